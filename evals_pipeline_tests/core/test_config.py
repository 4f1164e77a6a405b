from pathlib import Path

import pytest

from evals_pipeline.core.config import load_config
from evals_pipeline.core.errors import InputFileError

REPO = Path(__file__).resolve().parents[2]


def mkdir(path: Path) -> Path:
    path.mkdir()
    return path


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "evals.yaml"
    path.write_text(text)
    return path


def test_the_shipped_config_loads_and_resolves_paths() -> None:
    config = load_config(REPO / "evals.yaml")
    assert config.reference == "oracle"
    assert set(config.backends) == {"oracle", "rules", "sloppy"}
    assert config.active_modes == ("freeform", "open", "strict")
    assert config.corpus.is_absolute() and config.corpus.exists()
    assert config.specs["rules"].cassette_path == REPO / "corpus" / "cassettes" / "rules.jsonl"
    assert config.limit == 50
    assert config.bench.corpora == {"cases": REPO / "corpus" / "cases"}
    bench_rules = config.bench_specs["rules"].cassette_path
    assert bench_rules == REPO / "corpus" / "cassettes" / "bench-rules.jsonl"
    assert bench_rules.exists() and config.bench.output_dir == REPO / "bench-results"


def test_relative_paths_resolve_against_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "backends: {a: oracle, b: 'cassette:path=c.jsonl'}\nreference: a\n")
    config = load_config(path)
    assert config.specs["b"].cassette_path == tmp_path / "c.jsonl"
    assert config.output_dir == tmp_path / "reports"
    assert config.active_modes == ("freeform",)  # no ontology


def test_asset_storage_resolves_against_the_file_unless_it_is_a_url(tmp_path: Path) -> None:
    """`dagster dev` and the driver started from other folders must share one store."""
    base = "backends: {a: oracle}\nreference: a\n"
    local = load_config(write(tmp_path, base + "asset_storage: relstore\n"))
    assert local.asset_storage == str(tmp_path / "relstore")
    url = load_config(write(tmp_path, base + "asset_storage: 's3://bucket/evals'\n"))
    assert url.asset_storage == "s3://bucket/evals"


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        (
            "backends: {a: oracle}\nreference: a\nmax_concurrent: 4\n",
            "max_concurrent",
            "not with executor: in_process",
        ),
        # Each step of a multiprocess run is a process of its own: one's memory is not another's.
        (
            "backends: {a: oracle}\nreference: a\nexecutor: multiprocess\n"
            "asset_storage: 'memory://evals'\n",
            "asset_storage",
            "memory:// is one process's memory",
        ),
        ("backends: {a: antropic}\nreference: a\n", "backends.a", "unknown backend kind"),
        (
            "backends: {a: oracle}\nreference: a\nbench: {backends: {x: 'casette:path=p'}}\n",
            "bench.backends.x",
            "unknown backend kind",
        ),
        (
            "backends: {a: oracle}\nreference: a\nbench: {record_cassette: {y: r.jsonl}}\n",
            "bench.record_cassette.y",
            "no bench backend",
        ),
        ("backends: {a: oracle}\nreference: a\nbench: {split: tset}\n", "bench.split", "'dev'"),
        ("backends: {a: oracle}\nreference: a\nbench: {backends: {}}\n", "bench.backends",
         "at least one"),
        ("backends: {a: oracle}\nreference: b\n", "reference", "not one of the backends"),
        ("backends: {a: oracle}\nreference: a\nscope: 0\n", "scope", "positive"),
        ("backends: {a: oracle}\nreference: a\nmodes: [strict]\n", "modes", "need an ontology"),
        ("backends: {a: oracle}\nreference: a\nrecord_cassette: {z: x.jsonl}\n",
         "record_cassette.z", "no backend"),
        ("backends: {a: oracle}\nreference: a\ncolour: red\n", "colour", "Extra inputs"),
        ("backends: {a: oracle}\nreference: a\nmodes: [fast]\n", "modes[0]", "Input should be"),
        # Counts are strict: lax parsing had made `true`/`yes` 1 and "8" 8 (a 1-token budget).
        ("backends: {a: oracle}\nreference: a\nconcurrency: true\n", "concurrency",
         "valid integer"),
        ("backends: {a: oracle}\nreference: a\nconcurrency: yes\n", "concurrency",
         "valid integer"),
        ("backends: {a: oracle}\nreference: a\nconcurrency: '8'\n", "concurrency",
         "valid integer"),
        ("backends: {a: oracle}\nreference: a\nmax_tokens_entities: true\n",
         "max_tokens_entities", "valid integer"),
        # One problem at the field (not `scope.constrained-int`), naming both forms.
        ("backends: {a: oracle}\nreference: a\nscope: ALL\n", "scope",
         "Input should be a valid integer or 'all'"),
        ("backends: {a: oracle}\nreference: a\nscope: 2.0\n", "scope", "valid integer or 'all'"),
        ("backends: {a: oracle}\nreference: a\nclaims_gate: 0\n", "claims_gate", "valid boolean"),
        # Sibling fields with the same bad value are two problems, not one union's: the first
        # is named (a union's members are told from fields by the data).
        ("backends: {a: oracle}\nreference: a\nbench: {split: true, ontology_mode: true}\n",
         "bench.split", "'all', 'dev' or 'test'"),
        ("backends: {a: oracle}\nreference: a\njudge: {model: null, cache: null}\n",
         "judge.model", "valid string"),
        ("backends: {a: null, b: null}\nreference: a\n", "backends.a", "valid string"),
        # The key as written: trimmed first, `rules ` had passed, and became a partition key.
        ("backends: {'a ': oracle}\nreference: 'a '\n", "backends.a ", "must be letters"),
        ('backends: {"a\\n": oracle}\nreference: "a\\n"\n', "backends.a\n", "must be letters"),
        ("backends: {a: oracle}\nreference: a\nbench: {backends: {' b': oracle}}\n",
         "bench.backends. b", "must be letters"),
    ],
)  # fmt: skip
def test_bad_config_names_the_field(tmp_path: Path, text: str, field: str, problem: str) -> None:
    with pytest.raises(InputFileError) as err:
        load_config(write(tmp_path, text))
    assert err.value.field == field
    assert problem in str(err.value)
    assert str(tmp_path / "evals.yaml") in str(err.value)


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(InputFileError) as err:
        load_config(path := write(tmp_path, "backends:\n  a: oracle\n reference: a\n"))
    assert err.value.line == 3 and err.value.path == path  # the badly indented line
    assert f"{path}:3" in str(err.value)


