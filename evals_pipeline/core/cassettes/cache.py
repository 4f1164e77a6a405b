"""The extraction cache: a cassette per backend that makes re-materialisation free.

Dagster never skips work by itself, so "re-running an unchanged report reuses upstream
results" comes from here: every successful extraction is appended to a cassette named by a
fingerprint of what could change the answer (the spec; a replayed cassette's bytes; the
oracle's expected graphs), and a later run serves from it without calling the backend.
Failures are not cached, so they are retried. A local backend (a cassette replay, the oracle)
is not cached at all: its answers are on disk or in memory already, and caching them would
copy the cassette (930 MB at the replay benchmark's N = 10,000) to serve it back as slowly.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import TypeVar

from ..digests import file_sha256
from ..errors import CassetteMiss, CassetteWriteError, ExtractionFailed
from ..extractors.base import Extractor, classify_entities_items, classify_relations_items
from ..extractors.specs import BackendSpec
from ..models import CallStats, ClassifyOutcome, Edge, Entity, Episode, ExtractionOutcome
from ..options import ExtractOptions
from .keys import classify_key, extract_key
from .record import RecordingExtractor
from .replay import ReplayingExtractor
from .store import load_cassette

T = TypeVar("T")
Answer = TypeVar("Answer", ExtractionOutcome, ClassifyOutcome)


def backend_fingerprint(
    spec: BackendSpec, *, corpus_digest: str, budgets: Sequence[int] = ()
) -> str:
    """What, besides the prompt (already in every key), decides a backend's answers: its spec
    (less its timeout and retries), a replayed cassette's bytes, the oracle's corpus, and the
    token budgets of its calls (a smaller budget can truncate a reply the cache holds whole;
    keys leave budgets out)."""
    material = [spec.kind, spec.answers_identity, *(str(b) for b in budgets)]
    if spec.cassette_path is not None and spec.cassette_path.exists():
        material.append(file_sha256(spec.cassette_path))
    if spec.kind == "oracle":
        material.append(corpus_digest)
    return hashlib.sha256("\0".join(material).encode()).hexdigest()[:16]


def cache_path(cache_dir: Path, backend: str, fingerprint: str) -> Path:
    return cache_dir / "extractions" / f"{backend}-{fingerprint}.jsonl"


def extraction_cache_path(
    cache_dir: Path,
    backend: str,
    spec: BackendSpec,
    *,
    corpus_digest: str,
    budgets: Sequence[int],
) -> Path:
    """Where `backend`'s extraction cache lives: the run, its plan and the dry runs ask here."""
    fingerprint = backend_fingerprint(spec, corpus_digest=corpus_digest, budgets=budgets)
    return cache_path(cache_dir, backend, fingerprint)


class CachingExtractor(Extractor):
    """Serve from the cache when the key is there; otherwise call `inner` and remember it.

    `calls` counts the calls that reached the backend (an extract call is one per chunk) and
    `requests` the LLM requests they sent (one or more a call: entities, then edges,
    retries; failed calls included), `hits` the calls the cache answered. `interrupted`
    counts the calls stopped mid-flight (Ctrl-C, SIGTERM): each had sent at least one request,
    which `requests` cannot count (the call's own tally goes with it), and may be billed.

    A backend being recorded (`recording_to`, the cassette its `inner` recorder appends to) is
    served from that cassette instead: a call it already holds is answered from it, neither
    made again nor appended twice (a re-run of a recorded report makes no call, and a re-run
    after failed chunks makes only theirs); the extraction cache is written, never read, so
    the cassette gets every call (`check_record_target` makes sure first that the file's
    answers are this model's, at these token budgets). With `fifo=True` each cached answer
    is served once, in recorded order, so a call repeated on purpose (the bench's recast
    cases) reaches the backend afresh the first time and replays its own answer on later
    runs. A local `inner` is passed through uncached; its answers are counted in `replayed`
    (no call reached a provider), and the calls its cassette did not hold in `misses` (each
    then fails as a CassetteMiss).
    """

    def __init__(
        self,
        inner: Extractor,
        path: Path | None,
        *,
        recording_to: Path | None = None,
        fifo: bool = False,
    ) -> None:
        self.inner = inner
        self.provider = inner.provider
        self.model = inner.model
        self.local = inner.local
        self.path = None if inner.local else path
        # (what the cache serves, what writes it); None for a local `inner`.
        self._cache: tuple[ReplayingExtractor, RecordingExtractor] | None = None
        if not inner.local:
            if path is None:
                raise ValueError(f"{inner.provider} makes calls: its cache needs a path")
            if recording_to is None:
                cassette = load_cassette(path, consume=fifo, missing_ok=True, skip_torn_tail=True)
            else:  # read under the lock its appenders take: another step may be appending
                cassette = load_cassette(
                    recording_to, consume=fifo, missing_ok=True, locked=True, skip_torn_tail=True
                )
            recorder = RecordingExtractor(inner, path, write_sidecar=False, unique=not fifo)
            self._cache = (ReplayingExtractor(cassette), recorder)
        self.calls = 0
        self.requests = 0
        self.hits = 0
        self.replayed = 0
        self.misses = 0
        # The extraction misses: episode name -> the keys asked of it that the cassette lacked.
        self.missed: dict[str, set[str]] = {}
        self.interrupted = 0

    async def _local(self, call: Awaitable[T], episode: str | None = None) -> T:
        """A local answer, counted as replayed only when there was one to replay."""
        try:
            answer = await call
        except CassetteMiss as exc:
            self.misses += 1
            if episode is not None:
                self.missed.setdefault(episode, set()).add(exc.key)
            raise
        self.replayed += 1
        return answer

    async def _reached(self, call: Awaitable[Answer]) -> Answer:
        """A call that reached the backend, counted with the requests it sent."""
        self.calls += 1
        try:
            answer = await call
        except (ExtractionFailed, CassetteWriteError) as exc:  # an answer not written counts
            if isinstance(exc.stats, CallStats):
                self.requests += exc.stats.requests
            raise
        except Exception:
            raise
        except BaseException:  # cancelled, or interrupted (Ctrl-C, SIGTERM), before its answer
            self.interrupted += 1
            raise
        self.requests += answer.stats.requests
        return answer

    async def extract(self, episode: Episode, options: ExtractOptions) -> ExtractionOutcome:
        if self._cache is None:
            return await self._local(self.inner.extract(episode, options), episode.name)
        cached, recorder = self._cache
        if extract_key(episode, options) in cached.cassette:
            self.hits += 1
            return await cached.extract(episode, options)
        return await self._reached(recorder.extract(episode, options))

    async def classify_entities(
        self, entities: Sequence[Entity], types: Sequence[str]
    ) -> ClassifyOutcome:
        if self._cache is None:
            return await self._local(self.inner.classify_entities(entities, types))
        cached, recorder = self._cache
        if (
            classify_key("classify_entities", classify_entities_items(entities), types)
            in cached.cassette
        ):
            self.hits += 1
            return await cached.classify_entities(entities, types)
        return await self._reached(recorder.classify_entities(entities, types))

    async def classify_relations(
        self, edges: Sequence[Edge], types: Sequence[str]
    ) -> ClassifyOutcome:
        if self._cache is None:
            return await self._local(self.inner.classify_relations(edges, types))
        cached, recorder = self._cache
        if (
            classify_key("classify_relations", classify_relations_items(edges), types)
            in cached.cassette
        ):
            self.hits += 1
            return await cached.classify_relations(edges, types)
        return await self._reached(recorder.classify_relations(edges, types))

    async def aclose(self) -> None:
        await self.inner.aclose()
