"""Values derived from immutable objects, remembered by the objects' identity.

Hashing a frozen pydantic model hashes every field (a whole ontology, a whole chunk), which
costs as much as rendering a prompt from it; identity is free. Each entry holds its objects, so
their ids cannot be reused while the entry lives. The memo is cleared when it fills: the users
ask again for the few objects a run is working on, not for a long tail.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")

# How to empty every process-wide memo (each IdentityMemo, the shared cassette loads, the file
# digests), for `forget_all`.
_CLEARERS: list[Callable[[], None]] = []


def on_forget(clear: Callable[[], None]) -> Callable[[], None]:
    """Register `clear` to run on `forget_all()`; returns it (usable as a decorator)."""
    _CLEARERS.append(clear)
    return clear


def forget_all() -> None:
    """Empty every registered memo (each IdentityMemo, the shared cassette loads and indexes,
    the file digests, the extract keys): a benchmark's cold start, a test's, or a process that
    wants the memory back. Not needed between runs: each memo is keyed by everything its value
    derives from. (The resource's small `lru_cache`s of parsed config are not included.)"""
    for clear in _CLEARERS:
        clear()


class IdentityMemo(Generic[V]):
    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: dict[tuple[int, ...], tuple[tuple[object, ...], V]] = {}
        self._lock = threading.Lock()
        on_forget(self.clear)

    def get(self, *objects: object) -> V | None:
        entry = self._entries.get(tuple(map(id, objects)))
        if entry is None or any(a is not b for a, b in zip(entry[0], objects, strict=True)):
            return None
        return entry[1]

    def put(self, objects: tuple[object, ...], value: V) -> V:
        with self._lock:
            if len(self._entries) >= self.size:
                self._entries.clear()
            self._entries[tuple(map(id, objects))] = (objects, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
