"""Building Dagster definitions from a run configuration.

Backend names are partition keys, so the graph is built from a config: by `definitions.py`
from `evals.yaml`, by the CLI from its flags, by tests from whatever they set up.
"""

from __future__ import annotations

from dagster import Definitions, ExecutorDefinition, in_process_executor, multiprocess_executor

from .assets import build_assets
from .core.config import EvalsConfig
from .io_managers import DeferredParquetInputManager, JsonIOManager, ParquetIOManager
from .resources import EvalsResource


def build_executor(config: EvalsConfig) -> ExecutorDefinition:
    """`executor:` in the project file. In-process by default: steps are coarse and mostly wait
    on I/O, and spawning a process per step costs ~3 s here. Multiprocess gives each step its
    own process, so a run's independent steps execute in parallel (see docs/scale-out.md)."""
    if config.executor == "multiprocess":
        return multiprocess_executor.configured({"max_concurrent": config.max_concurrent})
    return in_process_executor


def build_definitions(config: EvalsConfig) -> Definitions:
    storage = config.asset_storage or str(config.cache_dir / "assets")
    return Definitions(
        assets=build_assets(config),
        resources={
            "evals": EvalsResource.from_config(config),
            "parquet_io": ParquetIOManager(base_dir=storage),
            "parquet_deferred": DeferredParquetInputManager(base_dir=storage),
            "json_io": JsonIOManager(base_dir=storage),
        },
        executor=build_executor(config),
    )
