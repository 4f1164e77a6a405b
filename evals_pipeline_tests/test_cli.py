"""The operator CLI in-process: flag rules, exit codes and --output."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from evals_pipeline.cli import main
from evals_pipeline_tests.conftest import TEST_API_KEY
from evals_pipeline_tests.pipeline_fixtures import CASES, CORPUS, ONTOLOGY, REPO, RULES


def write_config(tmp_path: Path, modes: list[str]) -> Path:
    path = tmp_path / "evals.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "backends": {"oracle": "oracle", "rules": f"cassette:path={RULES}"},
                "reference": "oracle",
                "corpus": str(CORPUS),
                "ontology": str(ONTOLOGY),
                "scope": 2,
                "modes": modes,
                "output_dir": str(tmp_path / "reports"),
                "cache_dir": str(tmp_path / "cache"),
            }
        )
    )
    return path


def test_output_with_several_modes_is_the_mode_matrix_json(tmp_path: Path) -> None:
    config = write_config(tmp_path, ["open", "strict"])
    assert main(["--config", str(config), "--output", str(tmp_path / "out.json")]) == 0
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["modes"] == ["open", "strict"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_output_on_a_full_disk_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The copy after the run had ended in an OSError traceback."""
    config = write_config(tmp_path, ["open"])
    assert main(["--config", str(config), "--output", "/dev/full"]) == 2
    out, err = capsys.readouterr()
    assert "evals-pipeline: error: /dev/full" in err and "No space left on device" in err
    assert f"report: {tmp_path / 'reports' / 'open' / 'report.md'}" in out
    assert (tmp_path / "reports" / "open" / "report.json").is_file()  # the run's are written


@pytest.mark.parametrize("target", ["cassette", "corpus", "ontology", "golden", "cache"])
def test_output_onto_a_file_the_run_uses_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    """--output named like an input had replaced it with report JSON, and exited 0."""
    cassette, corpus = tmp_path / "r.jsonl", tmp_path / "chunks.jsonl"
    cassette.write_bytes(RULES.read_bytes())
    corpus.write_bytes(CORPUS.read_bytes())
    config = write_config(tmp_path, ["open"])
    text = config.read_text().replace(str(RULES), "r.jsonl").replace(str(CORPUS), "chunks.jsonl")
    config.write_text(text + f"golden_dir: {tmp_path / 'golden'}\n")
    (tmp_path / "golden").mkdir()
    output, field = {
        "cassette": (tmp_path / "sub" / ".." / "r.jsonl", "backends.rules"),  # any name of it
        "corpus": (corpus, "corpus"),
        "ontology": (ONTOLOGY, "ontology"),
        "golden": (tmp_path / "golden" / "claims-009.json", "in golden_dir"),
        "cache": (tmp_path / "cache" / "x.json", "in cache_dir"),
    }[target]
    before = {path: path.read_bytes() for path in (cassette, corpus, ONTOLOGY)}
    assert main(["--config", str(config), "--output", str(output)]) == 2
    out, err = capsys.readouterr()
    assert f"evals-pipeline: error: --output {output}: that is {field}, which this run uses" in err
    assert out == "" and not (tmp_path / "reports").exists()  # refused before the run
    assert {path: path.read_bytes() for path in before} == before


def test_output_with_one_mode_is_that_report(tmp_path: Path) -> None:
    config = write_config(tmp_path, ["open", "strict"])
    args = ["--config", str(config), "--ontology-mode", "open", "--output", str(tmp_path / "o")]
    assert main(args) == 0  # the flag narrows the file's modes to one
    assert json.loads((tmp_path / "o").read_text())["ontology_mode"] == "open"


def test_ontology_mode_without_any_ontology_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as err:
        main(["--backend", "a=oracle", "--reference", "a", "--ontology-mode", "strict"])
    assert err.value.code == 2


