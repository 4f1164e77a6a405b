"""Where asset values live: tables as Parquet, plans and reports as JSON, under one folder.

Each builds on Dagster's UPathIOManager, which already knows how to store one file per
partition and hand a fan-in asset a dict of partition key -> value; only the file format is
ours. A third, input-only manager hands over stored tables unread (`StoredTable`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pandas as pd
import pyarrow as pa
from dagster import ConfigurableIOManagerFactory, InputContext, OutputContext, UPathIOManager
from upath import UPath

from .core.atomic import write_atomic
from .core.errors import EvalsError, InputFileError

_REMATERIALISE = "materialise that partition again"


class StoredValueMissing(EvalsError, FileNotFoundError):
    """An upstream partition was never materialised: named, with what to do. Still a
    FileNotFoundError, which Dagster's UPathIOManager reads as "this partition is missing".
    The path is kept as written (a URL such as s3://... too)."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"{path}: no stored value here: materialise that partition first")

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[type[StoredValueMissing], tuple[str]]:
        return (type(self), (self.path,))


def read_table(path: str) -> pd.DataFrame:
    """A stored table, as every reader of one reads it; one that is missing, or not Parquet
    (cut short by a crash elsewhere, say), is an InputFileError naming it."""
    try:
        return pd.read_parquet(path, engine="pyarrow")
    except (pa.ArrowException, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise StoredValueMissing(path) from None
        raise InputFileError(
            path, f"not a readable Parquet table ({exc}): {_REMATERIALISE}"
        ) from exc


def _write(path: UPath, fill: Callable[[BinaryIO], object]) -> None:
    """Write a stored value whole: on a local disk through a temporary file and a rename, so a
    crash leaves the old value or the new one, never half of one (an object store's put is
    whole already)."""
    if path.protocol in ("", "file", "local"):
        write_atomic(Path(path.path), fill)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        fill(handle)


class _ParquetIOManager(UPathIOManager):
    extension = ".parquet"

    def dump_to_path(self, context: OutputContext, obj: pd.DataFrame, path: UPath) -> None:
        _write(path, lambda handle: obj.to_parquet(handle, engine="pyarrow", index=False))

    def load_from_path(self, context: InputContext, path: UPath) -> pd.DataFrame:
        return read_table(str(path))


@dataclass(frozen=True)
class StoredTable:
    """A stored table, read only when asked for; a missing one is named then."""

    path: str

    def read(self) -> pd.DataFrame:
        if not UPath(self.path).exists():
            raise StoredValueMissing(self.path)
        return read_table(self.path)


class _DeferredParquetInputManager(_ParquetIOManager):
    """Hands over each stored table as a `StoredTable` instead of reading it: the judging
    assets, which take every backend's extractions, read nothing when they have no judging to
    do (no key: the default offline run), where they had read every backend's table and the
    corpus, 16 tables a mode with three backends. A table is looked for when read, too: one
    backend's judging step reads its own table and the reference's, and runs whether or not
    the other backends' partitions exist (the partition mapping cannot say "this backend and
    the reference" alone)."""

    def dump_to_path(self, context: OutputContext, obj: pd.DataFrame, path: UPath) -> None:
        raise NotImplementedError("parquet_deferred only loads inputs; store with parquet_io")

    def load_from_path(self, context: InputContext, path: UPath) -> StoredTable:
        return StoredTable(str(path))


class _JsonIOManager(UPathIOManager):
    extension = ".json"

    def dump_to_path(self, context: OutputContext, obj: Any, path: UPath) -> None:
        # Compact: a stored value is read back by the next step, not by people (the reports
        # folder is for them), and a prose comparison's per-chunk counts, indented, had taken
        # 3.5x as long to write at 10,000 chunks.
        data = (json.dumps(obj, sort_keys=True, allow_nan=False) + "\n").encode()
        _write(path, lambda handle: handle.write(data))

    def load_from_path(self, context: InputContext, path: UPath) -> Any:
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            raise StoredValueMissing(str(path)) from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise InputFileError(
                str(path), f"not a stored JSON value ({exc}): {_REMATERIALISE}"
            ) from exc


class ParquetIOManager(ConfigurableIOManagerFactory):
    base_dir: str

    def create_io_manager(self, context: Any) -> _ParquetIOManager:
        return _ParquetIOManager(base_path=UPath(self.base_dir))


class DeferredParquetInputManager(ConfigurableIOManagerFactory):
    """`ParquetIOManager`'s tables as `StoredTable`s: an input manager (`input_manager_key`)."""

    base_dir: str

    def create_io_manager(self, context: Any) -> _DeferredParquetInputManager:
        return _DeferredParquetInputManager(base_path=UPath(self.base_dir))


class JsonIOManager(ConfigurableIOManagerFactory):
    base_dir: str

    def create_io_manager(self, context: Any) -> _JsonIOManager:
        return _JsonIOManager(base_path=UPath(self.base_dir))
