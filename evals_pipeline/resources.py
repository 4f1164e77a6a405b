"""Dagster resources: the run configuration, typed, and the one secret, only via EnvVar.

`EvalsResource` carries the resolved `EvalsConfig` as JSON (resources hold plain config) and
turns it into core objects. It is the only place the Dagster layer builds extractors, so assets
stay thin: every decision lives in the core.

Resource config is stored in every job snapshot (the run database, the UI's resource pages), so
a backend spec with a credential in it (a URL's user info or query string) is stored as its
`describe()` form plus a salted scrypt digest of the real spec, which each process that builds the
definitions keeps in memory (`_SEALED`) and puts back when the run reads its config.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path

from dagster import ConfigurableResource, EnvVar
from pydantic import Field

from .core.bench.gold import GoldCorpus, gold_inputs, load_gold
from .core.bench.plan import REPLAY_NOT_RECORDED
from .core.bench.runner import BENCH_BUDGETS
from .core.cassettes.cache import CachingExtractor, extraction_cache_path
from .core.cassettes.record import RecordingExtractor, check_record_target
from .core.config import EvalsConfig
from .core.corpus import ProseCorpus, load_prose_corpus
from .core.digests import contents_key
from .core.errors import ConfigError
from .core.extractors.anthropic import API_KEY_ENV
from .core.extractors.base import Extractor
from .core.extractors.specs import BackendSpec, build_extractor, parse_backend_spec
from .core.judge.cache import JudgeCache
from .core.judge.client import JudgeClient
from .core.models import Episode, OntologyMode
from .core.ontology import Ontology, load_ontology
from .core.options import ExtractOptions
from .core.plan import RunPlan, plan_run
from .core.prices import load_prices

# The real spec of every backend whose spec carries a credential, by its digest.
_SEALED: dict[str, str] = {}
_BENCH_FIELD, _RUN_FIELD = "bench.backends.", "backends."


def _digest(field: str, spec: str) -> str:
    """A salted, deliberately slow digest (scrypt, ~16 MB and tens of ms): it is stored, and a
    plain hash would let anyone with the run database test guesses of a password quickly."""
    salt = f"evals_pipeline/{field}".encode()
    return hashlib.scrypt(spec.encode(), salt=salt, n=2**14, r=8, p=1, dklen=32).hex()


def _seal(field: str, spec: str) -> tuple[str, str | None]:
    """(what may be stored, the digest to find the real spec by, or None if nothing is secret)."""
    parsed = parse_backend_spec(spec)
    shown = parsed.describe()
    if shown == parsed.raw:
        return spec, None
    digest = _digest(field, parsed.raw)
    _SEALED[digest] = parsed.raw
    return shown, digest


def _sealed_config(config: EvalsConfig) -> tuple[EvalsConfig, dict[str, str]]:
    """`config` with every secret-bearing spec replaced by its `describe()` form, and
    `{"backends.NAME" | "bench.backends.NAME": digest}` for each one replaced."""
    sealed: dict[str, str] = {}

    def seal_all(prefix: str, backends: dict[str, str]) -> dict[str, str]:
        shown: dict[str, str] = {}
        for name, spec in backends.items():
            shown[name], digest = _seal(prefix + name, spec)
            if digest is not None:
                sealed[prefix + name] = digest
        return shown

    bench = config.bench.backends
    shown = _with_backends(
        config,
        seal_all(_RUN_FIELD, config.backends),
        None if bench is None else seal_all(_BENCH_FIELD, bench),
    )
    return shown, sealed


def _with_backends(
    config: EvalsConfig, backends: dict[str, str], bench_backends: dict[str, str] | None
) -> EvalsConfig:
    bench = config.bench.model_copy(update={"backends": bench_backends})
    return config.model_copy(update={"backends": backends, "bench": bench})


@functools.lru_cache(maxsize=8)
def _parse(config_json: str, sealed: frozenset[tuple[str, str]]) -> EvalsConfig:
    config = EvalsConfig.model_validate_json(config_json)
    if not sealed:
        return config
    backends, bench_backends = dict(config.backends), dict(config.bench.backends or {})
    for field, digest in sorted(sealed):
        real = _SEALED.get(digest)
        if real is None:
            raise ConfigError(
                f"{field}: the spec carries a credential, which is kept out of Dagster's "
                "storage and this process never loaded it; build the definitions from the "
                "same project file here (e.g. through the code location)"
            )
        # A backend name may itself contain dots: strip the known prefix, never split.
        if field.startswith(_BENCH_FIELD):
            bench_backends[field.removeprefix(_BENCH_FIELD)] = real
        else:
            backends[field.removeprefix(_RUN_FIELD)] = real
    return _with_backends(
        config, backends, bench_backends if config.bench.backends is not None else None
    )


# The inputs every step reads, parsed once a process while their files are unchanged: keyed by
# the files' contents too, so a process that materialises again after an edit (a notebook, a
# script) reads the edit (a digest is re-hashed only when its file's stat changed).


def _ontology(path: str | None) -> Ontology | None:
    if not path:
        return None
    contents = contents_key(path)
    return load_ontology(path) if contents is None else _parsed_ontology(path, contents)


@functools.lru_cache(maxsize=8)
def _parsed_ontology(path: str, _contents: tuple[str, ...]) -> Ontology:
    return load_ontology(path)


def _corpus(path: str, ontology: str | None, limit: int | None) -> ProseCorpus:
    contents = (contents_key(path), contents_key(ontology) if ontology else ())
    if None in contents:
        return load_prose_corpus(Path(path), _ontology(ontology)).scoped(limit)
    return _parsed_corpus(path, ontology, limit, contents)


@functools.lru_cache(maxsize=8)
def _parsed_corpus(
    path: str, ontology: str | None, limit: int | None, _contents: tuple[object, ...]
) -> ProseCorpus:
    return load_prose_corpus(Path(path), _ontology(ontology)).scoped(limit)


def _gold(name: str, path: str, split: str) -> GoldCorpus:
    contents = tuple(contents_key(p) for p in gold_inputs(path))
    if None in contents:
        return load_gold(name, Path(path), split)  # type: ignore[arg-type]
    return _parsed_gold(name, path, split, contents)


@functools.lru_cache(maxsize=8)
def _parsed_gold(name: str, path: str, split: str, _contents: tuple[object, ...]) -> GoldCorpus:
    return load_gold(name, Path(path), split)  # type: ignore[arg-type]


class EvalsResource(ConfigurableResource):
    config_json: str  # secret-bearing specs in their `describe()` form
    # "backends.NAME" / "bench.backends.NAME" -> the digest of its real spec (see `_SEALED`)
    sealed_specs: dict[str, str] = Field(default_factory=dict)
    anthropic_api_key: str | None = None

    @classmethod
    def from_config(cls, config: EvalsConfig) -> EvalsResource:
        # EnvVar with the variable unset fails every run at launch, so pass it only when set.
        key = EnvVar(API_KEY_ENV) if os.environ.get(API_KEY_ENV) else None
        shown, sealed = _sealed_config(config)
        return cls(config_json=shown.model_dump_json(), sealed_specs=sealed, anthropic_api_key=key)

    @property
    def config(self) -> EvalsConfig:
        """The run's config with the real specs, credentials and all: never store it."""
        return _parse(self.config_json, frozenset(self.sealed_specs.items()))

    def ontology(self) -> Ontology | None:
        onto = self.config.ontology
        return _ontology(str(onto) if onto else None)

    def corpus(self) -> ProseCorpus:
        config = self.config
        onto = str(config.ontology) if config.ontology else None
        return _corpus(str(config.corpus), onto, config.limit)

    def prices(self) -> dict[str, dict[str, float]] | None:
        """`{"<model>": {"input_per_1m": …, "output_per_1m": …}}`; none ship with the project."""
        path = self.config.prices
        return None if path is None else load_prices(path)

    def options(self, mode: OntologyMode) -> ExtractOptions:
        config = self.config
        return ExtractOptions.for_mode(
            mode, self.ontology(), config.max_tokens_entities, config.max_tokens_edges
        )

    def key_environ(self) -> dict[str, str]:
        """The environment the plan sees, with the resource's key (an EnvVar resolved at
        launch) in place of whatever the process that loaded the definitions had."""
        return {**os.environ, API_KEY_ENV: self.anthropic_api_key or ""}

    def plan(
        self,
        episodes: list[Episode] | None = None,
        *,
        judge_coverage: bool = False,
        modes: Sequence[OntologyMode] | None = None,
    ) -> RunPlan:
        corpus = self.corpus()
        return plan_run(
            self.config,
            list(corpus.episodes()) if episodes is None else episodes,
            self.ontology(),
            corpus_path=str(corpus.path),
            corpus_digest=corpus.digest,
            environ=self.key_environ(),
            expected=corpus.expected_graphs(),
            judge_coverage=judge_coverage,
            modes=modes,
        )

    def judge_client(self) -> JudgeClient | None:
        """The judge behind its mandatory cache, or None without ANTHROPIC_API_KEY (skip)."""
        if not self.anthropic_api_key:
            return None
        judge = self.config.judge
        return JudgeClient(
            JudgeCache(judge.cache),
            api_key=self.anthropic_api_key,
            model=judge.model,
            concurrency=self.config.concurrency,
        )

    def gold(self, name: str) -> GoldCorpus:
        """A bench gold corpus named in the project file's `bench.corpora`."""
        bench = self.config.bench
        return _gold(name, str(bench.corpora[name]), bench.split)

    def bench_extractor(self, backend: str, gold: GoldCorpus) -> CachingExtractor:
        """The backend for a bench run (the oracle replies with `gold`'s graphs), behind a FIFO
        extraction cache: a recast case's repeated call reaches the backend afresh once, and an
        unchanged bench partition makes no call the second time. (A cassette or the oracle is
        replayed, uncached: see CachingExtractor.)"""
        config = self.config
        spec = config.bench_specs[backend]
        inner: Extractor = build_extractor(
            spec,
            expected=gold.expected_graphs(),
            anthropic_api_key=self.anthropic_api_key,
            unique_keys=False,  # recast cases repeat a call: identical keys come back FIFO
        )
        record_to = config.bench.record_cassette.get(backend)
        if record_to is not None:
            if spec.kind == "cassette":  # the bench plan says so too, and preflight refuses it
                raise ConfigError(f"bench.record_cassette.{backend}: {REPLAY_NOT_RECORDED}")
            # Recast cases record one key twice on purpose: no unique check here.
            check_record_target(record_to, model=spec.recorded_model, budgets=BENCH_BUDGETS)
            inner = RecordingExtractor(inner, record_to)
        path = _cache_file(
            inner, spec, config.cache_dir / "bench", backend, gold.digest, BENCH_BUDGETS
        )
        return CachingExtractor(inner, path, recording_to=record_to, fifo=True)

    def extractor(self, backend: str, keys: AbstractSet[str] | None = None) -> CachingExtractor:
        """The backend's extractor behind the extraction cache (and a recorder if configured).

        A backend being recorded is answered from its cassette where that holds the call, never
        from the cache, so the cassette gets every call once (see CachingExtractor). `keys`:
        the only extract keys the step will ask (a big cassette then loads only those).
        """
        config = self.config
        spec = config.specs[backend]
        corpus = self.corpus()
        inner: Extractor = build_extractor(
            spec,
            expected=corpus.expected_graphs(),
            anthropic_api_key=self.anthropic_api_key,
            keys=keys,
        )
        record_to = config.record_cassette.get(backend)
        if record_to is not None:
            check_record_target(
                record_to, model=spec.recorded_model, budgets=config.budgets, unique=True
            )
            inner = RecordingExtractor(inner, record_to, unique=True)
        path = _cache_file(inner, spec, config.cache_dir, backend, corpus.digest, config.budgets)
        return CachingExtractor(inner, path, recording_to=record_to)


def _cache_file(
    inner: Extractor,
    spec: BackendSpec,
    cache_dir: Path,
    backend: str,
    corpus_digest: str,
    budgets: tuple[int, int],
) -> Path | None:
    """Where `inner`'s extraction cache lives; None for a local backend, which is not cached
    (so its cassette is not hashed for a fingerprint)."""
    if inner.local:
        return None
    return extraction_cache_path(
        cache_dir, backend, spec, corpus_digest=corpus_digest, budgets=budgets
    )
