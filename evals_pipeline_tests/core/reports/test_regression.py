"""The `no_regression` gate's core: a run's per-chunk counts against a baseline run's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evals_pipeline.core.compare import check_run_report
from evals_pipeline.core.errors import InputFileError
from evals_pipeline.core.reports.regression import check_regression, gate_plan, read_baseline

BASELINE = Path("baseline/strict/episodes.json")


def _run(tp: dict[str, int], *, chunks: int = 30, digest: str = "d") -> dict[str, Any]:
    """A prose run report: backend -> entities_tp of each of its chunks (of 4 expected)."""
    rows = {
        name: {
            "episodes": [
                {
                    "case": f"c{i:02d}",
                    "source_id": "strict",
                    "case_digest": f"{digest}{i}",
                    "status": "ok",
                    "counts": {
                        "entities_tp": hits,
                        "entities_produced": 4,
                        "entities_expected": 4,
                    },
                }
                for i in range(chunks)
            ]
        }
        for name, hits in tp.items()
    }
    return {"kind": "prose", "reference": "oracle", "rows": rows}


def test_the_same_run_passes() -> None:
    found = check_regression(_run({"m": 3}), _run({"m": 3}), baseline_path=BASELINE)
    assert found.passed and found.compared == {"m": 30}
    assert found.describe().startswith("no backend is worse than in the baseline")


def test_a_backend_worse_than_in_the_baseline_fails_naming_its_rates() -> None:
    found = check_regression(_run({"m": 4, "n": 3}), _run({"m": 2, "n": 3}), baseline_path=BASELINE)
    assert not found.passed
    assert found.worse == {"m": ["entity_precision", "entity_recall"]}
    assert "m: worse on entity_precision, entity_recall" in found.describe()


def test_lost_counts_and_nothing_paired_fail() -> None:
    lost = _run({"m": 3})
    for episode in lost["rows"]["m"]["episodes"]:
        episode["counts"] = {}
    found = check_regression(_run({"m": 3}), lost, baseline_path=BASELINE)
    assert not found.passed and found.lost == {"m": ["entity_precision", "entity_recall"]}
    edited = check_regression(_run({"m": 3}), _run({"m": 3}, digest="e"), baseline_path=BASELINE)
    assert not edited.passed and "case content changed" in edited.refused["m"]


def test_backends_on_one_side_only_are_named_and_a_run_sharing_none_fails() -> None:
    found = check_regression(
        _run({"m": 3, "old": 3}), _run({"m": 3, "new": 1}), baseline_path=BASELINE
    )
    assert found.passed  # m is compared; the others have nothing to be worse than
    assert "in the baseline only: old" in found.describe()
    assert "not in the baseline: new" in found.describe()
    renamed = check_regression(_run({"old": 3}), _run({"new": 3}), baseline_path=BASELINE)
    assert not renamed.passed
    said = "no backend is in both this run and the baseline (this run: new; the baseline: old)"
    assert said in renamed.describe()


def test_unpaired_chunks_are_counted_not_failed() -> None:
    found = check_regression(_run({"m": 3}), _run({"m": 3}, chunks=20), baseline_path=BASELINE)
    assert found.passed and found.unpaired == {"m": 10}
    assert "m on 20 chunks (10 of the baseline's chunks unpaired)" in found.describe()


def test_a_baseline_of_the_wrong_shape_names_its_file(tmp_path: Path) -> None:
    path = tmp_path / "episodes.json"
    bad = _run({"m": 3})
    bad["rows"]["m"]["episodes"][2]["counts"]["entities_tp"] = 9  # above produced
    path.write_text(json.dumps(bad))
    with pytest.raises(InputFileError, match=r"episodes\[2\]\.counts") as err:
        read_baseline(path)
    assert err.value.path == path
    path.write_text("{")
    with pytest.raises(InputFileError) as err:
        read_baseline(path)
    assert err.value.path == path


def _tokens(run: dict[str, Any], tokens: int) -> dict[str, Any]:
    for row in run["rows"].values():
        for episode in row["episodes"]:
            episode["counts"]["tokens"] = tokens
    return run


def test_costlier_chunks_are_said_not_gated() -> None:
    """A prompt that says more costs more tokens on every chunk, deterministically: a price
    to read, not a failed gate on each prompt edit."""
    found = check_regression(
        _tokens(_run({"m": 3}), 100), _tokens(_run({"m": 3}), 150), baseline_path=BASELINE
    )
    assert found.passed and found.costlier == {"m": ["tokens_per_episode"]}
    assert "m costs more: tokens_per_episode (not gated)" in found.describe()


def test_a_row_compare_refuses_is_a_failed_gate_not_a_failed_step() -> None:
    """Counts the file check passes (pooled over the whole row they are consistent) but that
    pool above 1 over the paired chunks had raised in the report step, and skipped everything
    after it."""
    baseline = _run({"m": 3}, chunks=3)
    del baseline["rows"]["m"]["episodes"][1]["counts"]["entities_produced"]
    baseline["rows"]["m"]["episodes"][2]["counts"]["entities_tp"] = 0  # row: 6 of 8 produced
    check_run_report(baseline)  # what reading the baseline checks: it passes
    current = _run({"m": 3}, chunks=2)  # pairs c00 and c01: 6 found of 4 produced
    found = check_regression(baseline, current, baseline_path=BASELINE)
    assert not found.passed and "exceeds" in found.refused["m"]
    assert "run A is the baseline, run B this run" in found.describe()
    assert "refresh the baseline" in found.describe()


def test_a_baseline_whose_row_pools_above_one_is_refused_when_read(tmp_path: Path) -> None:
    baseline = _run({"m": 3}, chunks=3)
    for episode in baseline["rows"]["m"]["episodes"][1:]:
        del episode["counts"]["entities_produced"]
    path = tmp_path / "episodes.json"
    path.write_text(json.dumps(baseline))
    with pytest.raises(InputFileError, match=r"rows\.m: pooled entities_tp \(9\) exceeds"):
        read_baseline(path)


def test_a_run_with_no_candidate_against_a_baseline_with_some_fails() -> None:
    empty = {"kind": "prose", "reference": "oracle", "rows": {}}
    found = check_regression(_run({"m": 3}), empty, baseline_path=BASELINE)
    assert not found.passed
    assert "no backend is in both this run and the baseline (this run: none" in found.describe()
    assert check_regression(empty, empty, baseline_path=BASELINE).passed  # nothing to gate


def test_the_dry_run_says_which_modes_the_gate_checks(tmp_path: Path) -> None:
    (tmp_path / "strict").mkdir()
    (tmp_path / "strict" / "episodes.json").write_text('{"rows": {}}')
    line = gate_plan(tmp_path, ("freeform", "strict"))
    assert line.startswith(f"regression gate: no_regression checks strict against {tmp_path}/")
    assert line.endswith("; no file for freeform (WARN: nothing gated there)")
    assert gate_plan(None, ("strict",)).startswith("regression gate: none")
