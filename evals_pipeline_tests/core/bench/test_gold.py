import copy
import json
import shutil
from pathlib import Path

import pytest

from evals_pipeline.core.bench.gold import GoldCorpus, load_gold, oracle_shortfalls, run_gold
from evals_pipeline.core.compare import compare_runs
from evals_pipeline.core.errors import InputFileError
from evals_pipeline.core.extractors.oracle import OracleExtractor
from evals_pipeline_tests.pipeline_fixtures import write_webnlg


def test_oracle_shortfalls_name_the_row_and_rate() -> None:
    report = {
        "kind": "cases",
        "rows": {"oracle": {"rates": {"entity_f1": 1.0, "edge_f1": 0.5, "mention": None}}},
    }
    assert oracle_shortfalls(report, ["oracle"]) == ["oracle edge_f1=0.5"]
    assert oracle_shortfalls(report, []) == []


def _webnlg_gold(folder: Path, second_text: str = "Abilene is in Texas.") -> GoldCorpus:
    """Two invented entries in WebNLG's layout, one of them with two triples."""
    path = write_webnlg(folder)
    entry = {
        "id": "synthetic-2t-Airport-2",
        "category": "Airport",
        "text": second_text,
        "triples": [
            {"subject": "Abilene", "predicate": "cityServed", "object": "Texas"},
            {"subject": "Abilene", "predicate": "isPartOf", "object": "Texas"},
        ],
    }
    with path.open("a") as out:
        out.write(json.dumps(entry) + "\n")
    with (folder / "ontologies" / "Airport.yaml").open("a") as out:
        out.write("- name: isPartOf\n")
    return load_gold("webnlg", path)


def test_a_gold_predicate_its_category_does_not_declare_is_named(tmp_path: Path) -> None:
    """It had been accepted: never produced in strict mode, so the oracle row fell short."""
    path = write_webnlg(tmp_path / "g")
    entry = json.loads(path.read_text())
    entry["triples"].append({"subject": "Aarhus", "predicate": "country", "object": "Denmark"})
    path.write_text(json.dumps(entry) + "\n")
    with pytest.raises(InputFileError) as err:
        load_gold("webnlg", path)
    assert (err.value.path, err.value.field) == (path, "triples[1].predicate")
    assert "entry 'synthetic-1t-Airport-1': predicate 'country' is not a relation of" in str(
        err.value
    )


def test_a_webnlg_file_without_its_ontologies_folder_says_so(tmp_path: Path) -> None:
    """It had named `ontologies/Airport.yaml` as missing, not the folder it is read from."""
    path = write_webnlg(tmp_path / "g")
    shutil.rmtree(tmp_path / "g" / "ontologies")
    with pytest.raises(InputFileError) as err:
        load_gold("webnlg", path)
    assert err.value.path == path
    assert f"{tmp_path / 'g' / 'ontologies'} is no such file or folder" in str(err.value)


def test_two_webnlg_runs_compare_on_their_triples(tmp_path: Path) -> None:
    """A WebNLG run's triple counts had no rate in `compare`, and its episodes no digest: the
    comparison was refused, or with --pair-by-name ranked by tokens, while its triple F1 fell."""
    gold = _webnlg_gold(tmp_path / "g")
    assert gold.webnlg is not None
    a = run_gold(gold, OracleExtractor(gold.webnlg.expected_graphs()), row_name="m")
    b = copy.deepcopy(a)
    for episode in b["rows"]["m"]["episodes"]:
        episode["counts"]["triples_tp"] = 0  # everything produced, nothing right
    result = compare_runs(a, b, resamples=200)
    rates = {r["rate"]: r for r in result["rates"]}
    assert rates["triple_precision"]["a"]["rate"] == 1.0
    assert rates["triple_precision"]["b"]["rate"] == 0.0
    assert rates["triple_recall"]["delta"] == -1.0
    assert result["ranking_metric"] == "triple F1"


def test_a_webnlg_episode_whose_text_changed_is_not_paired(tmp_path: Path) -> None:
    gold_a = _webnlg_gold(tmp_path / "a")
    gold_b = _webnlg_gold(tmp_path / "b", second_text="Abilene, Texas, has an airport.")
    assert gold_a.webnlg is not None and gold_b.webnlg is not None
    a = run_gold(gold_a, OracleExtractor(gold_a.webnlg.expected_graphs()), row_name="m")
    b = run_gold(gold_b, OracleExtractor(gold_b.webnlg.expected_graphs()), row_name="m")
    result = compare_runs(a, b, resamples=50)
    assert result["paired"] == 1
    assert [u["source_id"] for u in result["unpaired"]["case_changed"]] == [
        "synthetic-2t-Airport-2"
    ]


def test_a_webnlg_row_that_produced_nothing_renders_its_precision_as_undefined(
    tmp_path: Path,
) -> None:
    """A cassette recorded for other texts misses every episode: nothing produced, so the
    triple precision is undefined (None), which the report shows as —, not 0.000."""
    from evals_pipeline.core.bench.gold import render_gold_markdown
    from evals_pipeline.core.extractors.specs import build_extractor, parse_backend_spec

    gold = _webnlg_gold(tmp_path / "g")
    empty = tmp_path / "empty.jsonl"
    empty.touch()
    extractor = build_extractor(parse_backend_spec(f"cassette:path={empty}"))
    report = run_gold(gold, extractor, row_name="miss")
    rates = report["rows"]["miss"]["rates"]
    assert rates["triple_precision"] is None and rates["triple_f1"] == 0.0
    assert "| miss | — | 0.000 | 0.000 | 0 | 0 | 3 | 2 |" in render_gold_markdown(report)
