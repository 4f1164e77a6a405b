"""End to end through the real command lines: `dagster asset materialize`, the driver
(`python -m evals_pipeline.materialize`) and the `evals-pipeline` console script.

Every command runs as a subprocess in tmp_path against a config whose inputs are absolute paths
into the repository (corpus, ontology, cassettes) and whose outputs (reports, caches, Dagster
instance) all live under tmp_path, with no API key in the environment.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd

from evals_pipeline_tests.support.hermetic import hermetic_environ

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the project's venv
DAGSTER = str(BIN / "dagster")
EVALS_PIPELINE = str(BIN / "evals-pipeline")
CORPUS = REPO / "corpus" / "prose" / "chunks.jsonl"
ONTOLOGY = REPO / "ontologies" / "prose.yaml"
RULES = REPO / "corpus" / "cassettes" / "rules.jsonl"
SLOPPY = REPO / "corpus" / "cassettes" / "sloppy.jsonl"
TIMEOUT_S = 180
MODULE = ["-m", "evals_pipeline.definitions"]
ORACLE_AND_RULES = (
    "--backend",
    "o=oracle",
    "--backend",
    f"r=cassette:path={RULES}",
    "--reference",
    "o",
)
INPUTS = ("--ontology", str(ONTOLOGY), "--corpus", str(CORPUS))
SUMMARY = re.compile(
    r"(\d+) runs; (\d+) extraction calls \(\d+ LLM requests\), (\d+) answered from the "
    r"extraction cache \(or a recorded backend's cassette\), "
    r"(\d+) replayed"
)


def write_config(tmp_path: Path, backends: dict[str, str], name: str = "evals.yaml") -> Path:
    lines = ["backends:"]
    lines += [f"  {backend}: {spec}" for backend, spec in backends.items()]
    lines += [
        "reference: oracle",
        f"corpus: {CORPUS}",
        "scope: 4",
        f"ontology: {ONTOLOGY}",
        "modes: [freeform, open, strict]",
        f"output_dir: {tmp_path / 'reports'}",
        f"cache_dir: {tmp_path / 'cache'}",
        "judge:",
        f"  cache: {tmp_path / 'judge_cache.jsonl'}",
    ]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def good_config(tmp_path: Path) -> Path:
    return write_config(
        tmp_path,
        {
            "oracle": "oracle",
            "rules": f"cassette:path={RULES}",
            "sloppy": f"cassette:path={SLOPPY}",
        },
    )


def dagster_home(tmp_path: Path) -> Path:
    home = (tmp_path / "home").resolve()
    if not home.is_dir():
        home.mkdir()
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return home


def run(
    args: list[str], tmp_path: Path, config: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = hermetic_environ()
    env["DAGSTER_HOME"] = str(dagster_home(tmp_path))
    if config is not None:
        env["EVALS_CONFIG"] = str(config)
    return subprocess.run(
        args,
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return (
        f"exit {proc.returncode} from {proc.args}\n"
        f"--- stdout (tail) ---\n{proc.stdout[-3000:]}\n"
        f"--- stderr (tail) ---\n{proc.stderr[-3000:]}"
    )


def dagster_materialize(select: str, partition: str) -> list[str]:
    return [DAGSTER, "asset", "materialize", *MODULE, "--select", select, "--partition", partition]


def evals_pipeline(*args: str) -> list[str]:
    return [EVALS_PIPELINE, *args]


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under root (files and folders) with its size and mtime."""
    out = {}
    for path in root.rglob("*"):
        stat = path.lstat()
        out[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return out


def records(cassette: Path) -> int:
    return sum(1 for line in cassette.read_text().splitlines() if line.strip())


# a. `dagster asset materialize`, one partition definition per call


def test_dagster_asset_materialize_one_partition_per_definition(tmp_path: Path) -> None:
    config = good_config(tmp_path)
    inputs = run(
        dagster_materialize("corpus,run_plan", "strict"),
        tmp_path,
        config,
    )
    assert inputs.returncode == 0, explain(inputs)

    extraction = run(
        dagster_materialize("extractions,scores", "rules|strict"),
        tmp_path,
        config,
    )
    assert extraction.returncode == 0, explain(extraction)

    assets = tmp_path / "cache" / "assets"
    table_path = assets / "extractions" / "rules" / "strict.parquet"
    assert table_path.is_file(), sorted(str(p) for p in assets.rglob("*"))
    table = pd.read_parquet(table_path)
    assert len(table) == 4  # scope: 4
    assert table["ok"].all()
    assert (assets / "scores" / "rules" / "strict.json").is_file()
    assert (assets / "run_plan" / "strict.json").is_file()
    # Only the partitions asked for.
    assert not (assets / "extractions" / "sloppy").exists()
    assert not (assets / "run_plan" / "open.json").exists()


# b. two backends replaying one cassette: the blocking check stops the run


def test_shared_cassette_fails_the_blocking_check(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        {"oracle": "oracle", "a": f"cassette:path={RULES}", "b": f"cassette:path={RULES}"},
    )
    cli = run(
        dagster_materialize("corpus,run_plan", "strict"),
        tmp_path,
        config,
    )
    assert cli.returncode == 1, explain(cli)
    assert "distinct_cassettes" in cli.stdout + cli.stderr

    driver = run(
        [sys.executable, "-m", "evals_pipeline.materialize", "--config", str(config)],
        tmp_path,
    )
    assert driver.returncode == 1, explain(driver)
    assert "FAILED CHECK" in driver.stderr, explain(driver)
    assert re.search(r"FAILED CHECK run_plan\[\w+\] distinct_cassettes", driver.stderr)
    assert "report:" not in driver.stdout
    assets = tmp_path / "cache" / "assets"
    assert not list(assets.glob("extractions/**/*.parquet"))
    assert not (assets / "extractions").exists()
    assert not (tmp_path / "reports").exists()


# c. the driver materialises everything, and a second run answers from the cache


def test_driver_materialises_everything_then_reuses_the_cache(tmp_path: Path) -> None:
    config = good_config(tmp_path)
    command = [sys.executable, "-m", "evals_pipeline.materialize", "--config", str(config)]

    first = run(command, tmp_path)
    assert first.returncode == 0, explain(first)
    reports = re.findall(r"^report: (.+)$", first.stdout, flags=re.MULTILINE)
    assert len(reports) == 1, explain(first)
    matrix = Path(reports[0])
    assert matrix.is_file()
    assert matrix.is_relative_to(tmp_path)
    for mode in ("freeform", "open", "strict"):
        assert f"report ({mode}): " in first.stdout
        assert (tmp_path / "reports" / mode / "report.md").is_file()
    assert f"chart: {matrix.parent / 'f1_by_mode.png'}\n" in first.stdout
    assert (tmp_path / "cache" / "assets" / "extractions" / "rules" / "strict.parquet").is_file()

    summary = SUMMARY.search(first.stderr)
    assert summary, explain(first)
    runs, calls, hits, replayed = map(int, summary.groups())
    # At least, per mode: inputs, one run per backend, reports; then the mode matrix.
    assert runs >= 3 * (1 + 3 + 1) + 1
    # Cassettes and the oracle make no calls and are not cached: each answer is replayed.
    assert (calls, hits, replayed) == (0, 0, 3 * 3 * 4)  # backends x modes x chunks

    second = run(command, tmp_path)
    assert second.returncode == 0, explain(second)
    assert "0 extraction calls" in second.stderr, explain(second)
    again = SUMMARY.search(second.stderr)
    assert again, explain(second)
    assert tuple(map(int, again.groups())) == (runs, 0, 0, replayed)
    assert re.findall(r"^report: (.+)$", second.stdout, flags=re.MULTILINE) == reports


# d. the `evals-pipeline` console script


def test_cli_dry_run_prints_the_plan_and_writes_nothing(tmp_path: Path) -> None:
    dagster_home(tmp_path)
    before = tree(tmp_path)
    proc = run(evals_pipeline(*ORACLE_AND_RULES, *INPUTS, "--limit", "3", "--dry-run"), tmp_path)
    assert proc.returncode == 0, explain(proc)
    plan = proc.stdout
    assert "o = oracle" in plan
    assert f"r = cassette:path={RULES}" in plan
    assert f"replay from {RULES} ({records(RULES)} records)" in plan
    assert "scope 3 chunks" in plan
    assert "ontology modes: strict" in plan
    assert "guards: none would abort" in plan
    # No cache dir, no reports, no judge cache, no Dagster storage: nothing at all. The output
    # and cache folders default to paths relative to the working directory, tmp_path.
    assert tree(tmp_path) == before
    assert not (tmp_path / ".evals_cache").exists()


def test_cli_dry_run_names_an_aborting_guard_and_exits_0(tmp_path: Path) -> None:
    dagster_home(tmp_path)
    before = tree(tmp_path)
    shared = ("--backend", f"a=cassette:path={RULES}", "--backend", f"b=cassette:path={RULES}")
    proc = run(
        evals_pipeline("--backend", "o=oracle", *shared, "--reference", "o", *INPUTS, "--dry-run"),
        tmp_path,
    )
    assert proc.returncode == 0, explain(proc)
    assert "guards that would abort a real run" in proc.stdout
    assert "[distinct_cassettes]" in proc.stdout
    assert "backends a and b replay the same cassette" in proc.stdout
    assert tree(tmp_path) == before


def test_dagster_names_a_missing_corpus_when_loading_the_definitions(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"oracle": "oracle"})
    config.write_text(config.read_text().replace(str(CORPUS), str(CORPUS.with_name("nope"))))
    proc = run(dagster_materialize("corpus", "strict"), tmp_path, config)
    assert proc.returncode != 0, explain(proc)
    assert f"{config} [corpus]: {CORPUS.with_name('nope')}: no such file" in proc.stderr


