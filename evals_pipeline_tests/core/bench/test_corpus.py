from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from evals_pipeline.core.bench.corpus import (
    CORPUS_DIGEST,
    CORPUS_VERSION,
    corpus_digest,
    load_bench_corpus,
)
from evals_pipeline.core.errors import InputFileError
from evals_pipeline_tests.pipeline_fixtures import BENCH_SCHEMAS, CASES

from .helpers import expected, write_corpus

FAMILIES = {
    "direction", "units", "identity", "mention", "recast", "injection", "distractors",
    "selection", "context",
}  # fmt: skip


def test_shipped_corpus_loads_nine_families_of_four_split_two_and_two() -> None:
    corpus = load_bench_corpus(CASES)
    assert {c.family for c in corpus.cases} == FAMILIES
    assert Counter(c.family for c in corpus.cases) == dict.fromkeys(FAMILIES, 4)
    for family in FAMILIES:
        splits = Counter(c.split for c in corpus.cases if c.family == family)
        assert splits == {"dev": 2, "test": 2}, family
    assert len(load_bench_corpus(CASES, split="test").cases) == 18
    assert all(c.split == "dev" for c in load_bench_corpus(CASES, split="dev").cases)
    # Each family's instances are in different domains (their schemas differ).
    for family in FAMILIES:
        firsts = [c.schema_files[0] for c in corpus.cases if c.family == family]
        assert len(set(firsts)) == 4, family


def test_corpus_digest_is_pinned() -> None:
    digest = corpus_digest(CASES, BENCH_SCHEMAS)
    assert digest == CORPUS_DIGEST, (
        f"the bench corpus changed: bump CORPUS_VERSION (now {CORPUS_VERSION}) and set "
        f'CORPUS_DIGEST = "{digest}" in evals_pipeline/core/bench/corpus.py'
    )


def test_any_content_change_moves_the_digest_and_unpublishes(tmp_path: Path) -> None:
    shutil.copytree(CASES, tmp_path / "corpus" / "cases")
    shutil.copytree(BENCH_SCHEMAS, tmp_path / "ontologies" / "bench")
    root = tmp_path / "corpus" / "cases"
    assert load_bench_corpus(root, "test").modified is False
    episodes = root / "direction" / "football" / "episodes.jsonl"
    episodes.write_text(episodes.read_text().replace("Saturday", "Sunday"))
    changed = load_bench_corpus(root, "test")
    assert changed.digest != CORPUS_DIGEST and changed.modified
    schema = tmp_path / "ontologies" / "bench" / "common.yaml"
    schema.write_text(schema.read_text() + "\n# edited\n")
    assert corpus_digest(root) not in (CORPUS_DIGEST, changed.digest)


def test_case_digests_change_with_the_case_only(tmp_path: Path) -> None:
    shutil.copytree(CASES, tmp_path / "corpus" / "cases")
    shutil.copytree(BENCH_SCHEMAS, tmp_path / "ontologies" / "bench")
    root = tmp_path / "corpus" / "cases"
    before = {c.id: c.digest for c in load_bench_corpus(root).cases}
    path = root / "direction" / "football" / "case.yaml"
    path.write_text(path.read_text().replace("the loser", "the losing club"))
    after = {c.id: c.digest for c in load_bench_corpus(root).cases}
    assert [k for k in before if before[k] != after[k]] == ["direction/football"]


def test_the_mini_case_loads(tmp_path: Path) -> None:
    corpus = load_bench_corpus(write_corpus(tmp_path))
    (case,) = corpus.cases
    assert case.id == "mini/rail" and case.split == "dev"
    assert len(case.episodes[0].expected.edges) == 3


def _with(change: Any) -> dict[str, Any]:
    data = expected()
    change(data["ep-1"])
    return data


