"""The `no_regression` gate's core: a run's per-chunk counts against a baseline run's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evals_pipeline.core.errors import InputFileError
from evals_pipeline.core.reports.regression import check_regression, read_baseline

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
    assert "no backend of this run is in the baseline (new)" in renamed.describe()


def test_unpaired_chunks_are_counted_not_failed() -> None:
    found = check_regression(_run({"m": 3}), _run({"m": 3}, chunks=20), baseline_path=BASELINE)
    assert found.passed and found.unpaired == {"m": 10}
    assert "m on 20 chunks (10 unpaired)" in found.describe()


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
