"""The judge cache: mandatory, append-only JSONL, keyed over prompt name, prompt and model.

Judge calls are the expensive part of a run; a re-run against the same corpus, backends and
cache path makes zero judge calls. Entries of the `reference/*` and `pairwise/*` prompt families
can never collide because the prompt name is part of the key.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from ..cassettes.format import rfc3339_now
from ..cassettes.store import JsonlAppender
from ..errors import EvalsError, InputFileError
from ..files import line_problem
from ..parsing import parse_structured

V = TypeVar("V", bound=BaseModel)


class JudgeCacheCorrupt(EvalsError):
    def __init__(self, path: Path, line: int, problem: str) -> None:
        self.path = path
        self.line = line
        super().__init__(f"corrupt judge cache {path}:{line}: {problem}")


class JudgeCacheEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    prompt_name: str
    model: str
    timestamp: str
    text: str


def judge_key(prompt_name: str, system: str, user: str, model: str) -> str:
    material = json.dumps(
        {"prompt_name": prompt_name, "system": system, "user": user, "model": model},
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


class JudgeCache:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._entries: dict[str, JudgeCacheEntry] = {}
        if self.path.is_dir():
            raise InputFileError(self.path, "is a folder; the judge cache is a JSONL file")
        if self.path.exists():
            try:
                self._load()
            except OSError as exc:
                raise InputFileError(self.path, f"cannot be read: {exc.strerror or exc}") from exc
        self._appender: JsonlAppender | None = None
        self._opening = threading.Lock()  # `put` runs in worker threads: one appender

    def _load(self) -> None:
        """Every entry; a later one for a key replaces an earlier (the client appends one only
        where the earlier did not parse as a verdict). A bad line is JudgeCacheCorrupt naming
        it, except a line of JSON cut short: a torn append (another process's append in
        progress, since judging steps of a multiprocess run share the cache, or a crash
        mid-write, after which the next append starts on a fresh line). It loses only that
        verdict, which is asked again."""
        with self.path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                line = raw.rstrip(b"\r\n")
                if not line.strip():
                    continue
                try:
                    entry = JudgeCacheEntry.model_validate_json(line)
                except ValidationError as exc:
                    first = exc.errors()[0]
                    if first["type"] == "json_invalid" and "EOF while parsing" in first["msg"]:
                        continue  # a torn append: see above
                    raise JudgeCacheCorrupt(self.path, number, line_problem(first, line)) from None
                self._entries[entry.key] = entry

    def get(self, key: str) -> str | None:
        entry = self._entries.get(key)
        return entry.text if entry is not None else None

    def verdict(self, key: str, shape: type[V]) -> V | None:
        """The cached reply as `shape`, or None: not cached, or not a verdict (an older cache
        may hold a malformed reply, which the client asks again)."""
        text = self.get(key)
        return None if text is None else parse_structured(text, shape)[0]

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, key: str, prompt_name: str, model: str, text: str) -> None:
        entry = JudgeCacheEntry(
            key=key, prompt_name=prompt_name, model=model, timestamp=rfc3339_now(), text=text
        )
        with self._opening:
            if self._appender is None:
                self._appender = JsonlAppender(self.path)
        self._appender.append_model(entry)
        self._entries[key] = entry
