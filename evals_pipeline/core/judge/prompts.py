"""Judge prompts. Their names are cache-key families: `reference/*` and `pairwise/*` never collide.

The pairwise judge sees the source chunk and two unlabelled extractions, slot A and slot B — no
backend name, model id or provider — one axis at a time.
"""

from __future__ import annotations

import json
from string import Template

from ..models import ExtractionResult
from ..prompts import fenced_text

AXES = ("entities", "edges", "summaries")

REFERENCE_SYSTEM = """You grade a knowledge-graph extraction against a reference extraction
of the same text.
Match each CANDIDATE item to a REFERENCE item that states the same thing about the text, even if
worded differently. Each item matches at most one item on the other side.
Return one JSON object and nothing else:
{"matches": [[<candidate number>, <reference number>], ...]}"""

PAIRWISE_SYSTEM = """You compare two knowledge-graph extractions of the same text, A and B.
Judge only which better captures what the text states for the given aspect: correct, complete,
no invented content. The order in which they are shown carries no information.
Return one JSON object and nothing else:
{"winner": "A" | "B" | "tie", "reason": "<one sentence>"}"""

REFERENCE_USER = Template("""<document>
$body
</document>
Aspect: $axis
<reference>
$reference
</reference>
<candidate>
$candidate
</candidate>""")

PAIRWISE_USER = Template("""<document>
$body
</document>
Aspect: $axis
<extraction slot="A">
$a
</extraction>
<extraction slot="B">
$b
</extraction>""")


def axis_items(result: ExtractionResult, axis: str) -> list[str]:
    """One line of text per item of `axis`, in extraction order."""
    if axis == "entities":
        return [f"{e.name} ({e.type})" if e.type else e.name for e in result.entities]
    if axis == "edges":
        return [f"{e.source} --{e.relation}--> {e.target}" for e in result.edges]
    return [f"{e.name}: {e.summary}" for e in result.entities if e.summary]


def _numbered(items: list[str]) -> str:
    return "\n".join(f"{i}. {item}" for i, item in enumerate(items, start=1)) or "(none)"


def _listed(items: list[str]) -> str:
    return json.dumps(items, ensure_ascii=False, indent=0) if items else "(none)"


def render_reference(
    body: str, axis: str, candidate: ExtractionResult, reference: ExtractionResult
) -> tuple[str, str, str]:
    """(prompt name, system, user) of one reference-mode judge call."""
    user = REFERENCE_USER.substitute(
        body=fenced_text(body),  # the text cannot close its own fence
        axis=axis,
        reference=_numbered(axis_items(reference, axis)),
        candidate=_numbered(axis_items(candidate, axis)),
    )
    return f"reference/{axis}", REFERENCE_SYSTEM, user


def render_pairwise(
    body: str, axis: str, slot_a: ExtractionResult, slot_b: ExtractionResult
) -> tuple[str, str, str]:
    """(prompt name, system, user) of one blind pairwise judge call."""
    user = PAIRWISE_USER.substitute(
        body=fenced_text(body),  # the text cannot close its own fence
        axis=axis,
        a=_listed(axis_items(slot_a, axis)),
        b=_listed(axis_items(slot_b, axis)),
    )
    return f"pairwise/{axis}", PAIRWISE_SYSTEM, user
