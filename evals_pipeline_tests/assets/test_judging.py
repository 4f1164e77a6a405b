"""Judging through the whole graph against a loopback Anthropic-protocol judge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dagster import DagsterInstance, materialize

from evals_pipeline.core.config import EvalsConfig
from evals_pipeline.graph import build_definitions
from evals_pipeline.materialize import materialize_all
from evals_pipeline.resources import EvalsResource
from evals_pipeline_tests.conftest import TEST_API_KEY
from evals_pipeline_tests.pipeline_fixtures import RULES, SLOPPY, make_config
from evals_pipeline_tests.support import scripted_judge
from evals_pipeline_tests.support.llm_servers import LoopbackLLMServer, anthropic_message

BACKENDS = {
    "oracle": "oracle",
    "rules": f"cassette:path={RULES}",
    "sloppy": f"cassette:path={SLOPPY}",
}


@pytest.fixture
def judge_server(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    responder = scripted_judge.judge_responder(scripted_judge.order_consistent)
    with LoopbackLLMServer("anthropic", responder=responder) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_API_KEY)
        monkeypatch.setenv("EVALS_ANTHROPIC_BASE_URL", server.base_url)
        yield server


def both_modes_config(tmp_path: Path) -> EvalsConfig:
    """The shipped backends in strict mode, judged in both modes, with a cache of the test's."""
    return make_config(
        tmp_path,
        BACKENDS,
        modes=("strict",),
        judge={"mode": "both", "cache": tmp_path / "judge_cache.jsonl"},
    )


def report(tmp_path: Path, mode: str = "strict") -> dict:  # type: ignore[type-arg]
    return json.loads((tmp_path / "reports" / mode / "report.json").read_text())


def test_both_modes_then_a_rerun_makes_zero_judge_calls(tmp_path: Path, judge_server) -> None:  # type: ignore[no-untyped-def]
    config = both_modes_config(tmp_path)
    defs = build_definitions(config)
    # Before the run, the plan counts what it will make: distinct prompts, and the repeats of
    # them the run answers from its cache (it had counted those as calls to make too).
    before = EvalsResource.from_config(config).plan(judge_coverage=True).judge["cache"]
    with DagsterInstance.ephemeral() as instance:
        first = materialize_all(config, instance, defs, quiet=True)
        assert first.success, first.failed_checks + first.failed_steps
        sent = len(judge_server.requests)
        # reference: 2 candidates x 3 axes x 4 chunks (minus empty axes); pairwise: 3 x 2 x 3 x 4
        assert first.judge_calls == sent and sent > 3 * 2 * 3 * 4
        made_first = (first.judge_calls, first.judge_cache_hits)
        assert (before["uncached"], before["repeated"]) == made_first
        assert before["cached"] == 0 and first.judge_cache_hits > 0
        second = materialize_all(config, instance, defs, quiet=True)
        assert second.success
    assert len(judge_server.requests) == sent  # zero judge calls on the re-run
    assert second.judge_calls == 0
    assert second.judge_cache_hits == first.judge_calls + first.judge_cache_hits
    built = report(tmp_path)
    assert built["judge"]["status"] == "ran"
    # The re-run's plan (this mode only) found every judge call in the cache before making one.
    made = first.judge_calls + first.judge_cache_hits
    # The rest of the planned calls (2 x 3 x 4 reference, 3 x 2 x 3 x 4 pairwise, one mode) are
    # for axes where a side has no item: nothing can match, so no call.
    no_call = 2 * 3 * 4 + 3 * 2 * 3 * 4 - made
    assert built["judge"]["cache"] == {
        "cached": made,
        "uncached": 0,
        "repeated": 0,
        "unknown": 0,
        "no_call": no_call,
    }
    assert built["backends"]["rules"]["judged"]["entities"]["f1"] >= 0.0
    assert built["backends"]["oracle"]["judged"] is None  # the reference
    assert set(built["pairwise"]["pairs"]) == {
        "oracle vs rules",
        "oracle vs sloppy",
        "rules vs sloppy",
    }
    assert built["pairwise"]["pairs"]["oracle vs rules"]["axes"]["edges"]["chunks_compared"] == 4
    # The cost plan now sees every planned judge call as cached.
    coverage = EvalsResource.from_config(config).plan(judge_coverage=True).judge["cache"]
    assert coverage == {
        "cached": made,
        "uncached": 0,
        "repeated": 0,
        "unknown": 0,
        "no_call": no_call,
    }
    # An entry that is no verdict (an older cache's malformed reply) is asked again: uncached.
    cache = tmp_path / "judge_cache.jsonl"
    entries = [json.loads(line) for line in cache.read_text().splitlines()]
    cache.write_text("".join(json.dumps({**e, "text": "no verdict"}) + "\n" for e in entries))
    coverage = EvalsResource.from_config(config).plan(judge_coverage=True).judge["cache"]
    assert coverage == before  # the first run's plan again: distinct prompts, then repeats
    markdown = (tmp_path / "reports" / "strict" / "report.md").read_text()
    assert "## LLM-as-judge agreement with `oracle`" in markdown
    assert "## Blind pairwise judging" in markdown
    # No credential anywhere in what the run wrote.
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert TEST_API_KEY.encode() not in path.read_bytes(), path


