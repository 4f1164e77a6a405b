"""Reading what Dagster stored, the way a leak would be read: every cell, decompressed."""

from __future__ import annotations

import sqlite3
import zlib
from pathlib import Path


def sqlite_values(db: Path) -> list[bytes]:
    """Every text and blob cell of a SQLite file, blobs zlib-decompressed where they can be.

    Dagster keeps job snapshots (which hold resource config) zlib-compressed in its run
    storage, where a scan of the file's raw bytes cannot see what they contain.
    """
    values: list[bytes] = []
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                for cell in row:
                    if isinstance(cell, str):
                        values.append(cell.encode())
                    elif isinstance(cell, bytes):
                        try:
                            values.append(zlib.decompress(cell))
                        except zlib.error:
                            values.append(cell)
    return values
