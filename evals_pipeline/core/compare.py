"""Reading run B against run A: pooled rates, paired bootstrap intervals, what moved.

A single run's rate says little about a change; two runs over the same episodes do, if the
comparison pairs each episode with itself and asks whether the corpus can tell them apart. This
module reads two run reports, pairs their episodes, and reports per rate A, B, B − A over the
pooled counts with a 95% paired bootstrap interval (`statistics_bootstrap`), per-episode rises
and falls, status changes and the largest drops and rises.

Run report (the JSON each benchmark run writes, and each prose mode report's `episodes.json`
beside it, a row per candidate backend and an episode per chunk; the writers produce exactly
this)::

    {
      "kind": "prose",                    # optional; a prose run's episodes.json says so
      "corpus_version": "1.1.0",          # optional; reports of different versions still pair
      "corpus_digest": "<sha256>",        # optional; the whole corpus, informational
      "split": "dev",                     # optional
      "reference": "oracle",              # optional; a prose run's yardstick backend
      "case_digest_scheme": "prose-1",    # optional; how its case digests were taken
      "rows": {                           # one row per oracle / model, at least one
        "<row name>": {
          "episodes": [
            {
              "case": "direction/ships",  # family/instance
              "source_id": "ep-1",        # the episode within the case
              "case_digest": "<sha256>",  # content of the case; absent before corpus 1.1
              "status": "ok",             # "ok" | "error" (any string is tabulated)
              "counts": {"entities_tp": 3, "entities_produced": 4, "entities_expected": 3}
            }
          ]
        }
      }
    }

Fields not named here are ignored. `counts` maps count names (those of `RATES`, `WEBNLG_RATES`
and `PROSE_RATES`; `episodes`, the denominator of the per-episode rates, is 1 for every episode and
never carried) to non-negative integers. The writer should write every count it knows for every
episode, errored ones included (nothing produced, but everything still expected): a count an
episode lacks is read as 0, and a rate is computed for a run only when some paired episode of
that run carries all its counts (pooled, its numerator may not exceed its denominator).
Where its denominator sums to 0 in a run (nothing to count), that run's `rate` is None, and the
rate's delta, interval, rises and falls are None: undefined, not 0.

Pairing: on (case, source_id), and only where both sides carry the same `case_digest`, so that a
case whose content changed between corpus versions is not compared with its old self. Reports
from before case digests have none; `pair_by_name=True` pairs those on (case, source_id)
alone, which asserts that their cases did not change (where both digests are there and differ,
the case changed, and it is not paired). Everything not paired is listed; with no pair at all the
comparison is refused (`ComparisonRefused`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import EvalsError, InputFileError
from .files import load_json
from .statistics_bootstrap import paired_bootstrap_deltas, pooled_rate

# Rate name -> (numerator, denominator). Each side is a count name, or several joined by "+".
# Every pooled rate a cases bench report shows: the bench's report and `compare` read this table.
RATES: dict[str, tuple[str, str]] = {
    "entity_precision": ("entities_tp", "entities_produced"),
    "entity_recall": ("entities_tp", "entities_expected"),
    "edge_precision": ("edges_tp", "edges_produced"),
    "edge_recall": ("edges_tp", "edges_expected"),
    "property_precision": ("properties_tp", "properties_produced"),
    "property_recall": ("properties_tp", "properties_expected"),
    "direction": ("edges_matched", "edges_matched+edges_reversed"),
    "conformance": ("items_conformant", "items_emitted"),
    "ungrounded": ("quotes_ungrounded", "items_emitted"),
    "forbidden": ("forbidden_written", "forbidden_total"),
    "conformance_final": ("final_items_conformant", "final_items_emitted"),
    "type_hallucination": ("unknown_type", "vertices_emitted"),
    "relation_hallucination": ("undeclared_edge", "edges_emitted"),
    "property_hallucination": ("undeclared_property", "properties_emitted"),
    "unfaithful": ("values_unfaithful", "properties_emitted"),
    "span": ("span_overlap", "items_matched"),
    "mention": ("mention_agree", "entities_tp"),
    "seed_recall": ("seeds_expected_found", "expected_types"),
    "closure_recall": ("slice_expected_found", "expected_types"),
    "recast_added": ("recast_added", "recast_vertices"),
    "recast_duplicated": ("recast_duplicated", "recast_vertices"),
    "tokens_per_episode": ("tokens", "episodes"),
    "requests_per_episode": ("requests", "episodes"),
}
# A WebNLG run's rates (exact triples against its gold, `bench.gold.run_webnlg`): its report
# shows them as it scores them, and `compare` reads them with the bench's.
WEBNLG_RATES: dict[str, tuple[str, str]] = {
    "triple_precision": ("triples_tp", "triples_produced"),
    "triple_recall": ("triples_tp", "triples_expected"),
}
# A prose run's rates beyond the bench's entity and edge ones: its strict axes against the
# reference (`reports.episodes`, the `<mode>/episodes.json` its report writes beside it).
PROSE_RATES: dict[str, tuple[str, str]] = {
    "typed_entity_precision": ("types_tp", "types_produced"),
    "typed_entity_recall": ("types_tp", "types_expected"),
    "summary_precision": ("summaries_tp", "summaries_produced"),
    "summary_recall": ("summaries_tp", "summaries_expected"),
}
_COMPARED_RATES: dict[str, tuple[str, str]] = {**RATES, **WEBNLG_RATES, **PROSE_RATES}
# Rates where a fall is an improvement; rendering says so.
LOWER_IS_BETTER: frozenset[str] = frozenset(
    {
        "ungrounded",
        "forbidden",
        "type_hallucination",
        "relation_hallucination",
        "property_hallucination",
        "unfaithful",
        "recast_added",
        "recast_duplicated",
        "tokens_per_episode",
        "requests_per_episode",
    }
)

# (tp, produced, expected) groups whose sum gives the per-episode F1 used to rank changes.
_F1_GROUPS: tuple[tuple[str, str, str], ...] = (
    ("entities_tp", "entities_produced", "entities_expected"),
    ("edges_tp", "edges_produced", "edges_expected"),
    ("triples_tp", "triples_produced", "triples_expected"),
)
_F1_LABELS = {"entities_tp": "entity", "edges_tp": "edge", "triples_tp": "triple"}
TOP_CHANGES = 5
# Counts are summed over episodes as 64-bit integers: a count past 2**31 - 1 is no count one
# episode made, and below it 2**32 episodes sum without overflowing.
MAX_COUNT = 2**31 - 1
CONFIDENCE = 0.95

Key = tuple[str, str]
# The verdicts a gate on B fails on: worse, or counts A has and B lacks.
B_WORSE = "B worse"
NOT_IN_B = "not in run b"
# The lists of `unpaired` that hold episodes of A left out of the comparison.
UNCOMPARED_OF_A = ("only_a", "case_changed", "no_case_digest")
# A run report's optional top-level strings, kept in the comparison's `a` and `b`.
_RUN_FIELDS = (
    "kind",
    "corpus_version",
    "corpus_digest",
    "split",
    "reference",
    "case_digest_scheme",
)


class ComparisonRefused(EvalsError):
    """The two runs share no comparable episode, so no difference between them can be measured."""


class RunReportError(EvalsError):
    """A run report does not have the documented shape, or the row asked for is not in it."""


@dataclass(frozen=True)
class _Episode:
    case: str
    source_id: str
    case_digest: str | None
    status: str
    counts: Mapping[str, int]

    @property
    def key(self) -> Key:
        return (self.case, self.source_id)


def load_run_report(path: Path | str) -> dict[str, Any]:
    """Read a run report file; unreadable or non-JSON content is an InputFileError."""
    path = Path(path)
    data = load_json(path)
    if not isinstance(data, dict):
        raise InputFileError(path, "a run report must be a JSON object")
    return data


def check_run_report(report: Mapping[str, Any], run: str = "a") -> None:
    """Every row of `report` has the documented shape (RunReportError otherwise): what
    comparing it would check, for a file read long before it is compared (a CI baseline)."""
    rows = report.get("rows")
    if not isinstance(rows, Mapping):
        raise RunReportError(f"run {run}: 'rows' must be an object of rows")
    for field in _RUN_FIELDS:
        _optional_str(report, field, run)
    for row, body in rows.items():
        episodes = list(_read_episodes(body, row, run).values())
        for rate, (num_side, den_side) in _COMPARED_RATES.items():
            nums, dens = _names(num_side), _names(den_side)
            if _EPISODES not in dens and _carried(episodes, nums + dens):  # as comparing does
                where = f"run {run}: rows.{row}"
                _refuse_pooled_above_one(
                    where, rate, _column(episodes, nums), _column(episodes, dens)
                )


def _refuse_pooled_above_one(where: str, rate: str, num: np.ndarray, den: np.ndarray) -> None:
    """Each episode's counts are checked where it carries both sides of a rate; episodes
    carrying only the numerator (the denominator read as 0) would pool it above 1."""
    num_side, den_side = _COMPARED_RATES[rate]
    if num.sum() > den.sum():
        raise RunReportError(
            f"{where}: pooled {num_side} ({num.sum()}) exceeds {den_side} ({den.sum()}), a "
            f"{rate} above 1: episodes carry one side of it without the other"
        )


def _names(side: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in side.split("+"))


def _optional_str(report: Mapping[str, Any], field: str, run: str) -> str | None:
    value = report.get(field)
    if value is not None and not isinstance(value, str):
        raise RunReportError(f"run {run}: {field} must be a string")
    return value


def _select_row(report: Mapping[str, Any], row: str | None, run: str) -> tuple[str, Any]:
    rows = report.get("rows") if isinstance(report, Mapping) else None
    if rows is None and isinstance(report, Mapping) and "backends" in report:
        raise RunReportError(  # what a user comparing two prose runs reaches for first
            f"run {run} is a prose mode report (reports/<mode>/report.json), which pools its "
            "chunks; compare its episodes.json beside it (the same run, chunk by chunk), or a "
            "bench run report (bench-results/<gold>/<stamp>.json)"
        )
    if isinstance(rows, Mapping) and not rows and report.get("kind") == "prose":
        raise RunReportError(  # a run of the reference alone: nothing was scored against it
            f"run {run} is a prose run with no candidate backend beside its reference "
            f"{report.get('reference')!r}: it holds no counts to compare"
        )
    if not isinstance(rows, Mapping) or not rows:
        raise RunReportError(f"run {run}: 'rows' must be a non-empty object of rows")
    names = sorted(rows)
    if row is None:
        if len(names) > 1:
            raise RunReportError(
                f"run {run} holds {len(names)} rows ({', '.join(names)}); "
                f"pick one with row_{run} (--row-{run})"
            )
        row = names[0]
    elif row not in rows:
        raise RunReportError(f"run {run} has no row {row!r} (rows: {', '.join(names)})")
    return row, rows[row]


def _read_episodes(body: Any, row: str, run: str) -> dict[Key, _Episode]:
    where = f"run {run}: rows.{row}"
    episodes = body.get("episodes") if isinstance(body, Mapping) else None
    if not isinstance(episodes, list):
        raise RunReportError(f"{where}.episodes must be a list")
    out: dict[Key, _Episode] = {}
    for i, ep in enumerate(episodes):
        at = f"{where}.episodes[{i}]"
        if not isinstance(ep, Mapping):
            raise RunReportError(f"{at} must be an object")
        for field in ("case", "source_id", "status"):
            if not isinstance(ep.get(field), str) or not ep[field]:
                raise RunReportError(f"{at}.{field} must be a non-empty string")
        digest = ep.get("case_digest")
        if digest is not None and not isinstance(digest, str):
            raise RunReportError(f"{at}.case_digest must be a string")
        counts = ep.get("counts", {})
        if not isinstance(counts, Mapping):
            raise RunReportError(f"{at}.counts must be an object")
        for name, value in counts.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise RunReportError(f"{at}.counts.{name} must be a non-negative integer")
            if value > MAX_COUNT:
                raise RunReportError(f"{at}.counts.{name} is {value}: too large to be a count")
        _check_rates_within_one(counts, at)
        episode = _Episode(ep["case"], ep["source_id"], digest or None, ep["status"], counts)
        if episode.key in out:
            raise RunReportError(f"{at}: episode {episode.key} appears twice in the row")
        out[episode.key] = episode
    return out


def _check_rates_within_one(counts: Mapping[str, int], at: str) -> None:
    """A rate's numerator counts a part of its denominator (matches among those produced,
    quotes among items emitted): more than all of it is a report that contradicts itself, and
    would compare as a rate above 1. Checked where the episode carries both sides."""
    for rate, (num_side, den_side) in _COMPARED_RATES.items():
        nums, dens = _names(num_side), _names(den_side)
        if _EPISODES in dens or not all(n in counts for n in (*nums, *dens)):
            continue
        num, den = sum(counts[n] for n in nums), sum(counts[n] for n in dens)
        if num > den:
            raise RunReportError(
                f"{at}.counts: {num_side} ({num}) exceeds {den_side} ({den}), a {rate} "
                "above 1: the counts contradict each other"
            )


def _key_dict(key: Key) -> dict[str, str]:
    return {"case": key[0], "source_id": key[1]}


def _pair(
    a: dict[Key, _Episode], b: dict[Key, _Episode], pair_by_name: bool
) -> tuple[list[tuple[_Episode, _Episode]], dict[str, list[Key]]]:
    pairs: list[tuple[_Episode, _Episode]] = []
    unpaired: dict[str, list[Key]] = {
        "only_a": sorted(set(a) - set(b)),
        "only_b": sorted(set(b) - set(a)),
        "case_changed": [],
        "no_case_digest": [],
    }
    for key in sorted(set(a) & set(b)):
        ea, eb = a[key], b[key]
        if ea.case_digest is None or eb.case_digest is None:
            # Only the flag pairs these: it asserts a digestless report's cases did not change.
            if pair_by_name:
                pairs.append((ea, eb))
            else:
                unpaired["no_case_digest"].append(key)
        elif ea.case_digest != eb.case_digest:
            # Whatever the flag: both digests say the case changed (the flag had paired these).
            unpaired["case_changed"].append(key)
        else:
            pairs.append((ea, eb))
    return pairs, unpaired


def _refusal(
    a: int, b: int, unpaired: Mapping[str, Sequence[Key]], runs: Mapping[str, Mapping[str, Any]]
) -> ComparisonRefused:
    for run, count in (("a", a), ("b", b)):
        if not count:
            why = (  # a prose row is empty where its reference extracted no chunk
                " (a prose run has none where its reference extracted no chunk: its report "
                "says why)"
                if runs[run]["kind"] == "prose"
                else ""
            )
            return ComparisonRefused(
                f"run {run.upper()} holds no episode in row {runs[run]['row']!r}{why}"
            )
    changed, undigested = len(unpaired["case_changed"]), len(unpaired["no_case_digest"])
    if not changed and not undigested:
        return ComparisonRefused(
            f"no episode of run A ({a} episodes) has a counterpart in run B ({b} episodes) "
            "by case and source id; the runs measure different episodes"
        )
    parts = []
    if changed:
        yardsticks = _yardsticks_differ(runs)  # what changes the digests of unchanged cases
        parts.append(
            f"{changed} share case and source id but the case content changed"
            + (f" ({'; '.join(yardsticks)})" if yardsticks else "")
        )
    if undigested:
        parts.append(
            f"{undigested} share case and source id but a report carries no case digest (a "
            "report from before case digests); pair_by_name=True pairs them, asserting the "
            "cases did not change"
        )
    return ComparisonRefused("no episodes in common with equal case digests: " + "; ".join(parts))


# Fields of a run whose difference changes the case digests: named where they differ.
_YARDSTICKS = {"reference": "references", "case_digest_scheme": "case digest schemes"}


def _yardsticks_differ(runs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Each of `_YARDSTICKS` both runs name, and name differently (one that does not name it:
    unknown), said as a clause."""
    return [
        f"the runs' {what} differ ({a} vs {b})"
        for field, what in _YARDSTICKS.items()
        if (a := runs["a"][field]) is not None and (b := runs["b"][field]) is not None and a != b
    ]


