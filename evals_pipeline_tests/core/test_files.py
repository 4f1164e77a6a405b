from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from evals_pipeline.core.bench.corpus import load_bench_corpus
from evals_pipeline.core.claims.gate import read_baseline
from evals_pipeline.core.claims.golden import load_golden_example
from evals_pipeline.core.claims.recordings import read_recording
from evals_pipeline.core.compare import load_run_report
from evals_pipeline.core.corpus import load_prose_corpus
from evals_pipeline.core.errors import InputFileError
from evals_pipeline.core.files import parse_json, validate_file_model
from evals_pipeline.core.prices import load_prices
from evals_pipeline.core.webnlg import load_webnlg

from .bench.helpers import write_corpus


def test_parse_json_names_line_and_column(tmp_path: Path) -> None:
    with pytest.raises(InputFileError) as err:
        parse_json(tmp_path / "a.json", '{\n  "a": 1,\n  "b": }')
    assert err.value.line == 3 and "column 8" in err.value.problem
    with pytest.raises(InputFileError) as err:
        parse_json(tmp_path / "a.jsonl", '{"a": }', line=7)
    assert err.value.line == 7  # the JSONL line, not the line within it


def test_parse_json_refuses_a_key_given_twice_at_any_depth(tmp_path: Path) -> None:
    assert parse_json(tmp_path / "a.json", '{"a": {"b": 1, "c": 2}, "d": [{"b": 3}]}') == {
        "a": {"b": 1, "c": 2},
        "d": [{"b": 3}],
    }
    with pytest.raises(InputFileError, match="key 'b' is given twice") as err:
        parse_json(tmp_path / "a.json", '{"a": {"b": 1, "b": 2}}')
    assert err.value.path == tmp_path / "a.json"


def _bench_episodes(tmp_path: Path) -> Callable[[], Any]:
    root = write_corpus(tmp_path)
    episodes = root / "mini" / "rail" / "episodes.jsonl"
    episodes.write_text('{"source_id": "ep-1", "source_id": "ep-2", "body": "x"}\n')
    return lambda: load_bench_corpus(root)


def _in_file(name: str, text: str, load: Callable[[Path], Any]) -> Callable[[Path], Any]:
    def make(tmp_path: Path) -> Callable[[], Any]:
        path = tmp_path / name
        path.write_text(text)
        return lambda: load(path)

    return make


# Every JSON input a person writes or edits; each once with a key given twice.
TWICE = '{"a": 1, "a": 2}'
LOADERS: dict[str, Callable[[Path], Callable[[], Any]]] = {
    "prices": _in_file(
        "prices.json",
        '{"m": {"input_per_1m": 1, "input_per_1m": 2, "output_per_1m": 3}}',
        load_prices,
    ),
    "golden example": _in_file("ex.json", TWICE, load_golden_example),
    "claim recording": _in_file("rec.json", TWICE, read_recording),
    "gate baseline": _in_file("baseline.json", TWICE, read_baseline),
    "run report": _in_file("run.json", TWICE, load_run_report),
    "webnlg line": _in_file("dev.jsonl", "\n" + TWICE + "\n", load_webnlg),
    "bench episodes": _bench_episodes,
}


@pytest.mark.parametrize("name", list(LOADERS))
def test_every_json_input_refuses_a_key_given_twice(name: str, tmp_path: Path) -> None:
    load = LOADERS[name](tmp_path)
    with pytest.raises(InputFileError, match="is given twice in one object") as err:
        load()
    if name == "webnlg line":
        assert err.value.line == 2
    if name == "bench episodes":
        assert err.value.path.name == "episodes.jsonl" and err.value.line == 1


@pytest.mark.parametrize("name", ["prices", "golden example", "claim recording", "gate baseline"])
def test_every_json_input_names_bytes_that_are_not_utf8(name: str, tmp_path: Path) -> None:
    load = LOADERS[name](tmp_path)
    for path in tmp_path.glob("*.json"):
        path.write_bytes(b'{"a": "caf\xe9"}')
    with pytest.raises(InputFileError, match=r"not UTF-8 text \(byte offset 10\)"):
        load()


