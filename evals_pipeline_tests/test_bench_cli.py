"""`evals-pipeline bench` through the CLI: usage errors, dry-run plans, failed steps, and
`compare` over its outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals_pipeline.cli import main as cli_main
from evals_pipeline_tests.pipeline_fixtures import (
    BENCH_RULES,
    CASES,
    REPO,
    RULES,
)


def _only(folder: Path, suffix: str) -> Path:
    (path,) = sorted(folder.glob(f"*{suffix}"))
    return path


def test_bench_cli_splits_publishability_and_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["--cache-dir", str(tmp_path / "cache")]
    assert cli_main(["bench", "--split", "test", "--out", str(tmp_path / "test"), *common]) == 0
    test_json = _only(tmp_path / "test" / "cases", ".json")
    report = json.loads(test_json.read_text())
    assert report["publishable"] is True and report["split"] == "test"
    assert set(report["rows"]) == {"oracle"}  # the oracle row only: free
    assert "not publishable" not in test_json.with_suffix(".md").read_text()

    rules = f"rules=cassette:path={BENCH_RULES}"
    args = ["bench", "--split", "dev", "--backend", rules, "--out", str(tmp_path / "dev")]
    assert cli_main([*args, *common]) == 0
    dev_json = _only(tmp_path / "dev" / "cases", ".json")
    dev = json.loads(dev_json.read_text())
    assert dev["publishable"] is False and set(dev["rows"]) == {"oracle", "rules"}
    out = capsys.readouterr().out
    assert f"bench JSON: {dev_json}" in out

    # Read the rules row against the oracle row of the same run: a clear drop.
    compared = tmp_path / "cmp.json"
    argv = ["compare", str(dev_json), str(dev_json), "--row-a", "oracle", "--row-b", "rules"]
    assert cli_main([*argv, "--resamples", "500", "--json", str(compared)]) == 0
    result = json.loads(compared.read_text())
    assert result["paired"] == 18
    # A --json path that cannot be written (a file where its folder goes) is named, exit 2.
    capsys.readouterr()
    blocked = tmp_path / "blocked"
    blocked.write_text("a file")
    with pytest.raises(SystemExit) as usage:  # at parsing, before the comparison
        cli_main([*argv, "--resamples", "10", "--json", str(blocked / "cmp.json")])
    assert usage.value.code == 2
    assert f"cannot be made: {blocked} is a file, not a folder" in capsys.readouterr().err


def test_bench_cli_bad_input_is_a_usage_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nope.jsonl"
    assert cli_main(["bench", "--gold", f"x={missing}", "--out", str(tmp_path)]) == 2
    assert str(missing) in capsys.readouterr().err
    assert cli_main(["bench", "--backend", "a=casette:path=x.jsonl"]) == 2
    assert "casette" in capsys.readouterr().err
    afile = tmp_path / "afile"  # a path under a file: refused before the run, not after it
    afile.write_text("")
    for flag in (["--out", str(afile / "out")], ["--cache-dir", str(afile / "c")]):
        assert cli_main(["bench", "--split", "test", *flag]) == 2
        err = capsys.readouterr().err
        assert f"cannot be made: {afile} is a file, not a folder" in err
        assert "FAILED STEP" not in err
    # Two backends recording into one file, named relatively and absolutely: refused up front.
    monkeypatch.chdir(tmp_path)  # were it not refused, the run would record there, not here
    both = ["--backend", "x=oracle", "--backend", "y=oracle", "--out", str(tmp_path / "o")]
    rec = ["--record-cassette", "x=r.jsonl", "--record-cassette", f"y={Path.cwd() / 'r.jsonl'}"]
    assert cli_main(["bench", *both, *rec]) == 2
    assert "[bench.record_cassette.y]" in (err := capsys.readouterr().err)
    assert "bench.record_cassette.x writes it too" in err


def test_bench_dry_run_plans_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = f"rules=cassette:path={BENCH_RULES}"
    out = tmp_path / "out"
    argv = ["bench", "--dry-run", "--split", "test", "--backend", rules, "--out", str(out)]
    assert cli_main([*argv, "--cache-dir", str(tmp_path / "cache")]) == 0
    plan = capsys.readouterr().out
    assert "split test, publishable" in plan
    # 18 test-split episodes + 2 recasts, every one in the cassette
    assert f"rules: replay {BENCH_RULES}; 40 records, covers 20 of 20 extractions" in plan
    assert "oracle: oracle" in plan
    assert list(tmp_path.iterdir()) == []


def test_an_anthropic_backend_without_its_key_is_refused_up_front(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its step would fail building the client, after the other rows' calls: the dry run says
    it would abort, and the run refuses it before any step."""
    argv = ["bench", "--split", "test", "--backend", "claude=anthropic", "--out", str(tmp_path)]
    assert cli_main([*argv, "--dry-run"]) == 0
    assert "claude: live anthropic; would abort: ANTHROPIC_API_KEY is not set" in (
        capsys.readouterr().out
    )
    assert cli_main(argv) == 2
    assert "[backends.claude]: the anthropic backend needs ANTHROPIC_API_KEY" in (
        capsys.readouterr().err
    )
    assert list(tmp_path.iterdir()) == []


