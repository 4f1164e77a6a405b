"""The failure-record sidecar `<cassette>.failures.jsonl`.

Created eagerly (empty) whenever a cassette is recorded, never in replay. Capped per file
(20 MB by default): an append that would pass the cap first rotates the file to the next free
`<cassette>.failures.N.jsonl`. Records are never cut to fit; only the aggregate is bounded.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from ..models import FailureRecord
from .store import JsonlAppender

DEFAULT_CAP_BYTES = 20 * 1024 * 1024


def sidecar_path(cassette_path: Path | str) -> Path:
    return Path(str(cassette_path) + ".failures.jsonl")


def rotated_path(cassette_path: Path | str, number: int) -> Path:
    return Path(f"{cassette_path}.failures.{number}.jsonl")


def failed_chunks(cassette_path: Path | str) -> frozenset[str]:
    """The chunks whose calls failed while `cassette_path` was recorded (its sidecar and the
    rotated ones): a replay misses them because there was never an answer, not because a
    prompt changed. Read to explain misses, so a line that is not a record is passed over."""
    paths = [sidecar_path(cassette_path)]
    number = 1
    while (rotated := rotated_path(cassette_path, number)).exists():
        paths.append(rotated)
        number += 1
    chunks: set[str] = set()
    for path in paths:
        try:
            lines = path.read_bytes().splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("chunk_key"), str):
                chunks.add(record["chunk_key"])
    return frozenset(chunks)


def miss_explanation(missed: set[str], chunks: int, cassette: Path | None, mode: str) -> str:
    """Why chunks are not in a replayed cassette: a call that failed while it was recorded (its
    sidecar names the chunk) never had an answer; any other miss was asked under other prompts
    (a changed prompt, ontology or corpus, or a mode never recorded)."""
    where = str(cassette) if cassette is not None else "the cassette"
    failed = missed & failed_chunks(cassette) if cassette is not None else set()
    parts = [f"{len(missed)} of {chunks} chunks are not in {where} under {mode} prompts"]
    if failed:
        parts.append(
            f"{len(failed)} of them failed when it was recorded, by its sidecar "
            f"{sidecar_path(where)} (which names chunks, not modes): a re-record with the "
            "backend up adds them"
        )
    if len(missed) > len(failed):
        parts.append(
            f"{len(missed) - len(failed)} {'of them ' if failed else ''}were asked under other "
            "prompts: the prompt, ontology or corpus changed since it was recorded, or this "
            "mode was never recorded"
        )
    return (
        "; ".join(parts) + ". They count as errors. Re-record it against a live backend "
        "(--record-cassette / record_cassette; the shipped ones: "
        "scripts/record_shipped_cassettes.py)"
    )


class FailureSidecar(JsonlAppender):
    def __init__(self, cassette_path: Path | str, cap_bytes: int = DEFAULT_CAP_BYTES) -> None:
        self.cassette_path = Path(cassette_path)
        self.cap_bytes = cap_bytes
        super().__init__(sidecar_path(cassette_path))

    def append(self, failure: FailureRecord) -> None:
        self._append((failure.model_dump_json() + "\n").encode("utf-8"), self._rotate_for)

    def extend(self, failures: Iterable[FailureRecord]) -> None:
        for failure in failures:
            self.append(failure)

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
