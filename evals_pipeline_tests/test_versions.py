"""Code versions: an edited input file marks what reads it stale in Dagster, and only that."""

from __future__ import annotations

from pathlib import Path

import pytest
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


PROSE_ASSETS = {
    "corpus": "strict",
    "run_plan": "strict",
    "extractions": "rules|strict",
    "scores": "rules|strict",
    "judge_verdicts": "rules|strict",
    "reference_comparison": "strict",
    "pairwise_tallies": "strict",
    "report": "strict",
    "mode_matrix_report": None,
}


def _statuses(config, instance: DagsterInstance) -> dict[str, StaleStatus]:  # type: ignore[no-untyped-def]
    graph = build_definitions(config).resolve_asset_graph()
    resolver = CachingStaleStatusResolver(instance, graph, LoadingContextForTest(instance))
    return {
        asset: resolver.get_status(AssetKey(asset), partition)
        for asset, partition in PROSE_ASSETS.items()
    }


def test_an_edited_cassette_marks_everything_downstream_stale_at_once(tmp_path: Path) -> None:
    """Dagster marks stale only the asset whose own version changed: the scores, judging and
    reports below an edited cassette had stayed FRESH (the UI showed reports built from the old
    cassette as fresh), and each "Materialize stale" had reached one layer further down."""
    from evals_pipeline.materialize import materialize_all

    cassette = tmp_path / "rules.jsonl"
    cassette.write_bytes(RULES.read_bytes())
    backends = {"oracle": "oracle", "rules": f"cassette:path={cassette}"}
    config = make_config(tmp_path, backends, modes=("strict",), claims_gate=False)
    with DagsterInstance.ephemeral() as instance:
        assert materialize_all(config, instance, quiet=True).success
        assert set(_statuses(config, instance).values()) == {StaleStatus.FRESH}
        cassette.write_text(cassette.read_text().replace('"Person"', '"Human"', 1))
        statuses = _statuses(config, instance)
        assert statuses.pop("corpus") == StaleStatus.FRESH  # upstream of the cassette
        assert statuses == dict.fromkeys(statuses, StaleStatus.STALE)
        assert materialize_all(config, instance, quiet=True).success  # one pass freshens them all
        assert set(_statuses(config, instance).values()) == {StaleStatus.FRESH}


def test_a_version_does_not_depend_on_where_the_checkout_is(tmp_path: Path) -> None:
    """Every file had been hashed with its absolute path: the same files in another clone (a
    moved checkout, CI's fresh path) had marked every versioned asset stale."""
    import shutil

    from evals_pipeline import versions
    from evals_pipeline.core.config import BenchConfig
    from evals_pipeline_tests.pipeline_fixtures import ONTOLOGY, REPO

    def project(root: Path) -> dict[str, str]:
        shutil.copytree(REPO / "corpus", root / "corpus")
        shutil.copy(ONTOLOGY, root / "ontology.yaml")
        backends = {
            "oracle": "oracle",
            "rules": f"cassette:path={root / 'corpus' / 'cassettes' / 'rules.jsonl'}",
        }
        bench = BenchConfig(corpora={"cases": root / "corpus" / "cases"})
        config = make_config(
            root,
            backends,
            corpus=root / "corpus" / "prose" / "chunks.jsonl",
            ontology=root / "ontology.yaml",
            golden_dir=root / "corpus" / "golden",
            bench=bench,
        )
        return {
            name: getattr(versions, name)(config)
            for name in dir(versions)
            if name.endswith("_version") and not name.startswith("_")
        }

    here, there = project(tmp_path / "a"), project(tmp_path / "elsewhere" / "b")
    assert here == there
    assert len(here) == 10  # every asset version, the layered ones included


