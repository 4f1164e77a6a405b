"""`evals-pipeline compare` through its CLI: what it refuses and how it names the files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals_pipeline.cli import main


def test_json_onto_a_compared_run_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--json onto run a had replaced it with the comparison (exit 0)."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text("{}")
    b.write_text("{}")
    for target, which in ((a, "run a"), (tmp_path / "." / "b.json", "run b")):
        assert main(["compare", str(a), str(b), "--json", str(target)]) == 2
        assert f"error: --json {target}: that is {which}" in capsys.readouterr().err
    assert a.read_text() == b.read_text() == "{}"


def test_a_report_of_the_wrong_shape_is_named_by_its_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"rows": {}}))
    b.write_text("{}")
    assert main(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert "evals-pipeline compare: error: run a: 'rows' must be a non-empty object" in err
    assert f"(run a is {a}, run b is {b})" in err


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        # numpy's "expected non-negative integer" had come out as a traceback (exit 1).
        ("--seed", "-1", "argument --seed: must be at least 0, got -1"),
        # A row of sums a resample: 10**11 had died allocating 8 TiB.
        ("--resamples", "100000000000", "must be at most 1,000,000, got 100,000,000,000"),
        ("--resamples", "0", "must be at least 1, got 0"),
    ],
)
def test_a_seed_or_resample_count_the_bootstrap_cannot_take_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, said: str
) -> None:
    a = tmp_path / "a.json"
    a.write_text("{}")
    with pytest.raises(SystemExit) as exit_:
        main(["compare", str(a), str(a), flag, value])
    assert exit_.value.code == 2
    assert said in capsys.readouterr().err


def test_fail_if_worse_is_a_ci_gate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """compare had exited 0 whatever it found: a CI job could not fail on a regression."""

    def run(tp: int) -> dict[str, object]:
        episodes = [
            {
                "case": f"c/{i}",
                "source_id": "ep-1",
                "case_digest": f"d{i}",
                "status": "ok",
                "counts": {"entities_tp": tp, "entities_produced": 4, "entities_expected": 4},
            }
            for i in range(30)
        ]
        return {"rows": {"m": {"episodes": episodes}}}

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(run(4)))
    b.write_text(json.dumps(run(1)))
    assert main(["compare", str(a), str(b)]) == 0  # without the flag: a report, exit 0
    assert "| B worse |" in capsys.readouterr().out
    assert main(["compare", str(a), str(b), "--fail-if-worse"]) == 1
    assert "B is worse on entity_precision, entity_recall" in capsys.readouterr().err
    assert main(["compare", str(a), str(a), "--fail-if-worse"]) == 0
    assert "| no change |" in capsys.readouterr().out


def test_fail_if_worse_fails_a_run_that_lacks_counts_a_has(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A B with its counts deleted had read as "not in both runs" on every rate: exit 0."""
    counts = {"entities_tp": 3, "entities_produced": 4, "entities_expected": 4}
    episode = {"case": "c/1", "source_id": "ep-1", "case_digest": "d1", "status": "ok"}
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"rows": {"m": {"episodes": [{**episode, "counts": counts}]}}}))
    b.write_text(json.dumps({"rows": {"m": {"episodes": [{**episode, "counts": {}}]}}}))
    assert main(["compare", str(a), str(b)]) == 0
    assert "| not in run b |" in capsys.readouterr().out
    assert main(["compare", str(a), str(b), "--fail-if-worse"]) == 1
    err = capsys.readouterr().err
    assert "B carries no counts for entity_precision, entity_recall, which A has" in err
    assert main(["compare", str(b), str(a), "--fail-if-worse"]) == 0  # B adds counts: no loss
    assert "| not in run a |" in capsys.readouterr().out


def test_fail_if_unpaired_fails_when_b_does_not_cover_a(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Episodes of A that B dropped, or whose case changed, were only listed: a B that ran on
    half the corpus passed the gate on the half it ran."""
    counts = {"entities_tp": 3, "entities_produced": 4, "entities_expected": 4}

    def episode(i: int, digest: str) -> dict[str, object]:
        return {"case": f"c/{i}", "source_id": "ep-1", "case_digest": digest, "status": "ok"}

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(
        json.dumps(
            {
                "rows": {
                    "m": {"episodes": [{**episode(i, f"d{i}"), "counts": counts} for i in range(3)]}
                }
            }
        )
    )
    b_eps = [{**episode(0, "d0"), "counts": counts}, {**episode(1, "new"), "counts": counts}]
    b.write_text(json.dumps({"rows": {"m": {"episodes": b_eps}}}))
    assert main(["compare", str(a), str(b), "--fail-if-worse"]) == 0  # nothing worse where paired
    capsys.readouterr()
    assert main(["compare", str(a), str(b), "--fail-if-unpaired"]) == 1
    err = capsys.readouterr().err
    assert "episodes of A not compared: 1 not in B, 1 whose case changed" in err
    assert main(["compare", str(a), str(b), "--fail-if-worse", "--fail-if-unpaired"]) == 1
    capsys.readouterr()
    assert main(["compare", str(b), str(b), "--fail-if-unpaired"]) == 0
    assert main(["compare", str(b), str(a), "--fail-if-unpaired"]) == 1  # b's c/1 changed in a
    capsys.readouterr()
    bare = [{**episode(0, "d0"), "counts": counts}, {**episode(1, ""), "counts": counts}]
    b.write_text(json.dumps({"rows": {"m": {"episodes": bare}}}))  # c/1 without its digest
    assert main(["compare", str(b), str(b), "--fail-if-unpaired"]) == 1
    assert "1 without a case digest (--pair-by-name pairs them)" in capsys.readouterr().err
    assert main(["compare", str(b), str(b), "--fail-if-unpaired", "--pair-by-name"]) == 0
