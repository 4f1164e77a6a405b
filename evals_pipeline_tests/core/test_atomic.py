from pathlib import Path

import pytest


def test_a_report_is_not_written_over_a_folder(tmp_path: Path) -> None:
    from evals_pipeline.core.atomic import write_text_atomic
    from evals_pipeline.core.errors import OutputPathError

    with pytest.raises(OutputPathError, match="is a folder; name a file to write"):
        write_text_atomic(tmp_path, "{}")
    assert not list(tmp_path.parent.glob(f".{tmp_path.name}.*.tmp"))


def test_an_atomic_write_keeps_a_symlink_and_writes_a_pipe_directly(tmp_path: Path) -> None:
    import os
    import threading

    from evals_pipeline.core.atomic import write_text_atomic

    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_text_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_text_atomic(fifo, "through the pipe")
    reader.join(5)
    assert got == [b"through the pipe"] and not fifo.is_file()


def test_a_report_that_cannot_be_written_names_its_path(tmp_path: Path) -> None:
    """A file where its folder goes: a typed error naming the path, not a raw OSError."""
    from evals_pipeline.core.atomic import write_text_atomic
    from evals_pipeline.core.errors import OutputPathError

    (tmp_path / "reports").write_text("not a folder")
    target = tmp_path / "reports" / "strict" / "report.json"
    with pytest.raises(OutputPathError, match="cannot write here") as err:
        write_text_atomic(target, "{}")
    assert err.value.path == target
