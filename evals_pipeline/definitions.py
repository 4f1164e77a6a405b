"""Dagster definitions: the asset graph, its resources and IO managers, from `evals.yaml`.

`dagster dev -w workspace.yaml` and `dagster asset materialize -m evals_pipeline.definitions`
load the module-level `defs`, built from the file named by EVALS_CONFIG (default: `evals.yaml`
in the current directory — run from the repository root).
"""

from __future__ import annotations

from .core.config import default_config_path, load_config
from .graph import build_definitions

_CONFIG = default_config_path()
defs = build_definitions(load_config(_CONFIG).check_inputs(_CONFIG))
