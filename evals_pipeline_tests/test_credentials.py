"""Credentials never reach a cassette, sidecar, report or log: scan all the suite wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from evals_pipeline_tests.conftest import TEST_API_KEY, TEST_OAI_KEY
from evals_pipeline_tests.support.storage import sqlite_values

# The credentials tests put in a backend's URL (user info, query string) or its proxy's: each
# of those tests checks its own errors and records; this scans everything else, the log too.
_URL_SECRETS = (
    "sk-url-secret-5f3a9c-do-not-leak",
    "sk-query-secret-1c9e",
    "proxy-pw-7f3a",
    "pw-SECRETURL",
    "QSECRET-123",
    "QUERY-KEY-5d1e",
    "pw-ANTH-URL-9c2e",
)
_SECRETS = (TEST_API_KEY, TEST_OAI_KEY, *_URL_SECRETS)


@pytest.mark.last
def test_no_test_key_in_anything_the_suite_wrote(
    tmp_path_factory: pytest.TempPathFactory, suite_log: Path
) -> None:
    for handler in __import__("logging").getLogger().handlers:
        handler.flush()
    root = tmp_path_factory.getbasetemp()
    scanned: list[Path] = []
    leaks: list[str] = []
    for path in root.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        scanned.append(path)
        leaks += [f"{path}: {secret[:12]}…" for secret in _SECRETS if secret.encode() in data]
        if data.startswith(b"SQLite format 3\0"):  # Dagster's stores: compressed snapshots
            cells = sqlite_values(path)
            leaks += [
                f"{path} (decompressed): {s[:12]}…"
                for s in _SECRETS
                for c in cells
                if s.encode() in c
            ]
    names = [p.name for p in scanned]
    # The scan is only meaningful if the suite actually recorded and logged something.
    assert any(n.endswith(".failures.jsonl") for n in names), "no sidecar was written"
    assert sum(n.endswith(".jsonl") and ".failures" not in n for n in names) >= 5
    assert suite_log.stat().st_size > 0
    assert leaks == []
