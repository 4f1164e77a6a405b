import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evals_pipeline.core.errors import InputFileError
from evals_pipeline.core.models import Edge, ExtractionResult
from evals_pipeline.core.scoring.webnlg import (
    aligned_matches,
    normalize_element,
    score_corpus,
    score_triples,
)
from evals_pipeline.core.webnlg import category_of, load_webnlg, load_webnlg_ontology

# The WebNLG data lives outside the repository (CC BY-NC-SA); point EVALS_WEBNLG_DIR elsewhere.
# shared/ sits beside the repository (on a developer machine and in CI alike).
_BESIDE_REPO = Path(__file__).resolve().parents[3] / "shared" / "data" / "webnlg"
DATA = Path(os.environ.get("EVALS_WEBNLG_DIR", str(_BESIDE_REPO)))
DEV = DATA / "dev.jsonl"
ONTOLOGIES = DATA / "ontologies"

needs_data = pytest.mark.skipif(not DEV.exists(), reason="WebNLG data not present")

# An invented entry in WebNLG's format (not one of its texts).
RECORD: dict[str, Any] = {
    "id": "synthetic-2t-Airport-1",
    "category": "Airport",
    "text": "Aarhus Airport serves Aarhus, Denmark.",
    "triples": [
        {"subject": "Aarhus Airport", "predicate": "cityServed", "object": "Aarhus, Denmark"},
        {"subject": "Aarhus Airport", "predicate": "location", "object": "Aarhus, Denmark"},
    ],
    "alt_texts": [],
}


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "sample.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def T(s: str, p: str, o: str) -> Edge:
    return Edge(source=s, relation=p, target=o)


@needs_data
def test_dev_file_loads() -> None:
    corpus = load_webnlg(DEV)
    assert len(corpus.chunks) == 300
    assert len(corpus.categories) == 16
    assert sum(len(c) for c in corpus.by_category().values()) == 300
    assert len(corpus.by_category()["Airport"]) == 19
    first = corpus.chunks[0]
    assert first.episode.name == "webnlg3-en-dev-1t-Airport-Id2"
    assert first.episode.group_id == "webnlg-Airport"
    assert category_of(first) == "Airport"
    assert first.expected is not None
    assert [e.name for e in first.expected.entities] == ["Aarhus Airport", "2702.0"]
    assert all(e.type is None and e.quote == "" for e in first.expected.entities)
    assert first.expected.edges == (T("Aarhus Airport", "runwayLength", "2702.0"),)
    assert len(corpus.digest) == 64


@needs_data
def test_all_ontologies_load() -> None:
    files = sorted(ONTOLOGIES.glob("*.yaml"))
    assert len(files) == 19
    ontologies = {f.stem: load_webnlg_ontology(f) for f in files}
    assert all(o.name == stem for stem, o in ontologies.items())
    assert len(ontologies["Airport"].relation_types) == 58
    assert ontologies["Airport"].entity_types == ()
    runway = next(r for r in ontologies["Airport"].relation_types if r.name == "runwayLength")
    assert runway.description and runway.source == () and runway.target == ()
    # Every dev predicate is declared by its category's ontology.
    for chunk in load_webnlg(DEV).chunks:
        names = ontologies[category_of(chunk)].relation_type_names
        assert chunk.expected is not None
        assert {e.relation for e in chunk.expected.edges} <= names


@needs_data
def test_oracle_scores_perfectly_on_the_whole_dev_file() -> None:
    gold = load_webnlg(DEV).expected_graphs()
    scores = score_corpus(gold, gold)
    assert (scores["precision"], scores["recall"], scores["f1"]) == (1.0, 1.0, 1.0)
    assert scores["tp"] == sum(len(g.edges) for g in gold.values())
    assert scores["missing"] == [] and scores["unscored"] == []