def test_cli_backend_spec_typo_is_a_usage_error(tmp_path: Path) -> None:
    proc = run(evals_pipeline("--backend", "x=casette:path=a", "--reference", "x"), tmp_path)
    assert proc.returncode == 2, explain(proc)
    assert "casette:path=a" in proc.stderr
    assert "unknown backend kind 'casette'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_ontology_mode_without_ontology_is_a_usage_error(tmp_path: Path) -> None:
    proc = run(
        evals_pipeline("--backend", "o=oracle", "--reference", "o", "--ontology-mode", "strict"),
        tmp_path,
    )
    assert proc.returncode == 2, explain(proc)
    assert "--ontology-mode needs --ontology" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_real_run_writes_the_report_json(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    outputs = ("--output-dir", str(tmp_path / "reports"), "--cache-dir", str(tmp_path / "cache"))
    judge = ("--judge-cache", str(tmp_path / "judge_cache.jsonl"))
    proc = run(
        evals_pipeline(
            *ORACLE_AND_RULES, *INPUTS, "--limit", "3", "--output", str(out), *outputs, *judge
        ),
        tmp_path,
    )
    assert proc.returncode == 0, explain(proc)
    report = json.loads(out.read_text())
    assert report["ontology_mode"] == "strict"
    assert report["reference"] == "o"
    assert set(report["backends"]) == {"o", "r"}
    assert report["corpus"]["chunks"] == 3
    assert f"report JSON: {out}" in proc.stdout
    assert (tmp_path / "reports" / "strict" / "report.md").is_file()
    assert (tmp_path / "cache" / "assets" / "extractions" / "r" / "strict.parquet").is_file()