def test_a_key_given_twice_is_an_error_naming_its_line(tmp_path: Path) -> None:
    # YAML's "last one wins" had silently dropped the first backends block.
    path = write(tmp_path, "backends: {a: oracle}\nreference: a\nbackends: {b: oracle}\n")
    with pytest.raises(InputFileError) as err:
        load_config(path)
    assert err.value.line == 3 and "'backends' is given twice" in str(err.value)


def test_a_folder_is_not_a_config(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="is a folder, not a file"):
        load_config(tmp_path)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("backends: {a: oracle}\nreference: a\nmodes: []\n", "modes"),
        (
            "backends: {a: oracle}\nreference: a\nbench: {corpora: {'../out': cases}}\n",
            "bench.corpora.../out",
        ),
    ],
)
def test_no_mode_and_a_gold_name_that_is_a_path_are_refused(
    tmp_path: Path, text: str, field: str
) -> None:
    with pytest.raises(InputFileError) as err:
        load_config(write(tmp_path, text))
    assert err.value.field == field


@pytest.mark.parametrize(
    ("line", "field", "problem"),
    [
        ("corpus: .", "corpus", "is a folder, not a file"),
        ("ontology: .", "ontology", "is a folder, not a file"),
        ("prices: .", "prices", "is a folder, not a file"),
        ("prices: nope.json", "prices", "file not found"),
        ("prices: bad.json", "prices", "bad.json:1: invalid JSON"),  # had failed a step mid-run
        ("prices: dup.json", "prices", "key 'm' is given twice"),
        ("claims_baseline: nope.json", "claims_baseline", "no baseline file here"),
        ("prose_baseline: nope", "prose_baseline", "nope"),
        ("prose_baseline: afile", "prose_baseline", "is a file, not a folder"),
        ("prose_baseline: reports", "prose_baseline", "is the file this run writes"),
        ("prose_baseline: base", "prose_baseline", "episodes.json:1: invalid JSON"),
        ("cache_dir: afile/sub", "cache_dir", "afile is a file, not a folder"),
        ("output_dir: afile/r", "output_dir", "afile is a file, not a folder"),
        ("judge: {cache: afile/j.jsonl}", "judge.cache", "afile is a file, not a folder"),
        ("record_cassette: {a: afile/x.jsonl}", "record_cassette.a", "is a file, not a folder"),
    ],
)
def test_an_input_or_output_path_that_cannot_be_used_names_its_field(
    tmp_path: Path, line: str, field: str, problem: str
) -> None:
    """Before any step runs: a folder given as the corpus had failed only the corpus step (after
    the claims run), and a cache_dir under a file a step with "Not a directory"."""
    (tmp_path / "afile").write_text("a file\n")
    (tmp_path / "chunks.jsonl").write_text("")
    (tmp_path / "bad.json").write_text("{bad")
    price = '{"input_per_1m": 1, "output_per_1m": 1}'
    (tmp_path / "dup.json").write_text(f'{{"m": {price}, "m": {price}}}')
    (tmp_path / "reports").mkdir()
    (tmp_path / "base" / "freeform").mkdir(parents=True)  # the one mode without an ontology
    (tmp_path / "base" / "freeform" / "episodes.json").write_text("{bad")
    text = f"backends: {{a: oracle}}\nreference: a\ncorpus: chunks.jsonl\n{line}\n"
    text = text.replace("corpus: chunks.jsonl\ncorpus: .", "corpus: .")
    path = write(tmp_path, text)
    with pytest.raises(InputFileError) as err:
        load_config(path).check_inputs(path)
    assert err.value.field == field
    assert problem in str(err.value) and str(path) in str(err.value)