def test_reference_mode_report_has_no_pairwise_section(tmp_path: Path, judge_server) -> None:  # type: ignore[no-untyped-def]
    config = make_config(
        tmp_path, BACKENDS, modes=("strict",), judge={"cache": tmp_path / "judge_cache.jsonl"}
    )
    with DagsterInstance.ephemeral() as instance:
        assert materialize_all(config, instance, quiet=True).success
    built = report(tmp_path)
    assert "pairwise" not in built
    assert built["backends"]["sloppy"]["judged"] is not None
    assert not any("pairwise/" in r.body.decode() for r in judge_server.requests)


def test_without_a_key_judging_is_skipped_and_said(tmp_path: Path) -> None:
    config = make_config(tmp_path, BACKENDS, modes=("strict",), judge={"mode": "both"})
    with DagsterInstance.ephemeral() as instance:
        outcome = materialize_all(config, instance, quiet=True)
    assert outcome.success and outcome.judge_calls == 0
    built = report(tmp_path)
    assert built["judge"]["status"] == "skipped"
    # No judging, so the plan does not replay every backend to count judge-cache coverage.
    assert "cache" not in built["judge"]
    assert built["pairwise"] == {"status": "skipped", "reason": "ANTHROPIC_API_KEY is not set"}
    assert all(b["judged"] is None for b in built["backends"].values())
    assert "LLM-as-judge: skipped" in (tmp_path / "reports" / "strict" / "report.md").read_text()


