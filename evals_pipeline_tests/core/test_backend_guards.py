"""backend_guards: the extraction step re-checks exactly the plan's guards for its backend."""

from pathlib import Path

from evals_pipeline.core.corpus import load_prose_corpus
from evals_pipeline.core.ontology import load_ontology
from evals_pipeline.core.plan import backend_guards, plan_run
from evals_pipeline_tests.pipeline_fixtures import CORPUS, ONTOLOGY, RULES, make_config


def test_backend_guards_match_the_plan(tmp_path: Path) -> None:
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(RULES.read_bytes() + b'{"key": "half a rec')
    config = make_config(
        tmp_path,
        {
            "o": "oracle",
            "a": f"cassette:path={RULES}",
            "b": f"cassette:path={RULES}",  # the same cassette twice: distinct_cassettes
            "t": f"cassette:path={torn}",  # a torn last line: cassette_integrity
        },
        record_cassette={"a": str(tmp_path / "rec.jsonl")},  # recording a replay
    )
    ontology = load_ontology(ONTOLOGY)
    corpus = load_prose_corpus(CORPUS, ontology).scoped(config.limit)
    plan = plan_run(
        config,
        list(corpus.episodes()),
        ontology,
        corpus_path=str(CORPUS),
        corpus_digest=corpus.digest,
        environ={},
    )
    assert {g.check for g in plan.guards} == {
        "cassette_integrity",
        "distinct_cassettes",
        "no_record_on_replay",
    }
    for backend in config.backends:
        assert backend_guards(config, backend) == [g for g in plan.guards if backend in g.backends]
    assert backend_guards(config, "o") == []
