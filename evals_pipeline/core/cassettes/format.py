"""The cassette record: one JSON object per line, no envelope.

`response.transcript` holds every provider reply of the call (both stages of an extract, and a
truncated first attempt where there was one), so replay runs the same parsing code as the live
call did and reproduces its output and its reliability counts exactly. `response.result` is the
parsed output, stored for people reading the cassette.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..models import CallType, StageTranscript


class CassetteResponse(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    transcript: tuple[StageTranscript, ...]
    result: dict[str, Any]


class CassetteRecord(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    call_type: CallType
    provider: str
    model: str
    timestamp: str
    request: dict[str, Any]
    response: CassetteResponse


class ReplayResponse(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    transcript: tuple[StageTranscript, ...]


class ReplayRecord(BaseModel):
    """A record as loading checks it and replay reads it.

    `request` (the rendered prompts, already summed up by the key) and `response.result` (the
    parsed output, which replay derives afresh from the transcript) are written for people
    reading the file and are most of its bytes. Parsing still reads past them, so a line that
    is not well-formed JSON is caught, but builds no objects for them: about half the time of
    validating a whole `CassetteRecord`.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    key: str
    call_type: CallType
    provider: str
    model: str
    timestamp: str
    response: ReplayResponse


def rfc3339_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
