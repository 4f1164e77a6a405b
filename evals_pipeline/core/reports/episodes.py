"""A prose run's per-chunk counts, as a run report `compare` reads (`<mode>/episodes.json`).

A mode report pools counts over chunks: enough to rank the backends of one run, not to say
whether a prompt or model change made one of them worse. That takes two runs over the same
chunks, paired chunk by chunk with a bootstrap interval, which is what `compare` does with the
bench's run reports. This builds the same shape for a prose run: a row per candidate backend,
an episode per chunk the reference extracted, its strict counts against the reference on each
axis (and its calls' tokens and requests).

A chunk pairs across two runs only where its `case_digest` agrees: the chunk as extraction saw
it and the reference's keys for it. Counts against another reference output (another model, a
re-recorded reference cassette, an edited label) are against another yardstick, and are not
paired; a candidate's prompts, model and cassette are what a comparison is for, and are not in
the digest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from ..models import Episode
from ..scoring.strict import AXES, ChunkCounts, ChunkKeys, chunk_counts, pool_counts, table_keys

EPISODES_FILE = "episodes.json"
# What `chunk_digest` hashes, and how: a new name with every change to it (pydantic's dump of
# an episode included), so that `compare` says why two runs' digests all differ.
DIGEST_SCHEME = "prose-1"
# Each strict axis's count names, as `compare`'s rate tables name them.
_COUNT_NAMES = {axis: (f"{axis}_tp", f"{axis}_produced", f"{axis}_expected") for axis in AXES}


def chunk_digest(episode: Episode, reference_keys: ChunkKeys) -> str:
    """SHA-256 of the chunk as extraction sees it and of the reference's keys for it."""
    # An axis's keys are all strings or all tuples of strings: they sort, and dump as lists.
    keys = [sorted(reference_keys[axis].items()) for axis in sorted(reference_keys)]
    digest = hashlib.sha256(episode.model_dump_json().encode())
    digest.update(b"\0" + json.dumps(keys, ensure_ascii=False).encode())
    return digest.hexdigest()


def episodes_json(run: dict[str, Any]) -> str:
    """A run report's JSON text: compact, as `compare` reads it (one episode per chunk and
    backend: indented, at 10,000 chunks the file was 70% larger and took 4x as long)."""
    return json.dumps(run, sort_keys=True, allow_nan=False, ensure_ascii=False) + "\n"


def _calls(table: pd.DataFrame) -> dict[str, tuple[bool, int, int]]:
    """chunk -> (extracted, tokens, requests) from an extraction table."""
    columns = ("chunk", "ok", "input_tokens", "output_tokens", "requests")
    rows = zip(*(table[name].tolist() for name in columns), strict=True)
    return {str(c): (bool(ok), int(i) + int(o), int(r)) for c, ok, i, o, r in rows}


def _episode(
    chunk: str,
    mode: str,
    digest: str | None,
    counts: ChunkCounts,
    calls: tuple[bool, int, int] | None,
) -> dict[str, Any]:
    """One chunk's episode; a chunk absent from the table counts as failed with no calls."""
    extracted, tokens, requests = calls or (False, 0, 0)
    named: dict[str, int] = {}
    for axis, (tp_name, produced_name, expected_name) in _COUNT_NAMES.items():
        tp, fp, fn = counts[axis]
        named[tp_name], named[produced_name], named[expected_name] = tp, tp + fp, tp + fn
    episode: dict[str, Any] = {"case": chunk, "source_id": mode}
    if digest is not None:
        episode["case_digest"] = digest
    episode["status"] = "ok" if extracted else "error"
    episode["counts"] = {**named, "tokens": tokens, "requests": requests}
    return episode


def compare_tables(
    tables: Mapping[str, pd.DataFrame],
    reference: str,
    *,
    mode: str,
    corpus_digest: str,
    episodes: Mapping[str, Episode],
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Every candidate's extraction table against the reference's: (backend -> its pooled
    strict scores, as the mode report shows them; the run report of per-chunk counts). The
    counts are taken once and pooled, so the two agree by construction. Chunks the reference
    failed on have nothing to count: the scores skip them, and they are no episode."""
    ref = table_keys(tables[reference])
    skipped = sum(1 for keys in ref.values() if keys is None)
    # A chunk the corpus no longer holds (tables from before an edit) gets no digest: it pairs
    # only by name (`--pair-by-name`).
    digests = {
        c: chunk_digest(episodes[c], keys) if c in episodes else None
        for c, keys in ref.items()
        if keys is not None
    }
    strict: dict[str, dict[str, Any]] = {}
    rows: dict[str, Any] = {}
    for name, table in sorted(tables.items()):
        if name == reference:
            continue
        counts = chunk_counts(table_keys(table), ref)
        strict[name] = pool_counts(counts, skipped).to_dict()
        calls = _calls(table)
        rows[name] = {
            "episodes": [
                _episode(chunk, mode, digests[chunk], chunk_axes, calls.get(chunk))
                for chunk, chunk_axes in counts.items()
            ]
        }
    run = {
        "kind": "prose",
        "ontology_mode": mode,
        "reference": reference,
        "corpus_digest": corpus_digest,
        "case_digest_scheme": DIGEST_SCHEME,
        "rows": rows,
    }
    return strict, run
