"""The asset graph, built from the run configuration (backend names are partition keys)."""

from __future__ import annotations

from dagster import AssetsDefinition

from ..core.config import EvalsConfig
from .bench import build_bench_assets
from .claims import build_claims_assets
from .corpus import build_corpus_assets
from .extraction import build_extraction_assets
from .judging import build_judging_assets
from .reports import build_report_assets


def build_assets(config: EvalsConfig) -> list[AssetsDefinition]:
    return [
        *build_corpus_assets(config),
        *build_extraction_assets(config),
        *build_judging_assets(config),
        *build_report_assets(config),
        *build_claims_assets(config),
        *build_bench_assets(config),
    ]
