"""Extraction options: which ontology regime a call runs under, and its token budgets."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator

from .errors import ConfigError
from .models import OntologyMode
from .ontology import Ontology

DEFAULT_MAX_TOKENS_ENTITIES = 4096
DEFAULT_MAX_TOKENS_EDGES = 4096


class ExtractOptions(BaseModel):
    """`ontology` is None exactly in freeform mode, so a prompt can never half-inject one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: OntologyMode = "freeform"
    ontology: Ontology | None = None
    max_tokens_entities: int = DEFAULT_MAX_TOKENS_ENTITIES
    max_tokens_edges: int = DEFAULT_MAX_TOKENS_EDGES

    @model_validator(mode="after")
    def _mode_matches_ontology(self) -> ExtractOptions:
        if self.mode == "freeform" and self.ontology is not None:
            raise ValueError("freeform mode takes no ontology")
        if self.mode != "freeform" and self.ontology is None:
            raise ValueError(f"{self.mode} mode needs an ontology")
        return self

    @classmethod
    def for_mode(
        cls,
        mode: OntologyMode,
        ontology: Ontology | None,
        max_tokens_entities: int = DEFAULT_MAX_TOKENS_ENTITIES,
        max_tokens_edges: int = DEFAULT_MAX_TOKENS_EDGES,
    ) -> ExtractOptions:
        """Options for one partition of the mode matrix: freeform drops the ontology."""
        if mode == "freeform":
            ontology = None
        elif ontology is None:
            raise ConfigError(f"ontology mode {mode!r} needs an ontology file")
        return cls(
            mode=mode,
            ontology=ontology,
            max_tokens_entities=max_tokens_entities,
            max_tokens_edges=max_tokens_edges,
        )


def resolve_ontology_mode(
    ontology: Ontology | None, requested: OntologyMode | None
) -> OntologyMode:
    """The reference harness rule: a mode without an ontology is a usage error; with an ontology
    and no mode, strict. The flag overrides any `mode:` the file declares (that field is for
    production ingestion, not for an eval run)."""
    if ontology is None:
        if requested not in (None, "freeform"):
            raise ConfigError(f"--ontology-mode {requested} given without --ontology")
        return "freeform"
    return requested or "strict"
