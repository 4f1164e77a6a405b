"""The whole asset graph in-process, on an ephemeral instance, through the driver."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from dagster import AssetCheckKey, AssetCheckSeverity, AssetKey, DagsterInstance

from evals_pipeline.assets.extraction import COVERAGE_CHECK
from evals_pipeline.core.cassettes.store import load_cassette
from evals_pipeline.core.compare import compare_runs, verdict
from evals_pipeline.graph import build_definitions
from evals_pipeline.materialize import materialize_all
from evals_pipeline_tests.pipeline_fixtures import CORPUS, RULES, SLOPPY, make_config
from evals_pipeline_tests.support.deterministic_backend import openai_responder
from evals_pipeline_tests.support.llm_servers import LoopbackLLMServer, openai_error
from evals_pipeline_tests.support.storage import sqlite_values

SHIPPED = {
    "oracle": "oracle",
    "rules": f"cassette:path={RULES}",
    "sloppy": f"cassette:path={SLOPPY}",
}


def _materialized(instance: DagsterInstance, asset: str) -> bool:
    return instance.get_latest_materialization_event(AssetKey(asset)) is not None


def test_every_partition_then_zero_calls_on_rematerialisation(tmp_path: Path) -> None:
    config = make_config(tmp_path, SHIPPED)
    defs = build_definitions(config)
    with DagsterInstance.ephemeral() as instance:
        first = materialize_all(config, instance, defs, quiet=True)
        assert first.success, first.failed_checks + first.failed_steps
        # the claims gate + 3 modes x (inputs + 3 extraction + 3 judging + reports) + the matrix
        assert first.runs == 1 + 3 * 8 + 1
        # Local backends (the oracle, cassettes) make no calls and are not cached: replayed.
        assert (first.extraction_calls, first.cache_hits, first.replayed) == (0, 0, 3 * 3 * 4)
        assert not list(config.cache_dir.glob("extractions/*.jsonl"))  # no copy of a cassette
        second = materialize_all(config, instance, defs, quiet=True)
        assert second.success
        assert (second.extraction_calls, second.cache_hits, second.replayed) == (0, 0, 3 * 3 * 4)
    out = config.output_dir
    matrix = json.loads((out / "mode_matrix.json").read_text())
    assert matrix["modes"] == ["freeform", "open", "strict"]
    assert set(matrix["matrix"]) == {"oracle", "rules", "sloppy"}
    assert (out / "f1_by_mode.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    strict = json.loads((out / "strict" / "report.json").read_text())
    assert strict["ontology_mode"] == "strict"
    assert strict["judge"]["status"] == "skipped"
    assert "ANTHROPIC_API_KEY" in strict["judge"]["reason"]
    assert "vocabulary_compliance" in strict["backends"]["rules"]
    freeform = json.loads((out / "freeform" / "report.json").read_text())
    assert "vocabulary_compliance" not in freeform["backends"]["rules"]
    assert freeform["backends"]["oracle"]["strict"] is None  # the reference itself
    assert freeform["backends"]["sloppy"]["structured_output"]["recovered"] > 0
    assert (out / "strict" / "report.md").read_text().startswith("# ")
    # Beside each report, its chunks one by one, for `compare` against another run.
    episodes = json.loads((out / "strict" / "episodes.json").read_text())
    assert set(episodes["rows"]) == {"rules", "sloppy"}  # the candidates, not the reference
    rules = episodes["rows"]["rules"]["episodes"]
    assert len(rules) == strict["backends"]["rules"]["strict"]["chunks_compared"] == 4
    tp = sum(e["counts"]["edges_tp"] for e in rules)
    assert tp == strict["backends"]["rules"]["strict"]["edges"]["tp"]
    same = compare_runs(episodes, episodes, row_a="rules", row_b="rules", resamples=20)
    assert {verdict(r) for r in same["rates"]} <= {"no change", "undefined in a run"}


def test_report_metadata_is_plottable(tmp_path: Path) -> None:
    config = make_config(tmp_path, SHIPPED, modes=("strict",))
    with DagsterInstance.ephemeral() as instance:
        assert materialize_all(config, instance, quiet=True).success
        event = instance.get_latest_materialization_event(AssetKey("report"))
        assert event is not None and event.asset_materialization is not None
        meta = event.asset_materialization.metadata
    assert isinstance(meta["rules/entities_f1"].value, float)
    assert isinstance(meta["sloppy/error_rate"].value, float)
    assert "Strict agreement" in str(meta["report"].value)
    assert meta["episodes_json"].value == str(config.output_dir / "strict" / "episodes.json")


def test_live_backend_records_and_second_run_sends_nothing(tmp_path: Path) -> None:
    with LoopbackLLMServer("openai", responder=openai_responder) as server:
        config = make_config(
            tmp_path,
            {"oracle": "oracle", "live": f"oai-http:url={server.base_url},model=rules"},
            modes=("freeform", "strict"),
        )
        defs = build_definitions(config)
        with DagsterInstance.ephemeral() as instance:
            first = materialize_all(config, instance, defs, quiet=True)
            assert first.success
            assert len(server.requests) == 2 * 4 * 2  # two calls per chunk per mode
            # An extract call is one a chunk; the summary counts the requests it sent too.
            assert (first.extraction_calls, first.llm_requests) == (4 * 2, len(server.requests))
            planned = _run_plan_metadata(instance, "strict")["planned_llm_requests"].value
            assert planned == 2 * 4  # LLM requests, as the dry run says, not extraction calls
            again = materialize_all(config, instance, defs, quiet=True)
            assert again.success and (again.extraction_calls, again.llm_requests) == (0, 0)
            assert _run_plan_metadata(instance, "strict")["planned_llm_requests"].value == 0
        assert len(server.requests) == 2 * 4 * 2  # nothing more reached the server


def _run_plan_metadata(instance: DagsterInstance, mode: str) -> dict[str, Any]:
    """The metadata of run_plan[mode]'s latest materialisation (newest first)."""
    for record in instance.fetch_materializations(AssetKey("run_plan"), limit=20).records:
        materialization = record.asset_materialization
        if materialization is not None and materialization.partition == mode:
            return dict(materialization.metadata)
    raise AssertionError(f"no run_plan[{mode}] materialization")


