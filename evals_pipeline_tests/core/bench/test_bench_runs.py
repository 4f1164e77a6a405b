from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from evals_pipeline.core.bench.corpus import BenchCorpus, load_bench_corpus
from evals_pipeline.core.bench.metrics import COUNT_NAMES
from evals_pipeline.core.bench.runner import (
    oracle_extractor,
    render_markdown,
    run_bench,
    write_run,
)
from evals_pipeline.core.bench.slice import slice_schema
from evals_pipeline.core.compare import RATES, compare_runs
from evals_pipeline.core.extractors.oracle import OracleExtractor
from evals_pipeline.core.models import Edge, Entity, ExtractionResult
from evals_pipeline_tests.pipeline_fixtures import CASES

from .helpers import write_corpus

Perturb = Callable[[ExtractionResult], ExtractionResult]


def test_oracle_scores_perfectly_on_the_whole_corpus() -> None:
    corpus = load_bench_corpus(CASES)
    report = run_bench(corpus, oracle_extractor(corpus), row_name="oracle")
    row = report["rows"]["oracle"]
    assert len(row["episodes"]) == sum(len(c.episodes) for c in corpus.cases) == 36
    for ep in row["episodes"]:
        assert ep["status"] == "ok"
        assert set(ep["counts"]) == set(COUNT_NAMES)
    rates = row["rates"]
    for rate in (
        "entity_precision", "entity_recall", "entity_f1", "edge_precision", "edge_recall",
        "edge_f1", "property_precision", "property_recall", "property_f1", "direction",
        "conformance", "span", "closure_recall", "mention",
    ):  # fmt: skip
        assert rates[rate] == 1.0, rate
    for rate in (
        "ungrounded", "forbidden", "type_hallucination", "relation_hallucination",
        "property_hallucination", "unfaithful",
    ):  # fmt: skip
        assert rates[rate] == 0.0, rate
    # Selection cases name some expected types only through a relation: seeds miss them.
    assert rates["seed_recall"] is not None and rates["seed_recall"] < 1.0
    assert report["split"] == "all" and report["publishable"] is False
    assert set(RATES) <= set(rates)


def test_the_report_says_what_each_rate_counts_and_what_the_oracle_must_reach() -> None:
    from evals_pipeline.core.bench.gold import CEILING

    corpus = load_bench_corpus(CASES)
    report = run_bench(corpus, oracle_extractor(corpus), row_name="oracle")
    markdown = render_markdown(report)
    legend = markdown.split("## What the rates count", 1)[1]
    table_rates = [line.split(" | ")[0][2:] for line in markdown.splitlines() if line[:2] == "| "]
    for rate in table_rates[1:]:  # past the header row
        assert f"- `{rate}`: " in legend, rate
    assert "`mention`: `mention_agree` / `entities_tp`" in legend
    ceiling = legend.split("must reach 1.0 on ", 1)[1].split(" (the `oracle_ceiling` check)")[0]
    assert set(ceiling.replace(" and ", ", ").split(", ")) == set(CEILING["cases"])


def test_only_the_test_split_of_the_unmodified_corpus_is_publishable(tmp_path: Path) -> None:
    corpus = load_bench_corpus(CASES, split="test")
    report = run_bench(corpus, oracle_extractor(corpus), row_name="oracle")
    assert report["publishable"] is True
    dev = load_bench_corpus(CASES, split="dev")
    dev_report = run_bench(dev, oracle_extractor(dev), row_name="oracle")
    assert dev_report["publishable"] is False
    json_path, md_path = write_run(
        dev_report, tmp_path, now=datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    )
    assert json_path.name == "20250102T030405Z.json" and md_path.name == "20250102T030405Z.md"
    assert json.loads(json_path.read_text()) == dev_report
    assert "not publishable" in md_path.read_text()
    json_path, md_path = write_run(report, tmp_path / "t")
    assert "not publishable" not in md_path.read_text()


def _mini(tmp_path: Path) -> BenchCorpus:
    return load_bench_corpus(write_corpus(tmp_path))


def _run(corpus: BenchCorpus, perturb: Perturb) -> dict[str, int]:
    name, graph = next(iter(corpus.expected_results().items()))
    report = run_bench(corpus, OracleExtractor({name: perturb(graph)}), row_name="x")
    (episode,) = report["rows"]["x"]["episodes"]
    assert episode["status"] == "ok"
    counts: dict[str, int] = episode["counts"]
    return counts


