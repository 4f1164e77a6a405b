"""Resolving a run before it runs: the plan a dry run prints and the guards a real run enforces.

`plan_run` is the only resolution code. `--dry-run` prints its result and stops; a real run
(the `run_plan` asset and the extraction step) refuses to start while it reports a guard, so
the preview cannot drift from what actually happens. Resolving reads cassettes and the
extraction cache from disk; it never builds a client, reads a key or makes a call.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from .cassettes.cache import extraction_cache_path
from .cassettes.keys import extract_key
from .cassettes.record import check_record_target
from .cassettes.store import (
    Cassette,
    CassetteIndex,
    index_cassette,
    load_cassette,
)
from .config import EvalsConfig
from .digests import file_sha256
from .errors import CassetteCorrupt, CassetteDuplicateKey, CassetteError, ConfigError
from .extractors.anthropic import API_KEY_ENV, BASE_URL_ENV, check_base_url_in_use
from .extractors.credentials import userinfo_replaces_key
from .extractors.openai_compat import API_KEY_ENV as OAI_KEY_ENV
from .extractors.specs import BackendSpec
from .files import real_path
from .judge.prompts import AXES as JUDGE_AXES
from .models import Episode, ExtractionResult, OntologyMode
from .ontology import Ontology
from .options import ExtractOptions
from .prices import load_prices


@dataclass(frozen=True)
class Guard:
    """A condition that aborts a real run. `check` names the Dagster asset check enforcing it."""

    check: str
    backends: tuple[str, ...]
    message: str


@dataclass
class BackendPlan:
    name: str
    spec: str
    kind: str
    action: str  # live | replay | oracle
    cassette_path: str | None = None
    cassette_records: int | None = None
    record_to: str | None = None
    cache_path: str | None = None
    coverage: dict[str, int] = field(default_factory=dict)  # mode -> chunks the cassette answers
    # mode -> chunks already cached (for a backend being recorded: already in its cassette)
    cache_hits: dict[str, int] = field(default_factory=dict)
    planned_calls: dict[str, int] = field(default_factory=dict)  # mode -> LLM requests, 2 a chunk


@dataclass
class RunPlan:
    corpus_path: str
    corpus_digest: str
    scope: int
    modes: tuple[str, ...]
    reference: str
    backends: dict[str, BackendPlan]
    guards: list[Guard]
    notes: list[str]
    judge: dict[str, Any]

    def guards_for(self, check: str, backend: str | None = None) -> list[Guard]:
        return [
            g
            for g in self.guards
            if g.check == check and (backend is None or backend in g.backends)
        ]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def render(self) -> str:
        """The human-readable plan `--dry-run` prints."""
        lines = [
            f"corpus: {self.corpus_path} (digest {self.corpus_digest[:12]}), scope {self.scope} "
            "chunks",
            f"ontology modes: {', '.join(self.modes)}; reference: {self.reference}",
            "backends:",
        ]
        for plan in self.backends.values():
            detail = plan.action
            if plan.cassette_path is not None:
                records = "unreadable" if plan.cassette_records is None else plan.cassette_records
                detail += f" from {plan.cassette_path} ({records} records)"
            if plan.record_to:
                detail += f", recording to {plan.record_to}"
            calls = ", ".join(f"{m}: {n}" for m, n in plan.planned_calls.items())
            cached = ", ".join(f"{m}: {n}" for m, n in plan.cache_hits.items())
            if plan.coverage:
                covered = ", ".join(f"{m}: {n}/{self.scope}" for m, n in plan.coverage.items())
                detail += f"; covers {covered} chunks"
            lines.append(f"  {plan.name} = {plan.spec}: {detail}")
            if plan.action == "live":
                source = "recorded in its cassette" if plan.record_to else "cached"
                lines.append(f"    planned LLM requests: {calls}; calls already {source}: {cached}")
            else:
                lines.append("    no calls: answered locally, not cached")
        judge = self.judge
        lines.append(
            f"judge: {judge['status']} ({judge['reason']}); {judge['mode']} mode plans up to "
            f"{judge['planned_calls']} judge calls with {judge['model']}"
        )
        if "cache" in judge:
            cache = judge["cache"]
            if "error" in cache:
                lines.append(f"  judge cache: unreadable: {cache['error']}")
            else:
                repeated = cache.get("repeated", 0)  # (a plan stored before it was counted)
                lines.append(
                    f"  judge cache already covers {cache['cached']}; {cache['uncached']} to "
                    f"make; {repeated} repeat a prompt made earlier in the run (answered from "
                    f"the cache); {cache['unknown']} unknown until their extractions exist; "
                    f"{cache['no_call']} need no call (a failed extraction or an axis with no "
                    "item on one side)"
                )
        if self.guards:
            lines.append("guards that would abort a real run:")
            lines += [f"  [{g.check}] {g.message}" for g in self.guards]
        else:
            lines.append("guards: none would abort")
        lines += [f"note: {note}" for note in self.notes]
        return "\n".join(lines)


def _load_for_plan(
    name: str, path: Path, guards: list[Guard]
) -> tuple[CassetteIndex | None, int | None]:
    try:
        cassette = index_cassette(path)
    except CassetteDuplicateKey as exc:
        guards.append(Guard("cassette_integrity", (name,), f"{name}: {exc}"))
        return None, None
    except CassetteCorrupt as exc:
        guards.append(Guard("cassette_integrity", (name,), f"{name}: {exc}"))
        return None, None
    return cassette, len(cassette)


def _same_bytes(a: Path, b: Path) -> bool:
    """Whether two readable files hold the same bytes. A folder or an unreadable file is not
    compared: the cassette-integrity guard names it."""
    if not (a.is_file() and b.is_file()):
        return False
    try:
        return file_sha256(a) == file_sha256(b)
    except OSError:
        return False


def _identity_guards(config: EvalsConfig, guards: list[Guard]) -> None:
    cassettes = {
        name: spec.cassette_path
        for name, spec in config.specs.items()
        if spec.cassette_path is not None
    }
    for (a, path_a), (b, path_b) in combinations(sorted(cassettes.items()), 2):
        if real_path(path_a) == real_path(path_b):
            guards.append(
                Guard(
                    "distinct_cassettes",
                    (a, b),
                    f"backends {a} and {b} replay the same cassette {path_a}: the comparison "
                    "would be degenerate",
                )
            )
        elif _same_bytes(path_a, path_b):
            guards.append(
                Guard(
                    "distinct_cassettes",
                    (a, b),
                    f"backends {a} and {b} replay byte-identical cassettes ({path_a}, {path_b})",
                )
            )
    for name in config.record_cassette:
        if config.specs[name].kind == "cassette":
            guards.append(
                Guard(
                    "no_record_on_replay",
                    (name,),
                    f"backend {name} replays a cassette and also has record_cassette: "
                    "recording a replay is meaningless",
                )
            )
    _shared_target_guards(config, cassettes, guards)


def _shared_target_guards(
    config: EvalsConfig, replayed: Mapping[str, Path], guards: list[Guard]
) -> None:
    """A recording is served what its file already holds: a backend recording into a file
    another backend records into, or replays, would be answered with that backend's outputs
    (or refused mid-run, after paid calls, when the models differ)."""
    targets = sorted(config.record_cassette.items())
    for (a, path_a), (b, path_b) in combinations(targets, 2):
        if real_path(path_a) == real_path(path_b):
            guards.append(
                Guard(
                    "recording_targets",
                    (a, b),
                    f"backends {a} and {b} both record into {path_a}: each would be served "
                    "the other's answers; give each its own file",
                )
            )
    for recorder, target in targets:
        for replayer, path in sorted(replayed.items()):
            if replayer != recorder and real_path(target) == real_path(path):
                guards.append(
                    Guard(
                        "recording_targets",
                        (recorder, replayer),
                        f"backend {recorder} records into {target}, the cassette backend "
                        f"{replayer} replays: it would be served {replayer}'s answers",
                    )
                )


def _record_target_guard(config: EvalsConfig, name: str, guards: list[Guard]) -> bool:
    """Whether the backend can record where it is told to (True when it records nothing). A
    target it could not take answers from is a guard, not an error, so a dry run still shows
    the whole plan (a real run refuses it before any call)."""
    record = config.record_cassette.get(name)
    if record is None:
        return True
    spec = config.specs[name]
    try:
        check_record_target(record, model=spec.recorded_model, budgets=config.budgets, unique=True)
    except CassetteError as exc:
        guards.append(Guard("recording_targets", (name,), f"{name}: {exc}"))
        return False
    return True


def credential_guards(config: EvalsConfig, env: Mapping[str, str]) -> list[Guard]:
    """An anthropic backend without ANTHROPIC_API_KEY: its extraction step fails building the
    client (even when every call is cached), after the other backends' steps have run."""
    if env.get(API_KEY_ENV):
        return []
    return [
        Guard(
            "live_credentials",
            (name,),
            f"{name}: the anthropic backend needs {API_KEY_ENV} to be set",
        )
        for name, spec in config.specs.items()
        if spec.kind == "anthropic"
    ]


