"""Per-episode counts of the exact-match bench (`core.bench.metrics`)."""

from __future__ import annotations

from evals_pipeline.core.bench.corpus import ExpectedGraph, Vertex
from evals_pipeline.core.bench.metrics import match_entities
from evals_pipeline.core.models import Entity
from evals_pipeline.core.ontology import EntityType, Ontology

BODY = "a red parcel and a blue parcel arrived"
SCHEMA = Ontology(entity_types=(EntityType(name="Parcel", identity="blank"),))


def _vertex(handle: str, quote: str) -> Vertex:
    return Vertex(handle=handle, type="Parcel", name=quote, quote=quote, properties={})


def test_entities_are_matched_one_to_one_at_most_whatever_the_file_order() -> None:
    """Greedy in file order, v1 (whose quote overlaps both parcels) had taken the red one, the
    only one v2 matches: one true positive where two match, and the count hung on the order."""
    produced = [
        Entity(name="red parcel", type="Parcel", quote="a red parcel"),
        Entity(name="blue parcel", type="Parcel", quote="a blue parcel"),
    ]
    v1, v2 = _vertex("v1", "a red parcel and a blue parcel"), _vertex("v2", "red parcel")
    for order in ((v1, v2), (v2, v1)):
        expected = ExpectedGraph(vertices={v.handle: v for v in order}, edges=())
        assert match_entities(expected, produced, SCHEMA, BODY) == {"v1": 1, "v2": 0}


def test_an_unambiguous_match_is_the_file_order_one() -> None:
    """Where file order already matches as many as can be, its pairs are kept: two produced
    entities of one name go to the expected ones in order."""
    schema = Ontology(entity_types=(EntityType(name="Parcel"),))
    produced = [Entity(name="box", type="Parcel", quote="a"), Entity(name="box", type="Parcel")]
    expected = ExpectedGraph(
        vertices={
            "a": Vertex(handle="a", type="Parcel", name="box", quote="", properties={}),
            "b": Vertex(handle="b", type="Parcel", name="box", quote="", properties={}),
        },
        edges=(),
    )
    assert match_entities(expected, produced, schema, "box box") == {"a": 0, "b": 1}