def test_a_replayed_row_is_priced_at_its_recorded_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the prose report prices a replay (what the recorded calls cost): the bench's row had
    the model "cassette", which no prices file names, so its cost was always "—"."""
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"rules-tidy": {"input_per_1m": 3.0, "output_per_1m": 15.0}}))
    rules = f"rules=cassette:path={BENCH_RULES}"
    argv = ["bench", "--split", "test", "--backend", rules, "--out", str(tmp_path / "out")]
    assert cli_main([*argv, "--prices", str(prices), "--cache-dir", str(tmp_path / "c")]) == 0
    report = json.loads(_only(tmp_path / "out" / "cases", ".json").read_text())
    row = report["rows"]["rules"]
    assert row["model"] == "rules-tidy" and row["provider"] == "oai-http"
    usage = row["usage"]
    expected = (usage["input_tokens"] * 3.0 + usage["output_tokens"] * 15.0) / 1e6
    assert expected > 0 and row["cost_usd"] == pytest.approx(expected)
    assert report["rows"]["oracle"]["cost_usd"] is None  # the oracle has no price
    assert "| cost (USD) | — | " in _only(tmp_path / "out" / "cases", ".md").read_text()


def test_bench_dry_run_counts_what_a_recorded_backends_cassette_already_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A recorded live backend is served what its cassette holds: only the rest are calls. A
    cassette of another model is named as the run would refuse it."""
    target = tmp_path / "rec.jsonl"
    target.write_bytes(BENCH_RULES.read_bytes())
    live = "local=oai-http:url=http://127.0.0.1:9/v1/chat/completions"
    argv = ["bench", "--dry-run", "--split", "test", "--out", str(tmp_path / "out")]
    argv += ["--cache-dir", str(tmp_path / "cache"), "--record-cassette", f"local={target}"]
    assert cli_main([*argv, "--backend", f"{live},model=rules-tidy"]) == 0
    assert "0 extraction calls planned, 20 already recorded" in capsys.readouterr().out
    assert cli_main([*argv, "--backend", f"{live},model=bigger"]) == 0
    assert "would abort: cannot record into" in capsys.readouterr().out


def test_bench_dry_run_counts_what_the_extraction_cache_already_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run answers a live backend's cached calls from the bench extraction cache: only the
    rest are calls, as the main command's plan counts them."""
    from evals_pipeline.core.bench.gold import load_gold
    from evals_pipeline.core.bench.runner import BENCH_BUDGETS
    from evals_pipeline.core.cassettes.cache import backend_fingerprint, cache_path
    from evals_pipeline.core.extractors.specs import parse_backend_spec

    spec = "oai-http:url=http://127.0.0.1:9/v1/chat/completions,model=rules-tidy"
    gold = load_gold("cases", CASES, "all")
    fingerprint = backend_fingerprint(
        parse_backend_spec(spec), corpus_digest=gold.digest, budgets=BENCH_BUDGETS
    )
    cached = cache_path(tmp_path / "cache" / "bench", "local", fingerprint)
    cached.parent.mkdir(parents=True)
    cached.write_bytes(BENCH_RULES.read_bytes())  # the same calls: every one answered
    argv = ["bench", "--dry-run", "--out", str(tmp_path / "out"), "--gold", f"cases={CASES}"]
    argv += ["--cache-dir", str(tmp_path / "cache"), "--backend", f"local={spec}"]
    assert cli_main(argv) == 0
    assert "local: live oai-http:" in (out := capsys.readouterr().out)
    assert "0 extraction calls planned, 40 already cached" in out
    # A corrupt cache fails the run when it loads: the plan says so, not "calls afresh".
    with cached.open("a") as handle:
        handle.write("{not a record}\n")
    assert cli_main(argv) == 0
    assert "local: live oai-http:" in (out := capsys.readouterr().out)
    assert "would abort: corrupt cassette" in out


