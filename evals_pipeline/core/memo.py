"""Values derived from immutable objects, remembered by the objects' identity.

Hashing a frozen pydantic model hashes every field (a whole ontology, a whole chunk), which
costs as much as rendering a prompt from it; identity is free. Each entry holds its objects, so
their ids cannot be reused while the entry lives. The memo is cleared when it fills (by entry
count or, where it is weighed, by what its entries hold): the users ask again for the objects
a step is working on, not for a long tail of earlier ones.
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
    """At most `size` entries and, with `weigh`, at most `max_weight` in all: `weigh(objects,
    value)` is what an entry holds alive (the characters of a rendered prompt, say), so a memo
    sized for a run's thousands of small chunks cannot hold thousands of huge ones. An entry
    heavier than `max_weight` alone is not kept."""

    def __init__(
        self,
        size: int,
        *,
        max_weight: int | None = None,
        weigh: Callable[[tuple[object, ...], V], int] | None = None,
    ) -> None:
        if (max_weight is None) != (weigh is None):
            raise ValueError("max_weight and weigh go together")
        self.size = size
        self.max_weight = max_weight
        self._weigh = weigh
        self._weight = 0
        self._entries: dict[tuple[int, ...], tuple[tuple[object, ...], V]] = {}
        self._lock = threading.Lock()
        on_forget(self.clear)

    def get(self, *objects: object) -> V | None:
        entry = self._entries.get(tuple(map(id, objects)))
        if entry is None or any(a is not b for a, b in zip(entry[0], objects, strict=True)):
            return None
        return entry[1]

    def put(self, objects: tuple[object, ...], value: V) -> V:
        weight = 0 if self._weigh is None else self._weigh(objects, value)
        key = tuple(map(id, objects))
        with self._lock:
            old = self._entries.pop(key, None)  # a replaced entry gives its weight back first
            if old is not None and self._weigh is not None:
                self._weight -= self._weigh(*old)
            if self.max_weight is not None and weight > self.max_weight:
                return value
            if len(self._entries) >= self.size or (
                self.max_weight is not None and self._weight + weight > self.max_weight
            ):
                self._entries.clear()
                self._weight = 0
            self._entries[key] = (objects, value)
            self._weight += weight
        return value

    @property
    def weight(self) -> int:
        return self._weight

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._weight = 0
