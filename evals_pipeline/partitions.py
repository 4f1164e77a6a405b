"""Partitions: ontology mode for every stage, crossed with backend for per-backend stages.

Multi-partition keys join dimension values in alphabetical order of dimension name, so an
extraction partition key reads `backend|ontology_mode`, e.g. `rules|strict`.
"""

from __future__ import annotations

import warnings
from typing import Any

from dagster import (
    AllPartitionMapping,
    AssetCheckSpec,
    AssetExecutionContext,
    BetaWarning,
    DimensionPartitionMapping,
    IdentityPartitionMapping,
    MultiPartitionKey,
    MultiPartitionMapping,
    MultiPartitionsDefinition,
    MultiToSingleDimensionPartitionMapping,
    PartitionsDefinition,
    PreviewWarning,
    StaticPartitionsDefinition,
)

from .core.config import EvalsConfig

BACKEND = "backend"
ONTOLOGY_MODE = "ontology_mode"

# Per-mode assets read every backend's partition of that mode, and per-backend assets read
# their mode's partition of the per-mode assets.
with warnings.catch_warnings():  # beta in Dagster 1.13, and exactly the mapping we mean
    warnings.simplefilter("ignore", BetaWarning)
    BY_MODE = MultiToSingleDimensionPartitionMapping(partition_dimension_name=ONTOLOGY_MODE)
    # A per-backend asset reading every backend's partition of its own mode.
    ALL_BACKENDS_SAME_MODE = MultiPartitionMapping(
        {
            BACKEND: DimensionPartitionMapping(BACKEND, AllPartitionMapping()),
            ONTOLOGY_MODE: DimensionPartitionMapping(ONTOLOGY_MODE, IdentityPartitionMapping()),
        }
    )


def partition_check(
    name: str, asset: str, partitions: PartitionsDefinition, **spec: Any
) -> AssetCheckSpec:
    """A check recorded per partition of its asset. Without `partitions_def` every evaluation
    is stored with no partition and the UI shows one status, the latest of any partition: a
    later passing `sloppy|strict` hid a failed `rules|strict`. (A preview in Dagster 1.13;
    the tests drive it through the driver, the CLI and `dagster dev`.)"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PreviewWarning)
        return AssetCheckSpec(name, asset=asset, partitions_def=partitions, **spec)


def mode_partitions(config: EvalsConfig) -> StaticPartitionsDefinition:
    return StaticPartitionsDefinition(list(config.active_modes))


def backend_crossed(
    backends: list[str], dimension: str, other: StaticPartitionsDefinition
) -> MultiPartitionsDefinition:
    """Backend crossed with one other dimension (ontology mode, or a bench's gold corpus)."""
    return MultiPartitionsDefinition(
        {BACKEND: StaticPartitionsDefinition(sorted(backends)), dimension: other}
    )


def crossed_key(backend: str, dimension: str, value: str) -> MultiPartitionKey:
    return MultiPartitionKey({BACKEND: backend, dimension: value})


def split_crossed(key: str, dimension: str) -> tuple[str, str]:
    """(backend, other value) of a crossed partition key (dimensions join alphabetically)."""
    if isinstance(key, MultiPartitionKey):
        dims = key.keys_by_dimension
        return dims[BACKEND], dims[dimension]
    first, second = key.split("|")
    return (first, second) if dimension > BACKEND else (second, first)


def extraction_partitions(config: EvalsConfig) -> MultiPartitionsDefinition:
    return backend_crossed(list(config.backends), ONTOLOGY_MODE, mode_partitions(config))


def extraction_key(backend: str, mode: str) -> MultiPartitionKey:
    return crossed_key(backend, ONTOLOGY_MODE, mode)


def split_key(key: str) -> tuple[str, str]:
    """(backend, mode) of an extraction partition key."""
    return split_crossed(key, ONTOLOGY_MODE)


def fan_in(context: AssetExecutionContext, input_name: str, value: Any) -> dict[str, Any]:
    """Upstream partition key -> value, also when only one upstream partition exists.

    Dagster's UPathIOManager hands a fan-in input over as a dict, except when exactly one
    upstream partition maps in, when it hands over that value alone.
    """
    keys = [str(k) for k in context.asset_partition_keys_for_input(input_name)]
    if isinstance(value, dict) and set(value) == set(keys):
        return {str(k): v for k, v in value.items()}
    if len(keys) == 1:
        return {keys[0]: value}
    raise TypeError(f"cannot read fan-in input {input_name!r} for partitions {keys}")