# A count every episode has without carrying it: itself (per-episode rates such as tokens).
_EPISODES = "episodes"


def _carried(episodes: Sequence[_Episode], names: Sequence[str]) -> bool:
    """Whether some episode carries every one of `names`: a run measured a rate only then (the
    union over episodes had counted a numerator from one and a denominator from another)."""
    wanted = [n for n in names if n != _EPISODES]
    return any(all(n in ep.counts for n in wanted) for ep in episodes)


def _count(ep: _Episode, name: str) -> int:
    return 1 if name == _EPISODES else ep.counts.get(name, 0)


def _column(episodes: Sequence[_Episode], names: Sequence[str]) -> np.ndarray:
    return np.array([sum(_count(ep, n) for n in names) for ep in episodes], dtype=np.int64)


def _episode_f1(
    episodes: Sequence[_Episode], groups: Sequence[tuple[str, str, str]]
) -> list[float]:
    """Per-episode F1 over the summed groups; nothing produced or expected scores 1.0."""
    out = []
    for ep in episodes:
        tp = sum(ep.counts.get(g[0], 0) for g in groups)
        den = sum(ep.counts.get(g[1], 0) + ep.counts.get(g[2], 0) for g in groups)
        out.append(2 * tp / den if den else 1.0)
    return out


def _episode_rate(episodes: Sequence[_Episode], rate: str) -> list[float]:
    num, den = (_names(side) for side in _COMPARED_RATES[rate])
    nums, dens = _column(episodes, num), _column(episodes, den)
    return [float(n) / float(d) if d else 0.0 for n, d in zip(nums, dens, strict=True)]