def _edges(g: ExtractionResult, edges: tuple[Edge, ...]) -> ExtractionResult:
    return g.model_copy(update={"edges": edges})


def _reverse(e: Edge) -> Edge:
    return e.model_copy(update={"source": e.target, "target": e.source})


def test_oracle_on_the_mini_case(tmp_path: Path) -> None:
    c = _run(_mini(tmp_path), lambda g: g)
    assert (c["entities_tp"], c["entities_produced"], c["entities_expected"]) == (4, 4, 4)
    assert (c["edges_tp"], c["edges_produced"], c["edges_expected"]) == (3, 3, 3)
    assert (c["properties_tp"], c["properties_expected"]) == (2, 2)
    assert (c["forbidden_written"], c["forbidden_total"]) == (0, 2)
    assert (c["items_conformant"], c["items_emitted"], c["span_overlap"]) == (7, 7, 7)
    assert c["requests"] == 2


@pytest.mark.parametrize("k", [1, 2, 3])
def test_dropping_k_edges(tmp_path: Path, k: int) -> None:
    c = _run(_mini(tmp_path / str(k)), lambda g: _edges(g, g.edges[k:]))
    assert (c["edges_tp"], c["edges_produced"], c["edges_expected"]) == (3 - k, 3 - k, 3)
    assert c["edges_reversed"] == 0 and c["entities_tp"] == 4


@pytest.mark.parametrize("k", [1, 2, 3])
def test_reversing_k_edges(tmp_path: Path, k: int) -> None:
    c = _run(
        _mini(tmp_path / str(k)),
        lambda g: _edges(g, tuple(_reverse(e) for e in g.edges[:k]) + g.edges[k:]),
    )
    assert (c["edges_tp"], c["edges_matched"], c["edges_reversed"]) == (3 - k, 3 - k, k)
    assert c["edges_produced"] == 3
    # Reversing ash->birch writes the forbidden birch->ash edge.
    assert c["forbidden_written"] == 1


def test_a_repeated_edge_counts_once_whichever_way_round(tmp_path: Path) -> None:
    """A reversed edge written twice had counted twice against direction (0.5 became 0.33),
    while a right edge written twice counted once."""
    c = _run(
        _mini(tmp_path),
        lambda g: _edges(g, (g.edges[0], g.edges[0], _reverse(g.edges[1]), _reverse(g.edges[1]))),
    )
    assert (c["edges_matched"], c["edges_reversed"], c["edges_produced"]) == (1, 1, 4)


def test_renamed_types_are_hallucination_findings(tmp_path: Path) -> None:
    def rename(g: ExtractionResult) -> ExtractionResult:
        dale = g.entities[3].model_copy(update={"type": "Stop"})
        ash = g.entities[0].model_copy(
            update={"properties": {**g.entities[0].properties, "colour": "red"}}
        )
        first = g.edges[0].model_copy(update={"relation": "JOINS"})
        return ExtractionResult(entities=(ash, *g.entities[1:3], dale), edges=(first, *g.edges[1:]))

    c = _run(_mini(tmp_path), rename)
    assert (c["unknown_type"], c["vertices_emitted"]) == (1, 4)
    # JOINS is undeclared; cedar->Dale now has a Stop target LINKS_TO does not take.
    assert (c["undeclared_edge"], c["edges_emitted"]) == (2, 3)
    assert (c["undeclared_property"], c["properties_emitted"]) == (1, 3)
    assert c["items_conformant"] == 7 - 1 - 1 - 2  # dale, ash (property), two edges
    assert c["entities_tp"] == 3 and c["edges_tp"] == 1
    assert (c["properties_tp"], c["properties_produced"], c["properties_expected"]) == (2, 3, 2)


def test_forbidden_items_written(tmp_path: Path) -> None:
    def add(g: ExtractionResult) -> ExtractionResult:
        elm = Entity(name="Elm", type="Station", quote="Ash")
        back = Edge(source="Birch", target="Ash", relation="LINKS_TO", quote="links to Birch")
        return ExtractionResult(entities=(*g.entities, elm), edges=(*g.edges, back))

    c = _run(_mini(tmp_path), add)
    assert (c["forbidden_written"], c["forbidden_total"]) == (2, 2)
    assert (c["entities_tp"], c["entities_produced"]) == (4, 5)
    # The back edge is both produced the wrong way round and forbidden.
    assert (c["edges_tp"], c["edges_produced"], c["edges_reversed"]) == (3, 4, 1)


