"""Recording: wraps whichever extractor was resolved and appends one record per successful call.

A failed call (an extract's or a classify's) never produces a cassette record (the cassette
holds successes only); it produces a sidecar record. Edge-budget exhaustion is the one
non-fatal class and produces both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

from ..errors import (
    CassetteDuplicateKey,
    CassetteNotAFile,
    CassetteWriteError,
    ExtractionFailed,
    RecordingTargetMismatch,
)
from ..extractors.base import Extractor, classify_entities_items, classify_relations_items
from ..files import cannot_be_made, not_writable
from ..models import (
    CallType,
    ClassifyOutcome,
    Edge,
    Entity,
    Episode,
    ExtractionOutcome,
    FailureRecord,
)
from ..options import ExtractOptions
from .format import CassetteRecord, CassetteResponse, ReplayRecord, rfc3339_now
from .keys import classify_key, classify_request, extract_key, extract_request
from .sidecar import DEFAULT_CAP_BYTES, FailureSidecar
from .store import CassetteWriter, iter_records, off_loop


class RecordingExtractor(Extractor):
    def __init__(
        self,
        inner: Extractor,
        path: Path | str,
        *,
        sidecar_cap_bytes: int = DEFAULT_CAP_BYTES,
        write_sidecar: bool = True,
        unique: bool = False,
    ) -> None:
        """`unique`: never append a key the cassette holds (see CassetteWriter)."""
        self.inner = inner
        self.provider = inner.provider
        self.model = inner.model
        self.local = inner.local
        self.writer = CassetteWriter(path, unique=unique)
        self.sidecar = FailureSidecar(path, cap_bytes=sidecar_cap_bytes) if write_sidecar else None

    async def _written(self, write: Callable[[], object], stats: object) -> None:
        """`write()`, a write under the file's lock, with `stats` (the paid call's) on the
        CassetteWriteError it may end in. Off the event loop for a network backend: another
        process may hold the lock (a recording, a locked load), and the calls in flight must
        not stall meanwhile, nor time out on replies that came."""
        try:
            if self.local:
                write()
            else:
                await off_loop(write)
        except CassetteWriteError as exc:
            exc.stats = stats  # the call was made and paid for: its requests count
            raise

    async def _sidecar(self, exc: ExtractionFailed) -> None:
        if self.sidecar is not None and isinstance(failure := exc.failure, FailureRecord):
            sidecar = self.sidecar
            await self._written(lambda: sidecar.append(failure), exc.stats)

    async def _append(
        self,
        key: str,
        call_type: CallType,
        request: Mapping[str, object],
        outcome: ExtractionOutcome | ClassifyOutcome,
        result: dict[str, object],
        failures: Sequence[FailureRecord] = (),
    ) -> None:
        """The call's record, then `failures` (edge budgets exhausted) in the sidecar: one
        write job, so a cancel while it waits (on a lock held elsewhere) splits neither."""
        record = CassetteRecord(
            key=key,
            call_type=call_type,
            provider=outcome.provider,
            model=outcome.model,
            timestamp=rfc3339_now(),
            request=dict(request),
            response=CassetteResponse(transcript=outcome.transcript, result=result),
        )
        sidecar = self.sidecar

        def write() -> None:
            self.writer.append(record)
            if sidecar is not None:
                sidecar.extend(failures)

        await self._written(write, outcome.stats)

    async def extract(self, episode: Episode, options: ExtractOptions) -> ExtractionOutcome:
        try:
            outcome = await self.inner.extract(episode, options)
        except ExtractionFailed as exc:
            await self._sidecar(exc)
            raise
        request: dict[str, object] = {"episode_name": episode.name, "ontology_mode": options.mode}
        request.update(extract_request(episode, options))
        await self._append(
            extract_key(episode, options),
            "extract",
            request,
            outcome,
            outcome.result.model_dump(mode="json"),
            outcome.failures,
        )
        return outcome

    async def _classify(
        self,
        call_type: CallType,
        items: dict[str, str],
        types: Sequence[str],
        outcome_coro: Awaitable[ClassifyOutcome],
    ) -> ClassifyOutcome:
        try:
            outcome = await outcome_coro
        except ExtractionFailed as exc:
            await self._sidecar(exc)
            raise
        await self._append(
            classify_key(call_type, items, types),
            call_type,
            classify_request(items, types),
            outcome,
            {"types": outcome.types},
        )
        return outcome

    async def classify_entities(
        self, entities: Sequence[Entity], types: Sequence[str]
    ) -> ClassifyOutcome:
        return await self._classify(
            "classify_entities",
            classify_entities_items(entities),
            types,
            self.inner.classify_entities(entities, types),
        )

    async def classify_relations(
        self, edges: Sequence[Edge], types: Sequence[str]
    ) -> ClassifyOutcome:
        return await self._classify(
            "classify_relations",
            classify_relations_items(edges),
            types,
            self.inner.classify_relations(edges, types),
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def check_record_target(
    path: Path,
    *,
    model: str | None = None,
    budgets: tuple[int, int] | None = None,
    unique: bool = False,
) -> None:
    """Refuse a recording target before any paid call. A recording appends to `path` and is
    answered by what `path` already holds (see CachingExtractor), so the file must be a
    cassette (not a folder, every line a record) whose answers this backend can take as its
    own: `model`'s, made at these token `budgets` (entities, edges); with `unique` (a graph
    backend, replayed later with unique keys), one answer a key. A torn last line (a write cut
    off) is not a record: its call is made again and the next append sets it aside."""
    try:
        if path.is_dir():
            raise CassetteNotAFile(path, "is a folder; --record-cassette names a file")
        if (why := cannot_be_made(path) or not_writable(path)) is not None:
            raise CassetteNotAFile(path, why)  # (its sidecar is made beside it: the folder too)
        if not path.is_file() or path.stat().st_size == 0:
            return
    except PermissionError as exc:  # a folder on the way this user cannot search
        raise CassetteNotAFile(path, f"cannot be checked: {exc.strerror}") from None
    first_line: dict[str, int] = {}
    # (an append in progress elsewhere reads as a torn last line: skipped, as it should be)
    for number, record in iter_records(path, ReplayRecord, skip_torn_tail=True):
        if unique and (earlier := first_line.get(record.key)) is not None:
            raise CassetteDuplicateKey(path, record.key, (earlier, number), path)
        first_line.setdefault(record.key, number)
        if model is not None and record.model != model:
            raise RecordingTargetMismatch(
                path,
                f"line {number} is an answer of model {record.model!r}, and this backend "
                f"calls {model!r}",
            )
        if budgets is not None and (asked := _asked(record, budgets)) is not None:
            raise RecordingTargetMismatch(
                path,
                f"line {number} was recorded at {asked}, and this run asks max_tokens "
                f"{budgets[0]} (entities), {budgets[1]} (edges)",
            )


def _asked(record: ReplayRecord, budgets: tuple[int, int]) -> str | None:
    """How an extract record's first attempts' token budgets differ from `budgets`, or None."""
    wanted = {"entities": budgets[0], "edges": budgets[1]}
    differ = [
        f"max_tokens {stage.attempts[0].max_tokens} ({stage.stage})"
        for stage in record.response.transcript
        if stage.attempts
        and stage.stage in wanted
        and stage.attempts[0].max_tokens != wanted[stage.stage]
    ]
    return ", ".join(differ) or None
