"""Scripted judge behaviours, served over the real Anthropic Messages protocol.

`position_biased` always picks slot A; `order_consistent` prefers the extraction with more items
(the same answer whichever slot it sits in); `mixed` is biased on documents containing the word
"biased" and consistent elsewhere. Reference-mode prompts are answered by matching items whose
names agree after lower-casing and dropping a "(Type)" suffix (`lenient`: summaries by the
entity they are about).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from .llm_servers import ReceivedRequest, Reply, anthropic_message

_SLOT = re.compile(r'<extraction slot="([AB])">\n(.*?)\n</extraction>', re.DOTALL)
_SECTION = re.compile(r"<(reference|candidate)>\n(.*?)\n</\1>", re.DOTALL)
_DOC = re.compile(r"<document>\n(.*?)\n</document>", re.DOTALL)


def _items(block: str) -> list[str]:
    return [] if block.strip() == "(none)" else json.loads(block)


def _numbered(block: str) -> list[str]:
    if block.strip() == "(none)":
        return []
    return [line.split(". ", 1)[1] for line in block.splitlines()]


def _key(item: str) -> str:
    return re.sub(r"\s*\([^)]*\)$", "", item).strip().lower()


def _about(item: str) -> str:
    """What a summary item is about ("Name: summary" -> name): a judge forgiving wording."""
    return _key(item.split(": ", 1)[0])


def reference_matches(user: str, *, lenient: bool = False) -> list[list[int]]:
    sections = dict(_SECTION.findall(user))
    reference, candidate = _numbered(sections["reference"]), _numbered(sections["candidate"])
    key = _about if lenient else _key
    matches, used = [], set()
    for c, item in enumerate(candidate, start=1):
        for r, ref in enumerate(reference, start=1):
            if r not in used and key(item) == key(ref):
                matches.append([c, r])
                used.add(r)
                break
    return matches


def _more_items(user: str) -> str:
    slots = {slot: len(_items(body)) for slot, body in _SLOT.findall(user)}
    if slots["A"] == slots["B"]:
        return "tie"
    return "A" if slots["A"] > slots["B"] else "B"


def position_biased(user: str) -> str:
    return "A"


def order_consistent(user: str) -> str:
    return _more_items(user)


def mixed(user: str) -> str:
    document = _DOC.search(user)
    biased = document is not None and "biased" in document.group(1)
    return "A" if biased else _more_items(user)


def judge_responder(
    pairwise: Callable[[str], str], *, lenient: bool = False
) -> Callable[[ReceivedRequest], Reply]:
    """`lenient`: reference-mode summaries match when they are about the same entity, however
    worded (as a real judge forgives wording)."""

    def respond(request: ReceivedRequest) -> Reply:
        user = request.user_prompt or ""
        if '<extraction slot="A">' in user:
            text = json.dumps({"winner": pairwise(user), "reason": "scripted"})
        else:
            text = json.dumps({"matches": reference_matches(user, lenient=lenient)})
        return anthropic_message(text, model=request.model or "judge")

    return respond
