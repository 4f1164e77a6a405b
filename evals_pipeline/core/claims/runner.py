"""Running the claim extractor over the golden set: replay from recordings, or live with --record.

Both paths go through `ClaimExtractor.extract`, so schema, span and shape validation is the code
under test either way; replay only swaps the network call for `RecordedTransport`. Replay first
checks each recording against the live prompt fingerprint and the example's input text: a
missing, invalid or stale recording is never replayed (its example gets no predictions and the
reason is reported), because replaying it would score a pipeline that no longer exists.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ..extractors.base import ChatTransport
from ..runner import gather_all, run_sync
from .extractor import Claim, ClaimCallFailed, ClaimExtraction, ClaimExtractor, RecordedTransport
from .golden import GoldenExample, GoldenSet
from .prompt import current_prompt, prompt_fingerprint
from .recordings import (
    Recording,
    RecordingStatus,
    check_recording,
    now_iso,
    text_sha256,
    write_recording,
)


@dataclass(frozen=True)
class ExampleRun:
    """One example's outcome: recording status, and the extraction when there is one."""

    id: str
    verified: bool
    status: RecordingStatus
    detail: str
    extraction: ClaimExtraction | None = None

    @property
    def current(self) -> bool:
        return self.status == "current"

    @property
    def claims(self) -> tuple[Claim, ...]:
        return self.extraction.claims if self.extraction is not None else ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "verified": self.verified,
            "status": self.status,
            "detail": self.detail,
            "extraction": self.extraction.to_dict() if self.extraction is not None else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExampleRun:
        extraction = data["extraction"]
        return cls(
            id=data["id"],
            verified=bool(data["verified"]),
            status=cast(RecordingStatus, data["status"]),
            detail=data["detail"],
            extraction=ClaimExtraction.from_dict(extraction) if extraction is not None else None,
        )


@dataclass(frozen=True)
class ReplayResult:
    """Every example's replay, under the fingerprint the live code has now."""

    fingerprint: str
    prompt_version: str
    runs: tuple[ExampleRun, ...]

    def predictions(self) -> dict[str, tuple[Claim, ...]]:
        return {r.id: r.claims for r in self.runs if r.extraction is not None}

    def notes(self) -> dict[str, str]:
        return {r.id: f"{r.status} recording: {r.detail}" for r in self.runs if not r.current}

    def unusable(self, *, verified: bool) -> tuple[ExampleRun, ...]:
        """Examples (verified or pending) whose recording is missing, invalid or stale."""
        return tuple(r for r in self.runs if r.verified == verified and not r.current)

    def to_dict(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "prompt_version": self.prompt_version,
            "runs": [r.to_dict() for r in self.runs],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReplayResult:
        return cls(
            fingerprint=data["fingerprint"],
            prompt_version=data["prompt_version"],
            runs=tuple(ExampleRun.from_dict(r) for r in data["runs"]),
        )


async def _replay_one(example: GoldenExample, recordings_dir: Path, fingerprint: str) -> ExampleRun:
    check = check_recording(recordings_dir, example.id, example.input_text, fingerprint)
    recording = check.recording
    if not check.current or recording is None:
        return ExampleRun(example.id, example.verified, check.status, check.detail)
    transport = RecordedTransport(
        text=recording.raw_response_text, truncated=recording.truncated, model=recording.model
    )
    extraction = await ClaimExtractor(transport).extract(example.input_text)
    return ExampleRun(example.id, example.verified, "current", check.detail, extraction)


async def _replay(golden: GoldenSet, recordings_dir: Path) -> ReplayResult:
    fingerprint = prompt_fingerprint()
    runs = [await _replay_one(e, recordings_dir, fingerprint) for e in golden]
    return ReplayResult(fingerprint, current_prompt().version, tuple(runs))


def replay_golden_set(golden: GoldenSet, recordings_dir: Path | None = None) -> ReplayResult:
    """Replay every example (verified and pending) from its recording; makes no network call."""
    return run_sync(lambda: _replay(golden, recordings_dir or golden.recordings_dir))


@dataclass(frozen=True)
class RecordResult:
    written: tuple[str, ...]  # example ids with a fresh recording
    failed: tuple[tuple[str, str], ...]  # (example id, why the call failed)


async def _record(
    golden: GoldenSet,
    transport: ChatTransport,
    backend: str,
    recordings_dir: Path,
    concurrency: int,
    ids: Sequence[str] | None,
) -> RecordResult:
    fingerprint = prompt_fingerprint()
    version = current_prompt().version
    extractor = ClaimExtractor(transport)
    gate = asyncio.Semaphore(concurrency)
    written: list[str] = []
    failed: list[tuple[str, str]] = []
    wanted = set(ids) if ids is not None else None

    stopped: list[BaseException] = []  # an error that is not one call's: start no more

    async def one(example: GoldenExample) -> None:
        async with gate:
            if stopped:
                return
            try:
                extraction = await extractor.extract(example.input_text)
            except ClaimCallFailed as exc:
                failed.append((example.id, str(exc)))
                return
        assert extraction.raw_response_text is not None  # a live call always has a reply
        write_recording(
            recordings_dir,
            Recording(
                id=example.id,
                fingerprint=fingerprint,
                prompt_version=version,
                input_sha256=text_sha256(example.input_text),
                backend=backend,
                model=transport.model,
                recorded_at=now_iso(),
                raw_response_text=extraction.raw_response_text,
                truncated=extraction.truncated,
                claims=extraction.claims,
            ),
        )
        written.append(example.id)

    async def guarded(example: GoldenExample) -> None:
        try:
            await one(example)
        except Exception as exc:  # e.g. a recording that cannot be written (a full disk)
            stopped.append(exc)
            raise

    try:
        # Calls in flight finish (and are recorded where they can be) before the first error is
        # raised: the client must not close under them. No call starts after such an error.
        await gather_all([guarded(e) for e in golden if wanted is None or e.id in wanted])
    finally:
        await extractor.aclose()
    return RecordResult(tuple(sorted(written)), tuple(sorted(failed)))


def record_golden_set(
    golden: GoldenSet,
    transport: ChatTransport,
    *,
    backend: str,
    recordings_dir: Path | None = None,
    concurrency: int = 4,
    ids: Sequence[str] | None = None,
) -> RecordResult:
    """Live-extract every example (pending ones too, so verifying one later needs no new call)
    and write each recording as its call completes.

    A failed call writes nothing for that example and is listed in `failed`: its old recording,
    if any, is left as it was (a recording of another prompt then still replays as stale).
    """
    return run_sync(
        lambda: _record(
            golden, transport, backend, recordings_dir or golden.recordings_dir, concurrency, ids
        )
    )
