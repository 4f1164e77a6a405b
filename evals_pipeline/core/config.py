"""The project file (`evals.yaml`): which backends run, against what, under which ontology modes.

Relative paths resolve against the file's own folder, so a config means the same thing from any
working directory. Every problem is an InputFileError naming the file and the field.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

from .errors import BackendSpecError, ConfigError, InputFileError
from .extractors.anthropic import API_KEY_ENV as ANTHROPIC_KEY_ENV
from .extractors.redaction import without_userinfo
from .extractors.specs import BackendSpec, check_name, parse_backend_spec
from .files import (
    cannot_be_made,
    load_yaml,
    local_storage_path,
    no_such_path,
    not_writable,
    real_path,
    storage_problem,
    validate_file_model,
)
from .models import ONTOLOGY_MODES, OntologyMode
from .options import DEFAULT_MAX_TOKENS_EDGES, DEFAULT_MAX_TOKENS_ENTITIES

CONFIG_ENV = "EVALS_CONFIG"  # the project file `dagster dev`, the CLIs and the gate read
DEFAULT_CONFIG = "evals.yaml"
DEFAULT_SCOPE = 50


def default_config_path() -> Path:
    """EVALS_CONFIG, else evals.yaml in the working directory (the repository root)."""
    return real_path(os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG)  # empty: unset


JudgeMode = Literal["reference", "pairwise", "both"]
DEFAULT_JUDGE_MODEL = "claude-sonnet-4-6"


class JudgeConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = DEFAULT_JUDGE_MODEL
    mode: JudgeMode = "reference"
    cache: Path = Path("judge_cache.jsonl")


class BenchConfig(BaseModel):
    """The exact-match bench: gold corpora by name (a cases folder or a WebNLG .jsonl file).

    With no `corpora` the run has no bench assets (`evals-pipeline bench` defaults to
    `cases: corpus/cases`). `backends` default to the run's backends. The bench has cassettes
    of its own: its recast cases repeat a call on purpose, so its cassettes hold identical keys
    (served FIFO), which the prose pipeline's one-answer-per-call guard rightly rejects.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    backends: dict[str, str] | None = None
    record_cassette: dict[str, Path] = Field(default_factory=dict)

    corpora: dict[str, Path] = Field(default_factory=dict)  # none: the run has no bench
    split: Literal["all", "dev", "test"] = "all"
    ontology_mode: OntologyMode = "strict"
    output_dir: Path = Path("bench-results")


