"""Cassette files: loading errors by line, duplicate keys, torn lines, crash safety, locking."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from evals_pipeline.core.cassettes.format import CassetteRecord, CassetteResponse
from evals_pipeline.core.cassettes.keys import extract_key
from evals_pipeline.core.cassettes.store import CassetteWriter, iter_records, load_cassette
from evals_pipeline.core.errors import CassetteCorrupt, CassetteDuplicateKey, CassetteMiss
from evals_pipeline.core.models import Attempt, Episode, StageTranscript
from evals_pipeline.core.options import ExtractOptions
from evals_pipeline_tests.support.llm_servers import LoopbackLLMServer, Reply, openai_completion

REPO = Path(__file__).resolve().parents[3]


def record(key: str, text: str = "{}") -> CassetteRecord:
    attempt = Attempt(text=text, finish_reason="stop", truncated=False, max_tokens=10)
    return CassetteRecord(
        key=key,
        call_type="extract",
        provider="oai-http",
        model="m",
        timestamp="2026-01-01T00:00:00.000Z",
        request={},
        response=CassetteResponse(
            transcript=(StageTranscript(stage="entities", attempts=(attempt,)),), result={}
        ),
    )


def write(path: Path, *records: CassetteRecord) -> None:
    writer = CassetteWriter(path)
    for r in records:
        writer.append(r)


def test_corrupt_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    write(path, record("a" * 64), record("b" * 64))
    with path.open("a") as handle:
        handle.write("{not json}\n")
    with pytest.raises(CassetteCorrupt) as err:
        load_cassette(path)
    assert err.value.line == 3 and err.value.path == path
    assert f"{path}:3" in str(err.value)


def test_a_byte_order_mark_is_named_as_one(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"  # had said "expected value at line 1 column 1"
    write(path, record("a" * 64))
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    with pytest.raises(CassetteCorrupt, match=r"c\.jsonl:1: Unexpected UTF-8 BOM: save the file"):
        load_cassette(path)


def test_record_missing_a_field_is_corrupt_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    data = record("a" * 64).model_dump(mode="json")
    del data["call_type"]
    path.write_text(json.dumps(data) + "\n")
    with pytest.raises(CassetteCorrupt, match="call_type"):
        load_cassette(path)


def test_duplicate_key_is_an_error_only_for_eval_backends(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    write(path, record("a" * 64, "1"), record("c" * 64), record("a" * 64, "2"))
    with pytest.raises(CassetteDuplicateKey) as err:
        load_cassette(path, unique=True)
    assert err.value.lines == (1, 3) and err.value.key == "a" * 64
    fifo = load_cassette(path)  # pipeline replay: FIFO
    assert fifo.take("a" * 64, "extract").response.transcript[0].attempts[0].text == "1"
    assert fifo.take("a" * 64, "extract").response.transcript[0].attempts[0].text == "2"
    assert "a" * 64 not in fifo and "c" * 64 in fifo
    with pytest.raises(CassetteMiss, match="already served"):
        fifo.take("a" * 64, "extract")


def test_a_key_repeated_across_two_files_names_both(tmp_path: Path) -> None:
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    write(first, record("c" * 64), record("a" * 64, "1"))
    write(second, record("a" * 64, "2"))
    with pytest.raises(CassetteDuplicateKey) as err:
        load_cassette([first, second], unique=True)
    assert (err.value.first_path, err.value.path, err.value.lines) == (first, second, (2, 1))
    assert f"{first} (line 2) and {second} (line 1)" in str(err.value)


def test_unique_cassette_serves_its_answer_repeatedly(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    write(path, record("a" * 64))
    cassette = load_cassette(path, unique=True)
    assert cassette.take("a" * 64, "extract") == cassette.take("a" * 64, "extract")


def test_a_torn_last_line_is_named_skipped_by_its_recorder_and_set_aside_whole(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.jsonl"
    write(path, record("a" * 64))
    full = path.read_bytes()
    path.write_bytes(full + full[:40])  # a crash mid-write left half a line
    with pytest.raises(CassetteCorrupt, match="torn last line") as err:
        load_cassette(path)  # replaying it: named, with how to repair it
    assert err.value.line == 2 and "c.jsonl.torn" in str(err.value)
    # The run recording into it takes what is whole and makes the torn line's call again.
    assert list(load_cassette(path, skip_torn_tail=True, consume=False).keys()) == ["a" * 64]
    write(path, record("b" * 64))
    assert path.read_bytes() == full + (record("b" * 64).model_dump_json() + "\n").encode()
    assert (tmp_path / "c.jsonl.torn").read_bytes() == full[:40] + b"\n"  # kept, not lost
    assert len(load_cassette(path, unique=True)) == 2


def test_a_whole_last_record_short_of_its_newline_stays_a_record(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    write(path, record("a" * 64))
    path.write_bytes(path.read_bytes().rstrip(b"\n"))  # cut just before the newline
    write(path, record("b" * 64))
    assert len(load_cassette(path, unique=True)) == 2
    assert not (tmp_path / "c.jsonl.torn").exists()


def test_a_torn_line_in_the_middle_is_never_skipped(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    write(path, record("a" * 64))
    path.write_bytes(path.read_bytes()[:40] + b"\n" + path.read_bytes())
    with pytest.raises(CassetteCorrupt) as err:
        load_cassette(path, skip_torn_tail=True)
    assert err.value.line == 1


def test_blank_lines_are_ignored_and_appends_never_truncate(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    write(path, record("a" * 64))
    with path.open("a") as handle:
        handle.write("\n\n")
    write(path, record("b" * 64))  # a new writer on an existing file appends
    assert len(load_cassette(path)) == 2


def test_missing_file_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(CassetteCorrupt, match="not found"):
        load_cassette(tmp_path / "absent.jsonl")


def test_key_is_sha256_hex_and_stable() -> None:
    episode = Episode(name="x", body="Ada met Charles.")
    key = extract_key(episode, ExtractOptions())
    assert len(key) == 64 and int(key, 16) >= 0
    assert key == extract_key(episode.model_copy(), ExtractOptions(max_tokens_entities=9))


_RECORDER = textwrap.dedent(
    """
    import sys
    from evals_pipeline.core.cassettes.record import RecordingExtractor
    from evals_pipeline.core.extractors.base import TransportExtractor
    from evals_pipeline.core.extractors.openai_compat import OpenAICompatTransport
    from evals_pipeline.core.models import Episode
    from evals_pipeline.core.options import ExtractOptions
    from evals_pipeline.core.runner import run_sync

    url, path = sys.argv[1], sys.argv[2]
    extractor = RecordingExtractor(TransportExtractor(OpenAICompatTransport(url=url)), path)
    for i in range(1000):
        episode = Episode(name=f"chunk-{i}", body=f"Text number {i}.")
        run_sync(lambda: extractor.extract(episode, ExtractOptions()))
    """
)


def _slow_reply(request: object) -> Reply:
    return Reply(**{**openai_completion('{"entities": [], "edges": []}').__dict__, "delay_s": 0.02})


def test_killing_a_recording_process_keeps_every_completed_record(tmp_path: Path) -> None:
    path = tmp_path / "killed.jsonl"
    with LoopbackLLMServer("openai", responder=_slow_reply) as server:
        proc = subprocess.Popen(
            [sys.executable, "-c", _RECORDER, server.base_url, str(path)],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if path.exists() and path.read_bytes().count(b"\n") >= 5:
                break
            time.sleep(0.02)
        time.sleep(0.3)  # a dozen more exchanges: a record held back in a buffer would show
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        received = len(server.requests)
    assert proc.returncode == -signal.SIGKILL
    cassette = load_cassette(path)  # every line present is a complete, valid record
    # Two requests per extraction, one after another: every extraction before the one whose
    # requests arrived last had ended, and so had its record been written.
    assert len(cassette) >= (received + 1) // 2 - 1 >= 5
    assert path.read_bytes().endswith(b"\n")


_APPENDER = textwrap.dedent(
    """
    import os, sys, time
    from evals_pipeline.core.cassettes.store import JsonlAppender
    name, path = sys.argv[1], sys.argv[2]
    real_write = os.write
    def short_write(fd, data):
        # A write may take fewer bytes than given (a signal, a network filesystem): each line
        # goes out in 4 KiB pieces with a yield between, so only the lock keeps lines whole.
        written = real_write(fd, bytes(data[:4096]))
        time.sleep(0)
        return written
    os.write = short_write
    appender = JsonlAppender(path)
    pad = name * 70_000  # lines far beyond PIPE_BUF, so only the lock keeps them whole
    for i in range(150):
        appender.append_line('{"writer": "%s", "i": %d, "pad": "%s"}' % (name, i, pad))
    """
)


def test_two_processes_recording_into_one_file_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "shared.jsonl"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _APPENDER, name, str(path)],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        for name in ("a", "b")
    ]
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 300
    for name in ("a", "b"):
        assert [r["i"] for r in rows if r["writer"] == name] == list(range(150))
        assert all(r["pad"] == name * 70_000 for r in rows if r["writer"] == name)


_UNIQUE_WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from evals_pipeline.core.cassettes.store import CassetteWriter
    from evals_pipeline_tests.core.cassettes.test_store import record
    path, name, go, walk = sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4]
    writer = CassetteWriter(path, unique=True)
    order = range(300) if name == "a" or walk == "same" else range(299, -1, -1)
    (go.parent / f"ready-{name}").touch()
    while not go.exists():  # the barrier: both start appending at once
        time.sleep(0.001)
    kept = 0
    for i in order:
        kept += writer.append(record(f"{i:064d}", text=name))
        if walk == "opposite":
            time.sleep(0.001)  # each append's window is far wider than the start's jitter
    print(kept)
    """
)