def test_noise_floor_a_backend_judged_against_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same live spec twice under two names: the second run words its summaries differently
    (as a sampling model does), so strict summaries F1 falls while a judge that forgives wording
    finds the two runs equivalent. That gap is the noise floor a real comparison sits on."""
    from collections import Counter

    from evals_pipeline_tests.support.deterministic_backend import answer
    from evals_pipeline_tests.support.llm_servers import ReceivedRequest, Reply, openai_completion

    seen: Counter[str] = Counter()

    def reworded_on_second_sight(request: ReceivedRequest) -> Reply:
        text = answer(request)
        if "extracts ENTITIES" in (request.system_prompt or ""):
            seen[request.user_prompt or ""] += 1
            if seen[request.user_prompt or ""] > 1:
                data = json.loads(text)
                for e in data["entities"]:
                    e["summary"] = "As the text says: " + e["summary"]
                text = json.dumps(data)
        return openai_completion(text, prompt_tokens=10, completion_tokens=10)

    judge = scripted_judge.judge_responder(scripted_judge.order_consistent, lenient=True)
    with (
        LoopbackLLMServer("openai", responder=reworded_on_second_sight) as model,
        LoopbackLLMServer("anthropic", responder=judge) as judge_server,
    ):
        monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_API_KEY)
        monkeypatch.setenv("EVALS_ANTHROPIC_BASE_URL", judge_server.base_url)
        spec = f"oai-http:url={model.url},model=sampler"
        config = make_config(
            tmp_path,
            {"run1": spec, "run2": spec},
            modes=("freeform",),
            ontology=None,
            judge={"cache": tmp_path / "judge_cache.jsonl"},
        )
        with DagsterInstance.ephemeral() as instance:
            outcome = materialize_all(config, instance, quiet=True)
        assert outcome.success, outcome.failed_checks + outcome.failed_steps
    run2 = report(tmp_path, "freeform")["backends"]["run2"]
    assert run2["strict"]["entities"]["f1"] == 1.0
    assert run2["strict"]["summaries"]["f1"] == 0.0  # every summary reworded
    assert run2["judged"]["summaries"]["f1"] == 1.0  # the judge forgives the wording
    assert run2["judged"]["entities"]["f1"] == 1.0


def test_without_a_key_the_judging_assets_read_no_stored_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """They take every backend's extraction table and the corpus, and read none of them when
    there is no judging to do: the tables may even be unreadable, or missing."""
    from evals_pipeline.materialize import MaterializeResult, _run
    from evals_pipeline.partitions import extraction_key

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    config = make_config(tmp_path, BACKENDS, modes=("strict",))
    defs = build_definitions(config)
    with DagsterInstance.ephemeral() as instance:
        assert materialize_all(config, instance, defs, quiet=True).success
        storage = config.cache_dir / "assets"
        tables = [*(storage / "extractions").rglob("*.parquet"), *(storage / "corpus").glob("*")]
        assert len(tables) == len(BACKENDS) + 1
        for path in tables:
            path.write_bytes(b"not a parquet file")
        outcome = MaterializeResult()
        for backend in BACKENDS:
            key = str(extraction_key(backend, "strict"))
            assert _run(defs, instance, ["judge_verdicts"], key, outcome, True), outcome
        assert _run(defs, instance, ["pairwise_tallies"], "strict", outcome, True), outcome
        tables[0].unlink()
        assert _run(defs, instance, ["pairwise_tallies"], "strict", outcome, True), outcome


def test_a_judging_step_reads_only_its_backend_and_the_reference(
    tmp_path: Path, judge_server
) -> None:  # type: ignore[no-untyped-def]
    from evals_pipeline.materialize import MaterializeResult, _run
    from evals_pipeline.partitions import extraction_key

    config = both_modes_config(tmp_path)
    defs = build_definitions(config)
    with DagsterInstance.ephemeral() as instance:
        assert materialize_all(config, instance, defs, quiet=True).success
        sloppy = config.cache_dir / "assets" / "extractions" / "sloppy" / "strict.parquet"
        assert sloppy.is_file()
        sloppy.write_bytes(b"not a parquet file")
        outcome = MaterializeResult()
        key = str(extraction_key("rules", "strict"))
        assert _run(defs, instance, ["judge_verdicts"], key, outcome, True), outcome
        assert outcome.judge_cache_hits > 0 and outcome.judge_calls == 0
        sloppy.unlink()  # never materialised: not needed here either
        assert _run(defs, instance, ["judge_verdicts"], key, outcome, True), outcome
        # The pairwise step reads every table: the missing one is named.
        assert not _run(defs, instance, ["pairwise_tallies"], "strict", outcome, True)
    assert any(f"{sloppy}: no stored value here" in line for line in outcome.failed_steps), outcome


def test_a_judge_that_gives_no_verdict_is_warned_and_scores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every judge reply is prose, not a verdict: the judged scores are — (not the 1.0 of
    agreeing on nothing), the report counts the errors, the driver warns, nothing is cached."""
    with LoopbackLLMServer(
        "anthropic", responder=lambda _request: anthropic_message("Sure! They match.")
    ) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_API_KEY)
        monkeypatch.setenv("EVALS_ANTHROPIC_BASE_URL", server.base_url)
        config = make_config(
            tmp_path,
            BACKENDS,
            modes=("strict",),
            judge={"mode": "both", "cache": tmp_path / "judge_cache.jsonl"},
        )
        with DagsterInstance.ephemeral() as instance:
            outcome = materialize_all(config, instance, quiet=True)
        assert outcome.success, outcome.failed_checks + outcome.failed_steps
        assert outcome.judge_calls == len(server.requests) > 0
    judged = report(tmp_path)["backends"]["rules"]["judged"]
    assert all(judged[axis]["f1"] is None and judged[axis]["judge_errors"] for axis in judged)
    warned = [w for w in outcome.warnings if " judge_errors: " in w]
    assert len(warned) == 3, outcome.warnings  # judge_verdicts of rules and sloppy; pairwise
    assert any(w.startswith("judge_verdicts[rules|strict] judge_errors: ") for w in warned)
    # Each warning says what the first failed call said, pairwise too.
    assert all(". The first said: " in w and "verdict" in w.split("first said")[1] for w in warned)
    assert (
        not (tmp_path / "judge_cache.jsonl").exists()
        or not (tmp_path / "judge_cache.jsonl").read_text().strip()
    )
    markdown = (tmp_path / "reports" / "strict" / "report.md").read_text()
    judged_row = next(line for line in markdown.splitlines() if line.startswith("| rules | —"))
    assert judged_row.split("|")[-2].strip() != "0"  # the judge errors column
    pairwise = markdown[markdown.index("## Blind pairwise judging") :]
    assert "| Judge errors |" in pairwise.splitlines()[4]