def _set(path: str, value: Any) -> Any:
    def change(ep: dict[str, Any]) -> None:
        *head, last = path.split(".")
        node: Any = ep
        for part in head:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(last) if last.isdigit() else last] = value

    return change


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        (_set("vertices.ash.quote", "Ash opened"), "ep-1.vertices.ash.quote", "not in the text"),
        (_set("edges.1.quote", "Birch joins Cedar"), "ep-1.edges[1].quote", "not in the text"),
        (
            _set("vertices.ash.properties.opened", "1 May 1990"),
            "ep-1.vertices.ash.properties.opened",
            "what a date field makes",
        ),
        (
            _set("vertices.ash.properties.platforms", "four"),
            "ep-1.vertices.ash.properties.platforms",
            "what a integer field makes",
        ),
        (
            _set("vertices.ash.properties.platforms", 5),
            "ep-1.vertices.ash.properties.platforms",
            "not stated by its quote",
        ),
        (
            _set("vertices.ash.properties.colour", "red"),
            "ep-1.vertices.ash.properties.colour",
            "not declared",
        ),
        (_set("vertices.ash.type", "Stop"), "ep-1.vertices.ash.type", "not in the case's schema"),
        (_set("edges.0.target", "elm"), "ep-1.edges[0].target", "unknown handle"),
        (_set("edges.0.relation", "JOINS"), "ep-1.edges[0].relation", "not in the case's schema"),
        (
            _set("forbidden.edges.0.source", "oak"),
            "ep-1.forbidden.edges[0].source",
            "unknown handle",
        ),
        (
            _set("forbidden.vertices.0.type", "Depot"),
            "ep-1.forbidden.vertices[0].type",
            "not in the case's schema",
        ),
        (
            _set("vertices.ash.from_context", {"opened": 0}),
            "ep-1.vertices.ash.from_context.opened",
            "not an identity property",
        ),
        (_set("vertices.birch.name", "ash"), "ep-1.vertices.birch.name", "also vertex"),
        (_set("vertices.ash.mention", True), "ep-1.vertices.ash.mention", "'name'-identity"),
    ],
)
def test_expected_errors_name_file_and_field(
    tmp_path: Path, change: Any, field: str, problem: str
) -> None:
    root = write_corpus(tmp_path, expected_yaml=_with(change))
    with pytest.raises(InputFileError) as err:
        load_bench_corpus(root)
    assert err.value.path.name == "expected.yaml"
    assert err.value.field == field
    assert problem in err.value.problem
    assert f"expected.yaml [{field}]" in str(err.value)


def test_an_identity_value_may_be_quoted_from_the_context_only(tmp_path: Path) -> None:
    body = "The train stopped at Ash."
    vertices = {
        "train": {
            "type": "Train",
            "name": "the train",
            "quote": "The train",
            "properties": {"number": "IC 204"},
            "from_context": {"number": 0},
        },
        "ash": {"type": "Station", "name": "Ash", "quote": "Ash"},
    }
    graph = {"vertices": vertices, "edges": []}
    ok = write_corpus(
        tmp_path / "ok",
        episodes=[{"source_id": "ep-1", "body": body, "context": ["Train IC 204 left at noon."]}],
        expected_yaml={"ep-1": graph},
    )
    load_bench_corpus(ok)
    bad = write_corpus(
        tmp_path / "bad",
        episodes=[{"source_id": "ep-1", "body": body, "context": ["Train IC 205 left at noon."]}],
        expected_yaml={"ep-1": graph},
    )
    with pytest.raises(InputFileError) as err:
        load_bench_corpus(bad)
    assert err.value.field == "ep-1.vertices.train.properties.number"


def test_missing_and_unknown_episodes_are_named(tmp_path: Path) -> None:
    data = expected()
    data["ep-2"] = data["ep-1"]
    with pytest.raises(InputFileError) as err:
        load_bench_corpus(write_corpus(tmp_path / "a", expected_yaml=data))
    assert (err.value.path.name, err.value.field) == ("expected.yaml", "ep-2")
    with pytest.raises(InputFileError) as err:
        load_bench_corpus(write_corpus(tmp_path / "b", expected_yaml={}))
    assert err.value.path.name == "expected.yaml"


@pytest.mark.parametrize(
    ("splits", "field", "problem"),
    [
        ({"dev": [], "test": []}, "mini/rail", "in no split"),
        ({"dev": ["mini/rail", "mini/tram"]}, "dev[1]", "unknown case"),
        ({"dev": ["mini/rail"], "test": ["mini/rail"]}, "test[0]", "in two splits"),
        ({"train": ["mini/rail"]}, "train", "unknown split"),
        ({"dev": [{"a": 1}]}, "dev[0]", "a case is named family/instance"),  # was a TypeError
    ],
)
def test_splits_errors_name_the_field(
    tmp_path: Path, splits: dict[str, Any], field: str, problem: str
) -> None:
    with pytest.raises(InputFileError) as err:
        load_bench_corpus(write_corpus(tmp_path, splits=splits))
    assert err.value.path.name == "SPLITS.yaml"
    assert err.value.field == field and problem in err.value.problem


