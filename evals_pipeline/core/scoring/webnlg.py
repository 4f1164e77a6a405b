"""Triple-level exact P/R/F1 against WebNLG gold, after the WebNLG 2020 scorer's normalisation.

Why not just compare strings: WebNLG spells predicates as camelCase DBpedia names and entities
with underscores, quotes and disambiguators, while a model writes plain text. The WebNLG 2020
text-to-RDF scorer (`WebNLG/WebNLG-Text-to-triples`, `Evaluation_script.py`) normalises both
sides first; we apply the same steps so that a prediction is not penalised for spelling alone.

Reproduced from the official scorer, per element (subject, predicate, object):

- camelCase split `([a-z])([A-Z])` -> `\\1 \\2` ("runwayLength" -> "runway length"), then
  lower-case, `_` -> space, runs of whitespace collapsed;
- objects only: a trailing parenthetical is dropped with the scorer's own regex
  `^(.*?)\\s\\(.*\\)$` ("Ardmore Airport (New Zealand)" -> "ardmore airport"; note that it cuts
  at the *first* " (" of an object ending in ")", and that unit suffixes such as "(metres)" go
  too);
- predicted triples are aligned one-to-one with gold triples by a maximum matching (the official
  script searches permutations exhaustively; we solve the same assignment problem with
  `scipy.optimize.linear_sum_assignment`).

Added (not in the official script): one pair of surrounding double quotes is stripped from each
element on both sides. The official script drops quote tokens from the reference only, so a
candidate copying raw gold strings with quotes scores below 1.0 there (see the data README).

Not reproduced:

- the metric itself: the official scores are the SemEval-2013 Strict / Exact / Partial / Type
  schemes *per element*, with partial credit for overlapping tokens and an element's role. Here a
  triple counts only when subject, predicate and object all match exactly after normalisation;
  this is stricter than the official "Exact" F1 and the figures are not comparable to published
  ones;
- `unidecode` transliteration (accents are kept: "Aarhus" and "Århus" differ), tokenisation and
  punctuation handling of the official `nonrefwords` / `evaluaterefcand` code;
- its macro averaging over entries: scores here are micro (pooled counts over chunks).

Because exact whole-triple equality after normalisation is an equivalence relation, a greedy
pass would find a maximum matching too; the assignment solver is kept so that the alignment
stays optimal if the match relation is ever relaxed (e.g. per-element or partial matches).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from ..models import Edge, ExtractionResult
from .strict import PRF

Role = Literal["subject", "predicate", "object"]
ROLES: tuple[Role, ...] = ("subject", "predicate", "object")

_CAMEL = re.compile(r"([a-z])([A-Z])")
_SPACE = re.compile(r"\s+")
_PARENTHETICAL = re.compile(r"^(.*?)\s\(.*\)$")


def _strip_quotes(s: str) -> str:
    if len(s) >= 2 and s[0] == '"' and s[-1] == '"':
        return s[1:-1].strip()
    return s


def normalize_element(s: str, *, role: Role) -> str:
    """One triple element as the WebNLG 2020 scorer compares it (plus quote stripping)."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r} (expected one of {ROLES})")
    out = _CAMEL.sub(r"\1 \2", s).lower().replace("_", " ")
    out = _strip_quotes(_SPACE.sub(" ", out).strip())
    if role == "object":
        match = _PARENTHETICAL.match(out)
        if match:
            out = _strip_quotes(match.group(1).strip())
    return out


def normalize_triple(edge: Edge) -> tuple[str, str, str]:
    """(subject, predicate, object) of an edge, each normalised for its role."""
    return (
        normalize_element(edge.source, role="subject"),
        normalize_element(edge.relation, role="predicate"),
        normalize_element(edge.target, role="object"),
    )


def aligned_matches(match: NDArray[np.bool_]) -> int:
    """Size of a maximum one-to-one matching in a (predicted x gold) boolean match matrix."""
    if match.size == 0 or not match.any():
        return 0
    from scipy.optimize import linear_sum_assignment  # ~0.5 s to import; only scoring needs it

    rows, cols = linear_sum_assignment(match, maximize=True)
    return int(match[rows, cols].sum())


def score_triples(pred: Sequence[Edge], gold: Sequence[Edge]) -> tuple[int, int, int]:
    """(tp, fp, fn) of predicted against gold triples, aligned one-to-one."""
    p = [normalize_triple(e) for e in pred]
    g = [normalize_triple(e) for e in gold]
    matrix = np.array([[pt == gt for gt in g] for pt in p], dtype=bool).reshape(len(p), len(g))
    tp = aligned_matches(matrix)
    return tp, len(p) - tp, len(g) - tp


def prf(tp: int, fp: int, fn: int) -> dict[str, float | None]:
    """P/R/F1 of these counts, as strict scoring's `PRF` gives them (nothing predicted and
    nothing expected is agreement, 1.0; a precision of nothing predicted is None)."""
    scores = PRF(tp=tp, fp=fp, fn=fn).to_dict()
    return {k: scores[k] for k in ("precision", "recall", "f1")}


def score_corpus(
    predictions: Mapping[str, ExtractionResult | None], gold: Mapping[str, ExtractionResult]
) -> dict[str, Any]:
    """Pooled (micro) triple P/R/F1 over the gold chunks, with per-chunk counts.

    A chunk missing from `predictions`, or predicted as None (a failed extraction), misses every
    gold triple. Predicted chunks that have no gold are not scored and are listed in `unscored`.
    """
    chunks: dict[str, dict[str, int]] = {}
    missing: list[str] = []
    totals = [0, 0, 0]
    for name in sorted(gold):
        predicted = predictions.get(name)
        if predicted is None:
            missing.append(name)
        tp, fp, fn = score_triples(
            predicted.edges if predicted is not None else (), gold[name].edges
        )
        chunks[name] = {"tp": tp, "fp": fp, "fn": fn}
        totals = [totals[0] + tp, totals[1] + fp, totals[2] + fn]
    tp, fp, fn = totals
    return {
        "tp": tp,
        "fp": fp,
        "fn": fn,
        **prf(tp, fp, fn),
        "chunks": chunks,
        "missing": missing,
        "unscored": sorted(set(predictions) - set(gold)),
    }
