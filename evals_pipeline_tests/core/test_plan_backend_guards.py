"""backend_guards: the extraction step re-checks exactly the plan's guards for its backend."""

from pathlib import Path

from evals_pipeline.core.plan import backend_guards
from evals_pipeline_tests.pipeline_fixtures import RULES, make_config, plan_fixture_run


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
            "r": "oracle",
            "s": "oracle",
            "k": "anthropic",  # no ANTHROPIC_API_KEY: live_credentials
        },
        record_cassette={
            "a": str(tmp_path / "rec.jsonl"),  # recording a replay
            "r": str(RULES),  # another model's answers, and a replayed cassette: recording_targets
            "s": str(torn),  # a replayed cassette, and torn: recording_targets
        },
    )
    plan = plan_fixture_run(config)
    assert {g.check for g in plan.guards} == {
        "cassette_integrity",
        "distinct_cassettes",
        "no_record_on_replay",
        "recording_targets",
        "live_credentials",
    }
    assert len(plan.guards_for("recording_targets", "r")) == 3  # a's and b's file, rules' answers
    for backend in config.backends:
        assert backend_guards(config, backend) == [g for g in plan.guards if backend in g.backends]
    assert backend_guards(config, "o") == []
