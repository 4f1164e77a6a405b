"""A deterministic, rule-based "model" served over the real wire protocols.

It is not an LLM and never pretends to be one: it finds capitalised names as entities and links
two names that share a sentence. It exists so that cassettes can be recorded honestly through
the live backend path (real HTTP, real SDK, real parsing) on a machine with no model and no
network, and so tests have a backend whose output depends on its input.
"""

from __future__ import annotations

import itertools
import json
import re

from .llm_servers import ReceivedRequest, Reply, anthropic_message, openai_completion

_NAME = re.compile(r"\b[A-Z][a-zA-Z]+(?:\s+(?:of\s+|de\s+)?[A-Z][a-zA-Z]+)*\b")
_SKIP = frozenset(
    [
        "The",
        "A",
        "An",
        "In",
        "On",
        "At",
        "It",
        "Its",
        "This",
        "That",
        "These",
        "Those",
        "He",
        "She",
        "They",
        "We",
        "I",
        "His",
        "Her",
        "Their",
        "Our",
        "After",
        "Before",
        "When",
        "While",
        "During",
        "Since",
        "From",
        "By",
        "For",
        "And",
        "But",
        "Or",
        "With",
        "Without",
        "Also",
        "However",
    ]
)
_DOC = re.compile(r"<document[^>]*>\n(.*)\n</document>", re.DOTALL)
_ENTITIES = re.compile(r"<entities>\n(.*?)\n</entities>", re.DOTALL)
_VOCABULARY = re.compile(
    r"(?:Allowed|Suggested) (entity|relation) types[^\n]*:\n((?:- [^\n]*\n?)+)"
)
_LISTED = re.compile(r"^- (\w+)", re.MULTILINE)


def _document(user: str) -> str:
    match = _DOC.search(user)
    return match.group(1) if match else user


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def _listed_types(system: str, kind: str) -> list[str]:
    """The vocabulary an open/strict prompt injects, in listed order ([] in freeform)."""
    for match in _VOCABULARY.finditer(system):
        if match.group(1) == kind:
            return _LISTED.findall(match.group(2))
    return []


def entities_for(system: str, user: str) -> dict[str, object]:
    types = _listed_types(system, "entity")
    kind = types[0] if types else "Thing"
    seen: dict[str, dict[str, str]] = {}
    for sentence in _sentences(_document(user)):
        for match in _NAME.finditer(sentence):
            name = match.group(0)
            if name in _SKIP or name in seen:
                continue
            seen[name] = {"name": name, "type": kind, "summary": sentence, "quote": name}
    return {"entities": list(seen.values())}


def edges_for(system: str, user: str) -> dict[str, object]:
    types = _listed_types(system, "relation")
    relation = types[0] if types else "RELATED_TO"
    match = _ENTITIES.search(user)
    names = [e["name"] for e in json.loads(match.group(1))] if match else []
    edges = []
    for sentence in _sentences(_document(user)):
        present = [n for n in names if n in sentence]
        for source, target in itertools.pairwise(present):
            edges.append(
                {
                    "source": source,
                    "target": target,
                    "relation": relation,
                    "fact": sentence,
                    "quote": sentence,
                }
            )
    return {"edges": edges}


def answer(request: ReceivedRequest) -> str:
    system = request.system_prompt or ""
    user = request.user_prompt or ""
    if "extracts RELATIONS" in system:
        return json.dumps(edges_for(system, user))
    if "extracts ENTITIES" in system:
        return json.dumps(entities_for(system, user))
    return json.dumps({"types": {}})


def sloppy_answer(request: ReceivedRequest) -> tuple[str, bool]:
    """The "sloppy" variant: the same rules, badly delivered. It wraps JSON in prose and a
    Markdown fence (parsed as recovered), drops summaries, reverses every other edge, and
    on one chunk in four answers the first entity call with a truncated reply (so the
    doubled-budget retry is exercised). Returns (text, truncated)."""
    system = request.system_prompt or ""
    user = request.user_prompt or ""
    payload = json.loads(answer(request))
    for entity in payload.get("entities", []):
        entity["summary"] = ""
    for i, edge in enumerate(payload.get("edges", [])):
        if i % 2 == 1:
            edge["source"], edge["target"] = edge["target"], edge["source"]
    text = "Sure! Here is the JSON you asked for:\n```json\n" + json.dumps(payload) + "\n```"
    first_try = (request.max_tokens or 0) < 8192
    unlucky = sum(_document(user).encode()) % 4 == 0
    if "extracts ENTITIES" in system and first_try and unlucky:
        return text[: len(text) // 2], True
    return text, False


def _usage(request: ReceivedRequest, text: str) -> tuple[int, int]:
    prompt = (request.system_prompt or "") + (request.user_prompt or "")
    return len(prompt.split()), len(text.split())


def anthropic_responder(request: ReceivedRequest) -> Reply:
    text = answer(request)
    tokens_in, tokens_out = _usage(request, text)
    return anthropic_message(
        text, input_tokens=tokens_in, output_tokens=tokens_out, model=request.model or "rules"
    )


def openai_responder(request: ReceivedRequest) -> Reply:
    text = answer(request)
    tokens_in, tokens_out = _usage(request, text)
    return openai_completion(
        text, prompt_tokens=tokens_in, completion_tokens=tokens_out, model=request.model or "rules"
    )


def sloppy_anthropic_responder(request: ReceivedRequest) -> Reply:
    text, truncated = sloppy_answer(request)
    tokens_in, tokens_out = _usage(request, text)
    return anthropic_message(
        text,
        stop_reason="max_tokens" if truncated else "end_turn",
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        model=request.model or "rules-sloppy",
    )