def test_case_file_errors_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(InputFileError) as err:
        load_bench_corpus(
            write_corpus(tmp_path, case={"description": "x", "schema": ["nope.yaml"]})
        )
    assert (err.value.path.name, err.value.field) == ("case.yaml", "schema[0]")
    with pytest.raises(InputFileError) as err:
        load_bench_corpus(
            write_corpus(
                tmp_path / "b", case={"description": "x", "schema": ["mini.yaml"], "budget": 0}
            )
        )
    assert (err.value.path.name, err.value.field) == ("case.yaml", "budget")


def test_non_utf8_episodes_name_the_file_and_line(tmp_path: Path) -> None:
    root = write_corpus(tmp_path)
    episodes = root / "mini" / "rail" / "episodes.jsonl"
    episodes.write_bytes(episodes.read_bytes() + b'{"source_id": "ep-2", "body": "caf\xe9"}\n')
    with pytest.raises(InputFileError) as err:
        load_bench_corpus(root)
    assert err.value.path == episodes and err.value.line == 2
    assert "not UTF-8 text (byte 34 of the line)" in err.value.problem


def test_a_folder_where_a_case_file_goes_is_named(tmp_path: Path) -> None:
    root = write_corpus(tmp_path)
    episodes = root / "mini" / "rail" / "episodes.jsonl"
    episodes.unlink()
    episodes.mkdir()
    with pytest.raises(InputFileError, match="is a folder") as err:
        load_bench_corpus(root)
    assert err.value.path == episodes
    with pytest.raises(InputFileError, match="is a folder"):
        corpus_digest(root)


def test_an_episode_with_nothing_under_it_is_named(tmp_path: Path) -> None:
    # `ep-1:` and nothing under it, an easy slip when adding a case: had been an IndexError.
    with pytest.raises(InputFileError, match="should be a mapping of fields") as err:
        load_bench_corpus(write_corpus(tmp_path, expected_yaml={"ep-1": None}))
    assert (err.value.path.name, err.value.field) == ("expected.yaml", "ep-1")


@pytest.mark.parametrize(
    ("value", "field"),
    [("budget", True), ("budget", "3"), ("budget", 2.0), ("recast", "yes"), ("recast", 1)],
)
def test_a_case_count_or_flag_of_another_type_is_refused(
    tmp_path: Path, value: str, field: Any
) -> None:
    """`budget: true` had loaded as a budget of 1, and `recast: "yes"` as true."""
    case = {"description": "x", "schema": ["mini.yaml"], value: field}
    with pytest.raises(InputFileError) as err:
        load_bench_corpus(write_corpus(tmp_path, case=case))
    assert (err.value.path.name, err.value.field) == ("case.yaml", value)


def test_a_case_folder_without_its_case_file_is_named(tmp_path: Path) -> None:
    """A misnamed case.yml, or a case nested a level too deep, had been left out unseen."""
    root = write_corpus(tmp_path)
    shutil.copytree(root / "mini" / "rail", root / "mini" / "tram")
    (root / "mini" / "tram" / "case.yaml").rename(root / "mini" / "tram" / "case.yml")
    with pytest.raises(InputFileError, match=r"without a case\.yaml") as err:
        load_bench_corpus(root)
    assert err.value.path == root / "mini" / "tram"
    assert "case.yml, episodes.jsonl, expected.yaml" in err.value.problem
    shutil.rmtree(root / "mini" / "tram")
    (root / "mini" / "bus" / "deep").mkdir(parents=True)
    shutil.copy(root / "mini" / "rail" / "case.yaml", root / "mini" / "bus" / "deep")
    with pytest.raises(InputFileError, match=r"without a case\.yaml") as err:
        load_bench_corpus(root)
    assert err.value.path == root / "mini" / "bus"
    shutil.rmtree(root / "mini" / "bus")
    shutil.copy(root / "mini" / "rail" / "case.yaml", root / "mini")
    with pytest.raises(InputFileError, match="family/instance/") as err:
        load_bench_corpus(root)
    assert err.value.path == root / "mini" / "case.yaml"
