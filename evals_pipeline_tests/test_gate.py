"""The claim regression gate through its two front doors: `dagster asset materialize` (the
blocking check on `claim_scores`) and `evals-pipeline gate`, in every state.

Each state is a tmp project: a golden set of VERIFIED test examples recorded live through the
loopback OpenAI-compatible server, with or without a baseline, then damaged the way the state
needs (a lossy re-recording, a deleted recording, a prompt edit). The subprocesses of all states
run concurrently, once per module, because each Dagster CLI start costs several seconds here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dagster import AssetKey, DagsterInstance

from evals_pipeline.cli import main as cli_main
from evals_pipeline.core.claims import prompt
from evals_pipeline.core.claims.recordings import recording_path
from evals_pipeline.gate_cli import main as gate_main
from evals_pipeline.graph import build_definitions
from evals_pipeline.materialize import MaterializeResult, materialize_claims
from evals_pipeline_tests.core.claims.helpers import (
    VERIFIED,
    make_golden,
    record,
    write_current_baseline,
)
from evals_pipeline_tests.pipeline_fixtures import CORPUS, make_config
from evals_pipeline_tests.support.claims_backend import openai_claims_responder
from evals_pipeline_tests.support.hermetic import hermetic_environ
from evals_pipeline_tests.support.llm_servers import LoopbackLLMServer

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DAGSTER = str(BIN / "dagster")
SELECT = "golden_set,claim_extractions,claim_scores"
TIMEOUT_S = 180
STATES = ("inactive", "pass", "drop", "stale", "missing")
# A code edit to the prompt, made before the definitions load, with no re-recording.
EDITED_DEFINITIONS = '''"""The shipped definitions after an edit to the claim prompt."""
from evals_pipeline.core.claims import prompt

prompt.CLAIM_SYSTEM_PROMPT += "\\n- Prefer short claims."

from evals_pipeline.definitions import defs  # noqa: E402,F401
'''


def make_project(root: Path, state: str, template: Path) -> Path:
    """A project folder: config, Dagster home, and the golden set damaged as `state` needs."""
    root.mkdir(parents=True)
    golden = root / "golden"
    shutil.copytree(template, golden)
    if state != "inactive":
        write_current_baseline(golden)
    if state == "drop":
        record(golden, lossy=True)
    elif state == "missing":
        recording_path(golden / "recordings", "v-vote").unlink()
    (root / "home").mkdir()
    (root / "home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    (root / "evals.yaml").write_text(
        "backends:\n  oracle: oracle\nreference: oracle\n"
        f"corpus: {CORPUS}\ngolden_dir: golden\ncache_dir: cache\noutput_dir: reports\n"
    )
    return root


def env_for(project: Path) -> dict[str, str]:
    env = hermetic_environ()
    env["DAGSTER_HOME"] = str(project / "home")
    env["EVALS_CONFIG"] = str(project / "evals.yaml")
    return env


def dagster_command(state: str, project: Path) -> list[str]:
    if state == "stale":
        (project / "edited_definitions.py").write_text(EDITED_DEFINITIONS)
        target = ["-f", str(project / "edited_definitions.py")]
    else:
        target = ["-m", "evals_pipeline.definitions"]
    return [DAGSTER, "asset", "materialize", *target, "--select", SELECT]


@dataclass(frozen=True)
class Finished:
    returncode: int
    output: str
    project: Path

    def explain(self) -> str:
        return f"exit {self.returncode}\n{self.output[-4000:]}"


def run_all(commands: dict[str, tuple[list[str], Path]]) -> dict[str, Finished]:
    """Run the commands concurrently, as many at a time as there are cores (CPU-bound starts)."""

    def one(item: tuple[list[str], Path]) -> Finished:
        args, project = item
        proc = subprocess.run(
            args,
            cwd=project,
            env=env_for(project),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
        return Finished(proc.returncode, proc.stdout, project)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = pool.map(one, commands.values())
        return dict(zip(commands, results, strict=True))


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    golden = make_golden(tmp_path_factory.mktemp("template") / "golden")
    record(golden)
    return golden


@pytest.fixture(scope="module")
def subprocess_runs(
    tmp_path_factory: pytest.TempPathFactory, template: Path
) -> dict[str, Finished]:
    root = tmp_path_factory.mktemp("states")
    commands: dict[str, tuple[list[str], Path]] = {}
    for state in STATES:
        project = make_project(root / f"dagster-{state}", state, template)
        commands[f"dagster-{state}"] = (dagster_command(state, project), project)
    return run_all(commands)


# a. `dagster asset materialize`: the blocking check's exit code in each state


def test_dagster_inactive_passes_with_a_loud_warning(subprocess_runs: dict[str, Finished]) -> None:
    run = subprocess_runs["dagster-inactive"]
    assert run.returncode == 0, run.explain()
    assert "WARNING" in run.output and "claim gate INACTIVE: no baseline" in run.output
    assert "'claims_regression_gate' on 'claim_scores' passed" in run.output
    assert gate_of(run)["state"] == "INACTIVE"
    scores = json.loads((run.project / "cache" / "assets" / "claim_scores.json").read_text())
    assert scores["scores"]["counted"]["examples"] == 4


def gate_of(run: Finished) -> dict[str, Any]:
    """The gate as the `claim_scores` asset stored it (what the check decided on)."""
    scores = json.loads((run.project / "cache" / "assets" / "claim_scores.json").read_text())
    gate: dict[str, Any] = scores["gate"]
    return gate


def test_dagster_pass(subprocess_runs: dict[str, Finished]) -> None:
    run = subprocess_runs["dagster-pass"]
    assert run.returncode == 0, run.explain()
    assert gate_of(run)["state"] == "PASS", gate_of(run)
    assert "'claims_regression_gate' on 'claim_scores' passed" in run.output, run.explain()


@pytest.mark.parametrize(
    ("state", "why"),
    [
        ("drop", "is 0.333 below the baseline 1.000"),
        ("stale", "v-vote: stale recording"),
        ("missing", "v-vote: missing recording"),
    ],
)
def test_dagster_fails_the_blocking_check(
    subprocess_runs: dict[str, Finished], state: str, why: str
) -> None:
    run = subprocess_runs[f"dagster-{state}"]
    assert run.returncode == 1, run.explain()
    assert "claims_regression_gate" in run.output and why in run.output, run.explain()
    assert "evals-pipeline gate --mode live --record" in run.output  # re-record instructions
    # The checked asset is still materialised: its diffs are there to read.
    assert gate_of(run)["state"] == "FAIL"


def test_the_stale_run_really_loaded_the_edited_prompt(
    subprocess_runs: dict[str, Finished],
) -> None:
    run = subprocess_runs["dagster-stale"]
    for example_id in VERIFIED:
        assert f"{example_id}: stale recording" in run.output, run.explain()


# b. `evals-pipeline gate`: in-process through the dispatcher of `evals_pipeline.cli` (the
# console script's entry point), so states cost milliseconds instead of a process start each


@pytest.fixture
def project(
    tmp_path: Path, template: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Path:
    root = make_project(tmp_path / "p", request.param, template)
    monkeypatch.chdir(root)  # the CLI resolves evals.yaml from the working directory, like CI
    return root


@pytest.mark.parametrize(
    ("project", "code", "text"),
    [
        ("inactive", 0, "WARNING: claim gate INACTIVE"),
        ("pass", 0, "claim gate PASS"),
        ("drop", 1, "is 0.333 below the baseline"),
        ("missing", 1, "v-vote: missing recording"),
    ],
    indirect=["project"],
)
def test_cli_states(
    project: Path, code: int, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["gate"]) == code
    out = capsys.readouterr()
    assert text in out.out + out.err


@pytest.mark.parametrize("project", ["drop"], indirect=True)
def test_cli_f1_drop_prints_every_missed_claim(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["gate"]) == 1
    out = capsys.readouterr()
    assert "claim gate FAIL" in out.err and "To re-record" in out.err
    for example_id in ("v-library", "v-fair"):
        for claim, _span in VERIFIED[example_id][1][1:]:  # lossy: only the first claim survives
            assert f"FN (golden, missed): {claim}" in out.out


@pytest.mark.parametrize("project", ["drop"], indirect=True)
def test_cli_claims_gate_false_in_the_project_file_runs_no_gate(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the driver and the asset graph: the project switched it off. It had run (and failed)."""
    config = project / "evals.yaml"
    config.write_text(config.read_text() + "claims_gate: false\n")
    assert cli_main(["gate"]) == 0
    assert f"claim gate off: {config} sets claims_gate: false" in capsys.readouterr().out
    assert cli_main(["gate", "--golden", str(project / "golden")]) == 1  # asked for by name


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize(("project", "code"), [("drop", 1), ("pass", 2)], indirect=["project"])
def test_cli_an_output_that_cannot_be_written_does_not_hide_the_gate(
    project: Path, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failing gate still exits 1 (it had been 2, the write's code); a passing one exits 2."""
    assert cli_main(["gate", "--output", "/dev/full"]) == code
    err = capsys.readouterr().err
    assert "No space left on device" in err


@pytest.mark.parametrize("project", ["pass"], indirect=True)
def test_cli_an_output_onto_the_golden_set_is_refused(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--output onto a golden example or the baseline had replaced it with the gate's JSON, and
    the next gate had failed reading it."""
    golden = project / "golden"
    for target in (sorted(golden.glob("*.json"))[0], golden / "new.json"):
        assert cli_main(["gate", "--output", str(target)]) == 2
        assert f"--output {target}: that is in the golden set" in capsys.readouterr().err
    assert not (golden / "new.json").exists()
    assert (
        cli_main(["gate", "--golden", str(golden), "--output", str(golden / "baseline.json")]) == 2
    )
    assert "that is in the golden set" in capsys.readouterr().err
    assert cli_main(["gate"]) == 0  # the golden set is whole


@pytest.mark.parametrize("project", ["pass"], indirect=True)
def test_cli_prompt_edit_without_re_recording_fails(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert gate_main([]) == 0
    monkeypatch.setattr(prompt, "CLAIM_USER_TEMPLATE", prompt.CLAIM_USER_TEMPLATE + "\n")
    assert gate_main([]) == 1
    err = capsys.readouterr().err
    assert "v-fair: stale recording" in err and "To re-record" in err


@pytest.mark.parametrize("project", ["pass"], indirect=True)
def test_a_named_project_file_that_is_missing_is_an_error(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """EVALS_CONFIG or --config naming no file must not fall back to corpus/golden and the
    default baseline (a typo in CI would silently switch the project's gate settings off)."""
    monkeypatch.setenv("EVALS_CONFIG", str(project / "nope.yaml"))
    assert gate_main([]) == 2
    assert "nope.yaml: file not found" in capsys.readouterr().err
    monkeypatch.delenv("EVALS_CONFIG")
    assert gate_main(["--config", "nope.yaml"]) == 2
    assert "nope.yaml: file not found" in capsys.readouterr().err
    assert gate_main([]) == 0  # the default evals.yaml is there


@pytest.mark.parametrize("project", ["pass"], indirect=True)
def test_cli_live_record_refreshes_recordings_after_a_prompt_edit(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(prompt, "CLAIM_PROMPT_VERSION", "claims/2")
    assert gate_main([]) == 1
    with LoopbackLLMServer("openai", responder=openai_claims_responder()) as server:
        args = ["--mode", "live", "--record", "--backend", f"local=oai-http:url={server.url}"]
        assert gate_main(args) == 0
        assert len(server.requests) == 5  # pending examples are recorded too
    out = capsys.readouterr().out
    assert "wrote 5 recordings" in out and "claim gate PASS" in out
    recording = json.loads((project / "golden" / "recordings" / "v-vote.json").read_text())
    assert recording["prompt_version"] == "claims/2"
    assert gate_main([]) == 0  # replay is current again


@pytest.mark.parametrize("project", ["inactive"], indirect=True)
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("flags", [["--output", "/dev/full"], ["--write-baseline"]])
def test_cli_a_write_that_fails_is_one_error_line(
    project: Path, capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    """A full disk under --output or the baseline: one line naming the file, exit 2. Both writes
    had ended in a traceback and exit 1, the code of a failing gate."""
    if "--write-baseline" in flags:
        baseline = project / "golden" / "baseline.json"
        baseline.symlink_to("/dev/full")  # written through, as a link to a file would be
    assert gate_main(flags) == 2
    err = capsys.readouterr().err
    assert "evals-pipeline gate: error:" in err and "No space left on device" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("project", ["inactive"], indirect=True)
def test_cli_write_baseline_then_the_gate_is_active(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = project / "gate.json"
    assert gate_main(["--write-baseline", "--output", str(output)]) == 0
    assert "baseline written" in capsys.readouterr().out
    baseline = json.loads((project / "golden" / "baseline.json").read_text())
    assert baseline["micro"]["f1"] == 1.0 and len(baseline["examples"]) == 4
    assert json.loads(output.read_text())["gate"]["state"] == "INACTIVE"
    assert gate_main([]) == 0
    assert "claim gate PASS" in capsys.readouterr().out


@pytest.mark.parametrize("project", ["inactive"], indirect=True)
def test_cli_write_baseline_refuses_a_missing_verified_recording(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recording_path(project / "golden" / "recordings", "v-fair").unlink()
    assert gate_main(["--write-baseline"]) == 1
    assert "refusing to write a baseline" in capsys.readouterr().err
    assert not (project / "golden" / "baseline.json").exists()


@pytest.mark.parametrize("project", ["drop"], indirect=True)
def test_cli_write_baseline_refuses_to_lower_it_past_a_failing_gate(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After a regression, --write-baseline would make the next gate pass: it refuses unless
    --allow-lower says the trade is deliberate, and then says the baseline went down."""
    path = project / "golden" / "baseline.json"
    before = path.read_text()
    assert gate_main(["--write-baseline"]) == 1
    err = capsys.readouterr().err
    assert "refusing to lower the baseline" in err and "--allow-lower" in err
    assert path.read_text() == before
    assert gate_main(["--write-baseline", "--allow-lower"]) == 0
    err = capsys.readouterr().err
    assert "the baseline's micro-F1 went down: 1.000 ->" in err
    assert json.loads(path.read_text())["micro"]["f1"] < 1.0
    assert gate_main([]) == 0  # the lowered baseline is the new bar


@pytest.mark.parametrize("project", ["inactive"], indirect=True)
def test_cli_a_named_baseline_that_is_missing_is_an_error(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    typo = project / "golden" / "baselin.json"
    assert gate_main(["--baseline", str(typo)]) == 2  # had passed as INACTIVE, exit 0
    assert "no baseline file here, though one was named" in capsys.readouterr().err
    assert gate_main(["--baseline", str(typo), "--write-baseline"]) == 0  # unless written now
    assert typo.is_file()


def test_cli_on_the_shipped_golden_set(capsys: pytest.CaptureFixture[str]) -> None:
    """The real gate on the real set: CI fails here when a committed baseline's gate fails."""
    baseline = REPO / "corpus" / "golden" / "baseline.json"
    code = gate_main(["--config", str(REPO / "evals.yaml")])
    out = capsys.readouterr()
    if not baseline.exists():
        assert code == 0
        assert f"no baseline at {baseline}" in out.err
        assert "golden examples are VERIFIED" in out.err
    else:
        assert code == 0, out.out + out.err  # the gate is active and must pass
        assert "claim gate PASS" in out.out


@pytest.mark.parametrize(
    "args",
    [
        ["--record"],
        ["--mode", "live"],
        ["--mode", "live", "--record"],
        ["--backend", "x=oai-http:url=http://127.0.0.1:9/v1/chat/completions"],
        ["--allow-lower"],
    ],
)
def test_cli_usage_errors_exit_2(args: list[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        gate_main(args)
    assert caught.value.code == 2


@pytest.mark.parametrize("project", ["inactive"], indirect=True)
def test_cli_bad_input_exits_2(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert gate_main(["--mode", "live", "--record", "--backend", "x=oracle"]) == 2
    assert "needs a live backend" in capsys.readouterr().err
    example = project / "golden" / "v-vote.json"
    data = json.loads(example.read_text())
    data["expected_claims"][0]["evidence_span"] = "not in the text"
    example.write_text(json.dumps(data))
    assert gate_main([]) == 2
    assert "v-vote.json" in capsys.readouterr().err


# d. the CI driver runs the claims layer and stops on a failing gate


def test_driver_claims_layer_fails_on_a_failing_gate(tmp_path: Path, template: Path) -> None:
    root = make_project(tmp_path / "p", "missing", template)
    config = make_config(tmp_path, {"oracle": "oracle"}, golden_dir=root / "golden")
    outcome = MaterializeResult()
    with DagsterInstance.ephemeral() as instance:
        ok = materialize_claims(config, build_definitions(config), instance, outcome, quiet=True)
        assert not ok and not outcome.success
        assert instance.get_latest_materialization_event(AssetKey("claim_scores")) is not None
    assert any("claims_regression_gate" in line for line in outcome.failed_checks)


def test_the_replay_names_each_recording_it_could_not_use_and_why(
    tmp_path: Path, template: Path
) -> None:
    """In the UI the `claim_extractions` metadata had said only "recordings_invalid: 1"."""
    root = make_project(tmp_path / "p", "missing", template)
    broken = recording_path(root / "golden" / "recordings", "v-fair")
    broken.write_text(broken.read_text().replace("{", '{"id": "x",', 1))
    config = make_config(tmp_path, {"oracle": "oracle"}, golden_dir=root / "golden")
    with DagsterInstance.ephemeral() as instance:
        materialize_claims(config, build_definitions(config), instance, MaterializeResult())
        event = instance.get_latest_materialization_event(AssetKey("claim_extractions"))
    assert event is not None and event.asset_materialization is not None
    metadata = event.asset_materialization.metadata
    assert metadata["recordings_invalid"].value == 1 and metadata["recordings_missing"].value == 1
    problems = str(metadata["recording_problems"].value)
    assert f"- `v-fair`: invalid recording: unreadable or incomplete recording: {broken}: key " in (
        problems
    )
    assert "- `v-vote`: missing recording: no recording at " in problems


def test_driver_claims_layer_passes_when_inactive_and_skips_without_a_golden_set(
    tmp_path: Path, template: Path
) -> None:
    root = make_project(tmp_path / "p", "inactive", template)
    config = make_config(tmp_path, {"oracle": "oracle"}, golden_dir=root / "golden")
    defs = build_definitions(config)
    with DagsterInstance.ephemeral() as instance:
        outcome = MaterializeResult()
        assert materialize_claims(config, defs, instance, outcome, quiet=True)
        assert outcome.runs == 1 and outcome.failed_checks == []
        # Quiet runs print no Dagster log: the INACTIVE banner reaches CI as a warning line.
        [warning] = outcome.warnings
        assert warning.startswith("claims_regression_gate: ") and "INACTIVE" in warning
        absent = config.model_copy(update={"golden_dir": tmp_path / "nowhere"})
        skipped = MaterializeResult()
        assert materialize_claims(absent, defs, instance, skipped, quiet=True)
        assert skipped.runs == 0