def backend_guards(
    config: EvalsConfig, backend: str, environ: Mapping[str, str] | None = None
) -> list[Guard]:
    """The guards `plan_run` would report that concern `backend`, found the same way, but for
    a live backend's unreadable cache (`cassette_integrity`), which the step's own load of it
    reports as a typed error.

    For the extraction step's re-check: it needs only its own backend's guards, and a whole
    plan (every backend's cassette, every key in every mode, the extraction caches) per
    extraction partition cost several times the extraction itself on a large corpus.
    """
    guards: list[Guard] = []
    _identity_guards(config, guards)
    guards += credential_guards(config, os.environ if environ is None else environ)
    _record_target_guard(config, backend, guards)
    spec = config.specs[backend]
    if spec.cassette_path is not None:
        _load_for_plan(backend, spec.cassette_path, guards)
    return [g for g in guards if backend in g.backends]


def judge_plan(
    config: EvalsConfig,
    scope: int,
    environ: Mapping[str, str] | None = None,
    modes: Sequence[OntologyMode] | None = None,
) -> dict[str, Any]:
    """Planned judge calls: reference mode costs candidates x 3 axes per chunk and mode; pairwise
    costs C(N,2) x 2 slot orders x 3 axes."""
    env = os.environ if environ is None else environ
    n = len(config.backends)
    per_chunk = 0
    if config.judge.mode in ("reference", "both"):
        per_chunk += (n - 1) * len(JUDGE_AXES)
    if config.judge.mode in ("pairwise", "both"):
        per_chunk += n * (n - 1) // 2 * 2 * len(JUDGE_AXES)
    has_key = bool(env.get(API_KEY_ENV))
    return {
        "status": "planned" if has_key else "skipped",
        "reason": (
            f"{API_KEY_ENV} is set; every judge call goes through the cache at {config.judge.cache}"
            if has_key
            else f"{API_KEY_ENV} is not set; strict-string scores only"
        ),
        "model": config.judge.model,
        "mode": config.judge.mode,
        # What judging this scope costs; made only when a key is set.
        "planned_calls": per_chunk * scope * len(config.active_modes if modes is None else modes),
    }