def test_input_errors_exit_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "evals.yaml"
    bad.write_text("backends: {a: oracle}\nreference: nobody\n")
    assert main(["--config", str(bad), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "[reference]" in err


def test_dry_run_exits_0_with_a_guard_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "--backend", "a=oracle",
        "--backend", f"b=cassette:path={RULES}",
        "--backend", f"c=cassette:path={RULES}",
        "--reference", "a", "--corpus", str(CORPUS), "--ontology", str(ONTOLOGY),
        "--record-cassette", f"b={tmp_path / 'rec.jsonl'}",
        "--output-dir", str(tmp_path / "r"), "--cache-dir", str(tmp_path / "c"), "--dry-run",
    ]  # fmt: skip
    before = sorted(tmp_path.rglob("*"))
    assert main(args) == 0
    assert sorted(tmp_path.rglob("*")) == before
    out = capsys.readouterr().out
    assert "[distinct_cassettes]" in out and "[no_record_on_replay]" in out
    # No false positive: b records into its own file (rec.jsonl), which no backend replays.
    assert "[recording_targets]" not in out
    assert "ontology modes: strict" in out  # an ontology and no mode: strict


# -- bad input found by review: each once ran on silently, or ended in a traceback -----------


@pytest.mark.parametrize(
    "args",
    [
        ["--limit", "0"],  # had become the default scope of 50
        ["--limit", "-1"],  # a raw ValueError
        ["--concurrency", "0"],  # a raw ValidationError with --backend
        ["--backend", "a=oracle", "--reference", "a", "--concurrency", "0"],
        ["compare", "a.json", "b.json", "--resamples", "0"],
    ],
)
def test_a_count_below_one_is_a_usage_error(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as err:
        main([*args, "--dry-run"] if args[0] != "compare" else args)
    assert err.value.code == 2
    assert "must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flag", [["--reference", "rules"], ["--record-cassette", "rules=x.jsonl"], ["--ontology", "o"]]
)
def test_a_flag_run_only_flag_with_a_project_file_is_a_usage_error(
    tmp_path: Path, flag: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, ["strict"])
    with pytest.raises(SystemExit) as err:
        main(["--config", str(config), *flag, "--dry-run"])  # had been ignored
    assert err.value.code == 2
    assert f"{flag[0]}: only for a run built with --backend" in capsys.readouterr().err


def test_path_flags_override_the_project_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, ["strict"])
    missing = tmp_path / "elsewhere.jsonl"
    assert main(["--config", str(config), "--corpus", str(missing), "--dry-run"]) == 2
    err = capsys.readouterr().err  # the flag's corpus, not the file's
    assert f"(with the flags given) [corpus]: {missing}: no such file or folder" in err
    bad_gold = tmp_path / "gold.yaml"
    bad_gold.write_text(config.read_text() + "bench: {corpora: {cases: nowhere/cases}}\n")
    assert main(["--config", str(bad_gold), "--limit", "1"]) == 2  # before any run
    assert f"{bad_gold} [bench.corpora.cases]: " in capsys.readouterr().err
    out_dir = tmp_path / "flag-reports"
    assert main(["--config", str(config), "--output-dir", str(out_dir), "--limit", "1"]) == 0
    assert (out_dir / "strict" / "report.md").is_file()


@pytest.mark.parametrize("what", ["config", "corpus", "output"])
def test_a_folder_where_a_file_goes_is_named(
    tmp_path: Path, what: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, ["strict"])
    folder = tmp_path / "a-folder"
    folder.mkdir()
    if what == "output":
        with pytest.raises(SystemExit) as err:
            main(["--config", str(config), "--output", str(folder), "--dry-run"])
        assert err.value.code == 2
        assert "is a folder" in capsys.readouterr().err
        return
    args = ["--config", str(folder)] if what == "config" else ["--config", str(config)]
    args += ["--corpus", str(folder)] if what == "corpus" else []
    assert main([*args, "--dry-run"]) == 2  # had been an IsADirectoryError traceback
    assert f"{folder}: is a folder, not a file" in capsys.readouterr().err