def test_ungrounded_quotes_and_unfaithful_values(tmp_path: Path) -> None:
    def spoil(g: ExtractionResult) -> ExtractionResult:
        ash = g.entities[0].model_copy(
            update={"properties": {"opened": "1990-05-01", "platforms": 5}}
        )
        birch = g.entities[1].model_copy(update={"quote": "Birch station, west side"})
        edge = g.edges[2].model_copy(update={"quote": ""})
        return ExtractionResult(entities=(ash, birch, *g.entities[2:]), edges=(*g.edges[:2], edge))

    c = _run(_mini(tmp_path), spoil)
    assert (c["quotes_ungrounded"], c["items_emitted"]) == (2, 7)
    assert (c["values_unfaithful"], c["properties_emitted"]) == (1, 2)
    assert c["properties_tp"] == 1
    assert c["span_overlap"] == 7 - 2  # birch's and the third edge's quotes no longer overlap


def test_written_out_and_grouped_values_match_after_coercion(tmp_path: Path) -> None:
    def restate(g: ExtractionResult) -> ExtractionResult:
        ash = g.entities[0].model_copy(
            update={"name": "  ASH ", "properties": {"opened": "1 May 1990", "platforms": "four"}}
        )
        return g.model_copy(update={"entities": (ash, *g.entities[1:])})

    c = _run(_mini(tmp_path), restate)
    assert (c["entities_tp"], c["properties_tp"], c["values_unfaithful"]) == (4, 2, 0)
    # The edge names "Ash" and the entity is "  ASH ": resolved by normalised name.
    assert c["edges_tp"] == 3


def test_an_errored_episode_still_counts_everything_expected(tmp_path: Path) -> None:
    corpus = _mini(tmp_path)
    report = run_bench(corpus, OracleExtractor({}), row_name="x")
    (ep,) = report["rows"]["x"]["episodes"]
    assert ep["status"] == "error"
    c = ep["counts"]
    assert (c["entities_expected"], c["edges_expected"], c["entities_produced"]) == (4, 3, 0)


def test_a_row_that_errored_everywhere_shows_no_clean_lower_is_better_rate(
    tmp_path: Path,
) -> None:
    """An errored episode wrote nothing: `forbidden` 0.000 would read as the best score."""
    corpus = _mini(tmp_path)
    report = run_bench(corpus, oracle_extractor(corpus), row_name="oracle")
    report["rows"].update(run_bench(corpus, OracleExtractor({}), row_name="broken")["rows"])
    assert report["rows"]["broken"]["rates"]["forbidden"] == 0.0  # the data, as counted
    lines = render_markdown(report).splitlines()
    assert "| episodes errored | 0 / 1 | 1 / 1 |" in lines
    forbidden = next(line for line in lines if line.startswith("| forbidden |"))
    assert forbidden.split("|")[-2].strip() == "—"
    assert any("an errored episode wrote nothing" in line for line in lines)


def test_a_report_reads_into_compare(tmp_path: Path) -> None:
    corpus = _mini(tmp_path)
    a = run_bench(corpus, oracle_extractor(corpus), row_name="a")
    name, graph = next(iter(corpus.expected_results().items()))
    b = run_bench(corpus, OracleExtractor({name: _edges(graph, graph.edges[1:])}), row_name="b")
    result = compare_runs(a, b, resamples=200)
    rates = {r["rate"]: r for r in result["rates"]}
    assert rates["edge_recall"]["a"]["rate"] == 1.0
    assert rates["edge_recall"]["b"]["num"] == 2


def test_slice_keeps_named_types_then_closure_under_the_budget() -> None:
    corpus = load_bench_corpus(CASES)
    case = next(c for c in corpus.cases if c.id == "selection/shipping")
    cut = slice_schema(case.schema, case.episodes[0].body, 3)
    assert cut.seeds == ("Parcel", "Warehouse")
    assert cut.closure == ("Company",)
    assert set(cut.entity_types) == {"Company", "Parcel", "Warehouse"}
    assert {r.name for r in cut.ontology.relation_types} == {"SHIPPED", "STORED_IN"}
    tight = slice_schema(case.schema, case.episodes[0].body, 1)
    assert tight.entity_types == ("Parcel",)
    assert tight.ontology.relation_types == ()


