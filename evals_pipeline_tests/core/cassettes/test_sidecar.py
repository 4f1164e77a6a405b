from __future__ import annotations

import json
from pathlib import Path

from evals_pipeline.core.cassettes.sidecar import FailureSidecar, rotated_path, sidecar_path
from evals_pipeline.core.models import FailureRecord


def failure(body: str) -> FailureRecord:
    return FailureRecord(
        ts_ms=1,
        model="m",
        call_type="entities",
        chunk_key="c",
        classification="malformed",
        raw_body=body,
        finish_reason="stop",
        completion_tokens=3,
        max_tokens=10,
    )


def test_created_eagerly_and_empty(tmp_path: Path) -> None:
    FailureSidecar(tmp_path / "c.jsonl")
    assert sidecar_path(tmp_path / "c.jsonl").read_text() == ""
    assert sidecar_path(tmp_path / "c.jsonl").name == "c.jsonl.failures.jsonl"


def test_rotates_past_the_cap_without_cutting_a_record(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    sidecar = FailureSidecar(cassette, cap_bytes=1000)
    # ~600 bytes a record: one fits under the cap, two do not; the last alone exceeds it.
    bodies = [str(i) * 400 for i in range(5)] + ["x" * 5000]
    for body in bodies:
        sidecar.append(failure(body))
    files = [rotated_path(cassette, n) for n in (1, 2, 3, 4, 5)] + [sidecar_path(cassette)]
    assert all(f.exists() for f in files)
    assert not rotated_path(cassette, 6).exists()
    read = [json.loads(line)["raw_body"] for f in files for line in f.read_text().splitlines()]
    assert read == bodies  # every record whole, in order, across the rotated files
    for f in files[:-1]:
        assert f.stat().st_size <= 1000
