"""Recordings of live claim extraction: `<golden_dir>/recordings/<id>.json`, one per example.

A recording keeps the model's raw reply text, not just its claims, so replay re-runs the real
validation code on it; the prompt fingerprint it was recorded under, so replay can tell a
recording of today's prompt from one of a prompt that no longer exists; and a SHA-256 of the
input text, so editing an example's text without re-recording is caught the same way. Each file
is written atomically (temp file + rename) as its call completes: an interrupted `--record` run
leaves every finished recording whole and no partial file behind.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr

from ..atomic import write_text_atomic
from ..errors import InputFileError
from ..files import load_json, validate_file_model
from .extractor import Claim

RecordingStatus = Literal["current", "stale", "missing", "invalid"]


class Recording(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: StrictStr
    fingerprint: StrictStr  # prompt_fingerprint() at record time
    prompt_version: StrictStr
    input_sha256: StrictStr  # text_sha256(input_text) at record time
    backend: StrictStr  # the backend spec (specs never hold keys)
    model: StrictStr
    recorded_at: StrictStr  # ISO 8601, UTC
    raw_response_text: StrictStr
    truncated: StrictBool
    claims: tuple[Claim, ...]  # what validation kept at record time (replay recomputes them)


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def recording_path(recordings_dir: Path, example_id: str) -> Path:
    return recordings_dir / f"{example_id}.json"


def read_recording(path: Path | str) -> Recording:
    """One recording file; anything unreadable or incomplete is an InputFileError."""
    path = Path(path)
    recording = validate_file_model(Recording, load_json(path), path, kind="a recording")
    if recording.id != path.stem:
        raise InputFileError(
            path, f"recording id {recording.id!r} does not match its file name", field="id"
        )
    return recording


@dataclass(frozen=True)
class RecordingCheck:
    """Whether an example's recording may be replayed, and if not, why not."""

    status: RecordingStatus
    detail: str
    recording: Recording | None = None

    @property
    def current(self) -> bool:
        return self.status == "current"


def check_recording(
    recordings_dir: Path, example_id: str, input_text: str, fingerprint: str
) -> RecordingCheck:
    """Missing, invalid, stale (other prompt or other input text) or current."""
    path = recording_path(recordings_dir, example_id)
    if not path.is_file():
        return RecordingCheck("missing", f"no recording at {path}")
    try:
        recording = read_recording(path)
    except InputFileError as exc:
        return RecordingCheck("invalid", f"unreadable or incomplete recording: {exc}")
    if recording.fingerprint != fingerprint:
        return RecordingCheck(
            "stale",
            f"recorded under prompt fingerprint {recording.fingerprint[:12]}… "
            f"({recording.prompt_version}); the live prompt is {fingerprint[:12]}…",
            recording,
        )
    if recording.input_sha256 != text_sha256(input_text):
        return RecordingCheck(
            "stale", "the example's input_text changed since it was recorded", recording
        )
    return RecordingCheck("current", f"recorded {recording.recorded_at}", recording)


def write_recording(recordings_dir: Path, recording: Recording) -> Path:
    """Write one recording atomically; an existing recording of the example is replaced."""
    text = json.dumps(recording.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
    return write_text_atomic(recording_path(recordings_dir, recording.id), text)
