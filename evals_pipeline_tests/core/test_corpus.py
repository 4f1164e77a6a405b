import copy
import json
from pathlib import Path
from typing import Any

import pytest

from evals_pipeline.core.corpus import ProseCorpus, load_prose_corpus
from evals_pipeline.core.errors import InputFileError
from evals_pipeline.core.ontology import Ontology, load_ontology

REPO = Path(__file__).resolve().parents[2]
SHIPPED_CORPUS = REPO / "corpus" / "prose" / "chunks.jsonl"
SHIPPED_ONTOLOGY = REPO / "ontologies" / "prose.yaml"

BODY = "Ada Lovelace worked with Charles Babbage on the Analytical Engine, which he designed."

GOOD: dict[str, Any] = {
    "name": "chunk-a",
    "body": BODY,
    "group_id": "test",
    "reference_time": None,
    "source_type": "text",
    "custom_instructions": "",
    "expected": {
        "entities": [
            {"name": "Ada Lovelace", "type": "Person", "summary": "", "quote": "Ada Lovelace"},
            {"name": "Charles Babbage", "type": "Person", "summary": "", "quote": "Babbage"},
            {"name": "Analytical Engine", "type": "Work", "summary": "", "quote": "Engine"},
        ],
        "edges": [
            {
                "source": "Ada Lovelace",
                "target": "Charles Babbage",
                "relation": "COLLABORATED_WITH",
                "fact": "",
                "quote": "Ada Lovelace worked with Charles Babbage",
            },
            {
                "source": "Charles Babbage",
                "target": "Analytical Engine",
                "relation": "CREATED",
                "fact": "",
                "quote": "which he designed",
            },
            {
                "source": "Ada Lovelace",
                "target": "Analytical Engine",
                "relation": "CREATED",
                "fact": "",
                "quote": "on the Analytical Engine",
            },
        ],
    },
}

ONTOLOGY = Ontology.model_validate(
    {
        "name": "test",
        "entity_types": [{"name": "Person"}, {"name": "Work"}, {"name": "Place"}],
        "relation_types": [
            {"name": "COLLABORATED_WITH", "source": ["Person"], "target": ["Person"]},
            {"name": "CREATED", "source": ["Person"], "target": ["Work"]},
            {"name": "MENTIONS"},
        ],
    }
)


