"""Cassette matching keys: SHA-256 over exactly what is semantically asked of the model.

extract: the rendered entity and edge prompts plus the episode fields that reach them, so an
edit to a template or to the injected ontology invalidates stale records. classify_*: the raw
call arguments. Never in a key: timestamps, nonces, model settings, or anything transport-level
(headers, keys, URLs) — the seam sits above request construction and never sees them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from json.encoder import encode_basestring
from typing import Any

from ..memo import IdentityMemo, on_forget
from ..models import Episode
from ..options import ExtractOptions
from ..prompts import ExtractPrompts, render_extract_prompts, system_prompts


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _sha256(material: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json(material).encode("utf-8")).hexdigest()


# JSON encodings of the system prompts, which recur in every key under one options object (one
# string object per options, see prompts.py). Only those: a chunk's own long strings (its body)
# come once each and would only push them out.
_ENCODED: IdentityMemo[str] = IdentityMemo(256)
_RECURRING = frozenset({"entity_system", "edge_system"})

# Whole extract keys by value: the two system prompts and the episode (with its reference time
# as written) are everything a key is derived from. One chunk is keyed by the plan's guards,
# its extraction step's guards, the extraction cache, the recorder and the replayer, often from
# equal but distinct objects (each step reads the corpus back from storage). Cleared when full.
_EXTRACT_KEYS: dict[tuple[str, str, Episode, str | None], str] = {}
_EXTRACT_KEYS_KEPT = 65_536
on_forget(_EXTRACT_KEYS.clear)


def _episode_size(objects: tuple[object, ...], _key: str) -> int:
    """The characters of text an entry keeps alive: its episode's."""
    episode = objects[0]
    assert isinstance(episode, Episode)
    size = len(episode.body) + len(episode.custom_instructions)
    return size + sum(map(len, episode.context)) if episode.context else size


# In front of it, by the objects' identity: within one step the same episode and options objects
# are keyed four times over (the step's key set, the cache, the recorder, the replayer), and a
# by-value hit hashes and compares the whole episode. Sized for a step's corpus (its guards key
# every chunk before its replay keys them again), and bounded by the characters of the
# episodes it keeps alive, 64 Mi (1 to 4 bytes each).
_BY_IDENTITY: IdentityMemo[str] = IdentityMemo(65_536, max_weight=64 * 2**20, weigh=_episode_size)


def _encoded_string(value: str) -> str:
    hit = _ENCODED.get(value)
    return hit if hit is not None else _ENCODED.put((value,), encode_basestring(value))


def _flat_sha256(material: Mapping[str, Any]) -> str:
    """`_sha256` of a flat object, byte for byte: `canonical_json` writes a string value with
    `encode_basestring` and the object as sorted `"key":value` pairs joined by commas, so this
    does the same, reusing the encodings of the system prompts."""
    parts = []
    for name, value in sorted(material.items()):
        if name in _RECURRING and isinstance(value, str):
            encoded = _encoded_string(value)
        elif isinstance(value, str):
            encoded = encode_basestring(value)
        else:
            encoded = canonical_json(value)
        parts.append(f"{encode_basestring(name)}:{encoded}")
    return hashlib.sha256(("{" + ",".join(parts) + "}").encode("utf-8")).hexdigest()


def extract_request(
    episode: Episode, options: ExtractOptions, prompts: ExtractPrompts | None = None
) -> dict[str, Any]:
    """The human-readable request stored with an extract record, and the key's material.

    `prompts`, when the caller already rendered them for this episode and options, saves a
    second render (replay renders once for the key and the call alike).
    """
    if prompts is None:
        prompts = render_extract_prompts(episode, options)
    return {
        "entity_system": prompts.entity_system,
        "entity_user": prompts.entity_user,
        "edge_system": prompts.edge_system,
        # Rendered with a placeholder where the entity call's output goes (see prompts.py).
        "edge_user": prompts.edge_user(None),
        "episode_body": episode.body,
        "group_id": episode.group_id,
        "reference_time": (
            episode.reference_time.isoformat() if episode.reference_time is not None else None
        ),
        "custom_instructions": episode.custom_instructions,
        "source_type": episode.source_type,
        "context": list(episode.context),
    }


def extract_key(
    episode: Episode, options: ExtractOptions, prompts: ExtractPrompts | None = None
) -> str:
    same = _BY_IDENTITY.get(episode, options)
    if same is not None:
        return same
    entity_system, edge_system = (
        system_prompts(options) if prompts is None else (prompts.entity_system, prompts.edge_system)
    )
    # Episodes compare by value, but aware datetimes compare equal across UTC offsets while
    # their isoformat (in the prompt and the key) differs: the written form is part of the key.
    when = episode.reference_time.isoformat() if episode.reference_time is not None else None
    memo_key = (entity_system, edge_system, episode, when)
    key = _EXTRACT_KEYS.get(memo_key)
    if key is None:
        key = _flat_sha256({"call_type": "extract", **extract_request(episode, options, prompts)})
        if len(_EXTRACT_KEYS) >= _EXTRACT_KEYS_KEPT:
            _EXTRACT_KEYS.clear()
        _EXTRACT_KEYS[memo_key] = key
    return _BY_IDENTITY.put((episode, options), key)


def classify_request(items: Mapping[str, str], types: Sequence[str]) -> dict[str, Any]:
    return {"items": dict(items), "types": list(types)}


def classify_key(call_type: str, items: Mapping[str, str], types: Sequence[str]) -> str:
    return _sha256({"call_type": call_type, **classify_request(items, types)})
