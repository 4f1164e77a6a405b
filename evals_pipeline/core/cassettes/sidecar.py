"""The failure-record sidecar `<cassette>.failures.jsonl`.

Created eagerly (empty) whenever a cassette is recorded, never in replay. Capped per file
(20 MB by default): an append that would pass the cap first rotates the file to the next free
`<cassette>.failures.N.jsonl`. Records are never cut to fit; only the aggregate is bounded.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..models import FailureRecord
from .store import JsonlAppender

DEFAULT_CAP_BYTES = 20 * 1024 * 1024


def sidecar_path(cassette_path: Path | str) -> Path:
    return Path(str(cassette_path) + ".failures.jsonl")


def rotated_path(cassette_path: Path | str, number: int) -> Path:
    return Path(f"{cassette_path}.failures.{number}.jsonl")


class FailureSidecar(JsonlAppender):
    def __init__(self, cassette_path: Path | str, cap_bytes: int = DEFAULT_CAP_BYTES) -> None:
        self.cassette_path = Path(cassette_path)
        self.cap_bytes = cap_bytes
        super().__init__(sidecar_path(cassette_path))

    def append(self, failure: FailureRecord) -> None:
        self._append((failure.model_dump_json() + "\n").encode("utf-8"), self._rotate_for)

    def _rotate_for(self, fd: int, incoming: int) -> bool:
        """Under the sidecar's lock: move the full file to the next free number; True if moved.
        Appenders in other processes serialise on that lock, so no two pick one number."""
        size = os.fstat(fd).st_size
        if size == 0 or size + incoming <= self.cap_bytes:
            return False
        number = 1
        while rotated_path(self.cassette_path, number).exists():
            number += 1
        os.replace(self.path, rotated_path(self.cassette_path, number))
        return True
