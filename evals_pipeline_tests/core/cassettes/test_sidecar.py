from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from evals_pipeline.core.cassettes.sidecar import FailureSidecar, rotated_path, sidecar_path
from evals_pipeline.core.models import FailureRecord

REPO = Path(__file__).resolve().parents[3]


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


_FAILING_RECORDER = textwrap.dedent(
    """
    import os, sys, time
    from evals_pipeline.core.cassettes.sidecar import FailureSidecar
    from evals_pipeline.core.models import FailureRecord
    name, cassette, go = sys.argv[1], sys.argv[2], sys.argv[3]
    sidecar = FailureSidecar(cassette, cap_bytes=2000)
    open(f"{go}.{name}", "w").close()  # ready
    while not os.path.exists(go):  # both start appending at once
        time.sleep(0.001)
    for i in range(400):
        sidecar.append(
            FailureRecord(
                ts_ms=i, model="m", call_type="entities", chunk_key=f"{name}-{i}",
                classification="malformed", raw_body=name * 200, finish_reason=None,
                completion_tokens=None, max_tokens=1,
            )
        )
    """
)


def test_two_processes_rotating_one_sidecar_lose_no_record(tmp_path: Path) -> None:
    """Rotation happens under the sidecar's lock: two processes once picked the same rotated
    name (the second rename overwrote the first's file) or rotated a file the other had just
    moved (FileNotFoundError)."""
    cassette, go = tmp_path / "c.jsonl", tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _FAILING_RECORDER, name, str(cassette), str(go)],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stderr=subprocess.PIPE,
        )
        for name in ("a", "b")
    ]
    deadline = time.monotonic() + 60
    while not all(Path(f"{go}.{name}").exists() for name in "ab"):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.01)
    go.touch()
    for proc in procs:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()[-2000:]
    files = sorted(tmp_path.glob("c.jsonl.failures*.jsonl"))
    keys = [json.loads(line)["chunk_key"] for f in files for line in f.read_text().splitlines()]
    assert sorted(keys) == sorted(f"{name}-{i}" for name in "ab" for i in range(400))
    for f in files:
        assert f.stat().st_size <= 2000
