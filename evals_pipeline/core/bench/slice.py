"""Slicing a wide schema under a budget: keep the types the text names.

An entity type is named when its words occur in the text, case-insensitively, the last word
possibly plural (`parcel` / `parcels`, `box` / `boxes`, `company` / `companies`). A relation
type is named when its verb (the first word of its name) occurs in any simple inflection
(`ship` / `ships` / `shipped` / `shipping`). Seeds are the named entity types in order of first
occurrence; the closure adds the endpoint types of named relations that touch a seed. The slice
keeps seeds, then closure, up to the budget, plus every relation type whose endpoints survive.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..ontology import Ontology, RelationType

_TOKEN = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_VOWELS = set("aeiou")


@dataclass(frozen=True)
class Slice:
    """What a budget leaves of a schema for one text: `seeds` are the entity types it names."""

    seeds: tuple[str, ...]
    closure: tuple[str, ...]
    ontology: Ontology

    @property
    def entity_types(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.ontology.entity_types)


def _plural_stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith(("ses", "xes", "zes", "ches", "shes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _verb_stem(word: str) -> str:
    """A crude stem under which `ship`, `ships`, `shipped` and `shipping` agree."""
    w = word
    for suffix in ("ing", "ied", "ed"):
        if len(w) > len(suffix) + 2 and w.endswith(suffix):
            w = w[: -len(suffix)] + ("y" if suffix == "ied" else "")
            if len(w) > 2 and w[-1] == w[-2] and w[-1] not in _VOWELS and w[-1] not in "sl":
                w = w[:-1]
            break
    else:
        w = _plural_stem(w)
    return w[:-1] if len(w) > 3 and w.endswith("e") else w


def type_words(name: str) -> tuple[str, ...]:
    """`ShippingLine` -> (shipping, line); `CALL_AT` -> (call, at)."""
    parts = name.split("_") if "_" in name or name.isupper() else _CAMEL.findall(name)
    return tuple(p.casefold() for p in parts if p)


def _first_position(tokens: list[str], words: tuple[str, ...]) -> int | None:
    n = len(words)
    want_head, want_last = words[:-1], _plural_stem(words[-1])
    for i in range(len(tokens) - n + 1):
        if tuple(tokens[i : i + n - 1]) == want_head and _plural_stem(tokens[i + n - 1]) in (
            want_last,
            words[-1],
        ):
            return i
    return None


def named_entity_types(ontology: Ontology, text: str) -> tuple[str, ...]:
    """Entity types the text names, in order of first occurrence (schema order on ties)."""
    tokens = _TOKEN.findall(text.casefold())
    found: list[tuple[int, int, str]] = []
    for order, et in enumerate(ontology.entity_types):
        pos = _first_position(tokens, type_words(et.name))
        if pos is not None:
            found.append((pos, order, et.name))
    return tuple(name for _pos, _order, name in sorted(found))


def named_relation_types(ontology: Ontology, text: str) -> tuple[str, ...]:
    """Relation types whose verb the text uses in some inflection, in schema order."""
    stems = {_verb_stem(t) for t in _TOKEN.findall(text.casefold())}
    return tuple(
        rt.name for rt in ontology.relation_types if _verb_stem(type_words(rt.name)[0]) in stems
    )


def _trim(rt: RelationType, kept: set[str]) -> RelationType | None:
    source = tuple(t for t in rt.source if t in kept)
    target = tuple(t for t in rt.target if t in kept)
    if (rt.source and not source) or (rt.target and not target):
        return None
    return rt.model_copy(update={"source": source, "target": target})


def slice_schema(ontology: Ontology, text: str, budget: int) -> Slice:
    """Keep at most `budget` entity types: those the text names, then the closure."""
    if budget < 1:
        raise ValueError(f"budget must be at least 1, got {budget}")
    seeds = named_entity_types(ontology, text)
    seed_set = set(seeds)
    closure: list[str] = []
    for name in named_relation_types(ontology, text):
        rt = next(r for r in ontology.relation_types if r.name == name)
        ends = (rt.source, rt.target)
        for side, other in (ends, ends[::-1]):
            if other and not seed_set.intersection(other):
                continue
            closure += [t for t in side if t not in seed_set and t not in closure]
    chosen = [*seeds, *closure][:budget]
    kept = set(chosen)
    relations = tuple(
        trimmed for rt in ontology.relation_types if (trimmed := _trim(rt, kept)) is not None
    )
    sliced = ontology.model_copy(
        update={
            "name": f"{ontology.name}[slice {budget}]",
            "entity_types": tuple(t for t in ontology.entity_types if t.name in kept),
            "relation_types": relations,
        }
    )
    return Slice(seeds=seeds, closure=tuple(closure), ontology=sliced)