def test_the_main_job_names_a_config_error_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evals_pipeline.materialize import main as materialize_main

    bad = tmp_path / "evals.yaml"
    bad.write_text("backends: {a: oracle}\nreference: nobody\n")
    assert materialize_main(["--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "[reference]" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("setting", "field"),
    [
        ("corpus: corpus/prose/chunk.jsonl", "[corpus]"),
        ("ontology: ontologies/pros.yaml", "[ontology]"),
        ("bench: {corpora: {cases: corpus/case}}", "[bench.corpora.cases]"),
    ],
)
def test_the_main_job_names_a_missing_input_file_by_its_field(
    setting: str, field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Had been a failed `corpus` step: a Dagster traceback, the path only mid-way through it."""
    from evals_pipeline.materialize import main as materialize_main

    config = tmp_path / "evals.yaml"
    corpus = "" if setting.startswith("corpus") else f"corpus: {CORPUS}\n"
    config.write_text(
        f"backends: {{a: oracle}}\nreference: a\nmodes: [freeform]\n{corpus}{setting}\n"
    )
    assert materialize_main(["--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"{config} {field}: " in err and "no such file or folder" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("backends", "bench", "field"),
    [
        ("{o: oracle, claude: anthropic}", "", "[backends.claude]"),
        # The bench's row would fail its step after every prose extraction had been made.
        (
            "{o: oracle}",
            f"bench: {{backends: {{o: oracle, claude: anthropic}}, corpora: {{cases: {CASES}}}}}",
            "[bench.backends.claude]",
        ),
    ],
)
def test_an_anthropic_backend_without_its_key_is_refused_before_any_run(
    backends: str, bench: str, field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The dry run lists it (a guard, or the bench's "would abort") and exits 0; the main job
    and `evals-pipeline` refuse it up front, naming the field (exit 2), writing nothing."""
    from evals_pipeline.materialize import main as materialize_main

    config = tmp_path / "evals.yaml"
    config.write_text(
        f"backends: {backends}\nreference: o\nmodes: [freeform]\ncorpus: {CORPUS}\n"
        f"output_dir: {tmp_path / 'reports'}\ncache_dir: {tmp_path / 'cache'}\n"
        f"claims_gate: false\n{bench}\n"
    )
    assert main(["--config", str(config), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "[live_credentials] claude" in out or "would abort: ANTHROPIC_API_KEY" in out
    for run in (materialize_main, main):
        assert run(["--config", str(config)]) == 2
        err = capsys.readouterr().err
        assert f"{config} {field}: the anthropic backend needs ANTHROPIC_API_KEY" in err
    assert not (tmp_path / "reports").exists() and not (tmp_path / "cache").exists()


def test_a_judge_cache_that_is_a_folder_is_refused_by_its_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evals_pipeline.materialize import main as materialize_main

    config = tmp_path / "evals.yaml"
    config.write_text(
        f"backends: {{a: oracle}}\nreference: a\nmodes: [freeform]\ncorpus: {CORPUS}\n"
        f"judge: {{cache: {tmp_path}}}\n"
    )
    assert materialize_main(["--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"{config} [judge.cache]: {tmp_path}: is a folder" in err
    assert "Traceback" not in err


def test_a_recording_target_that_is_not_a_cassette_is_refused_before_any_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a cassette line\n")
    args = ["--backend", "a=oracle", "--backend", "b=oracle", "--reference", "a"]
    args += ["--corpus", str(CORPUS), "--record-cassette", f"b={notes}"]
    args += ["--output-dir", str(tmp_path / "r"), "--cache-dir", str(tmp_path / "c")]
    # The dry run shows the plan and the guard, and exits 0, as for a corrupt replayed cassette.
    assert main([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"[recording_targets] b: corrupt cassette {notes}:1" in out
    assert "b = oracle: oracle, recording to" in out
    # The real run stops at the guard: the file had been appended to, left corrupt at line 1.
    assert main(args) == 1
    assert f"recording_targets: b: corrupt cassette {notes}:1" in capsys.readouterr().err
    assert notes.read_text() == "not a cassette line\n"
    assert not (tmp_path / "r").exists()


def test_a_path_under_a_file_is_an_error_before_the_run_not_a_traceback_after(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--output` under a file ended the whole run in a FileExistsError traceback; a cassette,
    a recording target or the cache under one in NotADirectoryError."""
    afile = tmp_path / "afile"
    afile.write_text("a file\n")
    base = ["--backend", "o=oracle", "--reference", "o", "--corpus", str(CORPUS), "--limit", "1"]
    with pytest.raises(SystemExit) as usage:
        main([*base, "--output", str(afile / "r.json")])
    assert usage.value.code == 2
    assert f"{afile} is a file, not a folder" in capsys.readouterr().err
    assert main([*base, "--cache-dir", str(afile / "c")]) == 2
    assert f"command line [cache_dir]: {afile / 'c'}: cannot be made" in capsys.readouterr().err
    record = [*base, "--backend", "n=oracle", "--record-cassette", f"n={afile / 'n.jsonl'}"]
    assert main(record) == 2
    assert "command line [record_cassette.n]: " in capsys.readouterr().err
    project = tmp_path / "evals.yaml"  # a flag over a project file is checked too
    project.write_text(f"backends: {{a: oracle}}\nreference: a\ncorpus: {CORPUS}\n")
    flagged = ["--config", str(project), "--judge-cache", str(afile / "j.jsonl"), "--dry-run"]
    assert main(flagged) == 2
    assert f"{project} (with the flags given) [judge.cache]: " in capsys.readouterr().err
    args = [*base, "--backend", f"r=cassette:path={afile / 'x.jsonl'}", "--dry-run"]
    assert main(args) == 0  # a cassette that cannot load is a guard, as a missing one is
    out = capsys.readouterr().out
    assert f"[cassette_integrity] r: cassette {afile / 'x.jsonl'}: file not found ({afile}" in out


def test_a_folder_a_real_run_cannot_write_is_refused_before_it_but_not_by_a_dry_run(
    shared_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A read-only output_dir had failed only the report step, after every extraction; a dry
    run writes nothing, and a --backend run from a read-only folder still plans."""
    from evals_pipeline_tests.support.locks import without_write_access

    out = shared_folder / "reports"
    base = ["--backend", "o=oracle", "--reference", "o", "--corpus", str(CORPUS), "--limit", "1"]
    base += ["--output-dir", str(out), "--cache-dir", str(shared_folder / "cache")]
    with without_write_access(shared_folder):
        assert main([*base, "--dry-run"]) == 0
        capsys.readouterr()
        assert main(base) == 2
    err = capsys.readouterr().err
    assert (
        f"command line [output_dir]: {out}: cannot be made: {shared_folder} is not writable" in err
    )
    assert not out.exists()


def test_a_judge_cache_a_judging_run_cannot_write_is_refused_before_it(
    shared_folder: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a key the run appends each verdict to the cache after the extractions: an
    unwritable one had failed the judging step then. Without a key it is never written."""
    from evals_pipeline.materialize import main as materialize_main
    from evals_pipeline_tests.support.locks import without_write_access

    shared_folder.chmod(0o755)  # the project reachable, and writable, by the user it runs as
    project = shared_folder / "project"
    config = _project_copy(project)
    project.chmod(0o777)
    locked = shared_folder / "locked"
    locked.mkdir()
    cache = locked / "judge_cache.jsonl"
    data = yaml.safe_load(config.read_text()) | {"judge": {"cache": str(cache)}}
    config.write_text(yaml.safe_dump(data))
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_API_KEY)
    monkeypatch.setenv("EVALS_ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # never reached
    with without_write_access(locked):
        assert main(["--config", str(config)]) == 2
        assert materialize_main(["--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"[judge.cache]: {cache}: cannot be made: {locked} is not writable" in err
    assert not (project / "reports").exists()


def test_an_output_file_in_a_folder_that_cannot_be_written_is_refused_before_the_run(
    tmp_path: Path, shared_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--output's folder read-only: the copy had failed after the run and its calls."""
    from evals_pipeline_tests.support.locks import without_write_access

    base = ["--backend", "o=oracle", "--reference", "o", "--corpus", str(CORPUS), "--limit", "1"]
    base += ["--output-dir", str(shared_folder / "o"), "--cache-dir", str(shared_folder / "c")]
    (shared_folder / "o").mkdir()
    (shared_folder / "c").mkdir()
    for sub in ("o", "c"):
        (shared_folder / sub).chmod(0o777)
    with without_write_access(shared_folder):
        assert main([*base, "--output", str(shared_folder / "r.json")]) == 2
    err = capsys.readouterr().err
    assert f"--output {shared_folder / 'r.json'}: cannot be made" in err
    assert "runs;" not in err  # no run summary: nothing ran


def test_output_onto_the_project_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, ["open"])
    before = config.read_bytes()
    assert main(["--config", str(config), "--output", str(config)]) == 2
    assert "that is the project file, which this run uses" in capsys.readouterr().err
    assert config.read_bytes() == before


def test_two_backends_recording_into_one_file_is_a_guard_the_dry_run_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each would be served the other's answers (the file answers a recording's calls): with
    one model under two names, the calibration pattern, the second would make no call at all."""
    shared = tmp_path / "rec.jsonl"
    args = ["--backend", "o=oracle", "--backend", "a=oracle", "--backend", "b=oracle"]
    args += ["--reference", "o", "--corpus", str(CORPUS)]
    args += ["--record-cassette", f"a={shared}", "--record-cassette", f"b={shared}"]
    args += ["--output-dir", str(tmp_path / "r"), "--cache-dir", str(tmp_path / "c")]
    assert main([*args, "--dry-run"]) == 0
    assert f"[recording_targets] backends a and b both record into {shared}" in (
        capsys.readouterr().out
    )
    assert main(args) == 1
    assert not shared.exists()


def test_a_bad_prices_file_fails_the_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"m": {"input_per_1m": -3, "output_per_1m": 15}}))
    config = write_config(tmp_path, ["strict"])
    data = yaml.safe_load(config.read_text()) | {"prices": str(prices)}
    config.write_text(yaml.safe_dump(data))
    assert main(["--config", str(config), "--dry-run"]) == 2  # had been read after extraction
    err = capsys.readouterr().err
    assert f"{prices} [m.input_per_1m]" in err and "finite number" in err
    # A real run refuses it up front too (it had failed the plan step, after the claim gate's).
    assert main(["--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"{config} [prices]: {prices} [m.input_per_1m]" in err
    assert not (tmp_path / "reports").exists()


def test_prices_on_the_command_line_cost_a_backend_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run built with --backend reads no project file: --prices is its only way to a cost."""
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"rules-tidy": {"input_per_1m": 3.0, "output_per_1m": 15.0}}))
    args = [
        "--backend", "oracle=oracle", "--backend", f"rules=cassette:path={RULES}",
        "--reference", "oracle", "--corpus", str(CORPUS), "--limit", "2",
        "--output-dir", str(tmp_path / "r"), "--cache-dir", str(tmp_path / "c"),
    ]  # fmt: skip
    assert main([*args, "--prices", str(prices), "--output", str(tmp_path / "out.json")]) == 0
    report = json.loads((tmp_path / "out.json").read_text())
    assert report["backends"]["rules"]["cost_usd"] > 0
    prices.write_text(json.dumps({"m": {"input_per_1m": -3, "output_per_1m": 15}}))
    assert main([*args, "--prices", str(prices), "--dry-run"]) == 2  # before any call
    assert f"{prices} [m.input_per_1m]" in capsys.readouterr().err


def test_an_empty_corpus_is_an_error_not_a_perfect_score(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    args = ["--backend", "a=oracle", "--backend", "b=oracle", "--reference", "a"]
    assert main([*args, "--corpus", str(empty), "--dry-run"]) == 2
    assert "the corpus holds no chunk" in capsys.readouterr().err


def test_a_stale_cassette_is_warned_about_with_the_next_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cassette recorded for other calls (here: open-mode records replayed in strict mode)
    still makes a report, and the CLI says why its chunks all failed (a WARN: it never held
    this mode's calls; one that did and answers none is an ERROR, tested below)."""
    stale = tmp_path / "stale.jsonl"
    lines = RULES.read_text().splitlines()
    stale.write_text("".join(line + "\n" for line in lines if '"ontology_mode":"open"' in line))
    args = ["--backend", "o=oracle", "--backend", f"s=cassette:path={stale}", "--reference", "o"]
    args += ["--corpus", str(CORPUS), "--ontology", str(ONTOLOGY), "--ontology-mode", "strict"]
    args += ["--limit", "2", "--output-dir", str(tmp_path / "reports")]
    args += ["--cache-dir", str(tmp_path / "cache")]
    assert main(args) == 0  # a shortfall is an error rate, not an abort
    err = capsys.readouterr().err
    assert "WARNING extractions[s|strict] cassette_coverage: 2 of 2 chunks are not in" in err
    assert (tmp_path / "reports" / "strict" / "report.md").is_file()
    assert "re-record" in err.lower()
    # The run's summary line says what it cost and how many chunks failed.
    assert "0 extraction calls (0 LLM requests)" in err
    assert "2 cassette misses); 2 chunk extractions failed;" in err


def test_config_with_backend_flags_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run built with --backend reads no project file: one given too was silently ignored."""
    args = ["--config", str(tmp_path / "evals.yaml"), "--backend", "o=oracle", "--dry-run"]
    with pytest.raises(SystemExit) as exit_:
        main(args)
    assert exit_.value.code == 2
    assert "--config with --backend: a run built with --backend reads no project file" in (
        capsys.readouterr().err
    )


def _project_copy(tmp_path: Path) -> Path:
    """A project file over copies of the shipped inputs (prose corpus, ontology, golden set,
    bench cases), two chunks in strict mode, that each test below breaks in one place."""
    inputs = tmp_path / "in"
    shutil.copytree(REPO / "corpus" / "golden", inputs / "golden")
    shutil.copytree(CASES, inputs / "cases")
    shutil.copytree(REPO / "ontologies" / "bench", tmp_path / "ontologies" / "bench")  # its schemas
    shutil.copyfile(CORPUS, inputs / "chunks.jsonl")
    shutil.copyfile(ONTOLOGY, inputs / "onto.yaml")
    config = tmp_path / "evals.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "backends": {"oracle": "oracle", "rules": f"cassette:path={RULES}"},
                "reference": "oracle",
                "corpus": str(inputs / "chunks.jsonl"),
                "ontology": str(inputs / "onto.yaml"),
                "scope": 2,
                "modes": ["strict"],
                "output_dir": str(tmp_path / "reports"),
                "cache_dir": str(tmp_path / "cache"),
                "golden_dir": str(inputs / "golden"),
                "judge": {"cache": str(tmp_path / "judge_cache.jsonl")},
                "bench": {
                    "backends": {"oracle": "oracle"},
                    "corpora": {"cases": str(inputs / "cases")},
                },
            }
        )
    )
    return config


def _first_line_without_expected(path: Path) -> None:
    lines = path.read_text().splitlines()
    first = json.loads(lines[0]) | {"expected": None}
    path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")


def _bad_source_type(path: Path) -> None:
    lines = path.read_text().splitlines()
    first = json.loads(lines[0]) | {"source_type": "bogus"}
    path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")


@pytest.mark.parametrize(
    ("where", "breaks", "named"),
    [  # each had failed a step (exit 1) after the steps before it, and their calls
        ("chunks.jsonl", _bad_source_type, "chunks.jsonl:1 [source_type]"),
        ("onto.yaml", lambda p: p.write_text(p.read_text()[:40]), "onto.yaml"),
        ("chunks.jsonl", _first_line_without_expected, "chunks.jsonl [expected]: 1 chunk(s)"),
        (
            "golden/claims-003.json",
            lambda p: p.write_text(p.read_text().replace("{", '{"task": "x",', 1)),
            "claims-003.json: key 'task' is given twice",
        ),
        ("golden/baseline.json", lambda p: p.write_text('{"schema": 1,'), "baseline.json:1"),
        (
            "cases/context/clinics/episodes.jsonl",
            lambda p: p.write_text(
                p.read_text() + '{"source_id": "x", "body": "a", "body": "b"}\n'
            ),
            "key 'body' is given twice",
        ),
    ],
)
def test_a_bad_input_is_refused_before_any_run(
    where: str,
    breaks: Callable[[Path], None],
    named: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The dry run and the real run read the inputs alike, up front: one error naming the file
    (exit 2) from each, and nothing run or written."""
    from evals_pipeline.materialize import main as materialize_main

    config = _project_copy(tmp_path)
    breaks(tmp_path / "in" / where)
    for argv, run in (
        (["--config", str(config), "--dry-run"], main),
        (["--config", str(config)], main),
        (["--config", str(config)], materialize_main),
    ):
        assert run(argv) == 2, argv
        err = capsys.readouterr().err
        assert named in err and "Traceback" not in err and "FAILED STEP" not in err, err
    assert not (tmp_path / "reports").exists() and not (tmp_path / "cache").exists()


def test_the_project_copy_runs_when_nothing_is_broken(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """So each refusal above is the broken input's, not the fixture's."""
    config = _project_copy(tmp_path)
    assert main(["--config", str(config), "--dry-run"]) == 0
    assert main(["--config", str(config)]) == 0


@pytest.mark.parametrize("field", ["output_dir", "cache_dir"])
def test_an_output_folder_that_is_a_file_is_refused_before_any_run(
    field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Had failed the report step (output_dir) or the golden set's (cache_dir) after the
    run's calls: `Not a directory`."""
    config = _project_copy(tmp_path)
    afile = tmp_path / "afile"
    afile.write_text("")
    data = yaml.safe_load(config.read_text()) | {field: str(afile)}
    config.write_text(yaml.safe_dump(data))
    assert main(["--config", str(config), "--dry-run"]) == 2
    assert f"[{field}]: {afile}: is a file, not a folder" in capsys.readouterr().err


def test_a_corrupt_judge_cache_or_a_bad_base_url_is_refused_when_judging(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a key set the judge reads its cache after every extraction, and the base URL at
    the plan step: both had failed a step (exit 1) after the extraction calls."""
    config = _project_copy(tmp_path)
    (tmp_path / "judge_cache.jsonl").write_text('{"key": 5}\n{"a": 1}\n')
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_API_KEY)
    monkeypatch.setenv("EVALS_ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # never reached
    assert main(["--config", str(config)]) == 2
    assert f"{tmp_path / 'judge_cache.jsonl'}" in capsys.readouterr().err
    (tmp_path / "judge_cache.jsonl").unlink()
    monkeypatch.setenv("EVALS_ANTHROPIC_BASE_URL", "ftp://127.0.0.1:1/")
    assert main(["--config", str(config)]) == 2
    assert "EVALS_ANTHROPIC_BASE_URL 'ftp://127.0.0.1:1/'" in capsys.readouterr().err
    assert not (tmp_path / "reports").exists()


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [  # each had failed the live backend's step, naming neither the variable nor the backend
        ("EVALS_OAI_API_KEY", "sk-“x”", "EVALS_OAI_API_KEY (read by {who}) has a non"),
        ("EVALS_OAI_API_KEY", "sk-x\x01", "EVALS_OAI_API_KEY (read by {who}) has a con"),
        ("HTTP_PROXY", "ftp://u:pw@p:1", "HTTP_PROXY 'ftp://p:1' (the proxy for {who})"),
        ("http_proxy", "::::", "http_proxy '::::' (the proxy for {who}) does not"),
    ],
)
def test_a_key_or_proxy_variable_a_live_backend_cannot_use_is_refused_before_any_run(
    variable: str,
    value: str,
    named: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from evals_pipeline.materialize import main as materialize_main
    from evals_pipeline_tests.support.hermetic import clear_proxy_env

    clear_proxy_env(monkeypatch)
    config = _project_copy(tmp_path)
    live = "oai-http:url=http://127.0.0.1:9/v1/chat/completions,model=m"
    data = yaml.safe_load(config.read_text())
    data["backends"]["local"] = live
    config.write_text(yaml.safe_dump(data))
    monkeypatch.setenv(variable, value)
    for argv, run in (
        (["--config", str(config), "--dry-run"], main),
        (["--config", str(config)], main),
        (["--config", str(config)], materialize_main),
        (["bench", "--backend", f"local={live}", "--out", str(tmp_path / "b")], main),
    ):
        assert run(argv) == 2, argv
        err = capsys.readouterr().err
        who = "--backend local" if argv[0] == "bench" else "backends.local"
        assert named.format(who=who) in err, err
        assert "pw" not in err and "Traceback" not in err and "FAILED STEP" not in err
    assert not (tmp_path / "reports").exists() and not (tmp_path / "cache").exists()
    assert not (tmp_path / "b").exists()


def test_what_the_bench_plan_says_would_abort_is_refused_before_the_prose_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bench runs after the whole prose run: a bench recording target it cannot use (a
    folder) had failed bench_runs after the prose run's calls. The dry run shows the line."""
    from evals_pipeline.materialize import main as materialize_main

    config = _project_copy(tmp_path)
    target = tmp_path / "recdir"
    target.mkdir()
    data = yaml.safe_load(config.read_text())
    live = "oai-http:url=http://127.0.0.1:9/v1/chat/completions,model=m"  # never reached
    data["bench"]["backends"]["local"] = live
    # The oracle's target too: the plan had not checked a local backend's recording target.
    data["bench"]["record_cassette"] = {"local": str(target), "oracle": str(target / "x")}
    (target / "x").mkdir()
    config.write_text(yaml.safe_dump(data))
    assert main(["--config", str(config), "--dry-run"]) == 0
    assert "guards: the bench would abort a real run" in capsys.readouterr().out
    for run in (main, materialize_main):
        assert run(["--config", str(config)]) == 2
        err = capsys.readouterr().err
        assert "the bench would abort: local: live oai-http:" in err
        assert f"not a model), recording to {target / 'x'}; would abort: " in err
        assert str(target) in err and "FAILED STEP" not in err
    assert not (tmp_path / "reports").exists() and not (tmp_path / "cache").exists()


def test_the_main_command_exits_1_when_a_cassette_is_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A prompt edit makes every replay miss: the main command had written reports of error
    rate 1.0 and exited 0 (CI passed), with a warning on stderr. A cassette that holds a
    missed chunk's call in this mode under another key is that case (a key is the prompts'
    digest), for one chunk as for all. A shortfall (chunks never recorded), or a cassette
    recorded for other modes only, still exits 0."""
    from evals_pipeline.materialize import main as materialize_main

    lines = RULES.read_text().splitlines()
    strict = [line + "\n" for line in lines if '"ontology_mode":"strict"' in line]
    names = ("stale", "one_stale", "partial", "other")
    stale, one_stale, partial, other = (tmp_path / f"{n}.jsonl" for n in names)

    # As recorded under other prompts: the same calls, other keys.
    def rekeyed(line: str) -> str:  # a valid key, not today's
        return re.sub(r'^\{"key":"(.)', lambda m: '{"key":"' + "fe"[m[1] == "f"], line)

    stale.write_text("".join(rekeyed(line) for line in strict))
    # One text edited (or a prompt part only one chunk renders): that chunk alone is stale. It
    # had passed as a shortfall, a WARN and exit 0.
    one_stale.write_text(rekeyed(strict[0]) + "".join(strict[1:]))
    partial.write_text("".join(strict[:2]))
    other.write_text("".join(line + "\n" for line in lines if '"ontology_mode":"open"' in line))
    for cassette, exit_code in ((stale, 1), (one_stale, 1), (partial, 0), (other, 0)):
        config = tmp_path / f"{cassette.stem}.yaml"
        config.write_text(
            f"backends: {{o: oracle, s: 'cassette:path={cassette}'}}\nreference: o\n"
            f"modes: [strict]\nontology: {ONTOLOGY}\ncorpus: {CORPUS}\nscope: 4\n"
            f"output_dir: {tmp_path / cassette.stem}\ncache_dir: {tmp_path / 'cache'}\n"
            "claims_gate: false\n"
        )
        assert materialize_main(["--config", str(config)]) == exit_code
        captured = capsys.readouterr()
        assert (tmp_path / cassette.stem / "strict" / "report.md").is_file()
        assert f"report: {tmp_path / cassette.stem / 'mode_matrix.md'}" in captured.out
        said = "FAILED CHECK" if exit_code else "WARNING"
        assert f"{said} extractions[s|strict] cassette_coverage: " in captured.err


def test_an_output_dir_flag_onto_the_prose_baseline_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Checked with the flags applied: each report would overwrite its baseline, then pass."""
    config = write_config(tmp_path, ["strict"])
    baseline = tmp_path / "baseline" / "strict"
    baseline.mkdir(parents=True)
    (baseline / "episodes.json").write_text('{"rows": {}}')
    gated = tmp_path / "gated.yaml"
    gated.write_text(config.read_text() + f"prose_baseline: {tmp_path / 'baseline'}\n")
    args = ["--config", str(gated), "--dry-run"]
    assert main(["--config", str(config), "--dry-run"]) == 0
    assert "regression gate: none (no prose_baseline" in capsys.readouterr().out
    assert main(args) == 0
    said = f"regression gate: no_regression checks strict against {tmp_path / 'baseline'}/<mode>/"
    assert said in capsys.readouterr().out
    assert main([*args, "--output-dir", str(tmp_path / "baseline")]) == 2
    err = capsys.readouterr().err
    assert "[prose_baseline]" in err and "is the file this run writes strict's counts" in err


def test_the_prose_baseline_flag_gates_a_run_built_with_backends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The local form of the CI gate: keep the reports, make the change, run with the flag."""
    run = [
        "--backend", "a=oracle", "--backend", f"b=cassette:path={RULES}", "--reference", "a",
        "--corpus", str(CORPUS), "--ontology", str(ONTOLOGY), "--limit", "4",
        "--cache-dir", str(tmp_path / "c"),
    ]  # fmt: skip
    assert main([*run, "--output-dir", str(tmp_path / "before")]) == 0
    baseline = tmp_path / "before" / "strict" / "episodes.json"
    assert main([*run, "--output-dir", str(tmp_path / "same"), "--prose-baseline", "before"]) == 2
    assert "[prose_baseline]" in capsys.readouterr().err  # relative to the working directory
    gated = [*run, "--prose-baseline", str(tmp_path / "before")]
    assert main([*gated, "--output-dir", str(tmp_path / "same")]) == 0
    better = json.loads(baseline.read_text())
    for episode in better["rows"]["b"]["episodes"]:
        episode["counts"]["edges_tp"] = episode["counts"]["edges_expected"]
    baseline.write_text(json.dumps(better))
    capsys.readouterr()
    assert main([*gated, "--output-dir", str(tmp_path / "after")]) == 1
    captured = capsys.readouterr()
    assert "FAILED CHECK report[strict] no_regression: b: worse on edge_precision" in captured.err
    assert f"report: {tmp_path / 'after' / 'strict' / 'report.md'}" in captured.out