@pytest.mark.parametrize("walk", ["opposite", "same"])
def test_two_processes_recording_the_same_calls_leave_each_key_once(
    tmp_path: Path, walk: str
) -> None:
    """Two runs recording one backend into one cassette at once ask the same keys: whichever
    appends a key second finds it there (read under the lock) and does not append it again,
    so the cassette still replays with unique keys. The two start together and walk the keys
    from opposite ends, so each reads the other's appends as they come; or in the same order
    as fast as they can, so that they ask for nearly every key at once (without the lock,
    both find it missing and both append it)."""
    path = tmp_path / "shared.jsonl"
    go = tmp_path / "go"
    write(path, record(f"{7:064d}", text="earlier"))  # held before either started
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _UNIQUE_WRITER, str(path), name, str(go), walk],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"ready-{n}").exists() for n in "ab"):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.005)
    go.touch()
    kept = [int(proc.communicate(timeout=120)[0]) for proc in procs]
    cassette = load_cassette(path, unique=True)  # raised CassetteDuplicateKey before
    assert len(cassette) == 300 and sum(kept) == 299
    if walk == "opposite":
        assert min(kept) > 0  # both wrote: the appends really did meet
    texts = [r.response.transcript[0].attempts[0].text for _, r in iter_records(path)]
    assert texts.count("a") == kept[0] and texts.count("b") == kept[1]