def test_record_cassette_then_replay_it_as_a_backend(tmp_path: Path) -> None:
    cassette = tmp_path / "live.jsonl"
    with LoopbackLLMServer("openai", responder=openai_responder) as server:
        config = make_config(
            tmp_path,
            {"oracle": "oracle", "live": f"oai-http:url={server.base_url},model=rules"},
            modes=("strict",),
            record_cassette={"live": cassette},
        )
        with DagsterInstance.ephemeral() as instance:
            assert materialize_all(config, instance, quiet=True).success
    assert len(load_cassette(cassette, unique=True)) == 4
    recorded = json.loads((tmp_path / "reports" / "strict" / "report.json").read_text())
    replay = make_config(
        tmp_path / "replay",
        {"oracle": "oracle", "live": f"cassette:path={cassette}"},
        modes=("strict",),
    )
    with DagsterInstance.ephemeral() as instance:
        assert materialize_all(replay, instance, quiet=True).success
    replayed = json.loads((tmp_path / "replay" / "reports" / "strict" / "report.json").read_text())
    assert replayed["backends"]["live"]["strict"] == recorded["backends"]["live"]["strict"]


def test_a_recorded_backend_re_run_makes_no_call_and_records_nothing_twice(tmp_path: Path) -> None:
    """Its cassette answers what it already holds: a re-run is free, a run after a chunk went
    missing makes only that chunk's calls, and no key is appended twice (a unique load, as
    replaying it as a backend does, would refuse the file)."""
    cassette = tmp_path / "live.jsonl"
    with LoopbackLLMServer("openai", responder=openai_responder) as server:
        url = f"oai-http:url={server.base_url},model=rules"
        config = make_config(
            tmp_path,
            {"oracle": "oracle", "live": url},
            modes=("strict",),
            record_cassette={"live": cassette},
        )
        defs = build_definitions(config)
        with DagsterInstance.ephemeral() as instance:
            assert materialize_all(config, instance, defs, quiet=True).success
            assert len(server.requests) == 2 * 4
            again = materialize_all(config, instance, defs, quiet=True)
            assert again.success and again.extraction_calls == 0 and again.cache_hits == 4
            assert len(server.requests) == 2 * 4 and len(load_cassette(cassette, unique=True)) == 4
            lines = cassette.read_text().splitlines(keepends=True)
            cassette.write_text("".join(lines[1:]))  # one chunk's answer lost
            resumed = materialize_all(config, instance, defs, quiet=True)
            assert resumed.success and resumed.extraction_calls == 1
            assert len(server.requests) == 2 * 4 + 2
            assert len(load_cassette(cassette, unique=True)) == 4
        sent = len(server.requests)
        # Recording another model into this cassette, or at other token budgets, would mix
        # answers the run then serves as its own: refused before any call, in any mode, by
        # run_plan's blocking check.
        other = make_config(
            tmp_path / "other",
            {"oracle": "oracle", "live": f"oai-http:url={server.base_url},model=bigger"},
            modes=("freeform",),
            record_cassette={"live": cassette},
        )
        smaller = config.model_copy(update={"max_tokens_edges": 512})
        for refused, why in ((other, "an answer of model 'rules'"), (smaller, "max_tokens 4096")):
            with DagsterInstance.ephemeral() as instance:
                run = materialize_all(refused, instance, build_definitions(refused), quiet=True)
            assert not run.success
            assert any("recording_targets" in step for step in run.failed_steps)
            assert any(why in check for check in run.failed_checks), run.failed_checks
        assert len(server.requests) == sent
        assert len(load_cassette(cassette, unique=True)) == 4