def test_a_golden_dir_the_file_names_must_exist_unless_the_gate_is_off(tmp_path: Path) -> None:
    """A typo there had switched the claim gate off with a warning, and CI passed."""
    base = "backends: {a: oracle}\nreference: a\n"
    with pytest.raises(InputFileError, match="claims_gate: false runs without") as err:
        load_config(write(tmp_path, base + "golden_dir: corpus/goldne\n"))
    assert err.value.field == "golden_dir"
    assert not load_config(
        write(tmp_path, base + "golden_dir: x\nclaims_gate: false\n")
    ).claims_gate
    assert load_config(write(tmp_path, base)).claims_gate  # the default may be absent


@pytest.mark.parametrize("other", ["./r.jsonl", "ABS", "LINK"])
def test_two_bench_backends_recording_into_one_file_is_refused_however_it_is_named(
    tmp_path: Path, other: str
) -> None:
    # A relative, an absolute and a symlinked name of one file are one file: each backend
    # would be served the other's answers. (normpath of the names as written had missed two.)
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "r.jsonl")
    other = {"ABS": str(tmp_path / "r.jsonl"), "LINK": "link.jsonl"}.get(other, other)
    path = write(
        tmp_path,
        "backends: {a: oracle, b: oracle}\nreference: a\n"
        f"bench: {{record_cassette: {{a: r.jsonl, b: '{other}'}}}}\n",
    )
    with pytest.raises(InputFileError) as err:
        load_config(path).check_outputs(path)
    assert err.value.field == "bench.record_cassette.b"
    assert "bench.record_cassette.a writes it too" in str(err.value)


def test_bench_backends_recording_into_two_files_are_fine(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "backends: {a: oracle, b: oracle}\nreference: a\n"
        "bench: {record_cassette: {a: r.jsonl, b: sub/r.jsonl}}\n",
    )
    load_config(path).check_outputs(path)


@pytest.mark.parametrize(
    ("lines", "field", "other"),
    [
        # The judge cache and a recording in one file: the run had made its paid calls, then
        # failed reading the cassette's records as judge verdicts.
        ("judge: {cache: shared.jsonl}\nrecord_cassette: {a: shared.jsonl}", "record_cassette.a",
         "judge.cache"),
        ("judge: {cache: shared.jsonl}\nbench: {record_cassette: {a: ./shared.jsonl}}",
         "bench.record_cassette.a", "judge.cache"),
        # The prose run's one-answer-per-key cassette and the bench's, which repeats keys.
        ("record_cassette: {a: r.jsonl}\nbench: {record_cassette: {a: r.jsonl}}",
         "bench.record_cassette.a", "record_cassette.a"),
    ],
)  # fmt: skip
def test_two_writers_of_one_file_are_refused_before_the_run(
    tmp_path: Path, lines: str, field: str, other: str
) -> None:
    path = write(tmp_path, f"backends: {{a: oracle}}\nreference: a\n{lines}\n")
    with pytest.raises(InputFileError) as err:
        load_config(path).check_outputs(path)
    assert err.value.field == field and f"{other} writes it too" in str(err.value)


def test_two_prose_recorders_of_one_file_are_left_to_the_plans_guard(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "backends: {a: oracle, b: oracle}\nreference: a\n"
        "record_cassette: {a: r.jsonl, b: r.jsonl}\n",
    )
    load_config(path).check_outputs(path)  # the dry run shows it (test_cli)


