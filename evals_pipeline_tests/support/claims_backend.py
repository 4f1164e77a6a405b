"""A deterministic, rule-based claims "model" served over the real wire protocols.

It is not an LLM and never pretends to be one: every sentence of the document that holds a digit
becomes one claim, its evidence span the sentence without the final stop, its claim text the
sentence's first 15 words. It exists so tests can record claim extractions honestly through the
live path (real HTTP, real SDK or httpx, real parsing and validation) on a machine with no model
and no network. `lossy=True` keeps only the first claim of each document: a worse "model" whose
recordings make micro-F1 drop.
"""

from __future__ import annotations

import json
import re

from .llm_servers import ReceivedRequest, Reply, Responder, anthropic_message, openai_completion

_DOC = re.compile(r"<document>\n(.*)\n</document>", re.DOTALL)
_SENTENCE = re.compile(r"[^.!?]+[.!?]")


def claims_for(document: str, *, lossy: bool = False) -> dict[str, list[dict[str, str]]]:
    claims = []
    for match in _SENTENCE.finditer(document):
        sentence = match.group(0).strip()
        words = sentence.rstrip(".!?").split()
        if not any(ch.isdigit() for ch in sentence) or len(words) < 5:
            continue
        claims.append({"claim": " ".join(words[:15]) + ".", "evidence_span": sentence[:-1]})
    return {"claims": claims[:1] if lossy else claims}


def answer(request: ReceivedRequest, *, lossy: bool = False) -> str:
    match = _DOC.search(request.user_prompt or "")
    return json.dumps(claims_for(match.group(1) if match else "", lossy=lossy))


def openai_claims_responder(*, lossy: bool = False) -> Responder:
    def respond(request: ReceivedRequest) -> Reply:
        return openai_completion(answer(request, lossy=lossy), model=request.model or "rules")

    return respond


def anthropic_claims_responder(*, lossy: bool = False) -> Responder:
    def respond(request: ReceivedRequest) -> Reply:
        return anthropic_message(answer(request, lossy=lossy), model=request.model or "rules")

    return respond
