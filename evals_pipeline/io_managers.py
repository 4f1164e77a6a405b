"""Where asset values live: tables as Parquet, plans and reports as JSON, under one folder.

Each builds on Dagster's UPathIOManager, which already knows how to store one file per
partition and hand a fan-in asset a dict of partition key -> value; only the file format is
ours. A third, input-only manager hands over stored tables unread (`StoredTable`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pandas as pd
from dagster import ConfigurableIOManagerFactory, InputContext, OutputContext, UPathIOManager
from upath import UPath


def read_table(path: str) -> pd.DataFrame:
    """A stored table, as every reader of one reads it."""
    return pd.read_parquet(path, engine="pyarrow")


class _ParquetIOManager(UPathIOManager):
    extension = ".parquet"

    def dump_to_path(self, context: OutputContext, obj: pd.DataFrame, path: UPath) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        obj.to_parquet(str(path), engine="pyarrow", index=False)

    def load_from_path(self, context: InputContext, path: UPath) -> pd.DataFrame:
        return read_table(str(path))


@dataclass(frozen=True)
class StoredTable:
    """A stored table, read only when asked for; a missing one is named then."""

    path: str

    def read(self) -> pd.DataFrame:
        if not UPath(self.path).exists():
            raise FileNotFoundError(
                f"no stored table at {self.path}: materialise that partition first"
            )
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
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(obj, indent=2, sort_keys=True, allow_nan=False) + "\n")

    def load_from_path(self, context: InputContext, path: UPath) -> Any:
        return json.loads(path.read_text())


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