def test_mention_flag_is_read_from_the_cast(tmp_path: Path) -> None:
    """A keyed entity known by name only is a mention; stating a key it lacks disagrees."""
    body = "A train stopped at Ash, and train 4711 stopped at Birch."
    vertices = {
        "ash": {"type": "Station", "name": "Ash", "quote": "Ash"},
        "birch": {"type": "Station", "name": "Birch", "quote": "Birch."},
        "t1": {
            "type": "Train",
            "name": "4711",
            "quote": "train 4711",
            "properties": {"number": "4711"},
        },
        "tx": {"type": "Train", "name": "train", "quote": "A train stopped", "mention": True},
    }
    data = {"ep-1": {"vertices": vertices, "edges": []}}
    corpus = load_bench_corpus(
        write_corpus(tmp_path, expected_yaml=data, episodes=[{"source_id": "ep-1", "body": body}])
    )
    assert _run(corpus, lambda g: g)["mention_agree"] == 4

    def key_the_mention(g: ExtractionResult) -> ExtractionResult:
        ents = tuple(
            e.model_copy(update={"properties": {"number": "0001"}}) if e.name == "train" else e
            for e in g.entities
        )
        return g.model_copy(update={"entities": ents})

    counts = _run(corpus, key_the_mention)
    # Still matched by its name (the expected vertex has no key), but no longer a mention.
    assert counts["entities_tp"] == 4 and counts["mention_agree"] == 3


def test_conformance_reads_the_first_reply_and_the_final_attempt_separately(
    tmp_path: Path,
) -> None:
    """A first reply with a type outside the schema, retried (truncated) into a clean one."""
    from evals_pipeline.core.bench.metrics import episode_counts, first_reply
    from evals_pipeline.core.models import Attempt, CallStats, ExtractionOutcome, StageTranscript

    corpus = _mini(tmp_path)
    case = corpus.cases[0]
    (ep,) = case.episodes
    final = next(iter(corpus.expected_results().values()))
    bad_first = {
        "entities": [
            {"name": e.name, "type": "Stop" if e.name == "Ash" else e.type, "quote": e.quote}
            for e in final.entities
        ]
    }
    attempts = (
        Attempt(text=json.dumps(bad_first), finish_reason="length", truncated=True, max_tokens=8),
        Attempt(text="{}", finish_reason="stop", truncated=False, max_tokens=16),
    )
    edges = json.dumps({"edges": [e.model_dump() for e in final.edges]})
    outcome = ExtractionOutcome(
        result=final,
        stats=CallStats(),
        transcript=(
            StageTranscript(stage="entities", attempts=attempts),
            StageTranscript(
                stage="edges",
                attempts=(
                    Attempt(text=edges, finish_reason="stop", truncated=False, max_tokens=8),
                ),
            ),
        ),
        provider="test",
        model="m",
    )
    first = first_reply(outcome)
    assert next(e.type for e in first.entities) == "Stop"
    counts = episode_counts(
        body=ep.body,
        context=ep.context,
        expected=ep.expected,
        result=final,
        schema=case.schema,
        shown=case.schema,
        first=first,
    )
    items = len(final.entities) + len(final.edges)
    # Ash's unknown type also makes its LINKS_TO edge undeclared in the first reply.
    assert counts["items_emitted"] == counts["final_items_emitted"] == items
    assert counts["unknown_type"] == 1 and counts["undeclared_edge"] == 1
    assert counts["items_conformant"] == items - 2
    assert counts["final_items_conformant"] == items
    assert counts["entities_tp"] == len(final.entities)


class _TwoCasts(OracleExtractor):
    """The oracle on the first cast of each episode, `second` on the next."""

    def __init__(self, graphs: dict[str, ExtractionResult], second: Perturb) -> None:
        super().__init__(graphs)
        self._second = second
        self._seen: set[str] = set()

    async def extract(self, episode, options):  # type: ignore[no-untyped-def]
        outcome = await super().extract(episode, options)
        if episode.name not in self._seen:
            self._seen.add(episode.name)
            return outcome
        return outcome.model_copy(update={"result": self._second(outcome.result)})