@needs_data
def test_raw_gold_spellings_score_as_the_readme_says() -> None:
    """The raw `<modifiedtripleset>` strings normalise to the gold but for one `"x"(unit)`."""
    gold = load_webnlg(DEV).expected_graphs()
    raw = {}
    for line in DEV.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        raw[rec["id"]] = ExtractionResult(
            edges=tuple(T(t["subject"], t["predicate"], t["object"]) for t in rec["triples_raw"])
        )
    assert score_corpus(raw, gold)["f1"] == pytest.approx(0.999, abs=0.001)


@pytest.mark.parametrize(
    ("raw", "role", "expected"),
    [
        ("runwayLength", "predicate", "runway length"),
        (
            "associatedBand/associatedMusicalArtist",
            "predicate",
            "associated band/associated musical artist",
        ),
        ("Aarhus_Airport", "subject", "aarhus airport"),
        ('"2000-01-01"', "object", "2000-01-01"),
        ('"18R/36L"', "object", "18r/36l"),
        ("Ardmore Airport (New Zealand)", "object", "ardmore airport"),
        ("Ardmore_Airport_(New_Zealand)", "object", "ardmore airport"),
        ("Ardmore Airport (New Zealand)", "subject", "ardmore airport (new zealand)"),
        ("52.0 (minutes)", "object", "52.0"),
        ("  Andrews   County,\tTexas ", "subject", "andrews county, texas"),
        ('Officer\'s Star "Parasol"', "object", 'officer\'s star "parasol"'),
    ],
)
def test_normalize_element(raw: str, role: Any, expected: str) -> None:
    assert normalize_element(raw, role=role) == expected


def test_normalize_element_rejects_unknown_role() -> None:
    with pytest.raises(ValueError, match="role"):
        normalize_element("x", role="verb")  # type: ignore[arg-type]


def test_a_triple_matches_only_when_all_three_elements_match() -> None:
    gold = [T("Aarhus_Airport", "runwayLength", "2702.0")]
    assert score_triples([T("aarhus airport", "runway length", "2702.0")], gold) == (1, 0, 0)
    assert score_triples([T("Aarhus Airport", "runwayLength", "2702")], gold) == (0, 1, 1)
    assert score_triples([T("2702.0", "runwayLength", "Aarhus Airport")], gold) == (0, 1, 1)
    assert score_triples([], gold) == (0, 0, 1)
    assert score_triples(gold, []) == (0, 1, 0)


def test_a_duplicated_prediction_is_one_tp_and_one_fp() -> None:
    gold = [T("Aarhus Airport", "cityServed", "Aarhus")]
    pred = [
        T("Aarhus Airport", "cityServed", "Aarhus"),
        T("aarhus_airport", "city_served", "Aarhus"),
    ]
    assert score_triples(pred, gold) == (1, 1, 0)
    # Two identical gold triples need two predictions.
    assert score_triples(pred[:1], gold * 2) == (1, 0, 1)


def test_alignment_is_a_maximum_matching_not_greedy() -> None:
    # Prediction 0 matches gold 0 and 1, prediction 1 only gold 0. Greedy in row order pairs
    # 0-0 and strands prediction 1; the maximum matching pairs 0-1 and 1-0.
    match = np.array([[True, True], [True, False]])
    assert aligned_matches(match) == 2
    chain = np.array([[True, True, False], [True, False, False], [False, True, True]], dtype=bool)
    assert aligned_matches(chain) == 3
    assert aligned_matches(np.zeros((0, 3), dtype=bool)) == 0
    assert aligned_matches(np.zeros((2, 2), dtype=bool)) == 0