class EvalsConfig(BaseModel):
    """A whole eval run. `scope` is a chunk count (first N in corpus order) or "all"."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backends: dict[str, str] = Field(min_length=1)
    reference: str
    corpus: Path = Path("corpus/prose/chunks.jsonl")
    # Counts are strict: YAML's `yes`, `true` or `"8"` is not a number (lax parsing made them 1).
    scope: StrictInt | Literal["all"] = DEFAULT_SCOPE
    ontology: Path | None = None
    modes: tuple[OntologyMode, ...] | None = None
    record_cassette: dict[str, Path] = Field(default_factory=dict)
    output_dir: Path = Path("reports")
    cache_dir: Path = Path(".evals_cache")
    concurrency: int = Field(default=8, ge=1, strict=True)
    # Dagster's executor for runs launched from the definitions (dagster dev, `dagster asset
    # materialize`, backfills). in_process: steps share one process (a step spawn costs ~3 s on
    # a small machine). multiprocess: a process per step, up to `max_concurrent` at once (0: one
    # per CPU), so independent steps run in parallel. The driver's runs are always in-process.
    executor: Literal["in_process", "multiprocess"] = "in_process"
    max_concurrent: int = Field(default=0, ge=0, strict=True)
    # Where asset values (Parquet tables, JSON plans and reports) live: an fsspec URL such as
    # s3://bucket/evals (with s3fs installed), so steps on other machines share them, or a
    # folder (a relative one resolves against the project file). None: <cache_dir>/assets.
    # See docs/scale-out.md.
    asset_storage: str | None = None
    # The claim-extraction golden set and its gate baseline (None: `<golden_dir>/baseline.json`).
    golden_dir: Path = Path("corpus/golden")
    claims_baseline: Path | None = None
    # false: run without the claim gate. While it is true, a golden_dir the file names must
    # exist (a typo had switched the gate off with a warning, and CI passed); only the default
    # may be absent. Strict, as the counts: 0 or "off" is not false.
    claims_gate: bool = Field(default=True, strict=True)
    # A run kept from before a change (a copy of a reports folder: `<mode>/episodes.json`):
    # each mode's report then carries a `no_regression` check against it (None: no check).
    prose_baseline: Path | None = None
    max_tokens_entities: int = Field(default=DEFAULT_MAX_TOKENS_ENTITIES, ge=1, strict=True)
    max_tokens_edges: int = Field(default=DEFAULT_MAX_TOKENS_EDGES, ge=1, strict=True)
    prices: Path | None = None
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    bench: BenchConfig = Field(default_factory=BenchConfig)

    @field_validator("scope")
    @classmethod
    def _positive_scope(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 1:
            raise ValueError("scope must be a positive chunk count or 'all'")
        return value

    @property
    def limit(self) -> int | None:
        return None if self.scope == "all" else int(self.scope)

    @property
    def active_modes(self) -> tuple[OntologyMode, ...]:
        """Modes to run: as configured, else all three with an ontology and freeform without."""
        if self.modes is not None:
            return self.modes
        return ONTOLOGY_MODES if self.ontology is not None else ("freeform",)

    @property
    def budgets(self) -> tuple[int, int]:
        """The token budgets of the entity and edge calls (part of the extraction cache's
        fingerprint: a smaller budget can truncate an answer the cache holds whole)."""
        return (self.max_tokens_entities, self.max_tokens_edges)

    @property
    def claims_baseline_path(self) -> Path:
        return self.claims_baseline or self.golden_dir / "baseline.json"

    @property
    def specs(self) -> dict[str, BackendSpec]:
        return {name: parse_backend_spec(spec) for name, spec in self.backends.items()}

    @property
    def bench_backends(self) -> dict[str, str]:
        return self.bench.backends if self.bench.backends is not None else self.backends

    @property
    def bench_specs(self) -> dict[str, BackendSpec]:
        return {name: parse_backend_spec(spec) for name, spec in self.bench_backends.items()}

    def check(self, source: Path | str) -> EvalsConfig:
        """Cross-field rules, each failure naming the field it is about."""
        _check_backends(source, self.backends, self.record_cassette, "", "backend")
        if self.reference not in self.backends:
            raise InputFileError(
                source,
                f"reference {self.reference!r} is not one of the backends {sorted(self.backends)}",
                field="reference",
            )
        if self.bench.backends is not None and not self.bench.backends:
            raise InputFileError(source, "name at least one bench backend", field="bench.backends")
        _check_backends(
            source, self.bench_backends, self.bench.record_cassette, "bench.", "bench backend"
        )
        if self.ontology is None and any(m != "freeform" for m in self.active_modes):
            raise InputFileError(source, "open and strict modes need an ontology", field="modes")
        if self.modes is not None and len(set(self.modes)) != len(self.modes):
            raise InputFileError(source, "a mode is listed twice", field="modes")
        if self.modes is not None and not self.modes:
            raise InputFileError(
                source, "list at least one mode (or leave modes out)", field="modes"
            )
        for name in self.bench.corpora:  # a partition key and a folder under output_dir
            if (problem := check_name(name)) is not None:
                raise InputFileError(
                    source, f"gold corpus {problem}", field=f"bench.corpora.{name}"
                )
        if self.max_concurrent and self.executor == "in_process":
            raise InputFileError(  # it would be ignored: the in-process executor runs one step
                source,
                "not with executor: in_process (it runs one step at a time)",
                field="max_concurrent",
            )
        storage = (self.asset_storage or "").strip().lower()
        if self.executor == "multiprocess" and storage.startswith("memory:"):
            raise InputFileError(  # each step would fail, finding nothing its inputs stored
                source,
                "memory:// is one process's memory, and executor: multiprocess runs each step "
                "in a process of its own: no step would find what the steps before it stored "
                "(use executor: in_process, or a store every process reaches)",
                field="asset_storage",
            )
        return self

    def check_inputs(self, source: Path | str) -> EvalsConfig:
        """The input files a run reads first are there: a typo in `corpus`, `ontology` or a
        gold corpus path is one error naming the field, not a failed step's traceback.
        (Cassettes are checked by the plan's guards; a golden_dir the project file names is
        checked by `load_config`, and a missing default one switches the claim gate off, with a
        warning.)"""
        wanted: list[tuple[str, Path | None]] = [
            ("corpus", self.corpus),
            ("ontology", self.ontology),
            *((f"bench.corpora.{name}", path) for name, path in self.bench.corpora.items()),
        ]
        for field, path in wanted:
            if path is not None and not path.exists():
                raise InputFileError(source, f"{path}: {no_such_path(path)}", field=field)
        files = [("corpus", self.corpus), ("ontology", self.ontology), ("prices", self.prices)]
        for field, path in files:
            if path is not None and path.is_dir():
                raise InputFileError(source, f"{path}: is a folder, not a file", field=field)
        if self.prices is not None and not self.prices.exists():
            raise InputFileError(source, f"{self.prices}: file not found", field="prices")
        from .claims.gate import read_baseline
        from .prices import load_prices

        if self.prices is not None:  # read by the run's plan step, after the claim gate's steps
            try:
                load_prices(self.prices)
            except InputFileError as exc:
                raise InputFileError(source, str(exc), field="prices") from exc
        if self.claims_gate and self.claims_baseline is not None:
            try:  # a typo must not switch the gate off, nor fail its step mid-run
                read_baseline(self.claims_baseline, required=True)
            except InputFileError as exc:
                raise InputFileError(source, str(exc), field="claims_baseline") from exc
        self._check_prose_baseline(source)
        return self.check_outputs(source)

    def _check_prose_baseline(self, source: Path | str) -> None:
        """A baseline folder that is there, holds a file for some mode of this run, none of
        them the file this run writes (each report would overwrite its baseline, then pass
        against itself), and whose files read as run reports: a typo, or a copy nested one
        folder down, must not switch the gate off."""
        folder = self.prose_baseline
        if folder is None:
            return
        from .reports.regression import baseline_file, read_baseline

        field = "prose_baseline"
        if not folder.is_dir():
            why = "is a file, not a folder" if folder.exists() else no_such_path(folder)
            raise InputFileError(source, f"{folder}: {why}", field=field)
        found = []
        for mode in self.active_modes:
            path = baseline_file(folder, mode)
            written = baseline_file(self.output_dir, mode)  # this run's own, as report writes it
            if real_path(path) == real_path(written):  # the folder, or a mode's, linked to it
                raise InputFileError(
                    source,
                    f"{path}: is the file this run writes {mode}'s counts into ({written}): "
                    "keep the baseline in a copy (rm -rf baseline && cp -r reports baseline)",
                    field=field,
                )
            if path.exists():
                found.append(path)
                try:
                    read_baseline(path)
                except InputFileError as exc:
                    raise InputFileError(source, str(exc), field=field) from exc
        if not found:  # a folder of something else: the gate would be off in every mode
            try:
                entries = sorted(folder.iterdir())
            except OSError:  # unreadable: no hint, the error stands
                entries = []
            nested = [
                p
                for p in entries
                if any(baseline_file(p, mode).exists() for mode in self.active_modes)
            ]
            hint = f" (a copy nested in it: {nested[0]}?)" if nested else ""
            raise InputFileError(
                source,
                f"{folder}: holds no <mode>/episodes.json for any mode of this run "
                f"({', '.join(self.active_modes)}){hint}: it is not a copy of a reports folder",
                field=field,
            )

    def check_outputs(self, source: Path | str) -> EvalsConfig:
        """Every path a run writes can be made, and no two writers share a file: each is one
        error naming the field before the run, not a failed step after it (and after its paid
        calls)."""
        written: list[tuple[str, Path | None]] = [
            ("output_dir", self.output_dir),
            ("cache_dir", self.cache_dir),
            ("judge.cache", self.judge.cache),
            ("bench.output_dir", self.bench.output_dir),
            *((f"record_cassette.{n}", p) for n, p in self.record_cassette.items()),
            *((f"bench.record_cassette.{n}", p) for n, p in self.bench.record_cassette.items()),
        ]
        for field, path in written:
            if path is not None and (why := cannot_be_made(path)) is not None:
                raise InputFileError(source, f"{path}: {why}", field=field)
        storage = self.asset_storage
        if storage is not None and (why := storage_problem(storage)) is not None:
            raise InputFileError(
                source, f"{without_userinfo(storage)}: {why}", field="asset_storage"
            )
        folders = [("output_dir", self.output_dir), ("cache_dir", self.cache_dir)]
        folders += [("bench.output_dir", self.bench.output_dir)]
        for field, path in folders:  # a file there had failed a step after the run's calls
            if path.exists() and not path.is_dir():
                raise InputFileError(source, f"{path}: is a file, not a folder", field=field)
        # No two writers share a file: each would read the other's records as its own. On
        # resolved paths, so a relative, an absolute and a symlinked name of one file are one.
        # (Two of the prose run's recorders are the plan's recording_targets guard instead,
        # which a dry run shows.)
        writers = [
            ("judge.cache", self.judge.cache),
            *((f"record_cassette.{n}", p) for n, p in self.record_cassette.items()),
            *((f"bench.record_cassette.{n}", p) for n, p in self.bench.record_cassette.items()),
        ]
        first: dict[Path, str] = {}
        for field, path in writers:
            other = first.setdefault(real_path(path), field)
            both_prose = other.startswith("record_cassette.") and field.startswith(
                "record_cassette."
            )
            if other != field and not both_prose:
                raise InputFileError(
                    source,
                    f"{path}: {other} writes it too, and each would read the other's records "
                    "as its own; give each its own file",
                    field=field,
                )
        if self.judge.cache.is_dir():
            raise InputFileError(
                source,
                f"{self.judge.cache}: is a folder; name the cache's JSONL file",
                field="judge.cache",
            )
        return self

    def check_writable(self, source: Path | str, *, bench_only: bool = False) -> EvalsConfig:
        """The folders a real run writes into are writable (not for a dry run, which writes
        nothing, nor for loading the definitions): a read-only cache_dir or output_dir had
        failed a step after the run's calls; so had the judge cache, when a key is set.
        Recording targets are the plan's guard. `bench_only`: `evals-pipeline bench`, which
        writes no prose report and judges nothing."""
        live = any(s.is_live for s in [*self.specs.values(), *self.bench_specs.values()])
        folders: list[tuple[str, Path]] = [] if bench_only else [("output_dir", self.output_dir)]
        if self.asset_storage is None or live:  # the stored assets, the extraction cache
            folders.append(("cache_dir", self.cache_dir))
        if self.bench.corpora:
            folders.append(("bench.output_dir", self.bench.output_dir))
        for field, path in folders:
            if (why := not_writable(path)) is not None:
                raise InputFileError(source, f"{path}: {why}", field=field)
        # With a key the run judges, appending each verdict to the cache after its extractions.
        judging = not bench_only and os.environ.get(ANTHROPIC_KEY_ENV)
        if judging and (why := not_writable(self.judge.cache, in_place=True)) is not None:
            raise InputFileError(source, f"{self.judge.cache}: {why}", field="judge.cache")
        storage = self.asset_storage
        if storage is not None:
            why = storage_problem(storage, installed=True)
            if why is None and (local := local_storage_path(storage)) is not None:
                why = not_writable(local)
            if why is not None:
                shown = without_userinfo(storage)
                raise InputFileError(source, f"{shown}: {why}", field="asset_storage")
        return self

    def backends_in_use(self, *, bench: bool = True) -> list[tuple[str, BackendSpec]]:
        """Each backend a real run calls, by field: the bench's too when it has gold corpora
        (and `bench`: a run that includes the bench)."""
        fields = [(f"backends.{n}", s) for n, s in self.specs.items()]
        if bench and self.bench.corpora:
            fields += [(f"bench.backends.{n}", s) for n, s in self.bench_specs.items()]
        return fields

    def check_keys(
        self, source: Path | str, environ: Mapping[str, str] | None = None
    ) -> EvalsConfig:
        """A real run's anthropic backends (the bench's too, when it has gold corpora) have
        ANTHROPIC_API_KEY: each one's step would fail building its client, after the other
        backends' steps had made their calls. (Not when the definitions load: a run of other
        assets needs no key. In Dagster the prose run's `live_credentials` guard says so.)"""
        env = os.environ if environ is None else environ
        if env.get(ANTHROPIC_KEY_ENV):
            return self
        for field, spec in self.backends_in_use():
            if spec.kind == "anthropic":
                raise ConfigError(
                    f"{source} [{field}]: the anthropic backend needs {ANTHROPIC_KEY_ENV} to be set"
                )
        return self

    def paths_in_use(self) -> list[tuple[str, Path, bool]]:
        """Every file a run reads or records into, and every folder it reads from or keeps its
        caches in (True), by field: what an extra output (`--output`) must not overwrite."""
        uses: list[tuple[str, Path, bool]] = [("corpus", self.corpus, False)]
        uses += [("ontology", self.ontology, False)] if self.ontology else []
        uses += [("prices", self.prices, False)] if self.prices else []
        if self.claims_gate:
            uses += [("golden_dir", self.golden_dir, True)]
            uses += [("claims_baseline", self.claims_baseline_path, False)]
        uses += [("prose_baseline", self.prose_baseline, True)] if self.prose_baseline else []
        uses += [("judge.cache", self.judge.cache, False), ("cache_dir", self.cache_dir, True)]
        for prefix, backends in (("", self.backends), ("bench.", self.bench_backends)):
            for name, spec in backends.items():
                if (where := parse_backend_spec(spec).params.get("path")) is not None:
                    uses.append((f"{prefix}backends.{name}", Path(where), False))
        for prefix, record in (("", self.record_cassette), ("bench.", self.bench.record_cassette)):
            uses += [(f"{prefix}record_cassette.{n}", p, False) for n, p in record.items()]
        for name, path in self.bench.corpora.items():
            uses.append((f"bench.corpora.{name}", path, path.is_dir()))
        return uses

    def resolved_against(self, base: Path) -> EvalsConfig:
        """The same config with every relative path made absolute against `base`."""

        def fix(path: Path) -> Path:
            return path if path.is_absolute() else real_path(base / path)

        def fix_spec(spec: str) -> str:
            parsed = parse_backend_spec(spec, base)
            if parsed.kind in ("cassette", "oai-uds"):
                path = fix(Path(parsed.params["path"]))
                rest = [f"{k}={v}" for k, v in parsed.params.items() if k != "path"]
                spec = f"{parsed.kind}:" + ",".join([f"path={path}", *rest])
            return spec

        backends = {name: fix_spec(spec) for name, spec in self.backends.items()}
        return self.model_copy(
            update={
                "backends": backends,
                "corpus": fix(self.corpus),
                "ontology": fix(self.ontology) if self.ontology else None,
                "record_cassette": {k: fix(v) for k, v in self.record_cassette.items()},
                "output_dir": fix(self.output_dir),
                "cache_dir": fix(self.cache_dir),
                "golden_dir": fix(self.golden_dir),
                "claims_baseline": fix(self.claims_baseline) if self.claims_baseline else None,
                "prose_baseline": fix(self.prose_baseline) if self.prose_baseline else None,
                "prices": fix(self.prices) if self.prices else None,
                # A URL (s3://, memory://) stays as written; a plain path is a path like the rest.
                "asset_storage": (
                    str(fix(Path(self.asset_storage)))
                    if self.asset_storage and "://" not in self.asset_storage
                    else self.asset_storage
                ),
                "judge": self.judge.model_copy(update={"cache": fix(self.judge.cache)}),
                "bench": self.bench.model_copy(
                    update={
                        "backends": (
                            None
                            if self.bench.backends is None
                            else {k: fix_spec(v) for k, v in self.bench.backends.items()}
                        ),
                        "record_cassette": {
                            k: fix(v) for k, v in self.bench.record_cassette.items()
                        },
                        "corpora": {k: fix(v) for k, v in self.bench.corpora.items()},
                        "output_dir": fix(self.bench.output_dir),
                    }
                ),
            }
        )