def test_the_main_dry_run_plans_the_bench_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run materialises the bench after the reports: its calls are part of the plan."""
    config = tmp_path / "evals.yaml"
    live = "oai-http:url=http://127.0.0.1:9/v1/chat/completions"
    config.write_text(
        f"backends: {{oracle: oracle}}\nreference: oracle\nmodes: [freeform]\n"
        f"corpus: {REPO / 'corpus' / 'prose' / 'chunks.jsonl'}\n"
        f"bench: {{backends: {{oracle: oracle, local: '{live}'}}, corpora: {{cases: {CASES}}}}}\n"
    )
    assert cli_main(["--config", str(config), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "bench plan (dry run: no call made, nothing written)" in out
    assert "local: live oai-http:" in out and "40 extraction calls planned" in out
    # A gold corpus that does not load is named by its field.
    (tmp_path / "not-gold").mkdir()
    config.write_text(config.read_text().replace(str(CASES), str(tmp_path / "not-gold")))
    assert cli_main(["--config", str(config), "--dry-run"]) == 2
    assert "bench.corpora.cases: " in capsys.readouterr().err


def test_bench_dry_run_checks_each_cassette_as_the_run_would(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing cassette, and one recorded for other calls (the prose pipeline's), are named
    before the run, as the main CLI's plan names them; the dry run still exits 0."""
    argv = ["bench", "--dry-run", "--out", str(tmp_path / "out")]
    argv += ["--backend", f"gone=cassette:path={tmp_path / 'gone.jsonl'}"]
    argv += ["--backend", f"prose=cassette:path={RULES}"]
    assert cli_main([*argv, "--cache-dir", str(tmp_path / "cache")]) == 0
    plan = capsys.readouterr().out
    assert f"gone: replay {tmp_path / 'gone.jsonl'}; would abort: " in plan
    assert "file not found" in plan
    assert "covers 0 of 40 extractions (the rest fail as cassette misses" in plan


def test_bench_dry_run_counts_the_second_answer_a_recast_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A recast asks one key twice and is served FIFO: a cassette with one answer per key
    covers the first cast, not the second."""
    once = tmp_path / "once.jsonl"
    seen: set[str] = set()
    with once.open("w") as out:
        for line in BENCH_RULES.read_text().splitlines():
            key = json.loads(line)["key"]
            if key not in seen:
                seen.add(key)
                out.write(line + "\n")
    argv = ["bench", "--dry-run", "--out", str(tmp_path / "out")]
    argv += ["--backend", f"once=cassette:path={once}", "--cache-dir", str(tmp_path / "cache")]
    assert cli_main(argv) == 0
    assert "once: replay" in (plan := capsys.readouterr().out)
    assert "36 records, covers 36 of 40 extractions (the rest fail as cassette misses" in plan
    assert cli_main([a for a in argv if a != "--dry-run"]) == 0  # misses are errors, no abort
    err = capsys.readouterr().err
    assert (
        "0 bench calls (0 LLM requests; 0 answered from the cache, 76 replayed, 4 cassette misses)"
        in err
    )


def test_a_missing_cassette_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The plan says the run would abort on it: the run refuses it (exit 2), naming the file."""
    gone = tmp_path / "gone.jsonl"
    argv = ["bench", "--split", "test", "--out", str(tmp_path / "out")]
    argv += ["--backend", f"gone=cassette:path={gone}", "--cache-dir", str(tmp_path / "cache")]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert "the bench would abort: " in err and f"cassette {gone}: file not found" in err
    assert list(tmp_path.iterdir()) == []


