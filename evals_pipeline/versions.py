"""Code versions of the assets that read files Dagster does not see, so the UI's staleness
(and "Materialize stale") follows an edit of the corpus, the ontology, a prompt, a cassette,
the prices or the golden set.

Dagster marks an asset stale when its code version changes, and everything downstream with it.
The inputs here are files, not code: each version is a digest of what the asset reads, taken
when the definitions load (a new CLI process, or "Reload definitions" in `dagster dev`). A
version is per asset, not per partition: one backend's edited cassette marks every extraction
partition stale, which over-reports, never under-reports. Re-materialising a stale partition
whose inputs did not change for it still makes no call: the caches answer (see the README).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from .core import prompts
from .core.config import EvalsConfig
from .core.digests import contents_key

# The extraction prompts are code, but a template edit changes every extract key.
_PROMPTS = Path(prompts.__file__)


def _version(parts: Iterable[object]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(repr(part).encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def _files(paths: Iterable[Path | str | None]) -> list[object]:
    """Each path with its contents' digests (None where it is missing: the run says why)."""
    return [(str(p), contents_key(p)) for p in paths if p is not None]


def _cassettes(specs: dict[str, str]) -> list[object]:
    """Each backend's spec, and the digest of the cassette it replays. Not of a cassette it
    records into: the step writes that itself, and each recording run had marked its own
    extractions stale."""
    from .core.extractors.specs import parse_backend_spec

    out: list[object] = []
    for name, raw in sorted(specs.items()):
        out += [name, raw, *_files([parse_backend_spec(raw).cassette_path])]
    return out


def corpus_version(config: EvalsConfig) -> str:
    """The chunks and their extract keys: the corpus file, the ontology, the prompts."""
    return _version(
        [*_files([config.corpus, config.ontology, _PROMPTS]), config.limit, config.budgets]
    )


def extraction_version(config: EvalsConfig) -> str:
    """What answers the extractions: every backend's spec and cassette."""
    return _version(_cassettes(config.backends))


def gold_version(config: EvalsConfig) -> str:
    """The gold corpora, their cases' schemas included."""
    from .core.bench.gold import gold_inputs

    paths = [p for _, path in sorted(config.bench.corpora.items()) for p in gold_inputs(path)]
    return _version([config.bench.split, *_files(paths)])


def bench_version(config: EvalsConfig) -> str:
    """What answers the bench: its backends' specs and cassettes, and the prompts."""
    cassettes = _cassettes(config.bench_backends)
    return _version([*cassettes, *_files([_PROMPTS])])


def golden_version(config: EvalsConfig) -> str:
    """The golden set: its examples, their recordings and the baseline, and the claim prompt
    (an edit makes every recording stale)."""
    from .core.claims.prompt import prompt_fingerprint

    paths = [config.golden_dir, config.claims_baseline_path]
    return _version([*_files(paths), prompt_fingerprint()])


def scores_version(config: EvalsConfig) -> str:
    """The prices a cost is computed at."""
    return _version(_files([config.prices]))