def compare_runs(
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    *,
    row_a: str | None = None,
    row_b: str | None = None,
    pair_by_name: bool = False,
    resamples: int = 10_000,
    seed: int = 0,
) -> dict[str, Any]:
    """Read run B against run A (both run reports, as documented above); JSON-ready result."""
    name_a, body_a = _select_row(a, row_a, "a")
    name_b, body_b = _select_row(b, row_b, "b")
    eps_a, eps_b = _read_episodes(body_a, name_a, "a"), _read_episodes(body_b, name_b, "b")
    runs = {
        run: {
            "row": row,
            **{field: _optional_str(report, field, run) for field in _RUN_FIELDS},
        }
        for run, report, row in (("a", a, name_a), ("b", b, name_b))
    }
    pairs, unpaired = _pair(eps_a, eps_b, pair_by_name)
    if not pairs:
        raise _refusal(len(eps_a), len(eps_b), unpaired, runs)
    side_a = [p[0] for p in pairs]
    side_b = [p[1] for p in pairs]

    notes: list[str] = []
    by_name = sum(1 for ea, eb in pairs if ea.case_digest is None or eb.case_digest is None)
    for differ in _yardsticks_differ(runs):
        if by_name:  # nothing vouches for these: counts against two yardsticks
            notes.append(
                f"{differ}, and {by_name} of the pairs are paired by name alone "
                "(pair_by_name): their counts may be against different yardsticks"
            )
        if by_name < len(pairs):
            notes.append(
                f"{differ}, but {len(pairs) - by_name} paired cases' digests agree all "
                "the same, so their counts are compared"
            )
    for field in ("corpus_version", "split"):
        if runs["a"][field] != runs["b"][field]:
            notes.append(
                f"{field} differs ({runs['a'][field]} vs {runs['b'][field]}); only cases whose "
                "content is unchanged are paired"
                if not pair_by_name
                else f"{field} differs ({runs['a'][field]} vs {runs['b'][field]}); paired by "
                "name, which asserts the cases did not change"
            )

    rates: list[dict[str, Any]] = []
    both: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    for rate, (num_side, den_side) in _COMPARED_RATES.items():
        needed = _names(num_side) + _names(den_side)
        in_a, in_b = _carried(side_a, needed), _carried(side_b, needed)
        if not in_a and not in_b:
            continue
        num_names, den_names = _names(num_side), _names(den_side)
        na, da = _column(side_a, num_names), _column(side_a, den_names)
        nb, db = _column(side_b, num_names), _column(side_b, den_names)
        for run, carried, num, den in (("a", in_a, na, da), ("b", in_b, nb, db)):
            if carried and _EPISODES not in den_names:
                _refuse_pooled_above_one(f"run {run}", rate, num, den)
        entry: dict[str, Any] = {
            "rate": rate,
            "numerator": num_side,
            "denominator": den_side,
            "lower_is_better": rate in LOWER_IS_BETTER,
            "a": _side_rate(na, da) if in_a else None,
            "b": _side_rate(nb, db) if in_b else None,
            "delta": None,
            "low": None,
            "high": None,
            "rises": None,
            "falls": None,
        }
        if in_a and in_b and (not da.sum() or not db.sum()):
            # A rate with nothing to count in a run (e.g. no property expected) is undefined
            # there, not 0: no delta, no interval.
            empty = " and ".join(side for side, den in (("a", da), ("b", db)) if not den.sum())
            notes.append(f"{rate}: undefined in run {empty} (no {den_side} counted)")
        elif in_a and in_b:
            # Per episode, only where both rates are defined; cross-multiplied to stay exact.
            defined = (da > 0) & (db > 0)
            diff = nb * da - na * db
            entry["rises"] = int(np.sum(defined & (diff > 0)))
            entry["falls"] = int(np.sum(defined & (diff < 0)))
            both.append((len(rates), na, da, nb, db))
        else:
            missing = "a" if not in_a else "b"
            notes.append(f"{rate}: run {missing} carries no {num_side} / {den_side} counts")
        rates.append(entry)

    if both:
        delta, low, high = paired_bootstrap_deltas(
            *(np.stack([item[k] for item in both], axis=1) for k in range(1, 5)),
            resamples=resamples,
            seed=seed,
            confidence=CONFIDENCE,
        )
        for j, (i, *_rest) in enumerate(both):
            rates[i]["delta"] = float(delta[j])
            if math.isnan(low[j]):  # no resample drew a counted episode in both runs
                notes.append(f"{rates[i]['rate']}: no bootstrap resample had it in both runs")
                continue
            rates[i]["low"] = float(low[j])
            rates[i]["high"] = float(high[j])
    for entry in rates:
        entry["verdict"] = verdict(entry)

    status = Counter((ea.status, eb.status) for ea, eb in pairs)
    for run, errored in (
        ("b", sum(n for (f, t), n in status.items() if t != "ok" and f == "ok")),
        ("a", sum(n for (f, t), n in status.items() if f != "ok" and t == "ok")),
    ):
        if errored:
            notes.append(
                f"{errored} paired episode(s) ok in the other run are not ok in run {run}: an "
                "episode that errored wrote nothing, so on lower-is-better rates it looks clean "
                "(forbidden) or drops out; read them beside the status changes"
            )
    status_changes = [
        {"from": f, "to": t, "episodes": n, "changed": f != t}
        for (f, t), n in sorted(status.items())
    ]

    groups = [g for g in _F1_GROUPS if _carried(side_a, g) and _carried(side_b, g)]
    ranking: str | None
    if groups:
        ranking = "+".join(_F1_LABELS[g[0]] for g in groups) + " F1"
        score_a, score_b = _episode_f1(side_a, groups), _episode_f1(side_b, groups)
    elif both:
        # A rate where higher is better, where there is one: "drops" then read as losses.
        first = min(both, key=lambda b: rates[b[0]]["lower_is_better"])[0]
        ranking = rates[first]["rate"]
        score_a, score_b = _episode_rate(side_a, ranking), _episode_rate(side_b, ranking)
        if rates[first]["lower_is_better"]:
            ranking += " (lower is better: a drop is a gain)"
    else:
        ranking, score_a, score_b = None, [], []
    changes: list[dict[str, Any]] = [
        {
            **_key_dict(ea.key),
            "a": sa,
            "b": sb,
            "change": sb - sa,
            "status_a": ea.status,
            "status_b": eb.status,
        }
        for (ea, eb), sa, sb in (zip(pairs, score_a, score_b, strict=True) if ranking else ())
        if sb != sa
    ]
    drops = sorted((c for c in changes if c["change"] < 0), key=lambda c: c["change"])
    rises = sorted((c for c in changes if c["change"] > 0), key=lambda c: -c["change"])

    return {
        "a": runs["a"],
        "b": runs["b"],
        "pair_by_name": pair_by_name,
        "paired": len(pairs),
        "unpaired": {k: [_key_dict(key) for key in v] for k, v in unpaired.items()},
        "resamples": resamples,
        "seed": seed,
        "confidence": CONFIDENCE,
        "rates": rates,
        "status_changes": status_changes,
        "ranking_metric": ranking,
        "largest_drops": drops[:TOP_CHANGES],
        "largest_rises": rises[:TOP_CHANGES],
        "notes": notes,
    }