def test_the_report_names_the_judge_model_its_stored_verdicts_came_from(
    tmp_path: Path, judge_server
) -> None:  # type: ignore[no-untyped-def]
    """Verdicts are stored assets: after the judge model changes, a report re-materialised over
    the old ones must say which model made them, not name the new one beside them."""
    cache = tmp_path / "judge_cache.jsonl"
    old = make_config(tmp_path, BACKENDS, modes=("strict",), judge={"cache": cache})
    new = make_config(
        tmp_path, BACKENDS, modes=("strict",), judge={"cache": cache, "model": "claude-other-9"}
    )
    with DagsterInstance.ephemeral() as instance:
        assert materialize_all(old, instance, quiet=True).success
        assert "verdict_models" not in report(tmp_path)["judge"]
        defs = build_definitions(new)
        result = materialize(
            list(defs.assets or []),  # type: ignore[arg-type]
            selection=["run_plan", "reference_comparison", "pairwise_tallies", "report"],
            partition_key="strict",
            instance=instance,
            resources=defs.resources,
        )
        assert result.success
    built = report(tmp_path)
    assert built["judge"]["model"] == "claude-other-9"
    assert built["judge"]["verdict_models"] == [old.judge.model]
    assert any(
        f"were made by {old.judge.model}, not by the configured judge model claude-other-9" in note
        for note in built["notes"]
    )


def test_the_reference_partition_of_judge_verdicts_never_reads_the_judge_cache(
    tmp_path: Path, judge_server
) -> None:  # type: ignore[no-untyped-def]
    from evals_pipeline.materialize import MaterializeResult, _run
    from evals_pipeline.partitions import extraction_key

    cache = tmp_path / "judge_cache.jsonl"
    config = make_config(tmp_path, BACKENDS, modes=("strict",), judge={"cache": cache})
    defs = build_definitions(config)
    with DagsterInstance.ephemeral() as instance:
        assert materialize_all(config, instance, defs, quiet=True).success
        cache.write_text("{not json at all}\n")
        outcome = MaterializeResult()
        key = str(extraction_key("oracle", "strict"))
        assert _run(defs, instance, ["judge_verdicts"], key, outcome, True), outcome
        assert not _run(
            defs,
            instance,
            ["judge_verdicts"],
            str(extraction_key("rules", "strict")),
            outcome,
            True,
        )
    assert any("corrupt judge cache" in line for line in outcome.failed_steps), outcome


def test_verdicts_stored_while_judging_was_off_are_not_reported_as_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partial re-materialisation (the report with a key, its judging assets from a run
    without one) had reported "judge: ran" over empty verdict tables, as if nothing matched."""
    from evals_pipeline.materialize import MaterializeResult, _run

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    config = both_modes_config(tmp_path)
    defs = build_definitions(config)
    responder = scripted_judge.judge_responder(scripted_judge.order_consistent)
    with (
        DagsterInstance.ephemeral() as instance,
        LoopbackLLMServer("anthropic", responder=responder) as server,
    ):
        assert materialize_all(config, instance, defs, quiet=True).success
        monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_API_KEY)
        monkeypatch.setenv("EVALS_ANTHROPIC_BASE_URL", server.base_url)
        outcome = MaterializeResult()
        keyed = build_definitions(config)
        assert _run(keyed, instance, ["run_plan", "report"], "strict", outcome, True), outcome
        assert server.requests == []  # the report itself judges nothing
    built = report(tmp_path)
    notes = "\n".join(built["notes"])
    assert "judge_verdicts[rules|strict, sloppy|strict] was materialised when judging was " in (
        notes
    )
    assert "'skipped: ANTHROPIC_API_KEY is not set'" in notes
    assert "pairwise_tallies[strict] was materialised when judging was" in notes
    assert all(row["judged"] is None for row in built["backends"].values())  # not 0s
