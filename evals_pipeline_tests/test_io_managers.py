"""Stored asset values: written whole, and a stored value that cannot be read is named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from upath import UPath

from evals_pipeline.core.errors import InputFileError
from evals_pipeline.io_managers import (
    StoredTable,
    StoredValueMissing,
    _JsonIOManager,
    _ParquetIOManager,
)

CONTEXT: Any = None  # the managers' file methods do not use it


def test_values_are_written_whole_and_read_back(tmp_path: Path) -> None:
    json_io = _JsonIOManager(base_path=UPath(tmp_path))
    target = UPath(tmp_path / "plans" / "strict.json")
    json_io.dump_to_path(CONTEXT, {"a": 1}, target)
    assert json_io.load_from_path(CONTEXT, target) == {"a": 1}
    parquet = _ParquetIOManager(base_path=UPath(tmp_path))
    table = UPath(tmp_path / "extractions" / "rules|strict.parquet")
    parquet.dump_to_path(CONTEXT, pd.DataFrame({"chunk": ["a", "b"]}), table)
    assert parquet.load_from_path(CONTEXT, table)["chunk"].tolist() == ["a", "b"]
    assert StoredTable(str(table)).read()["chunk"].tolist() == ["a", "b"]
    # Written through a temporary file and a rename: none is left beside the value.
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [
        "rules|strict.parquet",
        "strict.json",
    ]


def test_an_object_store_path_is_written_with_a_put(tmp_path: Path) -> None:
    json_io = _JsonIOManager(base_path=UPath("memory://evals"))
    target = UPath("memory://evals/report/strict.json")
    json_io.dump_to_path(CONTEXT, {"b": [1, 2]}, target)
    assert json_io.load_from_path(CONTEXT, target) == {"b": [1, 2]}


def test_a_stored_value_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    cut = tmp_path / "strict.json"
    cut.write_text('{"a": ')
    with pytest.raises(InputFileError, match="not a stored JSON value") as err:
        _JsonIOManager(base_path=UPath(tmp_path)).load_from_path(CONTEXT, UPath(cut))
    assert str(cut) in str(err.value) and "materialise that partition again" in str(err.value)
    torn = tmp_path / "rules|strict.parquet"
    torn.write_bytes(b"PAR1 not really")
    with pytest.raises(InputFileError, match="not a readable Parquet table"):
        StoredTable(str(torn)).read()
    with pytest.raises(StoredValueMissing, match="no stored value here"):
        StoredTable(str(tmp_path / "missing.parquet")).read()


def test_a_missing_value_is_named_and_still_a_file_not_found_error(tmp_path: Path) -> None:
    """Dagster's UPathIOManager reads a FileNotFoundError as a missing partition: ours is one,
    naming the path as written (a URL too) and what to do; it survives pickling."""
    import pickle

    from evals_pipeline.io_managers import read_table

    missing = UPath(tmp_path / "plans" / "open.json")
    with pytest.raises(FileNotFoundError) as err:
        _JsonIOManager(base_path=UPath(tmp_path)).load_from_path(CONTEXT, missing)
    assert isinstance(err.value, StoredValueMissing)
    assert str(err.value) == f"{missing}: no stored value here: materialise that partition first"
    with pytest.raises(StoredValueMissing):
        read_table(str(tmp_path / "corpus" / "open.parquet"))
    remote = StoredValueMissing("memory://evals/corpus/open.parquet")
    assert str(remote).startswith("memory://evals/corpus/open.parquet: no stored value here")
    again = pickle.loads(pickle.dumps(remote))
    assert str(again) == str(remote) and again.path == remote.path