def test_a_failed_step_is_named_with_its_error_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A step that fails (here a cassette gone after the CLI's checks, as a program built on
    `materialize_bench` can meet) is one line naming the step and the error, no trace."""
    from dagster import DagsterInstance

    from evals_pipeline.bench_cli import _parser, bench_config
    from evals_pipeline.graph import build_definitions
    from evals_pipeline.materialize import materialize_bench
    from evals_pipeline.run_summary import MaterializeResult, print_problems

    gone = tmp_path / "gone.jsonl"
    argv = ["bench", "--split", "test", "--out", str(tmp_path / "out")]
    argv += ["--backend", f"gone=cassette:path={gone}", "--cache-dir", str(tmp_path / "cache")]
    parser = _parser()
    config = bench_config(parser.parse_args(argv[1:]), parser)
    outcome = MaterializeResult()
    with DagsterInstance.ephemeral() as instance:
        ok = materialize_bench(config, build_definitions(config), instance, outcome, quiet=True)
    assert not ok
    print_problems(outcome, verbose=False)
    err = capsys.readouterr().err
    assert "FAILED STEP bench_runs[gone|cases]: " in err
    assert f"CassetteNotAFile: cassette {gone}: file not found" in err
    assert "Stack Trace" not in err and "Traceback" not in err


def test_recording_a_bench_replay_is_refused_up_front(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The prose run's no_record_on_replay guard, for the bench: recording a replay only copies
    its cassette. It had recorded one; now the plan says it would abort and the run exits 2."""
    target = tmp_path / "copy.jsonl"
    argv = ["bench", "--split", "test", "--out", str(tmp_path / "out")]
    argv += ["--backend", f"rules=cassette:path={BENCH_RULES}", "--cache-dir", str(tmp_path / "c")]
    argv += ["--record-cassette", f"rules={target}"]
    assert cli_main([*argv, "--dry-run"]) == 0
    assert f"recording to {target}; would abort: it replays a cassette" in capsys.readouterr().out
    assert cli_main(argv) == 2
    assert "recording a replay is meaningless" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_the_bench_resource_refuses_to_record_a_replay(tmp_path: Path) -> None:
    """A program built on the resources (or the Dagster UI, which skips the CLI's preflight)
    gets the same error from the step, naming the field."""
    from evals_pipeline.core.bench.gold import load_gold
    from evals_pipeline.core.config import BenchConfig, EvalsConfig
    from evals_pipeline.core.errors import ConfigError
    from evals_pipeline.resources import EvalsResource

    config = EvalsConfig(
        backends={"oracle": "oracle"},
        reference="oracle",
        bench=BenchConfig(
            backends={"rules": f"cassette:path={BENCH_RULES}"},
            record_cassette={"rules": tmp_path / "copy.jsonl"},
        ),
    )
    resource = EvalsResource.from_config(config)
    with pytest.raises(ConfigError, match=r"bench\.record_cassette\.rules: it replays"):
        resource.bench_extractor("rules", load_gold("cases", CASES, "test"))
    assert list(tmp_path.iterdir()) == []


def test_a_stale_bench_cassette_fails_the_bench_after_its_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bench cassette holding the cases' calls under other keys (recorded under other
    prompts) answers none: the bench had exited 0 with a warning."""
    import re

    stale = tmp_path / "stale.jsonl"
    stale.write_text(
        "".join(
            re.sub(r'^\{"key":"(.)', lambda m: '{"key":"' + "fe"[m[1] == "f"], line) + "\n"
            for line in BENCH_RULES.read_text().splitlines()
        )
    )
    args = ["bench", "--backend", f"rules=cassette:path={stale}", "--out", str(tmp_path / "out")]
    assert cli_main(args) == 1
    err = capsys.readouterr().err
    assert "FAILED CHECK bench_runs[rules|cases] cassette_coverage: 40 of 40" in err
    assert _only(tmp_path / "out" / "cases", ".md").is_file()  # the report is written
