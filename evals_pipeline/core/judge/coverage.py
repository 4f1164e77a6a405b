"""How much of a run's judging the judge cache already covers, computed without a call.

Judge prompts embed the extractions, so they can be rendered ahead of a run only where the
extractions can be had for free: cassette replays, the oracle, and the extraction cache. Prompts
over a live backend's not-yet-made calls are counted as unknown. A chunk a cassette or the oracle
cannot answer fails in the run too, and judging makes no call for a failed extraction (nor for
an axis where a side has no item: nothing can match): those count as `no_call`, so the five
counts add up to the plan's `planned_calls`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

from pydantic import BaseModel

from ..cassettes.cache import extraction_cache_path
from ..cassettes.replay import ReplayingExtractor
from ..cassettes.store import load_cassette
from ..config import EvalsConfig
from ..errors import EvalsError
from ..extractors.base import Extractor
from ..extractors.oracle import OracleExtractor
from ..models import Episode, ExtractionResult, OntologyMode
from ..ontology import Ontology
from ..options import ExtractOptions
from ..runner import extract_all, run_sync
from .cache import JudgeCache, judge_key
from .pairwise import WinnerVerdict, slot_orders
from .prompts import AXES, axis_items, render_pairwise, render_reference
from .reference import MatchesVerdict


def _free_extractor(config: EvalsConfig, name: str, expected: Mapping[str, ExtractionResult],
                    corpus_digest: str) -> Extractor:  # fmt: skip
    spec = config.specs[name]
    if spec.kind == "oracle":
        return OracleExtractor(expected)
    record = config.record_cassette.get(name)
    if record is not None:  # a recorded backend is served by its own cassette, not the cache
        return ReplayingExtractor(
            load_cassette(record, consume=False, missing_ok=True, locked=True, skip_torn_tail=True)
        )
    if spec.kind == "cassette" and spec.cassette_path is not None:
        return ReplayingExtractor(load_cassette(spec.cassette_path, consume=False))
    path = extraction_cache_path(
        config.cache_dir,
        name,
        spec,
        corpus_digest=corpus_digest,
        budgets=config.budgets,
    )
    return ReplayingExtractor(
        load_cassette(path, consume=False, missing_ok=True, skip_torn_tail=True)
    )


def _free_results(
    extractor: Extractor, episodes: Sequence[Episode], options: ExtractOptions
) -> dict[str, ExtractionResult | None]:
    runs = run_sync(lambda: extract_all(extractor, episodes, options, tolerate_misses=True))
    return {r.episode.name: r.outcome.result if r.outcome else None for r in runs}


def judge_cache_coverage(
    config: EvalsConfig,
    episodes: Sequence[Episode],
    ontology: Ontology | None,
    expected: Mapping[str, ExtractionResult],
    corpus_digest: str,
    modes: Sequence[OntologyMode] | None = None,
) -> dict[str, Any]:
    """{"cached": n, "uncached": n, "repeated": n, "unknown": n, "no_call": n} over the judge
    calls the run would plan (in `modes`; default, every mode of the run). `uncached` counts
    distinct prompts: an identical one (two backends that answered a chunk alike, two modes'
    equal extractions) is `repeated`, as the run answers it from the cache the first filled."""
    try:
        cache = JudgeCache(config.judge.cache)
    except EvalsError as exc:
        return {"error": str(exc)}
    counts = {"cached": 0, "uncached": 0, "repeated": 0, "unknown": 0, "no_call": 0}
    made: set[str] = set()  # keys of the calls to make: a repeat of one is answered by it
    bodies = {e.name: e.body for e in episodes}
    model = config.judge.model
    names = sorted(config.backends)
    # Free sources: where these have no answer, the run's extraction fails too (not unknown).
    settled = {n for n in names if config.specs[n].kind in ("oracle", "cassette")}

    def missing(*pairs: tuple[str, ExtractionResult | None]) -> str:
        """Where a side has no result: "unknown" until a live call, or "no_call" (it fails)."""
        absent = [name for name, result in pairs if result is None]
        return "no_call" if all(name in settled for name in absent) else "unknown"

    def count(prompt: tuple[str, str, str], shape: type[BaseModel]) -> None:
        """Cached only where the entry is a verdict: the client asks again for one that is not
        (an older cache may hold a malformed reply)."""
        key = judge_key(*prompt, model)
        if cache.verdict(key, shape) is not None:
            counts["cached"] += 1
        elif key in made:  # the run makes it once and answers the rest from its cache
            counts["repeated"] += 1
        else:
            made.add(key)
            counts["uncached"] += 1

    for mode in config.active_modes if modes is None else modes:
        options = ExtractOptions.for_mode(
            mode, ontology, config.max_tokens_entities, config.max_tokens_edges
        )
        results: dict[str, dict[str, ExtractionResult | None]] = {}
        for name in names:
            try:
                extractor = _free_extractor(config, name, expected, corpus_digest)
            except EvalsError:
                extractor = None  # a corrupt cassette: the guards report it
            results[name] = (
                _free_results(extractor, episodes, options) if extractor is not None else {}
            )
        for chunk in bodies:
            if config.judge.mode in ("reference", "both"):
                ref = results[config.reference].get(chunk)
                for name in names:
                    if name == config.reference:
                        continue
                    cand = results[name].get(chunk)
                    if ref is None or cand is None:
                        counts[missing((config.reference, ref), (name, cand))] += len(AXES)
                        continue
                    for axis in AXES:
                        if axis_items(cand, axis) and axis_items(ref, axis):
                            count(render_reference(bodies[chunk], axis, cand, ref), MatchesVerdict)
                        else:
                            counts["no_call"] += 1
            if config.judge.mode in ("pairwise", "both"):
                for left, right in combinations(names, 2):
                    lr, rr = results[left].get(chunk), results[right].get(chunk)
                    if lr is None or rr is None:
                        counts[missing((left, lr), (right, rr))] += 2 * len(AXES)
                        continue
                    by_name = {left: lr, right: rr}
                    for axis in AXES:
                        for a, b in slot_orders(chunk, left, right):
                            count(
                                render_pairwise(bodies[chunk], axis, by_name[a], by_name[b]),
                                WinnerVerdict,
                            )
    return counts
