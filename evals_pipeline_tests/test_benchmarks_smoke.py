"""`benchmarks/run.py --quick` runs to the end: every section measures something and exits 0.

A smoke test only. Its figures come from shrunk sizes on a shared machine, so nothing here
asserts a timing; the real figures are in docs/performance.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEADINGS = (
    "== 1. Replay throughput",
    "== 2. Cassette load",
    "== 3. Live concurrency",
    "== 4. Dagster overhead",
)


def test_quick_benchmark_runs_every_section() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "run.py"), "--quick"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    for heading in HEADINGS:
        assert any(line.startswith(heading) for line in lines), heading
    # Each target line is printed with a verdict, whichever it is.
    targets = [line for line in lines if line.startswith("target ")]
    assert len(targets) == 3, targets
    assert all(line.endswith("MET") for line in targets)