def test_score_corpus_pools_and_counts_missing_predictions_as_misses() -> None:
    gold = {
        "a": ExtractionResult(edges=(T("X", "p", "Y"), T("X", "q", "Z"))),
        "b": ExtractionResult(edges=(T("U", "p", "V"),)),
        "c": ExtractionResult(edges=(T("U", "q", "V"),)),
    }
    pred: dict[str, ExtractionResult | None] = {
        "a": ExtractionResult(edges=(T("X", "p", "Y"), T("X", "r", "Z"))),
        "b": None,
        "extra": ExtractionResult(),
    }
    scores = score_corpus(pred, gold)
    assert (scores["tp"], scores["fp"], scores["fn"]) == (1, 1, 3)
    assert scores["precision"] == 0.5
    assert scores["recall"] == 0.25
    assert scores["f1"] == pytest.approx(2 * 0.5 * 0.25 / 0.75)
    assert scores["chunks"]["b"] == {"tp": 0, "fp": 0, "fn": 1}
    assert scores["missing"] == ["b", "c"]
    assert scores["unscored"] == ["extra"]


def test_entities_are_distinct_subjects_and_objects_in_order(tmp_path: Path) -> None:
    corpus = load_webnlg(_write(tmp_path, [json.dumps(RECORD), ""]))
    (chunk,) = corpus.chunks
    assert chunk.expected is not None
    assert [e.name for e in chunk.expected.entities] == ["Aarhus Airport", "Aarhus, Denmark"]
    assert [e.relation for e in chunk.expected.edges] == ["cityServed", "location"]
    assert corpus.categories == ("Airport",)


def _bad(**change: Any) -> str:
    rec = json.loads(json.dumps(RECORD))
    for key, value in change.items():
        if value is None:
            del rec[key]
        else:
            rec[key] = value
    return json.dumps(rec)


@pytest.mark.parametrize(
    ("line", "field", "problem"),
    [
        ("{not json", None, "invalid JSON"),
        ("[1, 2]", None, "JSON object"),
        (_bad(text=None), "text", "Field required"),
        (_bad(triples=None), "triples", "Field required"),
        (_bad(triples=[]), "triples", "at least 1"),
        (
            _bad(triples=[RECORD["triples"][0], {"subject": "A", "predicate": "p"}]),
            "triples[1].object",
            "Field required",
        ),
        (_bad(category=None), "category", "Field required"),
    ],
)
def test_bad_lines_name_file_line_and_field(
    tmp_path: Path, line: str, field: str | None, problem: str
) -> None:
    path = _write(tmp_path, [json.dumps(RECORD), "", line])
    with pytest.raises(InputFileError) as info:
        load_webnlg(path)
    assert info.value.path == path
    assert info.value.line == 3
    assert info.value.field == field
    assert problem in info.value.problem
    assert f"{path}:3" in str(info.value)


def test_duplicate_ids_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="duplicate id") as info:
        load_webnlg(_write(tmp_path, [json.dumps(RECORD), json.dumps(RECORD)]))
    assert (info.value.line, info.value.field) == (2, "id")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="not found"):
        load_webnlg(tmp_path / "absent.jsonl")


def test_folder_is_named_not_a_traceback(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="is a folder") as err:
        load_webnlg(tmp_path)
    assert err.value.path == tmp_path


def test_ontology_errors_name_line_or_field(tmp_path: Path) -> None:
    path = tmp_path / "Bad.yaml"
    path.write_text("category: Bad\nrelations: [\n", encoding="utf-8")
    with pytest.raises(InputFileError, match="invalid YAML") as info:
        load_webnlg_ontology(path)
    assert info.value.line is not None

    path.write_text("category: Bad\nentity_types: []\nrelations:\n- description: x\n")
    with pytest.raises(InputFileError) as info:
        load_webnlg_ontology(path)
    assert info.value.field == "relations[0].name"

    path.write_text("relations: []\nentity_types: []\n")
    with pytest.raises(InputFileError) as info:
        load_webnlg_ontology(path)
    assert info.value.field == "category"

    path.write_text("category: Bad\nentity_types: []\nrelations:\n- name: p\n- name: p\n")
    with pytest.raises(InputFileError, match="duplicate") as info:
        load_webnlg_ontology(path)
    assert info.value.field == "relations[1].name"

    path.write_text("- just a list\n")
    with pytest.raises(InputFileError, match="mapping"):
        load_webnlg_ontology(path)