def test_a_recast_counts_added_identities_and_reminted_blank_vertices(tmp_path: Path) -> None:
    body = "Train 4711 stopped at Ash after a delay of 12 minutes."
    vertices = {
        "ash": {"type": "Station", "name": "Ash", "quote": "Ash"},
        "t": {
            "type": "Train",
            "name": "4711",
            "quote": "Train 4711",
            "properties": {"number": "4711"},
        },
        "d": {
            "type": "Delay",
            "name": "delay",
            "quote": "a delay of 12 minutes",
            "properties": {"minutes": 12},
        },
    }
    data = {"ep-1": {"vertices": vertices, "edges": []}}
    root = write_corpus(
        tmp_path,
        expected_yaml=data,
        episodes=[{"source_id": "ep-1", "body": body}],
        case={"description": "recast", "schema": ["mini.yaml"], "recast": True},
    )
    corpus = load_bench_corpus(root)

    def counts(second: Perturb) -> dict[str, int]:
        report = run_bench(corpus, _TwoCasts(corpus.expected_results(), second), row_name="x")
        (episode,) = report["rows"]["x"]["episodes"]
        assert episode["counts"]["requests"] == 4  # two calls per cast, two casts
        return dict(episode["counts"])

    same = counts(lambda g: g)
    # The same cast again: nothing added; the blank Delay is minted anew (it cannot merge).
    assert (same["recast_vertices"], same["recast_added"], same["recast_duplicated"]) == (3, 0, 1)

    def renamed(g: ExtractionResult) -> ExtractionResult:
        ents = tuple(
            e.model_copy(update={"properties": {"number": "4712"}}) if e.type == "Train" else e
            for e in g.entities
            if e.type != "Delay"
        )
        return g.model_copy(update={"entities": ents})

    other = counts(renamed)
    assert (other["recast_vertices"], other["recast_added"], other["recast_duplicated"]) == (
        2,
        1,
        0,
    )


def test_a_cast_without_the_key_matches_by_name_and_disagrees_on_mention(tmp_path: Path) -> None:
    body = "Train 4711 stopped at Ash."
    vertices = {
        "ash": {"type": "Station", "name": "Ash", "quote": "Ash"},
        "t": {
            "type": "Train",
            "name": "4711",
            "quote": "Train 4711",
            "properties": {"number": "4711"},
        },
    }
    corpus = load_bench_corpus(
        write_corpus(
            tmp_path,
            expected_yaml={"ep-1": {"vertices": vertices, "edges": []}},
            episodes=[{"source_id": "ep-1", "body": body}],
        )
    )

    def drop_key(g: ExtractionResult) -> ExtractionResult:
        ents = tuple(e.model_copy(update={"properties": {}}) for e in g.entities)
        return g.model_copy(update={"entities": ents})

    counts = _run(corpus, drop_key)
    # Matched by its name (a secondary identity), but the cast called it a mention.
    assert counts["entities_tp"] == 2 and counts["mention_agree"] == 1
    assert counts["properties_tp"] == 0 and counts["properties_expected"] == 1


class _FailingSecondCast(_TwoCasts):
    async def extract(self, episode, options):  # type: ignore[no-untyped-def]
        from evals_pipeline.core.errors import ExtractionFailed

        if episode.name in self._seen:
            raise ExtractionFailed("the second call failed", failure=None)
        return await super().extract(episode, options)


def test_a_failed_second_cast_marks_the_episode_as_an_error(tmp_path: Path) -> None:
    root = write_corpus(
        tmp_path, case={"description": "recast", "schema": ["mini.yaml"], "recast": True}
    )
    corpus = load_bench_corpus(root)
    extractor = _FailingSecondCast(corpus.expected_results(), lambda g: g)
    report = run_bench(corpus, extractor, row_name="x")
    (episode,) = report["rows"]["x"]["episodes"]
    assert episode["status"] == "error"
    assert episode["error"].startswith("second cast:")
    assert episode["counts"]["entities_tp"] == 4  # the first cast still scores


def test_runs_of_the_same_second_never_overwrite(tmp_path: Path) -> None:
    corpus = _mini(tmp_path)
    report = run_bench(corpus, oracle_extractor(corpus), row_name="oracle")
    now = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    first, _ = write_run(report, tmp_path / "out", now=now)
    second, md = write_run(report, tmp_path / "out", now=now)
    assert first.name == "20250102T030405Z.json" and second.name == "20250102T030405Z-2.json"
    assert md.exists()
    # Each written whole: no temporary file is left, and the first run's file is intact.
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "20250102T030405Z-2.json", "20250102T030405Z-2.md",
        "20250102T030405Z.json", "20250102T030405Z.md",
    ]  # fmt: skip
    assert json.loads(first.read_text()) == report