@pytest.mark.parametrize(
    "name", ["golden example", "claim recording", "gate baseline", "run report", "webnlg line"]
)
def test_every_json_object_input_names_a_value_that_is_not_an_object(
    name: str, tmp_path: Path
) -> None:
    load = LOADERS[name](tmp_path)
    for path in [*tmp_path.glob("*.json"), *tmp_path.glob("*.jsonl")]:
        path.write_text("\n[1, 2]\n" if path.suffix == ".jsonl" else "[1, 2]")
    with pytest.raises(InputFileError, match="must be a JSON object") as err:
        load()
    if name == "webnlg line":
        assert err.value.line == 2


class _Price(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input_per_1m: float


def test_validate_file_model_names_the_field_from_where_the_value_sits(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    with pytest.raises(InputFileError) as err:
        validate_file_model(_Price, {"input_per_1m": "x"}, path, line=4, within=("m", 2))
    assert (err.value.line, err.value.field) == (4, "m[2].input_per_1m")
    assert str(err.value).startswith(f"{path}:4 [m[2].input_per_1m]: Input should be")
    with pytest.raises(InputFileError) as err:
        validate_file_model(_Price, {"x": 1}, path, problem=lambda e: f"custom {e['type']}")
    assert err.value.problem == "custom missing" and err.value.field == "input_per_1m"
    with pytest.raises(InputFileError, match="a price must be a JSON object, not list"):
        validate_file_model(_Price, [1], path, kind="a price")
    assert validate_file_model(_Price, {"input_per_1m": 2}, path).input_per_1m == 2.0


def test_a_jsonl_line_that_is_not_an_object_is_named_by_its_loader(tmp_path: Path) -> None:
    """The prose corpus and the bench's episodes, through their loaders: file, line, wording."""
    corpus = tmp_path / "chunks.jsonl"
    corpus.write_text('{"name": "a", "body": "x"}\n"just text"\n')
    with pytest.raises(InputFileError, match="a corpus line must be a JSON object, not str") as err:
        load_prose_corpus(corpus, None)
    assert (err.value.path, err.value.line) == (corpus, 2)
    root = write_corpus(tmp_path / "bench")
    episodes = root / "mini" / "rail" / "episodes.jsonl"
    episodes.write_text("\n[1, 2]\n")
    with pytest.raises(
        InputFileError, match="an episode line must be a JSON object, not list"
    ) as err:
        load_bench_corpus(root)
    assert (err.value.path, err.value.line) == (episodes, 2)


def test_a_price_error_names_the_model_it_belongs_to(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text('{"ok": {"input_per_1m": 1, "output_per_1m": 2}, "m-2": {"input_per_1m": 1}}')
    with pytest.raises(InputFileError) as err:
        load_prices(path)
    assert (err.value.path, err.value.field) == (path, "m-2.output_per_1m")
    path.write_text('{"m": {"input_per_1m": -1, "output_per_1m": 2}}')
    with pytest.raises(InputFileError, match="finite number of USD, 0 or more") as err:
        load_prices(path)
    assert err.value.field == "m.input_per_1m"
    path.write_text('{"m": {"input_per_1m": true, "output_per_1m": 2}}')  # had been 1 USD
    with pytest.raises(InputFileError, match="valid number") as err:
        load_prices(path)
    assert err.value.field == "m.input_per_1m"
    path.write_text('{"m": 5}')  # an error with no field under the model's: an IndexError
    with pytest.raises(InputFileError, match="should be a mapping of fields") as err:
        load_prices(path)
    assert err.value.field == "m"
    path.write_text('{"m": {"input_per_1m": 3, "output_per_1m": 2.5}}')  # an integer is a number
    assert load_prices(path)["m"]["input_per_1m"] == 3.0


def test_an_unquoted_yaml_date_is_named_as_one(tmp_path: Path) -> None:
    from pydantic import BaseModel

    from evals_pipeline.core.files import load_yaml, validate_file_model

    class Person(BaseModel):
        properties: dict[str, str | int]

    path = tmp_path / "p.yaml"
    path.write_text("properties: {born: 1958-07-03}\n")
    with pytest.raises(InputFileError) as err:
        validate_file_model(Person, load_yaml(path), path)
    assert err.value.field == "properties.born"  # not properties.born.str
    assert "unquoted date" in str(err.value) and "quotes" in str(err.value)


def test_a_yaml_integer_too_long_for_python_is_named_with_its_line(tmp_path: Path) -> None:
    """int() refuses over 4,300 digits: a ValueError traceback from a project file's `scope:`."""
    from evals_pipeline.core.files import load_yaml

    path = tmp_path / "evals.yaml"
    path.write_text("backends: {a: oracle}\nscope: " + "9" * 5000 + "\n")
    with pytest.raises(InputFileError, match="invalid YAML: a number too long") as err:
        load_yaml(path)
    assert (err.value.path, err.value.line) == (path, 2)
    path.write_text("hex: 0x10\nunderscored: 1_000\nsexagesimal: 1:30\nsign: -7\n")
    assert load_yaml(path) == {"hex": 16, "underscored": 1000, "sexagesimal": 90, "sign": -7}


def test_input_nested_too_deeply_is_named_not_a_recursion_error(tmp_path: Path) -> None:
    from evals_pipeline.core.files import load_yaml

    with pytest.raises(InputFileError, match="invalid JSON: nested too deeply") as err:
        parse_json(tmp_path / "a.jsonl", "[" * 200_000, line=3)
    assert err.value.line == 3
    corpus = tmp_path / "chunks.jsonl"
    corpus.write_text('{"name": "a", "body": ' + "[" * 200_000 + "\n")
    with pytest.raises(InputFileError, match="nested too deeply") as err:
        load_prose_corpus(corpus, None)
    assert (err.value.path, err.value.line) == (corpus, 1)
    deep = tmp_path / "o.yaml"
    deep.write_text("a: " + "[" * 50_000 + "]" * 50_000 + "\n")
    with pytest.raises(InputFileError, match="invalid YAML: nested too deeply") as err:
        load_yaml(deep)
    assert err.value.path == deep


def test_cost_is_the_tokens_at_the_models_price_and_none_without_one() -> None:
    from evals_pipeline.core.prices import cost_usd

    prices = {"m": {"input_per_1m": 3.0, "output_per_1m": 15.0}}
    assert cost_usd("m", 1_000_000, 200_000, prices) == 3.0 + 3.0
    assert cost_usd("other", 10, 10, prices) is None  # no price is not a cost of 0
    assert cost_usd("m", 10, 10, None) is None and cost_usd(None, 10, 10, prices) is None


def test_a_path_in_a_folder_this_user_cannot_write_is_not_writable(shared_folder: Path) -> None:
    """A read-only cache_dir or output_dir had failed a step after the run's calls, with a bare
    OSError; a real run's check refuses it first, naming the folder."""
    from evals_pipeline.core.files import not_writable
    from evals_pipeline_tests.support.locks import without_write_access

    existing = shared_folder / "cache.jsonl"
    existing.write_text("")
    existing.chmod(0o666)
    assert not_writable(shared_folder / "cache" / "x") is None
    with without_write_access(shared_folder):
        for path in (shared_folder, shared_folder / "cache" / "x", existing):
            assert not_writable(path) == f"cannot be made: {shared_folder} is not writable"
        # A file appended to where it is needs only itself to be writable (the judge cache).
        assert not_writable(existing, in_place=True) is None


def test_a_json_integer_past_the_conversion_limit_is_an_input_error(tmp_path: Path) -> None:
    """A 5,001-digit integer in a chunk line, a price or a run report had raised Python's
    ValueError (a traceback, exit 1) where every other bad JSON names its file and line."""
    from evals_pipeline.core.errors import InputFileError
    from evals_pipeline.core.files import parse_json

    with pytest.raises(InputFileError, match="invalid JSON: a number too long"):
        parse_json(tmp_path / "c.jsonl", '{"n": ' + "1" * 5001 + "}", line=3)
