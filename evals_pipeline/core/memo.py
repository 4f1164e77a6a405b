"""Values derived from immutable objects, remembered by the objects' identity.

Hashing a frozen pydantic model hashes every field (a whole ontology, a whole chunk), which
costs as much as rendering a prompt from it; identity is free. Each entry holds its objects, so
their ids cannot be reused while the entry lives. The memo is cleared when it fills: the users
ask again for the few objects a run is working on, not for a long tail.
"""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

V = TypeVar("V")


class IdentityMemo(Generic[V]):
    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: dict[tuple[int, ...], tuple[tuple[object, ...], V]] = {}
        self._lock = threading.Lock()

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
