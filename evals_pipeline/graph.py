"""Building Dagster definitions from a run configuration.

Backend names are partition keys, so the graph is built from a config: by `definitions.py`
from `evals.yaml`, by the CLI from its flags, by tests from whatever they set up.
"""

from __future__ import annotations

import os
from pathlib import Path

from dagster import Definitions, in_process_executor

from .assets import build_assets
from .core.config import EvalsConfig
from .io_managers import JsonIOManager, ParquetIOManager
from .resources import EvalsResource

CONFIG_ENV = "EVALS_CONFIG"
DEFAULT_CONFIG = "evals.yaml"


def default_config_path() -> Path:
    return Path(os.environ.get(CONFIG_ENV, DEFAULT_CONFIG)).resolve()


def build_definitions(config: EvalsConfig) -> Definitions:
    storage = str(config.cache_dir / "assets")
    return Definitions(
        assets=build_assets(config),
        resources={
            "evals": EvalsResource.from_config(config),
            "parquet_io": ParquetIOManager(base_dir=storage),
            "json_io": JsonIOManager(base_dir=storage),
        },
        # Steps are coarse and mostly wait on I/O; spawning a process per step costs ~3 s here.
        executor=in_process_executor,
    )
