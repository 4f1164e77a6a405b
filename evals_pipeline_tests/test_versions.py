"""Code versions: an edited input file marks what reads it stale in Dagster, and only that."""

from __future__ import annotations

from pathlib import Path

from dagster import AssetKey, DagsterInstance, materialize
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._core.loader import LoadingContextForTest

from evals_pipeline.graph import build_definitions
from evals_pipeline_tests.pipeline_fixtures import CORPUS, RULES, make_config


def _status(config, instance: DagsterInstance) -> dict[str, StaleStatus]:  # type: ignore[no-untyped-def]
    """Each asset's status as the UI would show it after "Reload definitions"."""
    graph = build_definitions(config).resolve_asset_graph()
    resolver = CachingStaleStatusResolver(instance, graph, LoadingContextForTest(instance))
    return {
        "corpus": resolver.get_status(AssetKey("corpus"), "strict"),
        "extractions": resolver.get_status(AssetKey("extractions"), "rules|strict"),
    }


def _materialize_rules_strict(config, instance: DagsterInstance) -> None:  # type: ignore[no-untyped-def]
    """corpus and run_plan of `strict`, then the rules backend's extractions, as the README's
    commands do."""
    defs = build_definitions(config)
    for selection, key in ((["corpus", "run_plan"], "strict"), (["extractions"], "rules|strict")):
        result = materialize(
            list(defs.assets or []),
            selection=selection,
            partition_key=key,
            instance=instance,
            resources=defs.resources,
        )
        assert result.success


def test_an_edited_cassette_or_corpus_marks_what_reads_it_stale(tmp_path: Path) -> None:
    """No asset had a code version: after any edit every partition stayed FRESH, and the UI's
    "Materialize stale" offered nothing."""
    cassette, corpus = tmp_path / "rules.jsonl", tmp_path / "chunks.jsonl"
    cassette.write_bytes(RULES.read_bytes())
    corpus.write_bytes(CORPUS.read_bytes())
    config = make_config(
        tmp_path,
        {"oracle": "oracle", "rules": f"cassette:path={cassette}"},
        corpus=corpus,
        modes=("strict",),
    )
    with DagsterInstance.ephemeral() as instance:
        _materialize_rules_strict(config, instance)
        assert set(_status(config, instance).values()) == {StaleStatus.FRESH}
        cassette.write_text(cassette.read_text().replace('"Person"', '"Human"', 1))
        assert _status(config, instance) == {
            "corpus": StaleStatus.FRESH,  # the chunks did not change
            "extractions": StaleStatus.STALE,
        }
        corpus.write_text(corpus.read_text().replace("Ada Lovelace, born", "Ada, born", 1))
        assert _status(config, instance)["corpus"] == StaleStatus.STALE


def test_a_recording_run_does_not_mark_its_own_extractions_stale(tmp_path: Path) -> None:
    """The cassette a live backend records into is the step's own output, not an input."""
    from evals_pipeline_tests.support.deterministic_backend import openai_responder
    from evals_pipeline_tests.support.llm_servers import LoopbackLLMServer

    with LoopbackLLMServer("openai", responder=openai_responder) as server:
        config = make_config(
            tmp_path,
            {"oracle": "oracle", "rules": f"oai-http:url={server.base_url},model=rules"},
            modes=("strict",),
            record_cassette={"rules": tmp_path / "live.jsonl"},
        )
        with DagsterInstance.ephemeral() as instance:
            _materialize_rules_strict(config, instance)
            assert (tmp_path / "live.jsonl").stat().st_size > 0
            assert set(_status(config, instance).values()) == {StaleStatus.FRESH}


def test_an_edited_golden_example_or_prices_file_marks_what_reads_it_stale(
    tmp_path: Path,
) -> None:
    import shutil

    from evals_pipeline_tests.pipeline_fixtures import REPO

    golden, prices = tmp_path / "golden", tmp_path / "prices.json"
    shutil.copytree(REPO / "corpus" / "golden", golden)
    prices.write_text('{"rules": {"input_per_1m": 1, "output_per_1m": 2}}')
    backends = {"oracle": "oracle", "rules": f"cassette:path={RULES}"}
    config = make_config(tmp_path, backends, modes=("strict",), golden_dir=golden, prices=prices)
    defs = build_definitions(config)
    with DagsterInstance.ephemeral() as instance:
        _materialize_rules_strict(config, instance)
        materialize(
            list(defs.assets or []),
            selection=["scores"],
            partition_key="rules|strict",
            instance=instance,
            resources=defs.resources,
        )
        materialize(
            list(defs.assets or []),
            selection=["golden_set"],
            instance=instance,
            resources=defs.resources,
        )

        def status(asset: str, partition: str | None) -> StaleStatus:
            graph = build_definitions(config).resolve_asset_graph()
            context = LoadingContextForTest(instance)
            return CachingStaleStatusResolver(instance, graph, context).get_status(
                AssetKey(asset), partition
            )

        assert status("scores", "rules|strict") == status("golden_set", None) == StaleStatus.FRESH
        prices.write_text('{"rules": {"input_per_1m": 3, "output_per_1m": 2}}')
        assert status("scores", "rules|strict") == StaleStatus.STALE
        example = sorted(golden.glob("claims-*.json"))[0]
        example.write_text(example.read_text() + "\n")
        assert status("golden_set", None) == StaleStatus.STALE


def test_an_edited_webnlg_category_ontology_changes_the_gold_version(tmp_path: Path) -> None:
    """The strict-mode prompt of a WebNLG episode lists its category's relations: an edited
    ontology must mark `gold_corpus` (and the bench runs after it) stale."""
    from evals_pipeline.core.config import BenchConfig
    from evals_pipeline.versions import gold_version
    from evals_pipeline_tests.pipeline_fixtures import write_webnlg

    path = write_webnlg(tmp_path / "webnlg")
    bench = BenchConfig(backends={"oracle": "oracle"}, corpora={"webnlg": path})
    config = make_config(tmp_path, {"oracle": "oracle"}, bench=bench)
    before = gold_version(config)
    assert gold_version(config) == before
    ontology = tmp_path / "webnlg" / "ontologies" / "Airport.yaml"
    ontology.write_text(ontology.read_text().replace("The city", "The town"))
    assert gold_version(config) != before