def test_a_smaller_token_budget_is_not_answered_from_the_cache(tmp_path: Path) -> None:
    """Keys leave budgets out, so the extraction cache's fingerprint holds them: a reply cached
    whole could be truncated under a smaller budget."""
    with LoopbackLLMServer("openai", responder=openai_responder) as server:
        backends = {"oracle": "oracle", "live": f"oai-http:url={server.base_url},model=rules"}
        config = make_config(tmp_path, backends, modes=("strict",))
        with DagsterInstance.ephemeral() as instance:
            assert materialize_all(config, instance, quiet=True).success
            smaller = config.model_copy(update={"max_tokens_entities": 40})
            run = materialize_all(smaller, instance, build_definitions(smaller), quiet=True)
            assert run.success and run.cache_hits == 0 and run.extraction_calls == 4
        sent = {r.max_tokens for r in server.requests[8:] if "ENTITIES" in (r.system_prompt or "")}
        assert 40 in sent


def test_the_plans_notes_reach_the_report(tmp_path: Path) -> None:
    """The large-chunk note names no mode (the plan is per mode already): it had been dropped."""
    from evals_pipeline.core.plan import LARGE_CHUNK_CHARS

    corpus = tmp_path / "chunks.jsonl"
    first = json.loads(CORPUS.read_text().splitlines()[0])
    big = {**first, "name": "big", "body": first["body"] + " x" * (LARGE_CHUNK_CHARS // 2)}
    corpus.write_text(json.dumps(first) + "\n" + json.dumps(big) + "\n")
    with LoopbackLLMServer("openai", responder=openai_responder) as server:
        config = make_config(
            tmp_path,
            {"oracle": "oracle", "live": f"oai-http:url={server.base_url},model=rules"},
            corpus=corpus,
            ontology=None,
            modes=("freeform",),
        )
        with DagsterInstance.ephemeral() as instance:
            assert materialize_all(config, instance, quiet=True).success
    report = json.loads((tmp_path / "reports" / "freeform" / "report.json").read_text())
    assert any("big (" in note and "chunk(s) hold over" in note for note in report["notes"])


def _duplicate_keyed(tmp_path: Path) -> Path:
    path = tmp_path / "dup.jsonl"
    first = RULES.read_text().splitlines()[0]
    path.write_text(first + "\n" + first + "\n")
    return path


def _corrupt(tmp_path: Path) -> Path:
    path = tmp_path / "corrupt.jsonl"
    path.write_text(RULES.read_text().splitlines()[0] + "\n{torn\n")
    return path


def _copy(tmp_path: Path) -> Path:
    path = tmp_path / "copy.jsonl"
    shutil.copyfile(RULES, path)
    return path


@pytest.mark.parametrize(
    ("make_backends", "extra", "check"),
    [
        (
            lambda t: {"o": "oracle", "d": f"cassette:path={_duplicate_keyed(t)}"},
            {},
            "cassette_integrity",
        ),
        (lambda t: {"o": "oracle", "c": f"cassette:path={_corrupt(t)}"}, {}, "cassette_integrity"),
        (
            lambda t: {"o": "oracle", "a": f"cassette:path={RULES}", "b": f"cassette:path={RULES}"},
            {},
            "distinct_cassettes",
        ),
        (
            lambda t: {
                "o": "oracle",
                "a": f"cassette:path={RULES}",
                "b": f"cassette:path={_copy(t)}",
            },
            {},
            "distinct_cassettes",
        ),
        (
            lambda t: {"o": "oracle", "a": f"cassette:path={RULES}"},
            {"record_cassette": {"a": Path("never.jsonl")}},
            "no_record_on_replay",
        ),
        (lambda t: {"o": "oracle", "claude": "anthropic"}, {}, "live_credentials"),
        (  # each would be served the other's answers
            lambda t: {"o": "oracle", "a": "oracle", "b": "oracle"},
            lambda t: {"record_cassette": {"a": t / "one.jsonl", "b": t / "one.jsonl"}},
            "recording_targets",
        ),
        (  # it would be served the replayed backend's answers
            lambda t: {"o": "oracle", "a": f"cassette:path={_copy(t)}", "b": "oracle"},
            lambda t: {"record_cassette": {"b": t / "copy.jsonl"}},
            "recording_targets",
        ),
        (  # a file of another model's answers
            lambda t: {"o": "oracle", "b": "oracle"},
            lambda t: {"record_cassette": {"b": _copy(t)}},
            "recording_targets",
        ),
    ],
)
def test_a_blocking_guard_stops_the_run_before_any_extraction(
    tmp_path: Path,
    make_backends,
    extra,
    check,  # type: ignore[no-untyped-def]
) -> None:
    if callable(extra):
        extra = extra(tmp_path)
    config = make_config(tmp_path, make_backends(tmp_path), modes=("strict",), **extra)
    with DagsterInstance.ephemeral() as instance:
        outcome = materialize_all(config, instance, quiet=True)
        assert not outcome.success
        assert any(f" {check}: " in line for line in outcome.failed_checks), outcome.failed_checks
        # One line for the step, naming the check, not Dagster's class path of its Failure.
        assert outcome.failed_steps == [
            f"run_plan[strict]: blocking check(s) failed: {check} (see the checks)"
        ], outcome.failed_steps
        assert outcome.extraction_calls == 0
        assert outcome.replayed == 0  # no extraction step ran, not even the oracle's
        assert not _materialized(instance, "run_plan")  # a failed guard fails its step too
        assert not _materialized(instance, "extractions")
        assert not _materialized(instance, "report")
    assert not (tmp_path / "reports").exists()


def test_an_input_a_later_step_reads_is_a_blocking_check_for_dagsters_own_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run from the UI or `dagster asset materialize` skips the CLI's preflight: run_plan's
    `run_inputs` check reads the same inputs, so a proxy the live backend cannot use stops the
    run before any extraction (it had failed the backend's step, after the oracle's)."""
    from evals_pipeline_tests.support.hermetic import clear_proxy_env

    clear_proxy_env(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", "ftp://u:pw@proxy:1")
    live = "oai-http:url=http://127.0.0.1:9/v1/chat/completions,model=m"
    config = make_config(tmp_path, {"o": "oracle", "local": live}, modes=("strict",))
    with DagsterInstance.ephemeral() as instance:
        outcome = materialize_all(config, instance, quiet=True)
        assert outcome.failed_steps == [
            "run_plan[strict]: blocking check(s) failed: run_inputs (see the checks)"
        ], outcome.failed_steps
        [line] = [f for f in outcome.failed_checks if " run_inputs: " in f]
        assert "HTTP_PROXY 'ftp://proxy:1' (the proxy for backends.local)" in line
        assert "pw" not in line
        assert outcome.extraction_calls == 0 and outcome.replayed == 0
        assert not _materialized(instance, "extractions")


def test_run_inputs_reads_no_input_of_the_claim_gate_or_the_bench(tmp_path: Path) -> None:
    """Their assets depend on no prose asset and fail on their own: a broken gate baseline or
    a bench cassette that is gone must not stop the prose run (Dagster runs them apart)."""
    import shutil

    import dagster

    from evals_pipeline.graph import build_definitions
    from evals_pipeline_tests.pipeline_fixtures import CASES, REPO

    golden = tmp_path / "golden"
    shutil.copytree(REPO / "corpus" / "golden", golden)
    (golden / "baseline.json").write_text('{"schema": 1,')
    gone = f"cassette:path={tmp_path / 'gone.jsonl'}"
    bench = {"backends": {"oracle": "oracle", "gone": gone}, "corpora": {"cases": CASES}}
    config = make_config(
        tmp_path, {"o": "oracle"}, modes=("strict",), golden_dir=golden, bench=bench
    )
    defs = build_definitions(config)
    result = dagster.materialize(
        list(defs.assets or []),
        instance=DagsterInstance.ephemeral(),
        resources=defs.resources,
        selection=["corpus", "run_plan"],
        partition_key="strict",
    )
    [check] = [e for e in result.get_asset_check_evaluations() if e.check_name == "run_inputs"]
    assert result.success and check.passed


def test_byte_identical_fresh_recordings_fail_after_capture_before_the_report(
    tmp_path: Path,
) -> None:
    seed = RULES.read_text().splitlines()[0] + "\n"
    paths = {"a": tmp_path / "a.jsonl", "b": tmp_path / "b.jsonl"}
    for path in paths.values():
        path.write_text(seed)
    with LoopbackLLMServer("openai", responder=lambda r: openai_error(400)) as server:
        spec = f"oai-http:url={server.base_url},model=rules-tidy"  # the seed record's model
        config = make_config(
            tmp_path,
            {"oracle": "oracle", "a": spec, "b": spec},  # same live spec twice is allowed
            modes=("strict",),
            record_cassette=paths,
        )
        with DagsterInstance.ephemeral() as instance:
            outcome = materialize_all(config, instance, quiet=True)
            assert _materialized(instance, "extractions")
            assert _materialized(instance, "reference_comparison")
            assert not _materialized(instance, "report")
    assert not outcome.success
    assert any("fresh_recordings_distinct" in line for line in outcome.failed_checks)
    # The per-chunk counts are the report's: a blocked report writes neither file.
    assert not list(config.output_dir.glob("strict/*"))


def test_chunk_digests_are_of_the_chunks_as_extracted_not_the_corpus_file_now(
    tmp_path: Path,
) -> None:
    """The comparison re-run alone after a corpus edit pairs the old counts with the old text:
    the new text's digest beside the old text's counts had paired an unchanged score with a
    changed chunk in the next run's comparison."""
    import dagster

    corpus = tmp_path / "chunks.jsonl"
    shutil.copyfile(CORPUS, corpus)
    config = make_config(tmp_path, SHIPPED, modes=("strict",), corpus=corpus)
    defs = build_definitions(config)
    episodes_file = config.output_dir / "strict" / "episodes.json"
    with DagsterInstance.ephemeral() as instance:
        assert materialize_all(config, instance, defs, quiet=True).success
        before = json.loads(episodes_file.read_text())
        lines = corpus.read_text(encoding="utf-8").splitlines(keepends=True)
        first = json.loads(lines[0])
        first["body"] += " An edit after the run."
        lines[0] = json.dumps(first, ensure_ascii=False) + "\n"
        corpus.write_text("".join(lines), encoding="utf-8")
        result = dagster.materialize(
            list(defs.assets or []),
            instance=instance,
            resources=defs.resources,
            selection=["reference_comparison", "report"],
            partition_key="strict",
        )
        assert result.success
    after = json.loads(episodes_file.read_text())
    assert after == before  # the digests, and the corpus digest, of what was extracted


def test_two_backends_with_the_same_graphs_everywhere_are_a_warning_not_an_abort(
    tmp_path: Path,
) -> None:
    """One deterministic model recorded under two names: the recordings differ (each record has
    its time), so fresh_recordings_distinct passes; the graphs do not, and that is said."""
    with LoopbackLLMServer("openai", responder=openai_responder) as server:
        spec = f"oai-http:url={server.base_url},model=rules"
        config = make_config(
            tmp_path,
            {"oracle": "oracle", "a": spec, "b": spec},
            modes=("strict",),
            record_cassette={"a": tmp_path / "a.jsonl", "b": tmp_path / "b.jsonl"},
        )
        with DagsterInstance.ephemeral() as instance:
            outcome = materialize_all(config, instance, quiet=True)
    assert outcome.success, outcome.failed_checks + outcome.failed_steps
    assert (tmp_path / "a.jsonl").read_bytes() != (tmp_path / "b.jsonl").read_bytes()
    [warning] = [w for w in outcome.warnings if "distinct_outputs" in w]
    assert "a and b extracted the same graphs on all 4 chunks they extracted" in warning
    assert "oracle and" not in warning  # the deterministic backend is not the oracle


def test_cassette_coverage_shortfall_is_a_note_and_an_error_rate(tmp_path: Path) -> None:
    partial = tmp_path / "partial.jsonl"
    strict_lines = [
        line for line in RULES.read_text().splitlines() if '"ontology_mode":"strict"' in line
    ]
    partial.write_text("\n".join(strict_lines[:2]) + "\n")
    scope = [json.loads(line)["name"] for line in CORPUS.read_text().splitlines()[:4]]
    kept = {json.loads(line)["request"]["episode_name"] for line in strict_lines[:2]}
    # One missing chunk's call failed when the cassette was recorded: its sidecar says so.
    failed = sorted(set(scope) - kept)[0]
    Path(f"{partial}.failures.jsonl").write_text(
        json.dumps({"chunk_key": failed, "call_type": "entities", "classification": "http_error"})
        + "\n"
    )
    config = make_config(
        tmp_path, {"oracle": "oracle", "part": f"cassette:path={partial}"}, modes=("strict",)
    )
    with DagsterInstance.ephemeral() as instance:
        outcome = materialize_all(config, instance, quiet=True)
        check = instance.event_log_storage.get_latest_asset_check_execution_by_key(
            [AssetCheckKey(AssetKey("extractions"), COVERAGE_CHECK)]
        )
    assert outcome.success and not outcome.failed_checks  # a shortfall is not an abort
    report = json.loads((tmp_path / "reports" / "strict" / "report.json").read_text())
    part = report["backends"]["part"]
    covered = len(kept & set(scope))
    missed = 4 - covered
    assert missed > 0
    assert part["chunks"] == 4
    assert part["errors"] == missed
    assert part["error_rate"] > 0
    assert part["errors_by_type"].get("CassetteMiss", 0) == part["errors"]
    assert any("part (strict)" in note and "covers" in note for note in report["notes"])
    markdown = (tmp_path / "reports" / "strict" / "report.md").read_text()
    assert "CassetteMiss` × " in markdown and "re-record the cassette" in markdown
    # A miss is not counted as replayed; it is counted, and warned about with the next step.
    assert (outcome.replayed, outcome.cassette_misses) == (4 + covered, missed)
    [warning] = [w for w in outcome.warnings if COVERAGE_CHECK in w]  # (and the claims gate's)
    assert f"extractions[part|strict] {COVERAGE_CHECK}: {missed} of 4 chunks" in warning
    assert "re-record" in warning.lower()
    assert f"1 of them failed when it was recorded, by its sidecar {partial}.failures" in warning
    if missed > 1:
        assert f"{missed - 1} of them were asked under other prompts" in warning
    [execution] = check.values()
    assert execution.evaluation is not None and not execution.evaluation.passed
    assert execution.evaluation.severity == AssetCheckSeverity.WARN


def test_a_secret_in_a_backend_url_reaches_no_report_plan_or_event_log(tmp_path: Path) -> None:
    """A key pasted into a URL (user info, query string) is sent to the server and kept out of
    everything the run writes: reports, plans, extraction caches and the instance's event log."""
    secret = "sk-url-secret-5f3a9c-do-not-leak"
    with LoopbackLLMServer("openai", responder=openai_responder) as server:
        url = server.base_url.replace("://", f"://user:{secret}@", 1) + f"?api-key={secret}"
        config = make_config(
            tmp_path / "run",
            {"oracle": "oracle", "live": f"oai-http:url={url},model=rules"},
            modes=("strict",),
        )
        home = tmp_path / "dagster_home"
        home.mkdir()
        with DagsterInstance.local_temp(str(home)) as instance:
            result = materialize_all(config, instance, quiet=True)
            assert result.success, result.failed_checks + result.failed_steps
        assert server.requests and all(secret in r.path for r in server.requests)
    report = json.loads((tmp_path / "run" / "reports" / "strict" / "report.json").read_text())
    assert report["backends"]["live"]["spec"].startswith("oai-http:url=http://127.0.0.1:")
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".db" for p in written)  # the event log is on disk, and scanned
    assert [p for p in written if secret.encode() in p.read_bytes()] == []
    # Dagster keeps job snapshots (which hold resource config) zlib-compressed in its SQLite
    # stores, where a scan of the raw bytes cannot see a secret: decompress every blob too.
    stored = [v for db in written if db.suffix == ".db" for v in sqlite_values(db)]
    assert any(b"EvalsResource" in v for v in stored)  # the snapshots were found and read
    assert [v[:200] for v in stored if secret.encode() in v] == []


def test_every_asset_check_says_what_it_asserts(tmp_path: Path) -> None:
    defs = build_definitions(make_config(tmp_path, SHIPPED))
    specs = [spec for asset in defs.assets or [] for spec in asset.check_specs]  # type: ignore[union-attr]
    assert {spec.name for spec in specs} >= {COVERAGE_CHECK, "cassette_integrity"}
    assert all(spec.description for spec in specs), [s.name for s in specs if not s.description]


def test_a_failed_step_line_names_our_error_not_the_os_error_under_it() -> None:
    from dagster._utils.error import SerializableErrorInfo

    from evals_pipeline.materialize import step_error_line

    disk = SerializableErrorInfo("OSError: [Errno 28] No space left on device\n", [], "OSError")
    ours = SerializableErrorInfo(
        "evals_pipeline.core.errors.CassetteWriteError: /data/rules.jsonl: cannot append\n",
        [],
        "CassetteWriteError",
        cause=disk,
    )
    wrapped = SerializableErrorInfo(
        'Error occurred while executing op "extractions":\n',
        [],
        "DagsterExecutionStepExecutionError",
        cause=ours,
    )
    assert step_error_line(wrapped) == (
        ": evals_pipeline.core.errors.CassetteWriteError: /data/rules.jsonl: cannot append"
    )
    assert step_error_line(disk) == ": OSError: [Errno 28] No space left on device"
    assert step_error_line(None) == ""


def test_a_partition_whose_upstream_was_never_materialised_names_what_to_materialise(
    tmp_path: Path,
) -> None:
    """`dagster asset materialize --select extractions --partition rules|open` before
    corpus[open]: the step names the missing stored value and what to do, one line."""
    from evals_pipeline.materialize import MaterializeResult, _run

    config = make_config(tmp_path, SHIPPED, modes=("open",))
    defs = build_definitions(config)
    outcome = MaterializeResult()
    with DagsterInstance.ephemeral() as instance:
        assert not _run(defs, instance, ["extractions"], "rules|open", outcome, True)
    [line] = outcome.failed_steps
    assert "StoredValueMissing" in line and "corpus/open.parquet: no stored value here" in line
    assert "materialise that partition first" in line


def test_a_step_that_fails_after_paid_calls_still_counts_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk while recording stops the step after calls reached the server: the summary
    counts them (the step's observation), not 0 as a failed step's missing metadata would."""
    import errno
    import os

    from evals_pipeline.core.cassettes import store

    cassette = tmp_path / "live.jsonl"
    real_write = os.write
    appended: list[int] = []

    def full_after_two(fd: int, data: bytes) -> int:
        if os.readlink(f"/proc/self/fd/{fd}") == str(cassette):
            if len(appended) == 2:
                raise OSError(errno.ENOSPC, "No space left on device")
            appended.append(fd)
        return real_write(fd, data)

    monkeypatch.setattr(store.os, "write", full_after_two)
    with LoopbackLLMServer("openai", responder=openai_responder) as server:
        config = make_config(
            tmp_path,
            {"oracle": "oracle", "live": f"oai-http:url={server.base_url},model=rules"},
            modes=("strict",),
            record_cassette={"live": cassette},
        ).model_copy(update={"concurrency": 1})
        with DagsterInstance.ephemeral() as instance:
            outcome = materialize_all(config, instance, quiet=True)
    assert not outcome.success
    assert any("No space left on device" in step for step in outcome.failed_steps)
    assert outcome.extraction_calls == 3  # two recorded, the third's record would not fit
    assert outcome.llm_requests == len(server.requests) == 2 * 3
    assert len(load_cassette(cassette)) == 2  # what was written stays


def test_claims_gate_false_runs_no_claim_asset_and_warns_of_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = make_config(tmp_path, {"oracle": "oracle"}, modes=("freeform",), claims_gate=False)
    with DagsterInstance.ephemeral() as instance:
        assert materialize_all(config, instance, quiet=True).success
        assert not _materialized(instance, "golden_set")
        assert _materialized(instance, "report")
    assert "golden" not in capsys.readouterr().err


def test_claims_gate_false_defines_no_claim_asset(tmp_path: Path) -> None:
    """The UI's "Materialize all" runs what the definitions hold: a gate switched off is not
    among them, nor its check."""
    off = make_config(tmp_path, {"oracle": "oracle"}, modes=("freeform",), claims_gate=False)
    keys = build_definitions(off).resolve_asset_graph().get_all_asset_keys()
    assert {AssetKey("golden_set"), AssetKey("claim_scores")}.isdisjoint(keys)
    assert AssetKey("report") in keys
    on = make_config(tmp_path, {"oracle": "oracle"}, modes=("freeform",))
    assert (
        AssetKey("claim_scores") in build_definitions(on).resolve_asset_graph().get_all_asset_keys()
    )


def test_check_results_are_kept_per_partition(tmp_path: Path) -> None:
    """A check's status is its partition's: stored with no partition, the latest evaluation of
    any partition had been the one status the UI showed, so a later passing rules|strict hid
    an empty cassette's 4 of 4 misses."""
    from dagster._core.storage.asset_check_execution_record import (
        AssetCheckExecutionRecordStatus,
    )

    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    backends = {"oracle": "oracle", "empty": f"cassette:path={empty}", "rules": SHIPPED["rules"]}
    config = make_config(tmp_path, backends, modes=("strict",))
    with DagsterInstance.ephemeral() as instance:
        outcome = materialize_all(config, instance, quiet=True)
        assert any(w.startswith("extractions[empty|strict]") for w in outcome.warnings)
        key = AssetCheckKey(AssetKey("extractions"), COVERAGE_CHECK)
        infos = instance.event_log_storage.get_asset_check_partition_info([key])
    status = {info.partition_key: info.latest_execution_status for info in infos}
    assert status == {
        "empty|strict": AssetCheckExecutionRecordStatus.FAILED,
        "oracle|strict": AssetCheckExecutionRecordStatus.SUCCEEDED,
        "rules|strict": AssetCheckExecutionRecordStatus.SUCCEEDED,
    }


def test_a_report_pins_the_prompts_ontology_and_cassettes_it_came_from(tmp_path: Path) -> None:
    """Reports had recorded the corpus digest only: two runs could not be shown to differ by
    a prompt edit alone, nor a replay tied to the cassette it read."""
    from evals_pipeline.core import prompts
    from evals_pipeline.core.digests import file_sha256

    config = make_config(tmp_path, {"oracle": "oracle", "rules": f"cassette:path={RULES}"})
    with DagsterInstance.ephemeral() as instance:
        assert materialize_all(config, instance, quiet=True).success
    report = json.loads((tmp_path / "reports" / "strict" / "report.json").read_text())
    provenance = report["provenance"]
    assert provenance["prompts"] == file_sha256(prompts.__file__)
    assert provenance["ontology"] == file_sha256(config.ontology)  # type: ignore[arg-type]
    assert provenance["cassettes"] == {"rules": file_sha256(RULES)}
    markdown = (tmp_path / "reports" / "strict" / "report.md").read_text()
    assert f"prompts `{provenance['prompts'][:12]}`" in markdown
    assert f"cassette of `rules` `{file_sha256(RULES)[:12]}`" in markdown


def test_values_stored_by_an_older_version_are_named_not_a_key_error(tmp_path: Path) -> None:
    """A corpus table without its digest and a comparison stored as its bare scores (1f7004d's
    shapes) failed their readers with a KeyError."""
    import dagster
    import pandas as pd

    from evals_pipeline.io_managers import read_table

    config = make_config(tmp_path, SHIPPED, modes=("strict",), claims_gate=False)
    defs = build_definitions(config)
    storage = config.cache_dir / "assets"  # the default asset storage
    with DagsterInstance.ephemeral() as instance:
        assert materialize_all(config, instance, defs, quiet=True).success
        comparison = storage / "reference_comparison" / "strict.json"
        stored = json.loads(comparison.read_text())
        assert set(stored) == {"strict", "episodes"}
        assert (
            stored["episodes"]["corpus_digest"]
            == read_table(str(storage / "corpus" / "strict.parquet")).attrs["corpus_digest"]
        )
        comparison.write_text(json.dumps(stored["strict"]))

        def run(selection: list[str]) -> str:
            result = dagster.materialize(
                list(defs.assets or []),
                instance=instance,
                resources=defs.resources,
                selection=selection,
                partition_key="strict",
                raise_on_error=False,
            )
            assert not result.success
            [failure] = [e for e in result.all_events if e.is_step_failure]
            return str(failure.step_failure_data.user_failure_data.description)

        said = run(["report"])
        assert "reference_comparison[strict] was stored by an older version" in said
        assert "lacks strict, episodes" in said
        table = pd.read_parquet(storage / "corpus" / "strict.parquet")
        table.attrs = {}
        table.to_parquet(storage / "corpus" / "strict.parquet", index=False)
        assert "corpus[strict] was stored by an older version" in run(["reference_comparison"])


def test_a_prose_baseline_gates_each_modes_report(tmp_path: Path) -> None:
    """The CI form of `compare --fail-if-worse`: a run kept from before a change, and each
    mode's report checked against it."""
    import dagster

    backends = {"oracle": "oracle", "rules": f"cassette:path={RULES}"}
    modes = ("freeform", "strict")
    before = make_config(tmp_path / "before", backends, modes=modes, claims_gate=False)
    with DagsterInstance.ephemeral() as instance:
        assert materialize_all(before, instance, quiet=True).success
    baseline = tmp_path / "baseline"
    shutil.copytree(before.output_dir / "strict", baseline / "strict")  # freeform: none
    config = make_config(
        tmp_path, backends, modes=modes, claims_gate=False, prose_baseline=baseline
    )
    with DagsterInstance.ephemeral() as instance:
        same = materialize_all(config, instance, quiet=True)
    assert same.success and not same.failed_checks
    [warning] = [w for w in same.warnings if "no_regression" in w]
    assert warning.startswith("report[freeform] no_regression: no baseline for freeform")

    kept = baseline / "strict" / "episodes.json"
    better = json.loads(kept.read_text())
    for episode in better["rows"]["rules"]["episodes"]:  # every expected edge found, then
        episode["counts"]["edges_tp"] = episode["counts"]["edges_expected"]
    kept.write_text(json.dumps(better))
    (config.output_dir / "mode_matrix.md").unlink()
    with DagsterInstance.ephemeral() as instance:
        worse = materialize_all(config, instance, quiet=True)
        # Blocking, as the claim gate: a Dagster run (`dagster asset materialize`) fails.
        defs = build_definitions(config)
        alone = dagster.materialize(
            list(defs.assets or []),
            instance=instance,
            resources=defs.resources,
            selection=["report"],
            partition_key="strict",
            raise_on_error=False,
        )
        assert not alone.success
    # The driver goes on: every mode, the matrix and the bench, then the run exits 1.
    assert worse.success and not worse.failed_steps
    [failed] = worse.failed_checks
    assert failed.startswith("report[strict] no_regression: rules: worse on edge_precision")
    assert "compared rules on 4 chunks" in failed and str(kept) in failed
    assert (config.output_dir / "mode_matrix.md").is_file()

    kept.write_text("{")  # broken after the run's input check: a failed check, not a step
    (config.output_dir / "mode_matrix.md").unlink()
    with DagsterInstance.ephemeral() as instance:
        broken = materialize_all(config, instance, quiet=True)
    assert broken.success and not broken.failed_steps
    [failed] = broken.failed_checks
    assert failed.startswith(f"report[strict] no_regression: {kept}:1: invalid JSON")
    assert (config.output_dir / "mode_matrix.md").is_file()