def chunk(name: str = "chunk-a", **changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(GOOD)
    out["name"] = name
    out.update(changes)
    return out


def write_lines(tmp_path: Path, *lines: str | dict[str, Any]) -> Path:
    path = tmp_path / "chunks.jsonl"
    text = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


def load_error(path: Path, ontology: Ontology | None = None) -> InputFileError:
    with pytest.raises(InputFileError) as err:
        load_prose_corpus(path, ontology)
    assert err.value.path == path
    return err.value


# --- the shipped corpus ----------------------------------------------------------------------


def test_shipped_corpus_loads_against_shipped_ontology() -> None:
    ontology = load_ontology(SHIPPED_ONTOLOGY)
    assert ontology.name == "prose-science"
    assert ontology.mode is None
    corpus = load_prose_corpus(SHIPPED_CORPUS, ontology)
    assert len(corpus.chunks) == 16
    names = [c.episode.name for c in corpus.chunks]
    assert len(set(names)) == 16
    assert all(c.expected is not None for c in corpus.chunks)
    assert all(c.episode.group_id == "prose-science" for c in corpus.chunks)
    # At least one chunk states no relations at all; every other one is labelled with some.
    empty = [c for c in corpus.chunks if c.expected is not None and not c.expected.edges]
    assert len(empty) == 1
    # Every relation type of the ontology is exercised somewhere.
    used = {e.relation for g in corpus.expected_graphs().values() for e in g.edges}
    assert used == ontology.relation_type_names


def test_shipped_chunks_are_short_prose() -> None:
    for c in load_prose_corpus(SHIPPED_CORPUS).chunks:
        assert 40 <= len(c.episode.body.split()) <= 90, c.episode.name


# --- API -------------------------------------------------------------------------------------


def test_loads_episode_and_expected_graph(tmp_path: Path) -> None:
    path = write_lines(tmp_path, "", chunk(), "   ", chunk("chunk-b", expected=None))
    corpus = load_prose_corpus(path, ONTOLOGY)
    assert [e.name for e in corpus.episodes()] == ["chunk-a", "chunk-b"]
    assert corpus.episodes()[0].body == BODY
    assert corpus.episodes()[0].group_id == "test"
    graphs = corpus.expected_graphs()
    assert list(graphs) == ["chunk-a"]
    assert [e.name for e in graphs["chunk-a"].entities] == [
        "Ada Lovelace",
        "Charles Babbage",
        "Analytical Engine",
    ]
    assert graphs["chunk-a"].edges[1].relation == "CREATED"
    assert corpus.chunks[1].expected is None


def test_optional_episode_fields_take_episode_defaults(tmp_path: Path) -> None:
    path = write_lines(tmp_path, {"name": "bare", "body": "Some text."})
    (c,) = load_prose_corpus(path).chunks
    assert c.episode.source_type == "text"
    assert c.episode.reference_time is None
    assert c.expected is None


def test_digest_is_sha256_of_file_and_changes_with_content(tmp_path: Path) -> None:
    import hashlib

    path = write_lines(tmp_path, chunk())
    first = load_prose_corpus(path).digest
    assert first == hashlib.sha256(path.read_bytes()).hexdigest()
    assert load_prose_corpus(path).digest == first
    edited = chunk()
    edited["expected"]["entities"][0]["summary"] = "changed"
    write_lines(tmp_path, edited)
    assert load_prose_corpus(path).digest != first


def test_scoped_takes_first_n_in_file_order_and_keeps_digest() -> None:
    corpus = load_prose_corpus(SHIPPED_CORPUS)
    three = corpus.scoped(3)
    assert isinstance(three, ProseCorpus)
    assert three.chunks == corpus.chunks[:3]
    assert three.digest == corpus.digest
    assert list(three.expected_graphs()) == [c.episode.name for c in corpus.chunks[:3]]
    assert corpus.scoped(None) == corpus
    assert corpus.scoped(100).chunks == corpus.chunks
    assert corpus.scoped(0).chunks == ()
    with pytest.raises(ValueError):
        corpus.scoped(-1)


# --- hard failures ---------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    err = load_error(tmp_path / "nope.jsonl")
    assert "not found" in err.problem


def test_invalid_json_names_line(tmp_path: Path) -> None:
    path = write_lines(tmp_path, chunk(), "", '{"name": "x", ')
    err = load_error(path)
    assert err.line == 3
    assert "JSON" in err.problem


def test_non_object_line(tmp_path: Path) -> None:
    path = write_lines(tmp_path, chunk(), "[1, 2]")
    err = load_error(path)
    assert err.line == 2
    assert err.field is None


def test_non_utf8_names_line(tmp_path: Path) -> None:
    path = tmp_path / "chunks.jsonl"
    good = json.dumps(chunk()).encode()
    path.write_bytes(good + b"\n" + b'{"name": "b\xff\xfe", "body": "x"}\n')
    err = load_error(path)
    assert err.line == 2
    assert "not UTF-8 text (byte 11 of the line)" in err.problem


def test_missing_field(tmp_path: Path) -> None:
    bad = chunk()
    del bad["body"]
    err = load_error(write_lines(tmp_path, bad))
    assert (err.line, err.field) == (1, "body")


def test_wrong_type(tmp_path: Path) -> None:
    err = load_error(write_lines(tmp_path, chunk(), chunk(name=5)))  # type: ignore[arg-type]
    assert (err.line, err.field) == (2, "name")


def test_unknown_field(tmp_path: Path) -> None:
    err = load_error(write_lines(tmp_path, chunk(colour="red")))
    assert (err.line, err.field) == (1, "colour")


def test_nested_missing_and_unknown_fields_name_their_path(tmp_path: Path) -> None:
    bad = chunk()
    del bad["expected"]["edges"][2]["quote"]
    err = load_error(write_lines(tmp_path, bad))
    assert (err.line, err.field) == (1, "expected.edges[2].quote")

    bad = chunk()
    bad["expected"]["entities"][1]["aliases"] = []
    err = load_error(write_lines(tmp_path, bad))
    assert err.field == "expected.entities[1].aliases"

    bad = chunk()
    bad["expected"]["entities"][0]["type"] = None
    err = load_error(write_lines(tmp_path, bad))
    assert err.field == "expected.entities[0].type"


def test_bad_source_type(tmp_path: Path) -> None:
    err = load_error(write_lines(tmp_path, chunk(source_type="audio")))
    assert err.field == "source_type"


def test_duplicate_chunk_name_names_both_lines(tmp_path: Path) -> None:
    path = write_lines(tmp_path, chunk("a"), chunk("b"), "", chunk("a"))
    err = load_error(path)
    assert (err.line, err.field) == (4, "name")
    assert "line 1" in err.problem


def test_entity_quote_not_verbatim(tmp_path: Path) -> None:
    bad = chunk()
    bad["expected"]["entities"][1]["quote"] = "charles babbage"  # wrong case
    err = load_error(write_lines(tmp_path, chunk("first"), bad))
    assert (err.line, err.field) == (2, "expected.entities[1].quote")


def test_edge_quote_not_verbatim(tmp_path: Path) -> None:
    bad = chunk()
    bad["expected"]["edges"][2]["quote"] = "on the  Analytical Engine"  # doubled space
    err = load_error(write_lines(tmp_path, bad))
    assert (err.line, err.field) == (1, "expected.edges[2].quote")


def test_empty_quote_rejected(tmp_path: Path) -> None:
    bad = chunk()
    bad["expected"]["edges"][0]["quote"] = ""
    err = load_error(write_lines(tmp_path, bad))
    assert err.field == "expected.edges[0].quote"


@pytest.mark.parametrize("side", ["source", "target"])
def test_edge_endpoint_names_no_entity(tmp_path: Path, side: str) -> None:
    bad = chunk()
    bad["expected"]["edges"][1][side] = "Babbage"
    err = load_error(write_lines(tmp_path, bad))
    assert (err.line, err.field) == (1, f"expected.edges[1].{side}")


def test_duplicate_entity_name(tmp_path: Path) -> None:
    bad = chunk()
    bad["expected"]["entities"][2]["name"] = "Ada Lovelace"
    err = load_error(write_lines(tmp_path, bad))
    assert (err.line, err.field) == (1, "expected.entities[2].name")
    assert "expected.entities[0]" in err.problem


def test_an_entity_name_repeated_in_other_case_is_a_duplicate(tmp_path: Path) -> None:
    """Scoring compares names casefolded: `ADA  lovelace` would have been expected twice."""
    bad = chunk()
    bad["expected"]["entities"][2]["name"] = "ADA  lovelace"
    bad["expected"]["edges"] = []
    err = load_error(write_lines(tmp_path, bad))
    assert (err.line, err.field) == (1, "expected.entities[2].name")
    assert "as 'Ada Lovelace'" in err.problem


def test_a_duplicate_edge_is_named(tmp_path: Path) -> None:
    """It had been accepted: scoring counted the one edge as expected twice."""
    bad = chunk()
    edges = bad["expected"]["edges"]
    edges.append({**edges[1], "source": "charles babbage", "fact": "another fact"})
    err = load_error(write_lines(tmp_path, bad))
    assert (err.line, err.field) == (1, "expected.edges[3]")
    assert "duplicate edge 'charles babbage' -CREATED-> 'Analytical Engine'" in err.problem
    assert "expected.edges[1]" in err.problem
    reversed_edge = {**edges[0], "source": "Charles Babbage", "target": "Ada Lovelace"}
    bad["expected"]["edges"] = [*edges[:3], reversed_edge]  # the other direction is no repeat
    assert load_prose_corpus(write_lines(tmp_path, bad), ONTOLOGY).chunks


# --- with an ontology ------------------------------------------------------------------------


def test_undeclared_entity_type(tmp_path: Path) -> None:
    bad = chunk()
    bad["expected"]["entities"][2]["type"] = "Machine"
    path = write_lines(tmp_path, bad)
    load_prose_corpus(path)  # fine without an ontology
    err = load_error(path, ONTOLOGY)
    assert (err.line, err.field) == (1, "expected.entities[2].type")
    assert "Machine" in err.problem


def test_undeclared_relation(tmp_path: Path) -> None:
    bad = chunk()
    bad["expected"]["edges"][1]["relation"] = "INVENTED"
    path = write_lines(tmp_path, bad)
    load_prose_corpus(path)
    err = load_error(path, ONTOLOGY)
    assert (err.line, err.field) == (1, "expected.edges[1].relation")


def test_endpoint_type_not_allowed(tmp_path: Path) -> None:
    bad = chunk()
    # CREATED allows Person -> Work; Person -> Person is not allowed.
    bad["expected"]["edges"][1]["target"] = "Ada Lovelace"
    err = load_error(write_lines(tmp_path, bad), ONTOLOGY)
    assert (err.line, err.field) == (1, "expected.edges[1].target")

    bad = chunk()
    bad["expected"]["edges"][0]["source"] = "Analytical Engine"
    err = load_error(write_lines(tmp_path, bad), ONTOLOGY)
    assert (err.line, err.field) == (1, "expected.edges[0].source")


def test_relation_without_endpoint_constraints_allows_any_types(tmp_path: Path) -> None:
    ok = chunk()
    ok["expected"]["edges"][2]["relation"] = "MENTIONS"
    ok["expected"]["edges"][2]["source"] = "Analytical Engine"
    load_prose_corpus(write_lines(tmp_path, ok), ONTOLOGY)


def test_a_key_given_twice_in_a_line_is_an_error(tmp_path: Path) -> None:
    # JSON's "last one wins" had silently made a labelled chunk unlabelled.
    path = tmp_path / "c.jsonl"
    path.write_text('{"name": "a", "body": "x", "expected": {"entities": []}, "expected": null}\n')
    with pytest.raises(InputFileError) as err:
        load_prose_corpus(path)
    assert err.value.line == 1 and "'expected' is given twice" in str(err.value)


def test_an_empty_corpus_and_a_folder_are_errors(tmp_path: Path) -> None:
    empty = tmp_path / "c.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(InputFileError, match="holds no chunk"):
        load_prose_corpus(empty)
    with pytest.raises(InputFileError, match="is a folder"):
        load_prose_corpus(tmp_path)