def rates_with_verdict(result: Mapping[str, Any], name: str) -> list[str]:
    """The rates of a comparison whose verdict is `name` (`B_WORSE`, `NOT_IN_B`: what a gate
    fails on)."""
    return [r["rate"] for r in result["rates"] if r["verdict"] == name]


def verdict(rate: Mapping[str, Any]) -> str:
    """What one rate's interval says of B against A: `B worse` / `B better` when the interval
    leaves out 0 (in the rate's own direction), `no change` when every resample gave 0 (the
    same rate in both runs, resample by resample), `cannot tell apart` when it spans 0; where
    no interval was drawn, `undefined in a run`, or `not in run a` / `not in run b` (its counts
    are carried by one run only)."""
    if rate["low"] is None:
        if rate["a"] is None or rate["b"] is None:
            return "not in run a" if rate["a"] is None else NOT_IN_B
        return "undefined in a run"
    if rate["low"] == rate["high"] == 0.0:
        return "no change"
    if rate["low"] <= 0.0 <= rate["high"]:
        return "cannot tell apart"
    better = (rate["delta"] < 0) == rate["lower_is_better"]
    return "B better" if better else B_WORSE


def _side_rate(num: np.ndarray, den: np.ndarray) -> dict[str, Any]:
    """One run's pooled counts and rate; the rate is None where nothing was counted."""
    total = int(den.sum())
    return {"num": int(num.sum()), "den": total, "rate": pooled_rate(num, den) if total else None}