def test_an_empty_evals_config_is_unset(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """As the gate has it: an empty EVALS_CONFIG had been the working folder, "is a folder"."""
    from evals_pipeline.core.config import default_config_path

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVALS_CONFIG", "")
    assert default_config_path() == tmp_path / "evals.yaml"


def test_the_bench_output_folder_is_checked_only_when_there_is_a_bench(
    tmp_path: Path, shared_folder: Path
) -> None:
    from evals_pipeline_tests.support.locks import without_write_access

    text = (
        "backends: {a: oracle}\nreference: a\n"
        f"output_dir: {tmp_path / 'r'}\ncache_dir: {tmp_path / 'c'}\n"
        f"bench: {{output_dir: {shared_folder / 'b'}}}\n"
    )
    plain = load_config(write(tmp_path, text))
    with_bench = load_config(
        write(
            mkdir(tmp_path / "b"),
            text.replace("bench: {", f"bench: {{corpora: {{c: {tmp_path}}}, "),
        )
    )
    with without_write_access(shared_folder):
        plain.check_writable("p")  # no bench corpora: nothing goes there
        with pytest.raises(InputFileError) as err:
            with_bench.check_writable("p")
    assert err.value.field == "bench.output_dir"


def test_only_folders_the_run_writes_are_checked(tmp_path: Path, shared_folder: Path) -> None:
    """The bench writes no prose report, and a run with its stored assets elsewhere and no live
    backend writes nothing to cache_dir: neither is refused for being read-only (the bench had
    been, from a read-only working folder, with no flag to move output_dir)."""
    from evals_pipeline_tests.support.locks import without_write_access

    ro = shared_folder
    config = load_config(
        write(
            tmp_path,
            f"backends: {{a: oracle}}\nreference: a\noutput_dir: {ro / 'r'}\n"
            f"cache_dir: {ro / 'c'}\nasset_storage: {tmp_path / 'assets'}\n",
        )
    )
    live = config.model_copy(update={"backends": {"a": "oracle", "l": "oai-http:url=http://h:1"}})
    with without_write_access(ro):
        config.check_writable("p", bench_only=True)
        with pytest.raises(InputFileError) as err:
            config.check_writable("p")
        assert err.value.field == "output_dir"
        with pytest.raises(InputFileError) as err:
            live.check_writable("p", bench_only=True)  # a live backend's extraction cache
        assert err.value.field == "cache_dir"


def _loop(tmp_path: Path) -> Path:
    """`loop` -> `back` -> `loop`: two symbolic links that lead to nothing."""
    (tmp_path / "loop").symlink_to(tmp_path / "back")
    (tmp_path / "back").symlink_to(tmp_path / "loop")
    return tmp_path / "loop"


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("corpus: loop", "corpus"),
        ("ontology: loop", "ontology"),
        ("output_dir: loop", "output_dir"),
        ("cache_dir: loop/inside", "cache_dir"),
        ("judge: {cache: loop}", "judge.cache"),
        ("record_cassette: {a: loop}", "record_cassette.a"),
        ("bench: {corpora: {cases: loop}}", "bench.corpora.cases"),
        ("bench: {output_dir: loop}", "bench.output_dir"),
    ],
)
def test_a_loop_of_symbolic_links_is_named_by_its_field(
    line: str, field: str, tmp_path: Path
) -> None:
    """Path.resolve() had raised RuntimeError on it: a traceback, not the field."""
    _loop(tmp_path)
    (tmp_path / "c.jsonl").write_text('{"id": "c1", "text": "x"}\n')
    (tmp_path / "o.yaml").write_text("entity_types: []\n")
    text = "backends: {a: oracle}\nreference: a\ncorpus: c.jsonl\nontology: o.yaml\n"
    lines = [row for row in text.splitlines() if row.split(":")[0] != line.split(":")[0]]
    path = write(tmp_path, "\n".join([*lines, line]) + "\n")
    with pytest.raises(InputFileError) as caught:
        load_config(path).check_inputs(path)
    assert caught.value.field == field
    assert "a loop of symbolic links" in caught.value.problem


def test_a_project_file_that_is_a_loop_of_links_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="Too many levels of symbolic links"):
        load_config(_loop(tmp_path))


def test_a_prose_baseline_that_would_gate_nothing_or_itself_is_refused(tmp_path: Path) -> None:
    """A folder with no mode's file (a copy nested one folder down: `cp -r reports baseline`
    onto an existing baseline) had switched the gate off with three warnings and exit 0; a
    mode's folder linked to the run's own had compared each report with itself."""
    base = "backends: {a: oracle}\nreference: a\ncorpus: chunks.jsonl\nprose_baseline: baseline\n"
    (tmp_path / "chunks.jsonl").write_text("")
    nested = tmp_path / "baseline" / "reports" / "freeform"
    nested.mkdir(parents=True)
    (nested / "episodes.json").write_text('{"rows": {}}')
    path = write(tmp_path, base)
    with pytest.raises(InputFileError) as err:
        load_config(path).check_inputs(path)
    assert err.value.field == "prose_baseline"
    assert "holds no <mode>/episodes.json for any mode of this run (freeform)" in str(err.value)
    assert f"a copy nested in it: {tmp_path / 'baseline' / 'reports'}?" in str(err.value)
    (tmp_path / "reports" / "freeform").mkdir(parents=True)
    (tmp_path / "baseline" / "freeform").symlink_to(tmp_path / "reports" / "freeform")
    with pytest.raises(InputFileError, match="is the file this run writes freeform's counts"):
        load_config(path).check_inputs(path)
