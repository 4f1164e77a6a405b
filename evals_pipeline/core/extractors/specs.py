"""Backend spec strings, parsed exactly as the reference harness spells them.

anthropic[:model=M]            hosted Anthropic (reads ANTHROPIC_API_KEY)
oai-http:url=U[,model=M]       OpenAI-compatible chat completions over HTTP
oai-uds:path=P[,model=M]       the same over a Unix domain socket
cassette:path=P                replay a recorded cassette (zero outbound calls)
oracle                         the expected graph, through the whole pipeline

A live kind also takes `timeout=S` (seconds a request may take, default 120) and `retries=N`
(retries after the first request, default 2): how calls are made, not what they answer, so
they leave the extraction cache's fingerprint as it was.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from ..errors import BackendSpecError
from ..models import ExtractionResult
from .base import Extractor, TransportExtractor

BackendKind = Literal["anthropic", "oai-http", "oai-uds", "cassette", "oracle"]

# How a live backend's calls are made; not part of what it answers (see answers_identity).
_TRANSPORT = frozenset({"timeout", "retries"})
_PARAMS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # kind: (required, optional)
    "anthropic": (frozenset(), frozenset({"model"}) | _TRANSPORT),
    "oai-http": (frozenset({"url"}), frozenset({"model"}) | _TRANSPORT),
    "oai-uds": (frozenset({"path"}), frozenset({"model"}) | _TRANSPORT),
    "cassette": (frozenset({"path"}), frozenset()),
    "oracle": (frozenset(), frozenset()),
}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# A name is part of file names (`<name>-<64 hex digits>.jsonl`) that must fit in 255 bytes.
MAX_NAME_LEN = 100


# The model a live backend calls when its spec names none.
DEFAULT_MODELS = {"anthropic": "claude-sonnet-4-6", "oai-http": "local", "oai-uds": "local"}


@dataclass(frozen=True)
class BackendSpec:
    kind: BackendKind
    params: Mapping[str, str]
    raw: str

    @property
    def is_live(self) -> bool:
        return self.kind in ("anthropic", "oai-http", "oai-uds")

    @property
    def cassette_path(self) -> Path | None:
        return Path(self.params["path"]) if self.kind == "cassette" else None

    @property
    def model(self) -> str | None:
        """The model a live backend calls: its `model=`, else the kind's default."""
        if not self.is_live:
            return None
        return self.params.get("model", DEFAULT_MODELS[self.kind])

    @property
    def recorded_model(self) -> str | None:
        """The model its recorded answers name, which a recording target's answers must name
        too: a live backend's model, the oracle's "oracle" (OracleExtractor.model); None for a
        cassette, whose recording is refused on its own (no_record_on_replay)."""
        return "oracle" if self.kind == "oracle" else self.model

    @property
    def timeout_s(self) -> float | None:
        """`timeout=`: how long one request may take, in seconds; None for the default."""
        return float(self.params["timeout"]) if "timeout" in self.params else None

    @property
    def max_retries(self) -> int | None:
        """`retries=`: retries after a call's first request; None for the default."""
        return int(self.params["retries"]) if "retries" in self.params else None

    @property
    def answers_identity(self) -> str:
        """The spec without its transport settings: what decides the answers. As written when
        it has none, so the fingerprints of existing caches hold."""
        if not _TRANSPORT & self.params.keys():
            return self.raw
        kept = ",".join(f"{k}={v}" for k, v in self.params.items() if k not in _TRANSPORT)
        return f"{self.kind}:{kept}" if kept else self.kind

    def describe(self) -> str:
        """The spec with nothing secret in it: a URL's user info, query string and fragment
        (where a key could hide) are dropped; the rest is shown as written."""
        url = self.params.get("url")
        if url is None:
            return self.raw
        parts = urlsplit(url)
        host = parts.netloc.rpartition("@")[2]  # as written: case, brackets and port kept
        if host == parts.netloc and not parts.query and not parts.fragment:
            return self.raw  # nothing to hide: shown exactly as given
        clean = urlunsplit((parts.scheme, host, parts.path, "", ""))
        return self.raw.replace(url, clean)