class _DiskFullAfter(OracleExtractor):
    """The oracle, whose recording fails from the `after`-th call on, as a full disk does."""

    def __init__(self, graphs: dict[str, ExtractionResult], after: int) -> None:
        super().__init__(graphs)
        self.after = after
        self.calls = 0

    async def extract(self, episode, options):  # type: ignore[no-untyped-def]
        from evals_pipeline.core.errors import CassetteWriteError

        self.calls += 1
        outcome = await super().extract(episode, options)
        if self.calls > self.after:
            raise CassetteWriteError("rec.jsonl", "No space left on device")
        return outcome


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_recording_that_cannot_be_written_stops_the_run(concurrency: int) -> None:
    """Not one episode's error: every episode still waiting would pay for a call it cannot
    record. The episodes in flight finish; no other starts; the error fails the run."""
    from evals_pipeline.core.errors import CassetteWriteError

    corpus = load_bench_corpus(CASES)
    extractor = _DiskFullAfter(corpus.expected_results(), after=2)
    with pytest.raises(CassetteWriteError, match="No space left on device"):
        run_bench(corpus, extractor, row_name="x", concurrency=concurrency)
    assert extractor.calls <= 2 + concurrency  # of 36 episodes


def test_a_run_that_cannot_be_written_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk (simulated: the report's write fails) leaves no claimed, empty run file."""
    from evals_pipeline.core.bench import runner
    from evals_pipeline.core.errors import OutputPathError

    real = runner.write_text_atomic

    def full_disk(path: Path, text: str) -> Path:
        if path.suffix == ".md":
            raise OutputPathError(path, "cannot write here: No space left on device")
        return real(path, text)

    monkeypatch.setattr(runner, "write_text_atomic", full_disk)
    corpus = _mini(tmp_path)
    report = run_bench(corpus, oracle_extractor(corpus), row_name="oracle")
    with pytest.raises(OutputPathError, match="No space left"):
        write_run(report, tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the output folder goes")
    with pytest.raises(OutputPathError, match="cannot write here"):
        write_run(report, blocked / "cases")


def test_a_rows_provider_and_model_are_one_answers_pair() -> None:
    """The most answers' (provider, model) pair, never the most common provider beside another
    answer's model; the extractor's own when no chunk was answered."""
    from evals_pipeline.core.bench.runner import row_source
    from evals_pipeline.core.models import CallStats, Episode, ExtractionOutcome
    from evals_pipeline.core.runner import ChunkRun

    episode = Episode(name="e", body="b")

    def answered(provider: str, model: str) -> ChunkRun:
        outcome = ExtractionOutcome(
            result=ExtractionResult(),
            stats=CallStats(),
            transcript=(),
            provider=provider,
            model=model,
        )
        return ChunkRun(episode=episode, outcome=outcome)

    runs = [answered("anthropic", "claude-x")] * 3 + [answered("oai-http", "local-a")] * 2
    runs += [answered("oai-http", "local-b")] * 2
    extractor = OracleExtractor({})
    assert row_source(extractor, runs) == {"provider": "anthropic", "model": "claude-x"}
    failed = [ChunkRun(episode=episode, outcome=None, error="boom")]
    assert row_source(extractor, failed) == {"provider": "oracle", "model": "oracle"}


def test_no_prompt_names_the_failure_its_case_tests() -> None:
    """The episode's name is in the prompt (`<document name=...>`): it had been the case id, so
    the model read `injection/clinics/ep-1` before the injection it was being tested on."""
    import re

    from evals_pipeline.core.bench.runner import bench_calls
    from evals_pipeline.core.prompts import render_extract_prompts

    corpus = load_bench_corpus(CASES)
    families = {case.family for case in corpus.cases}
    names = set()
    for episode, options in bench_calls(corpus):
        prompts = render_extract_prompts(episode, options)
        [shown] = re.findall(r'<document name="([^"]*)"', prompts.entity_user)
        assert not any(family in shown for family in families), shown
        names.add(shown)
    assert len(names) == sum(len(case.episodes) for case in corpus.cases)  # one per episode