def test_a_setting_the_plan_reads_marks_the_extractions_stale_too(tmp_path: Path) -> None:
    """`extractions` depends on `run_plan`: an edit only the plan read (the judge's model) had
    left the extractions and everything below them FRESH until the plan was materialised."""
    from evals_pipeline.core.config import JudgeConfig
    from evals_pipeline.materialize import materialize_all

    backends = {"oracle": "oracle", "rules": f"cassette:path={RULES}"}
    config = make_config(tmp_path, backends, modes=("strict",), claims_gate=False)
    with DagsterInstance.ephemeral() as instance:
        assert materialize_all(config, instance, quiet=True).success
        edited = config.model_copy(update={"judge": JudgeConfig(model="claude-other")})
        statuses = _statuses(edited, instance)
        assert statuses.pop("corpus") == StaleStatus.FRESH
        assert statuses == dict.fromkeys(statuses, StaleStatus.STALE)


def test_an_edited_judge_prompt_changes_the_judging_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The judge's prompts had been in no version: after an edit, the UI showed old verdicts
    and tallies as fresh (their cache asks again, so a re-run judges afresh)."""
    from evals_pipeline import versions

    config = make_config(tmp_path, {"oracle": "oracle"})
    before = versions.judging_version(config), versions.report_version(config)
    edited = tmp_path / "judge_prompts.py"
    edited.write_text(versions._JUDGE_PROMPTS.read_text() + "\n# edited\n")
    monkeypatch.setattr(versions, "_JUDGE_PROMPTS", edited)
    after = versions.judging_version(config), versions.report_version(config)
    assert after[0] != before[0] and after[1] != before[1]


def test_a_new_shape_of_the_comparisons_value_marks_the_report_stale_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new release storing `reference_comparison` in another shape: `report`, which reads
    that shape, had stayed FRESH (and materialised alone had died on a KeyError)."""
    from evals_pipeline import versions
    from evals_pipeline.materialize import materialize_all

    backends = {"oracle": "oracle", "rules": f"cassette:path={RULES}"}
    config = make_config(tmp_path, backends, modes=("strict",), claims_gate=False)
    with DagsterInstance.ephemeral() as instance:
        assert materialize_all(config, instance, quiet=True).success
        monkeypatch.setattr(versions, "COMPARISON_VALUE", ("strict", "episodes", "more"))
        statuses = _statuses(config, instance)
        assert statuses["reference_comparison"] == StaleStatus.STALE
        assert statuses["report"] == StaleStatus.STALE
        assert statuses["mode_matrix_report"] == StaleStatus.STALE
        assert statuses["extractions"] == StaleStatus.FRESH
        monkeypatch.setattr(versions, "_CORPUS_VALUE", ("chunks",))
        statuses = _statuses(config, instance)
        assert statuses == dict.fromkeys(statuses, StaleStatus.STALE)  # the chunks' table


def test_an_edited_prose_baseline_marks_the_reports_stale_and_nothing_above(
    tmp_path: Path,
) -> None:
    """The reports' no_regression checks read it: a new baseline is a new verdict."""
    import shutil

    from evals_pipeline.materialize import materialize_all

    backends = {"oracle": "oracle", "rules": f"cassette:path={RULES}"}
    first = make_config(tmp_path / "first", backends, modes=("strict",), claims_gate=False)
    with DagsterInstance.ephemeral() as instance:
        assert materialize_all(first, instance, quiet=True).success
    baseline = tmp_path / "baseline"
    shutil.copytree(first.output_dir, baseline)
    config = make_config(
        tmp_path, backends, modes=("strict",), claims_gate=False, prose_baseline=baseline
    )
    with DagsterInstance.ephemeral() as instance:
        assert materialize_all(config, instance, quiet=True).success
        assert set(_statuses(config, instance).values()) == {StaleStatus.FRESH}
        kept = baseline / "strict" / "episodes.json"
        kept.write_text(kept.read_text().replace('"requests": 2', '"requests": 1', 1))
        statuses = _statuses(config, instance)
        assert statuses.pop("report") == statuses.pop("mode_matrix_report") == StaleStatus.STALE
        assert statuses == dict.fromkeys(statuses, StaleStatus.FRESH)
    from evals_pipeline.versions import report_version

    version = report_version(config)
    (baseline / "strict" / "report.md").write_text("not read")  # only episodes.json is
    assert report_version(config) == version