def _continues_path(path: str, piece: str, base: Path | None) -> bool:
    """Whether `piece`, after a comma, is more of `path` (relative to `base`, else the working
    folder): the joined path exists, or the comma is in the name of a folder that exists
    (`/data/a,b/` of `/data/a,b/x.jsonl`: a project under it). A typo (`,model:m`,
    `,meta-llama/Llama-3`, `,,`) stays an error rather than a path that fails every call."""
    if not piece:
        return False
    joined = Path(f"{path},{piece}")
    folder = Path(f"{path},{piece.split('/', 1)[0]}")  # the name the comma is in
    if base is not None and not joined.is_absolute():
        joined, folder = base / joined, base / folder
    try:
        return joined.exists() or ("/" in piece and folder.is_dir())
    except OSError:
        return False


def _path_continuation(path: str, items: list[str], base: Path | None) -> int:
    """How many of the comma-split `items` after `path` are more of it (the fewest that
    make a path `_continues_path` accepts), or 0: a name with several commas is found even
    though none of its shorter prefixes exists."""
    for taken in range(1, len(items) + 1):
        if _continues_path(path, ",".join(items[:taken]), base):
            return taken
    return 0


def parse_backend_spec(spec: str, base: Path | None = None) -> BackendSpec:
    """`KIND:NAME=VALUE,…`. `base`: where a relative path= is (the project file's folder);
    default, the working folder."""
    kind, sep, rest = spec.strip().partition(":")
    if kind not in _PARAMS:
        raise BackendSpecError(
            spec, f"unknown backend kind {kind!r}; expected one of {', '.join(_PARAMS)}"
        )
    required, optional = _PARAMS[kind]
    params: dict[str, str] = {}
    last = ""  # the parameter the previous item set
    if sep and not rest:
        raise BackendSpecError(spec, "nothing after ':'")
    items = rest.split(",") if rest else []
    at = 0
    while at < len(items):
        item = items[at]
        name, eq, value = item.partition("=")
        name = name.strip()
        # A comma in a path (a project under /data/a,b/, `run,v2,final.jsonl`, even
        # `a,model=b.jsonl` for a kind that takes no model): not a parameter of its own.
        if (
            last == "path"
            and (not eq or name not in required | optional)
            and (taken := _path_continuation(params["path"], items[at:], base))
        ):
            params["path"] += "," + ",".join(items[at : at + taken])
            at += taken
            continue
        at += 1
        if not eq:
            raise BackendSpecError(spec, f"parameter {item!r} is not NAME=VALUE")
        if name not in required | optional:
            allowed = ", ".join(sorted(required | optional)) or "none"
            raise BackendSpecError(
                spec, f"unknown parameter {name!r} for {kind} (allowed: {allowed})"
            )
        if name in params:
            raise BackendSpecError(spec, f"parameter {name!r} given twice")
        if not value:
            raise BackendSpecError(spec, f"parameter {name!r} is empty")
        params[name], last = value, name
    missing = sorted(required - params.keys())
    if missing:
        raise BackendSpecError(spec, f"{kind} needs {', '.join(missing)}=...")
    if "url" in params:
        _check_url(spec, params["url"])
    if "timeout" in params:
        _check_number(spec, "timeout", params["timeout"])
    if "retries" in params:
        _check_number(spec, "retries", params["retries"])
    return BackendSpec(kind=kind, params=params, raw=spec.strip())  # type: ignore[arg-type]


