"""Typed errors. Every bad input names the file, line or field it came from.

Callers (the CLI, the Dagster layer, tests) tell failures apart by type, never by message text.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from .extractors.redaction import spec_secrets, without_url_secrets


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then what it was raised from (its cause, else its context), and so on: an SDK or
    an adapter wraps the error that says what failed."""
    seen: BaseException | None = exc
    while seen is not None:
        yield seen
        seen = seen.__cause__ or seen.__context__


class EvalsError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(EvalsError):
    """A configuration value is unusable (bad backend spec, conflicting environment variables)."""


class BackendSpecError(ConfigError):
    """A `--backend` spec string does not parse; names the spec and what is wrong with it.

    Both are shown without any URL's user info or query string, where credentials go: the
    message reaches the terminal and CI logs, as the spec's `describe()` does not."""

    def __init__(self, spec: str, problem: str) -> None:
        # What any URL in it must not show, however mistyped (see spec_secrets), then part by
        # part (a URL's query would otherwise take the parameters after it along).
        for secret in spec_secrets(spec):
            spec, problem = spec.replace(secret, ""), problem.replace(secret, "")
        self.spec = ",".join(without_url_secrets(part) for part in spec.split(","))
        self.problem = without_url_secrets(problem)
        super().__init__(f"invalid backend spec {self.spec!r}: {self.problem}")


class InputFileError(EvalsError):
    """A YAML/JSON input file is unreadable or invalid; names the file and the line or field."""

    def __init__(
        self, path: Path | str, problem: str, *, line: int | None = None, field: str | None = None
    ) -> None:
        self.path = Path(path)
        self.problem = problem
        self.line = line
        self.field = field
        where = str(self.path)
        if line is not None:
            where += f":{line}"
        if field is not None:
            where += f" [{field}]"
        super().__init__(f"{where}: {problem}")


class OntologyError(InputFileError):
    """An ontology file is invalid or refers to a type it does not declare."""


class CassetteError(EvalsError):
    """Base class of cassette failures."""


class CassetteCorrupt(CassetteError):
    """A cassette line is not a valid record; names the file and the 1-based line number."""

    def __init__(self, path: Path | str, line: int, problem: str) -> None:
        self.path = Path(path)
        self.line = line
        self.problem = problem
        super().__init__(f"corrupt cassette {self.path}:{line}: {problem}")


class CassetteDuplicateKey(CassetteError):
    """An eval backend cassette holds two records for one key, so one call has two answers."""

    def __init__(
        self,
        path: Path | str,
        key: str,
        lines: tuple[int, int],
        first_path: Path | str | None = None,
    ) -> None:
        """`lines`: the first record's line, then this one's in `path`; `first_path`: the file
        of the first, when the cassette is several files and it is another."""
        self.path = Path(path)
        self.key = key
        self.lines = lines
        self.first_path = Path(first_path) if first_path is not None else self.path
        where = (
            f"in {self.path} (lines {lines[0]} and {lines[1]})"
            if self.first_path == self.path
            else f"in {self.first_path} (line {lines[0]}) and {self.path} (line {lines[1]})"
        )
        super().__init__(
            f"duplicate cassette key {key} {where}; "
            "an eval backend needs exactly one recorded answer per call"
        )


class CassetteNotAFile(CassetteCorrupt):
    """A cassette path names nothing, or a folder (a CassetteCorrupt at line 0, so callers that
    guard against unusable cassettes catch it too)."""

    def __init__(self, path: Path | str, problem: str) -> None:
        super().__init__(path, 0, problem)
        self.args = (f"cassette {self.path}: {problem}",)

    def __str__(self) -> str:
        return str(self.args[0])


class OutputPathError(EvalsError):
    """Somewhere an output was asked to go cannot take it (a folder where a file goes)."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class CassetteWriteError(CassetteError):
    """Appending a record failed (a full disk, a read-only file); earlier records are intact.

    `stats`: the call stats of the answer that could not be recorded, when there was one, so a
    caller still counts the requests that call paid for."""

    def __init__(self, path: Path | str, problem: str, stats: object | None = None) -> None:
        self.path = Path(path)
        self.stats = stats
        super().__init__(f"could not append to {self.path}: {problem}")


class RecordingTargetMismatch(CassetteError):
    """The cassette a backend records into holds answers it cannot take as its own (another
    model's, or ones made under other token budgets): a recording run serves what the file
    holds, so it would mix two models or settings in one file."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = Path(path)
        super().__init__(
            f"cannot record into {self.path}: {problem}; move it aside (or record into another "
            "file) to record this backend afresh"
        )


class CassetteMiss(CassetteError):
    """A replayed call has no (remaining) recorded answer: the prompt, ontology or input changed.

    Never falls through to a live call. Re-record: move the stale cassette aside, run again with
    `record_cassette` (or `--record-cassette`; in a program built on the library,
    EVALS_RECORD_LLM) against a live backend, then replay to confirm.
    """

    def __init__(
        self, key: str, call_type: str, path: Path | str | None = None, detail: str = ""
    ) -> None:
        self.key = key
        self.call_type = call_type
        self.path = Path(path) if path is not None else None
        where = f" in {self.path}" if self.path is not None else ""
        extra = f" ({detail})" if detail else ""
        super().__init__(
            f"cassette miss{where}: no recorded {call_type} call with key {key}{extra}; "
            "the prompt, ontology or input changed since recording — re-record the cassette"
        )


class TransportError(EvalsError):
    """A provider call failed at the HTTP level after bounded retries."""

    def __init__(self, message: str, *, status: int | None = None, body: str = "") -> None:
        self.status = status
        self.body = body
        self.requests = 1  # HTTP requests sent before giving up (retries included)
        super().__init__(message)


class MalformedReply(EvalsError):
    """The provider answered, but its body or text could not be used as structured output."""

    def __init__(self, message: str, *, body: str = "") -> None:
        self.body = body
        self.requests = 1  # HTTP requests sent before giving up (retries included)
        super().__init__(message)


class ExtractionFailed(EvalsError):
    """One chunk's extraction failed fatally; carries the failure record for the sidecar."""

    def __init__(self, message: str, failure: object, stats: object | None = None) -> None:
        self.failure = failure
        self.stats = stats
        super().__init__(message)
