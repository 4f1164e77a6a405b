"""The claim-extraction golden set: one JSON file per example, loaded strictly.

Each file holds exactly these fields::

    {"id": "claims-001", "task": "claim_extraction", "input_text": "...",
     "input_provenance": "...", "expected_claims": [{"claim": "...", "evidence_span": "..."}],
     "review_status": "PENDING_HUMAN_REVIEW" | "VERIFIED", "notes": "..."}

The loader hard-fails (InputFileError naming the file, the field and, for a span, the claim) on
an unknown or missing field, a bad review status, an id other than the file's name (so no two
examples share one), and — the invariant the
pipeline enforces on model output, applied to the labels too — an evidence span that is not a
verbatim substring of the input text. Only VERIFIED examples count toward scores, the baseline
and the gate; PENDING_HUMAN_REVIEW examples are report-only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from ..errors import InputFileError
from ..files import load_json, real_path, validate_file_model
from .extractor import MAX_CLAIM_WORDS, MIN_CLAIM_WORDS, claim_shape_ok, span_is_verbatim

ReviewStatus = Literal["PENDING_HUMAN_REVIEW", "VERIFIED"]
REVIEW_STATUSES: tuple[ReviewStatus, ...] = ("PENDING_HUMAN_REVIEW", "VERIFIED")
TASK = "claim_extraction"
BASELINE_FILE = "baseline.json"
RECORDINGS_DIR = "recordings"
EXAMPLE_FIELDS = (
    "id",
    "task",
    "input_text",
    "input_provenance",
    "expected_claims",
    "review_status",
    "notes",
)
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # ids name recording files


class GoldenClaim(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    claim: StrictStr
    evidence_span: StrictStr


class GoldenExample(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: StrictStr = Field(min_length=1)
    task: Literal["claim_extraction"]
    input_text: StrictStr = Field(min_length=1)
    input_provenance: StrictStr
    expected_claims: tuple[GoldenClaim, ...]
    review_status: ReviewStatus
    notes: StrictStr

    @property
    def verified(self) -> bool:
        return self.review_status == "VERIFIED"


@dataclass(frozen=True)
class GoldenSet:
    directory: Path
    examples: tuple[GoldenExample, ...]
    paths: dict[str, Path]

    def __iter__(self) -> Iterator[GoldenExample]:
        return iter(self.examples)

    def __len__(self) -> int:
        return len(self.examples)

    @property
    def verified(self) -> tuple[GoldenExample, ...]:
        return tuple(e for e in self.examples if e.verified)

    @property
    def pending(self) -> tuple[GoldenExample, ...]:
        return tuple(e for e in self.examples if not e.verified)

    @property
    def recordings_dir(self) -> Path:
        return self.directory / RECORDINGS_DIR

    @property
    def baseline_path(self) -> Path:
        """Where the baseline lives unless the config names another path."""
        return self.directory / BASELINE_FILE

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what the `golden_set` asset stores); `from_dict` reverses it."""
        return {
            "directory": str(self.directory),
            "examples": [e.model_dump(mode="json") for e in self.examples],
            "paths": {k: str(v) for k, v in self.paths.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GoldenSet:
        return cls(
            directory=Path(data["directory"]),
            examples=tuple(GoldenExample.model_validate(e) for e in data["examples"]),
            paths={k: Path(v) for k, v in data["paths"].items()},
        )


def _problem(error: Any) -> str:
    kind = error["type"]
    if kind == "missing":
        return "missing field"
    if kind == "extra_forbidden":
        if error["loc"][:1] == ("expected_claims",):  # within a claim
            return f"unknown field (a claim has exactly: {', '.join(GoldenClaim.model_fields)})"
        return f"unknown field (an example has exactly: {', '.join(EXAMPLE_FIELDS)})"
    if kind == "literal_error" and error["loc"][:1] == ("review_status",):
        return f"review_status must be one of {', '.join(REVIEW_STATUSES)}, got {error['input']!r}"
    if kind == "literal_error" and error["loc"][:1] == ("task",):
        return f"task must be {TASK!r}, got {error['input']!r}"
    return str(error["msg"])


def load_golden_example(path: Path | str) -> GoldenExample:
    path = Path(path)
    example = validate_file_model(
        GoldenExample, load_json(path), path, kind="a golden example", problem=_problem
    )
    if not _ID.match(example.id):
        raise InputFileError(
            path, f"id {example.id!r} must be letters, digits, '_', '-' or '.'", field="id"
        )
    if example.id != path.stem:  # as a recording's: one id, one example file, one recording
        raise InputFileError(
            path, f"id {example.id!r} does not match its file name ({path.name})", field="id"
        )
    seen: set[str] = set()
    for i, claim in enumerate(example.expected_claims):
        where = f"expected_claims[{i}]"
        if not span_is_verbatim(claim.evidence_span, example.input_text):
            raise InputFileError(
                path,
                f"claim {claim.claim!r}: evidence_span {claim.evidence_span!r} is not a verbatim "
                "substring of input_text",
                field=f"{where}.evidence_span",
            )
        if not claim_shape_ok(claim.claim):
            raise InputFileError(
                path,
                f"claim {claim.claim!r} must be {MIN_CLAIM_WORDS}-{MAX_CLAIM_WORDS} words",
                field=f"{where}.claim",
            )
        if claim.evidence_span in seen:
            raise InputFileError(
                path,
                f"claim {claim.claim!r}: evidence_span {claim.evidence_span!r} is cited twice "
                "(claims anchor 1:1 to spans)",
                field=f"{where}.evidence_span",
            )
        seen.add(claim.evidence_span)
    return example


def example_files(directory: Path, baseline: Path | None = None) -> list[Path]:
    """`*.json` directly in the folder, except the gate's baseline (`baseline.json`, or the one
    the project file names, wherever it is; recordings live in a subfolder)."""
    skip = {real_path(directory / BASELINE_FILE)}
    if baseline is not None:
        skip.add(real_path(baseline))
    for path in directory.iterdir():  # claims-053.JSON had been skipped: no example, no error
        if path.suffix != ".json" and path.suffix.lower() == ".json":
            raise InputFileError(path, "a golden example's name ends in .json, in lower case")
    found = sorted(p for p in directory.glob("*.json") if real_path(p) not in skip)
    for path in found:  # nothing is skipped quietly: a folder named like an example is an error
        if path.is_dir():
            raise InputFileError(path, "is a folder, not a golden example file")
        if not path.is_file():
            raise InputFileError(path, "is not a file (a link to nothing?)")
    return found


def load_golden_set(directory: Path | str, baseline: Path | None = None) -> GoldenSet:
    """The examples of `directory`; `baseline`, the gate's baseline file if it sits there under
    another name than `baseline.json`, is not one."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputFileError(directory, "golden set folder not found")
    files = example_files(directory, baseline)
    if not files:
        raise InputFileError(directory, "golden set folder holds no example (*.json) files")
    examples: list[GoldenExample] = []
    paths: dict[str, Path] = {}
    for path in files:
        example = load_golden_example(path)  # its id is its file's name: unique in the folder
        paths[example.id] = path
        examples.append(example)
    return GoldenSet(directory=directory, examples=tuple(examples), paths=paths)