def plan_run(
    config: EvalsConfig,
    episodes: Sequence[Episode],
    ontology: Ontology | None,
    *,
    corpus_path: str,
    corpus_digest: str,
    environ: Mapping[str, str] | None = None,
    expected: Mapping[str, ExtractionResult] | None = None,
    judge_coverage: bool = False,
    modes: Sequence[OntologyMode] | None = None,
) -> RunPlan:
    """Resolve every backend exactly as a real run would, without making a call.

    `judge_coverage` also renders the judge prompts that free sources (cassettes, the oracle,
    the extraction cache) allow, to say how many planned judge calls the cache already holds.
    `modes` plans those of the run's modes only (one mode's partition); default, all of them.
    """
    active = tuple(config.active_modes if modes is None else modes)
    unknown = [m for m in active if m not in config.active_modes]
    if unknown:
        raise ConfigError(
            f"cannot plan ontology mode(s) {unknown}: the run's modes are {config.active_modes}"
        )
    if config.prices is not None:  # a bad prices file fails here, before any paid call
        load_prices(config.prices)
    env = os.environ if environ is None else environ
    # So does a mistyped EVALS_ANTHROPIC_BASE_URL (the process's).
    check_base_url_in_use(config.specs.values(), judging=bool(env.get(API_KEY_ENV)))
    guards: list[Guard] = []
    notes: list[str] = []
    _identity_guards(config, guards)
    guards += credential_guards(config, env)
    options = {
        mode: ExtractOptions.for_mode(
            mode, ontology, config.max_tokens_entities, config.max_tokens_edges
        )
        for mode in active
    }
    keys = {mode: [extract_key(e, opts) for e in episodes] for mode, opts in options.items()}
    backends: dict[str, BackendPlan] = {}
    for name, spec in config.specs.items():
        action = (
            "replay" if spec.kind == "cassette" else "oracle" if spec.kind == "oracle" else "live"
        )
        plan = BackendPlan(name=name, spec=spec.describe(), kind=spec.kind, action=action)
        record = config.record_cassette.get(name)
        plan.record_to = str(record) if record is not None else None
        recordable = _record_target_guard(config, name, guards)
        cassette = None
        if spec.cassette_path is not None:
            plan.cassette_path = str(spec.cassette_path)
            cassette, plan.cassette_records = _load_for_plan(name, spec.cassette_path, guards)
        # A local backend (cassette, oracle) is not cached (see cassettes/cache.py); a backend
        # being recorded is answered by its cassette where that holds the call, never by the
        # cache, so the cassette gets every call once.
        cache = None
        if action == "live":
            cache_file = extraction_cache_path(
                config.cache_dir,
                name,
                spec,
                corpus_digest=corpus_digest,
                budgets=config.budgets,
            )
            plan.cache_path = str(cache_file)
            if record is None:
                cache = _cache_for_plan(name, cache_file, guards)
            elif recordable:  # else its guard says why; the run would not start
                cache = _cache_for_plan(name, record, guards)
        for mode, mode_keys in keys.items():
            cached = sum(1 for k in mode_keys if k in cache) if cache is not None else 0
            plan.cache_hits[mode] = cached
            if cassette is not None:
                covered = sum(1 for k in mode_keys if k in cassette)
                plan.coverage[mode] = covered
                if covered < len(mode_keys):
                    notes.append(
                        f"{name} ({mode}): the cassette covers {covered} of {len(mode_keys)} "
                        "chunks in scope; the rest will count as errors (coverage, not abort)"
                    )
            plan.planned_calls[mode] = 2 * (len(mode_keys) - cached) if action == "live" else 0
        backends[name] = plan
    notes += _large_chunk_notes(episodes, any(b.action == "live" for b in backends.values()))
    notes += key_not_sent_notes(config.specs, env)
    judge = judge_plan(config, len(episodes), environ, active)
    if judge_coverage and not any(g.check == "cassette_integrity" for g in guards):
        from .judge.coverage import judge_cache_coverage

        judge["cache"] = judge_cache_coverage(
            config, episodes, ontology, expected or {}, corpus_digest, active
        )
    return RunPlan(
        corpus_path=corpus_path,
        corpus_digest=corpus_digest,
        scope=len(episodes),
        modes=active,
        reference=config.reference,
        backends=backends,
        guards=guards,
        notes=notes,
        judge=judge,
    )