def _check_backends(
    source: Path | str,
    backends: dict[str, str],
    record_cassette: dict[str, Path],
    prefix: str,
    what: str,
) -> None:
    """Every spec parses, and every recorded name is one of the backends (fields under
    `prefix`, e.g. `bench.backends.NAME`). A project file's relative paths are its folder's."""
    base = source.parent if isinstance(source, Path) else None
    for name, spec in backends.items():
        field = f"{prefix}backends.{name}"
        if (problem := check_name(name)) is not None:  # the key as written: `rules ` had passed
            raise InputFileError(source, f"backend {problem}", field=field)
        try:
            parse_backend_spec(spec, base)
        except BackendSpecError as exc:
            raise InputFileError(source, exc.problem, field=field) from None
    for name in record_cassette:
        if name not in backends:
            raise InputFileError(
                source, f"no {what} named {name!r}", field=f"{prefix}record_cassette.{name}"
            )


def load_config(path: Path | str) -> EvalsConfig:
    path = real_path(path)
    data = load_yaml(path)
    if not isinstance(data, dict):
        raise InputFileError(path, "a config file must be a YAML mapping")
    config = validate_file_model(EvalsConfig, data, path).check(path)
    named = "golden_dir" in config.model_fields_set
    config = config.resolved_against(path.parent)
    if named and config.claims_gate and not config.golden_dir.is_dir():
        raise InputFileError(
            path,
            f"{config.golden_dir}: no such folder (claims_gate: false runs without the claim gate)",
            field="golden_dir",
        )
    return config