def _fmt(value: float | None, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def _run_line(run: Mapping[str, Any]) -> str:
    digest = run.get("corpus_digest")
    version = run.get("corpus_version") or (
        f"digest {digest[:12]}" if digest else "unknown version"
    )
    split = f" ({run['split']})" if run.get("split") else ""
    reference = f", against reference `{run['reference']}`" if run.get("reference") else ""
    return f"row `{run['row']}`, corpus {version}{split}{reference}"


def render_comparison(result: Mapping[str, Any], *, list_limit: int = 20) -> str:
    """The comparison as Markdown: a line per rate, then status changes, moves and leftovers."""
    conf = round(100 * float(result["confidence"]))
    how = (
        "by case and source id alone (pair_by_name: cases asserted unchanged)"
        if result["pair_by_name"]
        else "by case and source id, with equal case digests"
    )
    un = result["unpaired"]
    lines = [
        "## Run B against run A",
        "",
        f"- A: {_run_line(result['a'])}",
        f"- B: {_run_line(result['b'])}",
        f"- paired episodes: {result['paired']}, {how}",
        f"- unpaired: {len(un['only_a'])} only in A, {len(un['only_b'])} only in B, "
        f"{len(un['case_changed'])} case changed, {len(un['no_case_digest'])} without case digest",
        f"- {result['resamples']} paired bootstrap resamples (seed {result['seed']}), "
        f"{conf}% intervals",
        "",
        f"| rate | A | B | B−A | {conf}% interval | verdict | episodes up / down |",
        "|---|---:|---:|---:|---|---|---:|",
    ]
    for r in result["rates"]:
        a = r["a"]["rate"] if r["a"] else None
        b = r["b"]["rate"] if r["b"] else None
        if r["low"] is None:
            interval, moves = "—", "—"
        else:
            interval = f"[{_fmt(r['low'], True)}, {_fmt(r['high'], True)}]"
            moves = f"{r['rises']} / {r['falls']}"
        name = r["rate"] + (" (lower is better)" if r["lower_is_better"] else "")
        lines.append(
            f"| {name} | {_fmt(a)} | {_fmt(b)} | {_fmt(r['delta'], True)} | {interval} "
            f"| {r.get('verdict') or verdict(r)} | {moves} |"
        )

    lines += ["", "### Status changes", "", "| A | B | episodes |", "|---|---|---:|"]
    for s in result["status_changes"]:
        lines.append(f"| {s['from']} | {s['to']} | {s['episodes']} |")

    metric = result["ranking_metric"]
    for title, items in (
        ("Largest drops", result["largest_drops"]),
        ("Largest rises", result["largest_rises"]),
    ):
        lines += ["", f"### {title}" + (f" ({metric})" if metric else ""), ""]
        if not items:
            lines.append("none")
        for c in items:
            status = (
                f" [{c['status_a']} → {c['status_b']}]" if c["status_a"] != c["status_b"] else ""
            )
            lines.append(
                f"- {c['case']} {c['source_id']}: {c['a']:.3f} → {c['b']:.3f} "
                f"({c['change']:+.3f}){status}"
            )

    labels = {
        "only_a": "Only in A",
        "only_b": "Only in B",
        "case_changed": "Case changed (digests differ)",
        "no_case_digest": "Without case digest",
    }
    for key, label in labels.items():
        items = un[key]
        if not items:
            continue
        lines += ["", f"### {label} ({len(items)})", ""]
        lines += [f"- {i['case']} {i['source_id']}" for i in items[:list_limit]]
        if len(items) > list_limit:
            lines.append(f"- … and {len(items) - list_limit} more")

    if result["notes"]:
        lines += ["", "### Notes", ""] + [f"- {n}" for n in result["notes"]]
    return "\n".join(lines) + "\n"