# ~100,000 tokens of text at ~4 characters a token: past half of a 200k-token context window,
# before the prompts, the ontology and the reply.
LARGE_CHUNK_CHARS = 400_000


def key_not_sent_notes(specs: Mapping[str, BackendSpec], env: Mapping[str, str]) -> list[str]:
    """A note for each live URL whose user info takes the Authorization header its API key would
    have had: httpx sends the user info as Basic auth, and the key goes unsent. A gateway that
    wants both answers 401 to every call, which would otherwise show only as an error rate."""
    notes = [
        f"{name}: its url carries user info, sent as Basic auth in place of {OAI_KEY_ENV}, "
        "which is then not sent"
        for name, spec in specs.items()
        if spec.kind == "oai-http"
        and env.get(OAI_KEY_ENV)
        and userinfo_replaces_key(spec.params["url"])
    ]
    anthropic = any(s.kind == "anthropic" for s in specs.values())
    base_url = env.get(BASE_URL_ENV)
    if env.get(API_KEY_ENV) and base_url and userinfo_replaces_key(base_url):
        users = "the anthropic backends and the judge" if anthropic else "the judge"
        notes.append(
            f"{BASE_URL_ENV} carries user info, sent as Basic auth in place of {API_KEY_ENV}, "
            f"which {users} then do not send"
        )
    return notes


def _large_chunk_notes(episodes: Sequence[Episode], live: bool) -> list[str]:
    """A note naming chunks whose text is beyond what a live model can be expected to take.
    They are sent and recorded whole (nothing is cut); a provider refusing one is that chunk's
    error, in the error rate."""
    if not live:
        return []
    sizes = ((e.name, len(e.body) + sum(map(len, e.context))) for e in episodes)
    large = [(name, size) for name, size in sizes if size > LARGE_CHUNK_CHARS]
    if not large:
        return []
    shown = ", ".join(f"{name} ({size:,} chars)" for name, size in large[:5])
    more = f" and {len(large) - 5} more" if len(large) > 5 else ""
    return [
        f"{len(large)} chunk(s) hold over {LARGE_CHUNK_CHARS:,} characters of text (~100,000 "
        f"tokens): {shown}{more}; they are sent whole, and a model whose context they exceed "
        "will fail them (counted as errors)"
    ]


def _cache_for_plan(name: str, path: Path, guards: list[Guard]) -> Cassette | None:
    """The answers a live backend's cache (or its recording target) holds, loaded as the run
    loads it; a file the run cannot load is a guard, as the run would fail on it."""
    try:
        return load_cassette(path, consume=False, missing_ok=True, skip_torn_tail=True)
    except CassetteError as exc:
        guards.append(Guard("cassette_integrity", (name,), f"{name}: {exc}"))
        return None


def fresh_recording_guards(record_paths: Mapping[str, Path]) -> list[Guard]:
    """Post-run half of the identity guard: freshly recorded cassettes must differ."""
    existing = {n: p for n, p in record_paths.items() if p.exists() and p.stat().st_size > 0}
    digests = {name: file_sha256(path) for name, path in existing.items()}
    return [
        Guard(
            "fresh_recordings_distinct",
            (a, b),
            f"freshly recorded cassettes of {a} and {b} are byte-identical",
        )
        for a, b in combinations(sorted(digests), 2)
        if digests[a] == digests[b]
    ]
