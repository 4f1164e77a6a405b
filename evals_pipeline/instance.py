"""The Dagster instance the driver runs on: DAGSTER_HOME's, the repository's, or an ephemeral one,
opened by one process at a time."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from dagster import DagsterInstance

from .stale_runs import LOCKS_UNSUPPORTED, open_lock_file

INSTANCE_LOCK = ".evals_pipeline_instance.lock"  # in the instance's home (git-ignored)


def default_instance() -> DagsterInstance:
    """DAGSTER_HOME if set; else the repository's dagster.yaml when run from its root."""
    if home := os.environ.get("DAGSTER_HOME"):
        with _creating(Path(home)):
            return DagsterInstance.get()
    if Path("dagster.yaml").is_file():
        with _creating(Path.cwd()):
            return DagsterInstance.from_config(str(Path.cwd()))
    return DagsterInstance.ephemeral()


@contextlib.contextmanager
def _creating(home: Path) -> Iterator[None]:
    """One process at a time opens the instance in `home`: the first to open a new SQLite
    instance creates its tables, and two at once both try (a raw "table runs already exists")."""
    lock: int | None = None
    if home.is_dir():  # else Dagster's own error names the folder
        with contextlib.suppress(OSError):  # a read-only home: no one creates an instance in it
            lock = open_lock_file(home / INSTANCE_LOCK, create=True)
    try:
        if lock is not None:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX)
            except OSError as exc:
                if exc.errno not in LOCKS_UNSUPPORTED:
                    raise
        yield
    finally:
        if lock is not None:
            os.close(lock)  # the lock goes with it