def test_a_unique_append_reads_a_big_file_a_block_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first unique append reads what the file holds in blocks (it had read the whole file
    in one pread: 665 MB peak for a 338 MB file, and a short read past 2 GiB)."""
    from evals_pipeline.core.cassettes import store

    path = tmp_path / "big.jsonl"
    keys = [f"{i:064d}" for i in range(40)]
    _write(path, *keys[:20])
    with path.open("a") as handle:  # lines the recorder did not write: found by their JSON
        for key in keys[20:]:
            handle.write(json.dumps({"pad": "x" * 3000, "key": key}) + "\n")
    monkeypatch.setattr(store, "_READ_BLOCK", 1000)  # every line spans blocks
    real_pread = os.pread
    sizes: list[int] = []

    def pread(fd: int, size: int, offset: int) -> bytes:
        sizes.append(size)
        return real_pread(fd, size, offset)

    monkeypatch.setattr(store.os, "pread", pread)
    writer = CassetteWriter(path, unique=True)
    assert not any(writer.append(record(key)) for key in keys)  # every key found, none added
    assert max(sizes) <= 1000
    assert writer.append(record("f" * 64)) is True


def test_a_unique_append_passes_over_json_lines_that_are_no_object(tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"
    path.write_text('[1, 2]\n"text"\n{"key": 5}\n{"no": "key"}\n')
    writer = CassetteWriter(path, unique=True)  # a list had raised AttributeError
    assert writer.append(record("a" * 64)) is True
    assert writer.append(record("a" * 64)) is False


def test_a_unique_writer_reads_afresh_a_file_replaced_or_cut_shorter(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    writer = CassetteWriter(path, unique=True)
    assert writer.append(record("a" * 64)) and writer.append(record("b" * 64))
    replacement = tmp_path / "new.jsonl"
    _write(replacement, "c" * 64)
    replacement.replace(path)  # another file at the path, without a or b
    assert writer.append(record("a" * 64)) is True
    assert writer.append(record("c" * 64)) is False
    _write(path, "d" * 64)  # the same file rewritten shorter, in place
    assert writer.append(record("b" * 64)) is True
    assert writer.append(record("d" * 64)) is False
    assert [r.key[0] for _, r in iter_records(path)] == ["d", "b"]


def test_a_full_disk_is_a_typed_error_and_keeps_earlier_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from evals_pipeline.core.cassettes import store
    from evals_pipeline.core.errors import CassetteWriteError

    path = tmp_path / "full.jsonl"
    write(path, record("a" * 64), record("b" * 64))
    real_write = os.write

    def disk_full(fd: int, data: bytes) -> int:
        real_write(fd, bytes(data)[:25])  # the disk took a few bytes, then filled up
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store.os, "write", disk_full)
    with pytest.raises(CassetteWriteError, match="No space left on device") as err:
        write(path, record("c" * 64))
    assert err.value.path == path
    monkeypatch.setattr(store.os, "write", real_write)
    with pytest.raises(CassetteCorrupt) as corrupt:  # the torn line is named, not hidden
        load_cassette(path)
    assert corrupt.value.line == 3
    write(path, record("d" * 64))  # space again: the torn line goes aside, whole
    assert [r.key[0] for _, r in iter_records(path)] == ["a", "b", "d"]
    assert (tmp_path / "full.jsonl.torn").read_bytes().startswith(b'{"key":"ccc')


def test_a_torn_tail_set_aside_on_a_full_disk_again_leaves_no_fragment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Moving a torn tail aside can hit the full disk again: the partial copy in `.torn` is
    cut off (the tail is still in the cassette), so the next move does not glue the tail to
    a fragment of itself."""
    import errno

    from evals_pipeline.core.cassettes import store
    from evals_pipeline.core.errors import CassetteWriteError

    path = tmp_path / "c.jsonl"
    write(path, record("a" * 64))
    torn = record("b" * 64).model_dump_json()[:60]
    with path.open("a") as handle:
        handle.write(torn)
    aside = tmp_path / "c.jsonl.torn"
    aside.write_text("an earlier torn line, cut short")  # no newline
    real_write = os.write

    def disk_full(fd: int, data: bytes) -> int:
        real_write(fd, bytes(data)[:10])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store.os, "write", disk_full)
    with pytest.raises(CassetteWriteError):
        write(path, record("c" * 64))
    assert aside.read_text() == "an earlier torn line, cut short"
    assert path.read_text().endswith(torn)  # nothing left the cassette
    monkeypatch.setattr(store.os, "write", real_write)
    write(path, record("c" * 64))
    assert aside.read_text() == "an earlier torn line, cut short\n" + torn + "\n"
    assert [r.key[0] for _, r in iter_records(path)] == ["a", "c"]


