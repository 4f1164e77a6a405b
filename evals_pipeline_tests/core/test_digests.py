"""File digests are remembered only while the file is provably unchanged."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from evals_pipeline.core import digests
from evals_pipeline.core.digests import file_sha256


def test_a_settled_unchanged_file_is_hashed_once_and_a_changed_one_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(digests, "RACY_WINDOW_S", 0.0)
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"one\n")
    time.sleep(0.05)
    assert file_sha256(path) == hashlib.sha256(b"one\n").hexdigest()
    assert digests._memo[os.path.abspath(path)][1] == hashlib.sha256(b"one\n").hexdigest()
    opened: list[str] = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    assert file_sha256(path) == hashlib.sha256(b"one\n").hexdigest()
    assert opened == []  # served from the memo
    with real_open(path, "ab") as handle:
        handle.write(b"two\n")
    assert file_sha256(path) == hashlib.sha256(b"one\ntwo\n").hexdigest()


def test_a_file_changed_just_before_it_was_hashed_is_never_trusted(tmp_path: Path) -> None:
    """A same-size rewrite that even restores the old mtime (a racy write within one timestamp
    tick looks the same to stat) still gives the new digest."""
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"aaaa\n")
    before = path.stat()
    assert file_sha256(path) == hashlib.sha256(b"aaaa\n").hexdigest()
    path.write_bytes(b"bbbb\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert file_sha256(path) == hashlib.sha256(b"bbbb\n").hexdigest()


def test_a_missing_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        file_sha256(tmp_path / "nope.jsonl")


def test_the_racy_window_decides_whether_a_digest_is_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"x\n")
    changed = max(path.stat().st_mtime, path.stat().st_ctime)
    digests.forget_digests()
    monkeypatch.setattr(digests.time, "time", lambda: changed + digests.RACY_WINDOW_S / 2)
    file_sha256(path)
    assert os.path.abspath(path) not in digests._memo  # hashed too soon after the change
    monkeypatch.setattr(digests.time, "time", lambda: changed + digests.RACY_WINDOW_S + 1)
    file_sha256(path)
    assert os.path.abspath(path) in digests._memo


def test_contents_key_changes_with_any_file_under_a_folder(tmp_path: Path) -> None:
    from evals_pipeline.core.digests import contents_key

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.yaml").write_text("x: 1\n")
    (tmp_path / "b.txt").write_text("b")
    key = contents_key(tmp_path)
    assert key is not None and contents_key(tmp_path) == key
    (tmp_path / "a" / "x.yaml").write_text("x: 2\n")  # same size, new contents
    assert contents_key(tmp_path) not in (None, key)
    assert contents_key(tmp_path / "b.txt") == contents_key(tmp_path / "b.txt")
    assert contents_key(tmp_path / "missing") is None  # the loader names why