_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def url_problem(url: str) -> str | None:
    """Why `url` is not an http(s) URL with a host, or None: `127.0.0.1:8000/v1` (no scheme)
    or `htps://…` would otherwise run and fail every call, counted as an error rate."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is the check (a non-number raises)
    except ValueError as exc:  # its text quotes the URL's parts: not a part with user info
        return "does not parse" if "@" in url else f"does not parse: {exc}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be http:// or https:// with a host, e.g. http://127.0.0.1:8000/v1"
    # In the host or path, httpx would send these percent-encoded or as written, to a place
    # the server does not have: every call failing (404) as an error rate. (User info and a
    # query are decoded leniently, as a literal '%' in a password is: they are left alone.)
    # urlsplit drops leading spaces, tabs and newlines, and the SDK keeps them: the raw URL.
    if any(char in "\t\n\r" or not (char.isprintable() or char.isspace()) for char in url):
        return "has a control character (a pasted newline or tab?)"
    if url != url.strip() or any(char.isspace() for char in f"{parts.hostname}{parts.path}"):
        return (
            "has a space at its start or end, or in its host or path (percent-encode one that "
            "is meant, e.g. %20)"
        )
    host = "" if "[" in parts.netloc else parts.hostname or ""  # an IPv6 zone id keeps its %
    if _BAD_ESCAPE.search(host + parts.path):
        return (
            "has a '%' in its host or path not followed by two hex digits (write a literal one "
            "as %25)"
        )
    return None


def _check_url(spec: str, url: str) -> None:
    if (problem := url_problem(url)) is not None:
        raise BackendSpecError(spec, f"url {url!r} {problem}")


def _check_number(spec: str, name: str, value: str) -> None:
    """`timeout=`: seconds, above 0 and at most an hour; `retries=`: a whole number, 0 to 10."""
    # ASCII only: str.isdigit() is true of '²', which int() refuses (a traceback), and float()
    # takes '٣' and '1_0', which nobody means as a count of seconds.
    plain = value.isascii() and "_" not in value
    if name == "timeout":
        try:
            ok = plain and 0.0 < float(value) <= 3600.0  # False for nan; inf is over the hour
        except ValueError:
            ok = False
        rule = "a number of seconds above 0 and at most 3600"
    else:
        ok = plain and value.isdigit() and int(value) <= 10
        rule = "a whole number from 0 to 10"
    if not ok:
        raise BackendSpecError(spec, f"{name}={value!r} must be {rule}")


def check_name(name: str) -> str | None:
    """Why `name` cannot be a backend or gold-corpus name (a partition key and a folder), or
    None: letters, digits, '_', '-' or '.', starting with a letter or digit."""
    if not _NAME.fullmatch(name):  # (match's `$` lets a trailing newline through)
        return (
            f"name {name!r} must be letters, digits, '_', '-' or '.', starting with a letter or "
            "digit"
        )
    if len(name) > MAX_NAME_LEN:  # it names files (a cache's, a report folder): had failed a step
        return f"name {name[:20]!r}… is {len(name)} characters; at most {MAX_NAME_LEN}"
    return None


def parse_named_backend(text: str, base: Path | None = None) -> tuple[str, BackendSpec]:
    """`NAME=SPEC`, as `--backend` takes it. NAME becomes a Dagster partition key."""
    name, eq, spec = text.partition("=")
    name = name.strip()
    if not eq or not spec:
        raise BackendSpecError(text, "expected NAME=SPEC, e.g. baseline=anthropic")
    if (problem := check_name(name)) is not None:
        raise BackendSpecError(text, f"backend {problem}")
    return name, parse_backend_spec(spec, base)


def build_extractor(
    spec: BackendSpec,
    *,
    expected: Mapping[str, ExtractionResult] | None = None,
    anthropic_base_url: str | None = None,
    anthropic_api_key: str | None = None,
    timeout_s: float = 120.0,
    max_retries: int = 2,
    unique_keys: bool = True,
    keys: AbstractSet[str] | None = None,
) -> Extractor:
    """Resolve a spec to an extractor. Cassette backends load with unique keys (one answer per
    call), so a duplicate-keyed cassette fails here, before any extraction; `unique_keys=False`
    serves identical keys FIFO instead (the bench's recast cases repeat a call on purpose).
    `keys`: the only extract keys the caller will ask of a cassette (see `load_cassette`).
    A spec's own `timeout=` and `retries=` win over `timeout_s` and `max_retries`."""
    retries = spec.max_retries if spec.max_retries is not None else max_retries
    if spec.kind == "anthropic":
        from .anthropic import AnthropicTransport

        return TransportExtractor(
            AnthropicTransport(
                model=spec.model or DEFAULT_MODELS["anthropic"],
                api_key=anthropic_api_key,
                base_url=anthropic_base_url,
                timeout_s=spec.timeout_s or timeout_s,
                max_retries=retries,
            )
        )
    if spec.kind in ("oai-http", "oai-uds"):
        from .openai_compat import OpenAICompatTransport

        uds = spec.params.get("path")
        url = spec.params.get("url", "http://localhost/v1/chat/completions")
        return TransportExtractor(
            OpenAICompatTransport(
                url=url,
                uds_path=uds,
                model=spec.model or DEFAULT_MODELS[spec.kind],
                timeout_s=spec.timeout_s or timeout_s,
                max_retries=retries,
            )
        )
    if spec.kind == "cassette":
        from ..cassettes.replay import ReplayingExtractor

        return ReplayingExtractor.from_path(spec.params["path"], unique=unique_keys, keys=keys)
    from .oracle import OracleExtractor

    return OracleExtractor(expected or {})