def _write(path: Path, *keys: str) -> None:
    path.write_text("".join(record(k).model_dump_json() + "\n" for k in keys))


def test_read_only_loads_of_an_unchanged_file_are_shared(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    _write(path, "a", "b")
    first = load_cassette(path, unique=True)
    assert load_cassette(path, unique=True) is first
    assert load_cassette(path, consume=False) is not first  # another kind of load
    fifo = load_cassette(path)  # consuming loads are never shared: each serves its own FIFO
    assert load_cassette(path) is not fifo


def test_an_appended_or_rewritten_file_is_loaded_afresh(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    _write(path, "a", "b")
    first = load_cassette(path, unique=True)
    CassetteWriter(path).append(record("c"))
    appended = load_cassette(path, unique=True)
    assert appended is not first and "c" in appended and len(appended) == 3
    # Same size, same inode, written within the same clock tick: only the content differs.
    _write(path, "x", "y", "z")
    rewritten = load_cassette(path, unique=True)
    assert "x" in rewritten and "a" not in rewritten
    # A duplicate written in place is still found: the bad file is loaded, not a memory of it.
    _write(path, "x", "x", "z")
    with pytest.raises(CassetteDuplicateKey):
        load_cassette(path, unique=True)


def test_the_shared_loads_are_bounded_by_the_size_of_the_files_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evals_pipeline.core.cassettes import store

    store.clear_load_memo()
    paths = [tmp_path / f"{i}.jsonl" for i in range(3)]
    for i, path in enumerate(paths):
        _write(path, f"{i}-a", f"{i}-b")
    size = paths[0].stat().st_size
    monkeypatch.setattr(store, "MEMO_MAX_BYTES", 2 * size)
    loaded = [load_cassette(p, unique=True) for p in paths]
    assert store._memo_bytes <= 2 * size
    assert load_cassette(paths[2], unique=True) is loaded[2]  # the most recent is kept
    assert load_cassette(paths[0], unique=True) is not loaded[0]  # the oldest was evicted
    big = tmp_path / "big.jsonl"
    _write(big, *(f"big-{i}" for i in range(7)))  # larger than the whole budget
    assert load_cassette(big, unique=True) is not load_cassette(big, unique=True)
    store.clear_load_memo()


def test_an_unchanged_cassette_is_indexed_once_and_a_changed_one_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evals_pipeline.core.cassettes import store

    store.clear_load_memo()
    monkeypatch.setattr(store, "MEMO_MAX_BYTES", 0)  # no shared full loads: count real ones
    loads: list[tuple[Path, ...]] = []
    real_load = store._load
    monkeypatch.setattr(
        store, "_load", lambda paths, **kw: loads.append(paths) or real_load(paths, **kw)
    )
    path = tmp_path / "c.jsonl"
    _write(path, "a", "b")
    first = store.index_cassette(path)
    assert "a" in first and len(first) == 2 and "zz" not in first
    assert store.index_cassette(path) is first and len(loads) == 1
    CassetteWriter(path).append(record("c"))
    assert "c" in store.index_cassette(path) and len(loads) == 2
    _write(path, "x", "x")
    for _ in range(2):  # a bad file is never remembered as good
        with pytest.raises(CassetteDuplicateKey):
            store.index_cassette(path)
    assert len(loads) == 4
    store.clear_load_memo()


def test_a_load_keeps_what_replay_reads_and_still_checks_the_rest_is_json(tmp_path: Path) -> None:
    """`response.result` is read past, not built; a broken byte inside the record is still a
    corrupt line, named by number."""
    path = tmp_path / "c.jsonl"
    base = record("a" * 64)
    response = CassetteResponse(transcript=base.response.transcript, result={"note": "x" * 1000})
    full = base.model_copy(update={"response": response})
    write(path, full)
    loaded = load_cassette(path).take("a" * 64, "extract")
    assert loaded.response.transcript == full.response.transcript
    assert (loaded.key, loaded.provider, loaded.model) == (full.key, full.provider, full.model)
    assert not hasattr(loaded.response, "result")
    good = path.read_text()
    broken = good.replace('"note":"x', '"note":x', 1)
    assert broken != good
    path.write_text(good + broken)
    with pytest.raises(CassetteCorrupt) as err:
        load_cassette(path)
    assert err.value.line == 2


def test_a_loaded_cassette_gives_the_cyclic_collector_nothing_to_scan(tmp_path: Path) -> None:
    """Records are held as line bytes: once the collector has seen them, a held cassette adds
    no tracked object per record however long it stays loaded (see `Cassette`)."""
    path = tmp_path / "c.jsonl"
    write(path, *(record(f"{i:064x}") for i in range(50)))
    cassette = load_cassette(path, unique=True)
    gc.collect()
    assert len(cassette) == 50
    assert not any(gc.is_tracked(lines) for lines in cassette._by_key.values())
    served = cassette.take(f"{7:064x}", "extract")
    assert served.key == f"{7:064x}"
    assert served.response.transcript == record(f"{7:064x}").response.transcript


def test_a_big_cassette_asked_for_some_keys_holds_only_those_and_still_checks_every_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evals_pipeline.core.cassettes import store

    monkeypatch.setattr(store, "MEMO_MAX_BYTES", 0)  # every file is "too big to share"
    path = tmp_path / "c.jsonl"
    keys = [f"{i:064x}" for i in range(6)]
    write(path, *(record(k, text=k[-1]) for k in keys))
    # A line not in the recorder's field order is validated to find its key, and kept.
    reordered = record("f" * 64, text="f").model_dump(mode="json")
    with path.open("a") as handle:
        handle.write(json.dumps(dict(reversed(list(reordered.items())))) + "\n")
    subset = load_cassette(path, unique=True, keys={keys[1], keys[4], "f" * 64})
    assert len(subset) == 3 and set(subset.keys()) == {keys[1], keys[4], "f" * 64}
    assert subset.take(keys[4], "extract").response.transcript[0].attempts[0].text == "4"
    assert subset.take("f" * 64, "extract").key == "f" * 64
    with pytest.raises(CassetteMiss):
        subset.take(keys[0], "extract")
    # A bad line, or a duplicate, among the records not asked for still fails the load.
    good = path.read_text()
    path.write_text(good + "{not json}\n")
    with pytest.raises(CassetteCorrupt) as err:
        load_cassette(path, unique=True, keys={keys[1]})
    assert err.value.line == 8
    path.write_text(good + record(keys[0]).model_dump_json() + "\n")
    with pytest.raises(CassetteDuplicateKey):
        load_cassette(path, unique=True, keys={keys[1]})


def test_a_subset_load_of_a_line_that_repeats_key_serves_it_by_its_real_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """JSON's last "key" wins; a hand-made line that starts with another key is not skipped."""
    from evals_pipeline.core.cassettes import store

    monkeypatch.setattr(store, "MEMO_MAX_BYTES", 0)
    path = tmp_path / "c.jsonl"
    write(path, record("a" * 64))
    line = record("b" * 64, text="b").model_dump_json()
    with path.open("a") as handle:
        handle.write('{"key":"' + "c" * 64 + '",' + line[1:] + "\n")  # first "key" is c, last b
    subset = load_cassette(path, unique=True, keys={"b" * 64})
    assert subset.take("b" * 64, "extract").response.transcript[0].attempts[0].text == "b"


@pytest.mark.parametrize("change", ["unknown field", "no request"])
def test_a_record_with_an_unknown_or_missing_top_level_field_is_corrupt(
    tmp_path: Path, change: str
) -> None:
    data = record("a" * 64).model_dump(mode="json")
    if change == "unknown field":
        data["requset"] = {}
    else:
        del data["request"]
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps(data) + "\n")
    with pytest.raises(CassetteCorrupt, match=r"request|requset"):
        load_cassette(path)


def _text(served: object) -> str:
    return served.response.transcript[0].attempts[0].text  # type: ignore[attr-defined]


def test_a_loaded_cassette_serves_from_the_file_it_checked(tmp_path: Path) -> None:
    """Records are read back from the open file: a file replaced by a rename is not seen; one
    rewritten in place is a CassetteCorrupt naming the line, never another record's answer."""
    path = tmp_path / "c.jsonl"
    write(path, record("a" * 64, "first"), record("b" * 64, "second"))
    cassette = load_cassette(path, unique=True, consume=False)
    replacement = tmp_path / "new.jsonl"
    write(replacement, record("a" * 64, "other"))
    os.replace(replacement, path)
    assert _text(cassette.take("a" * 64, "extract")) == "first"
    assert _text(cassette.take("b" * 64, "extract")) == "second"

    rewritten = load_cassette(path, unique=True, consume=False)
    assert _text(rewritten.take("a" * 64, "extract")) == "other"
    with path.open("r+b") as handle:  # same inode, new content: keys shift by one line
        handle.write(b"\n")
    with pytest.raises(CassetteCorrupt) as err:
        rewritten.take("a" * 64, "extract")
    assert err.value.line == 1 and "changed since it was loaded" in str(err.value)
    path.write_bytes(b"")  # truncated in place
    with pytest.raises(CassetteCorrupt):
        rewritten.take("a" * 64, "extract")


def test_a_dropped_cassette_closes_its_files(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    write(path, record("a" * 64))
    cassette = load_cassette(path, unique=True, consume=True)  # not shared: no memo holds it
    handles = [h for h in cassette._files if h is not None]
    assert handles and not any(h.closed for h in handles)
    del cassette
    gc.collect()
    assert all(h.closed for h in handles)


def test_a_failed_load_closes_what_it_opened(tmp_path: Path) -> None:
    good, bad = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write(good, record("a" * 64))
    bad.write_text("{broken\n")
    opened: list[object] = []
    real_open = Path.open

    def spy(self: Path, *args: object, **kwargs: object) -> object:
        handle = real_open(self, *args, **kwargs)  # type: ignore[call-overload]
        opened.append(handle)
        return handle

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Path, "open", spy)
        with pytest.raises(CassetteCorrupt):
            load_cassette([good, bad], unique=True, consume=True)
    assert opened and all(h.closed for h in opened)  # type: ignore[attr-defined]


def test_shared_loads_are_bounded_in_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evals_pipeline.core.cassettes import store

    monkeypatch.setattr(store, "MEMO_MAX_ENTRIES", 3)
    store.clear_load_memo()
    for i in range(5):
        path = tmp_path / f"c{i}.jsonl"
        write(path, record(f"{i:064x}"))
        load_cassette(path, unique=True)
    assert len(store._memo) == 3


def test_a_loaded_file_that_cannot_be_read_back_is_a_typed_error(tmp_path: Path) -> None:
    """A read error when serving (ESTALE on a network filesystem; here a pipe, which cannot be
    read at an offset) names the file and line instead of escaping as a bare OSError."""
    path = tmp_path / "c.jsonl"
    write(path, record("a" * 64))
    cassette = load_cassette(path, unique=True, consume=True)
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb") as pipe:
        cassette._files = (pipe,)  # the loaded file is still closed by the cassette's finalizer
        with pytest.raises(CassetteCorrupt) as err:
            cassette.take("a" * 64, "extract")
    os.close(write_end)
    assert err.value.line == 1 and "cannot read the loaded file" in str(err.value)


def test_a_shared_load_of_a_deleted_or_replaced_file_is_dropped_and_its_file_closed(
    tmp_path: Path,
) -> None:
    from evals_pipeline.core.cassettes import store

    store.clear_load_memo()
    deleted, replaced, other = (tmp_path / f"{n}.jsonl" for n in ("deleted", "replaced", "other"))
    for i, path in enumerate((deleted, replaced, other)):
        write(path, record(f"{i:064x}"))
    handles = []
    for path in (deleted, replaced):
        cassette = load_cassette(path, unique=True)
        handles += [h for h in cassette._files if h is not None]
        del cassette  # only the memo holds it now
    kept = load_cassette(other, unique=True)
    assert len(store._memo) == 3
    deleted.unlink()
    staged = tmp_path / "staged.jsonl"
    write(staged, record("f" * 64))
    os.replace(staged, replaced)  # the recorder's way of rewriting a file
    load_cassette(other, unique=True)  # any shared load sweeps the memo
    assert len(store._memo) == 1 and load_cassette(other, unique=True) is kept
    gc.collect()
    assert all(h.closed for h in handles)
    assert "f" * 64 in load_cassette(replaced, unique=True)  # the new file is loaded afresh
    store.clear_load_memo()


def test_fifo_serving_from_many_threads_serves_each_answer_once(tmp_path: Path) -> None:
    import threading

    path = tmp_path / "c.jsonl"
    key = "a" * 64
    write(path, *(record(key, text=f'{{"n": {i}}}') for i in range(400)))
    cassette = load_cassette(path)  # FIFO: identical keys served in recorded order
    find = cassette._next

    def find_then_yield(key: str) -> tuple[tuple[int, ...] | None, int]:
        found = find(key)
        time.sleep(0)  # let another thread run between finding an answer and marking it served
        return found

    cassette._next = find_then_yield  # type: ignore[method-assign]
    served: list[str] = []
    misses: list[CassetteMiss] = []
    start = threading.Barrier(8)

    def take_all() -> None:
        start.wait()
        while True:
            try:
                rec = cassette.take(key, "extract")
            except CassetteMiss as miss:
                misses.append(miss)
                return
            served.append(rec.response.transcript[0].attempts[0].text)

    threads = [threading.Thread(target=take_all) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(served) == sorted(f'{{"n": {i}}}' for i in range(400))
    assert len(misses) == 8


def test_a_folder_or_a_missing_file_is_named_as_such(tmp_path: Path) -> None:
    from evals_pipeline.core.cassettes.store import index_cassette
    from evals_pipeline.core.errors import CassetteNotAFile

    with pytest.raises(CassetteNotAFile) as err:  # had been an IsADirectoryError traceback
        index_cassette(tmp_path)
    assert str(err.value) == f"cassette {tmp_path}: is a folder, not a cassette file"
    with pytest.raises(CassetteCorrupt) as missing:  # still caught as an unusable cassette
        load_cassette(tmp_path / "nope.jsonl")
    assert str(missing.value) == f"cassette {tmp_path / 'nope.jsonl'}: file not found"
    (tmp_path / "afile").write_text("a file\n")
    under = tmp_path / "afile" / "x.jsonl"  # had been a NotADirectoryError traceback
    for load in (index_cassette, load_cassette):
        with pytest.raises(CassetteNotAFile) as err:
            load(under)
        assert str(err.value) == (
            f"cassette {under}: file not found ({tmp_path / 'afile'} is a file, not a folder)"
        )


def test_a_loop_of_symbolic_links_is_named_not_a_traceback(tmp_path: Path) -> None:
    from evals_pipeline.core.cassettes.store import index_cassette
    from evals_pipeline.core.errors import CassetteNotAFile

    loop = tmp_path / "loop.jsonl"
    loop.symlink_to(tmp_path / "back.jsonl")
    (tmp_path / "back.jsonl").symlink_to(loop)
    for load in (index_cassette, load_cassette):  # index_cassette had raised OSError (ELOOP)
        with pytest.raises(CassetteNotAFile, match="symbolic links"):
            load(loop)


def test_a_whole_json_last_line_that_is_no_record_is_not_skipped(tmp_path: Path) -> None:
    """Only JSON cut short is a torn line: the appender keeps whole JSON, so load must not
    skip it either (it would become a corrupt middle line after the next append)."""
    path = tmp_path / "c.jsonl"
    write(path, record("a" * 64))
    path.write_bytes(path.read_bytes() + b'{"key":"x"}')
    with pytest.raises(CassetteCorrupt) as err:
        load_cassette(path, skip_torn_tail=True)
    assert err.value.line == 2


def test_a_unique_append_that_failed_is_appended_on_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from evals_pipeline.core.cassettes import store
    from evals_pipeline.core.errors import CassetteWriteError

    path = tmp_path / "c.jsonl"
    writer = CassetteWriter(path, unique=True)
    real_write = os.write

    def disk_full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store.os, "write", disk_full)
    with pytest.raises(CassetteWriteError):
        writer.append(record("a" * 64))
    monkeypatch.setattr(store.os, "write", real_write)
    assert writer.append(record("a" * 64)) is True
    assert list(load_cassette(path, unique=True).keys()) == ["a" * 64]


def test_an_appender_that_cannot_make_its_file_is_a_write_error(tmp_path: Path) -> None:
    """Out of inodes (ENOSPC from creating the file), or a file where its folder goes: the
    OSError had escaped untyped from the appender's constructor."""
    from evals_pipeline.core.cassettes.store import JsonlAppender
    from evals_pipeline.core.errors import CassetteWriteError

    (tmp_path / "afile").write_text("a file\n")
    with pytest.raises(CassetteWriteError) as err:
        JsonlAppender(tmp_path / "afile" / "sub" / "c.jsonl")
    assert err.value.path == tmp_path / "afile" / "sub" / "c.jsonl"


@pytest.mark.parametrize("block", [1 << 20, 100])
def test_a_unique_append_finds_a_last_record_short_of_its_newline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    """A whole last record with no newline (a write cut just before it, a hand-joined file)
    is a record loading serves: the unique writer had not read it, appended its key again,
    and the file then failed to load with a duplicate key."""
    from evals_pipeline.core.cassettes import store

    monkeypatch.setattr(store, "_READ_BLOCK", block)  # the line spans blocks, or fits one
    path = tmp_path / "c.jsonl"
    path.write_text(record("a" * 64).model_dump_json())
    writer = CassetteWriter(path, unique=True)
    assert writer.append(record("a" * 64)) is False
    assert writer.append(record("b" * 64)) is True
    assert writer.append(record("b" * 64)) is False
    assert len(load_cassette(path, unique=True)) == 2


def test_an_append_waits_a_bounded_time_for_a_lock_held_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process stopped or hung while holding the file's lock had blocked the recorder for
    ever, with no word; a lock released within the wait is taken."""
    from evals_pipeline.core.cassettes import store
    from evals_pipeline.core.errors import CassetteWriteError
    from evals_pipeline_tests.support.locks import lock_held_elsewhere

    path = tmp_path / "c.jsonl"
    path.touch()
    monkeypatch.setattr(store, "LOCK_WAIT_S", 0.3)
    with (
        lock_held_elsewhere(path, 5),
        pytest.raises(CassetteWriteError, match=r"locked by another process for over 0\.3 s"),
    ):
        store.JsonlAppender(path).append_line('{"a": 1}')
    assert path.read_text() == ""
    monkeypatch.setattr(store, "LOCK_WAIT_S", 10.0)
    with lock_held_elsewhere(path, 0.5):
        store.JsonlAppender(path).append_line('{"a": 1}')  # waits for it, then writes
    assert path.read_text() == '{"a": 1}\n'


_WRITE_UNDER_INTERRUPT = """
import sys
from pathlib import Path

from evals_pipeline.core.cassettes.store import JsonlAppender, off_loop
from evals_pipeline.core.runner import run_sync

appender = JsonlAppender(Path(sys.argv[1]))


async def go() -> None:
    print("writing", flush=True)
    await off_loop(lambda: appender.append_line('{"a": 1}'))


run_sync(go)
"""


@pytest.mark.parametrize("after_the_notice", [True, False])
def test_a_second_interrupt_abandons_a_write_waiting_on_a_lock_and_says_so(
    tmp_path: Path, after_the_notice: bool
) -> None:
    """Ctrl-C during a write waiting on a lock held elsewhere had waited up to LOCK_WAIT_S
    with no word (and the interpreter's exit joined the writer thread again): the wait is
    said, and a second interrupt gives the write up, naming its file, also one that comes
    before the notice (a quick double Ctrl-C)."""
    import signal
    import subprocess
    import sys
    import time

    from evals_pipeline_tests.support.locks import lock_held_elsewhere

    path = tmp_path / "c.jsonl"
    path.touch()
    with lock_held_elsewhere(path, 120):
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITE_UNDER_INTERRUPT, str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline() == "writing\n"
            time.sleep(0.5)
            proc.send_signal(signal.SIGINT)  # the run is cancelled; its write still waits
            assert proc.stderr is not None
            said = ""
            while after_the_notice and "interrupt again to abandon" not in said:
                line = proc.stderr.readline()
                assert line, said
                said += line
            if not after_the_notice:
                time.sleep(0.3)  # within the 2 s before the notice
            assert proc.poll() is None  # still waiting for the write
            proc.send_signal(signal.SIGINT)
            _, rest = proc.communicate(timeout=30)  # the lock is held for 120 s
        finally:
            proc.kill()
    assert f"abandoned 1 write(s) waiting for a lock, their answers not recorded, to {path}" in (
        rest
    ), rest
    assert proc.returncode != 0
    assert path.read_text() == ""


def test_a_failed_unique_write_leaves_its_key_to_the_next_writer_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes run in worker threads: a write that failed (a full disk) had taken its key back
    only after letting go of the lock, so another thread writing the same key meanwhile found
    it "held", wrote nothing and said so to no one."""
    import errno
    import threading

    from evals_pipeline.core.cassettes import store
    from evals_pipeline.core.errors import CassetteWriteError

    path = tmp_path / "c.jsonl"
    writer = CassetteWriter(path, unique=True)
    writer.append(record("w" * 64))
    real_write, writes = store._write_all, []

    def full_disk_once(fd: int, data: bytes) -> None:
        writes.append(data)
        if len(writes) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(fd, data)

    class SlowToForget(set[str]):  # widens the moment between the lock and the discard
        def discard(self, key: str) -> None:
            time.sleep(0.3)
            super().discard(key)

    monkeypatch.setattr(store, "_write_all", full_disk_once)
    writer._keys = SlowToForget(writer._keys)
    said: dict[str, object] = {}

    def first() -> None:
        with pytest.raises(CassetteWriteError):
            writer.append(record("k" * 64))
        said["first"] = "failed"

    def second() -> None:
        time.sleep(0.1)  # while the first is taking its key back
        said["second"] = writer.append(record("k" * 64))

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert said == {"first": "failed", "second": True}
    assert len(load_cassette(path, unique=True)) == 2


def test_identical_calls_are_served_in_the_order_they_were_recorded(tmp_path: Path) -> None:
    """Matching is independent of file order, and identical calls are served FIFO "in the
    order they were recorded": a cassette assembled newest run first had served the newest
    answer first. Equal stamps keep the file's order."""
    from evals_pipeline.core.cassettes.store import Cassette

    def at(stamp: str, text: str) -> CassetteRecord:
        return record("a" * 64, text).model_copy(update={"timestamp": stamp})

    def texts(cassette: Cassette) -> list[str]:
        return [
            cassette.take("a" * 64, "extract").response.transcript[0].attempts[0].text
            for _ in range(3)
        ]

    newer, older = tmp_path / "newer.jsonl", tmp_path / "older.jsonl"
    write(newer, at("2026-03-01T00:00:00.000Z", "march"))
    write(older, at("2026-01-01T00:00:00.000Z", "january"), at("2026-02-01T09:00:00+09:00", "feb"))
    assembled = tmp_path / "assembled.jsonl"
    assembled.write_bytes(newer.read_bytes() + older.read_bytes())
    assert texts(load_cassette(assembled)) == ["january", "feb", "march"]
    assert texts(load_cassette([newer, older])) == ["january", "feb", "march"]
    tied = tmp_path / "tied.jsonl"
    write(tied, at("2026-01-01T00:00:00.000Z", "first"), at("2026-01-01T00:00:00.000Z", "second"))
    assert texts(load_cassette([tied, older])) == ["first", "second", "january"]


def test_a_record_written_in_another_field_order_is_ordered_by_its_own_timestamp(
    tmp_path: Path,
) -> None:
    """The order reads a timestamp from a line's head where the recorder puts it; a line
    written otherwise (its request first, holding a "timestamp" of its own) is parsed whole."""
    first = record("a" * 64, "first").model_copy(update={"timestamp": "2026-01-01T00:00:00Z"})
    late = record("a" * 64, "late").model_dump(mode="json")
    late["timestamp"] = "2026-06-01T00:00:00Z"
    late["request"] = {"timestamp": "2000-01-01T00:00:00Z"}
    path = tmp_path / "c.jsonl"
    shuffled = {"request": late["request"], **{k: v for k, v in late.items() if k != "request"}}
    path.write_text(json.dumps(shuffled) + "\n" + first.model_dump_json() + "\n")
    cassette = load_cassette(path)
    served = [
        cassette.take("a" * 64, "extract").response.transcript[0].attempts[0].text for _ in range(2)
    ]
    assert served == ["first", "late"]
