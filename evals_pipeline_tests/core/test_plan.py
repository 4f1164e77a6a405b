"""The plan: what a dry run prints is what a real run enforces."""

import shutil
from pathlib import Path

import pytest

from evals_pipeline.core.errors import ConfigError
from evals_pipeline.core.plan import fresh_recording_guards
from evals_pipeline_tests.pipeline_fixtures import RULES, SLOPPY, make_config
from evals_pipeline_tests.pipeline_fixtures import plan_fixture_run as plan


def test_plan_content(tmp_path: Path) -> None:
    config = make_config(
        tmp_path,
        {"o": "oracle", "r": f"cassette:path={RULES}", "live": "oai-http:url=http://127.0.0.1:9"},
    )
    p = plan(config)
    assert p.scope == 4 and p.modes == ("freeform", "open", "strict")
    assert p.backends["r"].action == "replay" and p.backends["r"].cassette_records == 48
    assert p.backends["r"].coverage == {"freeform": 4, "open": 4, "strict": 4}
    assert p.backends["live"].action == "live"
    assert p.backends["live"].planned_calls == {"freeform": 8, "open": 8, "strict": 8}
    assert p.backends["o"].planned_calls == {"freeform": 0, "open": 0, "strict": 0}
    assert p.guards == [] and p.notes == []
    # reference mode: 2 candidates x 3 axes x 4 chunks x 3 modes; skipped without a key
    assert p.judge["planned_calls"] == 2 * 3 * 4 * 3 and p.judge["status"] == "skipped"
    text = p.render()
    assert "r = cassette:path=" in text and "(48 records)" in text
    assert "guards: none would abort" in text


def test_an_anthropic_backend_without_its_key_is_a_guard(tmp_path: Path) -> None:
    """Its extraction step would fail building the client (even with every call cached),
    after the other backends' steps: a dry run that said "none would abort" was wrong."""
    config = make_config(
        tmp_path, {"o": "oracle", "claude": "anthropic", "r": f"cassette:path={RULES}"}
    )
    p = plan(config)
    assert [(g.check, g.backends) for g in p.guards] == [("live_credentials", ("claude",))]
    assert "[live_credentials] claude: the anthropic backend needs ANTHROPIC_API_KEY" in p.render()
    assert plan(config, environ={"ANTHROPIC_API_KEY": "k"}).guards == []
    assert plan(make_config(tmp_path, {"o": "oracle"})).guards == []  # no anthropic backend


def test_one_modes_plan_covers_that_mode_only(tmp_path: Path) -> None:
    """What one mode's `run_plan` partition asks for: its own keys, calls and judge cost."""
    config = make_config(
        tmp_path, {"o": "oracle", "r": f"cassette:path={RULES}", "live": "oai-http:url=http://h"}
    )
    p = plan(config, modes=["open"], judge_coverage=True)
    assert p.modes == ("open",)
    assert p.backends["r"].coverage == {"open": 4}
    assert p.backends["live"].planned_calls == {"open": 8}
    assert p.judge["planned_calls"] == 2 * 3 * 4  # one mode
    assert set(p.judge["cache"]) == {"cached", "uncached", "repeated", "unknown", "no_call"}
    # The live backend's open-mode extractions do not exist yet: 3 axes x 4 chunks unknown.
    assert p.judge["cache"]["unknown"] == 3 * 4
    assert sum(p.judge["cache"].values()) == p.judge["planned_calls"]


def test_judge_coverage_knows_a_chunk_a_cassette_cannot_answer_needs_no_call(
    tmp_path: Path,
) -> None:
    """A cassette (or the oracle) without a chunk's answer fails that chunk in the run, and
    judging makes no call for a failed extraction: not "unknown until it exists"."""
    short = tmp_path / "short.jsonl"
    lines = RULES.read_text().splitlines(keepends=True)
    kept = [line for line in lines if '"episode_name":"chunk-01-lovelace"' not in line]
    assert len(kept) == len(lines) - 3  # one chunk, three modes
    short.write_text("".join(kept))
    config = make_config(
        tmp_path,
        {"o": "oracle", "r": f"cassette:path={short}", "s": f"cassette:path={SLOPPY}"},
        judge={"mode": "both"},
    )
    cache = plan(config, modes=["open"], judge_coverage=True).judge["cache"]
    # reference: 2 candidates x 3 axes x 4 chunks; pairwise: 3 pairs x 2 orders x 3 axes x 4
    assert sum(cache.values()) == 2 * 3 * 4 + 3 * 2 * 3 * 4
    assert cache["unknown"] == 0
    # With r's whole cassette, its calls on that chunk (3 reference axes where both sides have
    # items, and 2 pairs x 2 orders x 3 axes) would be made.
    whole = config.model_copy(
        update={"backends": {**config.backends, "r": f"cassette:path={RULES}"}}
    )
    full = plan(whole, modes=["open"], judge_coverage=True).judge["cache"]
    assert 2 * 2 * 3 < cache["no_call"] - full["no_call"] <= 3 + 2 * 2 * 3


def test_planning_a_mode_the_run_does_not_have_is_a_config_error(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"o": "oracle", "p": "oracle"}, modes=("strict",))
    with pytest.raises(ConfigError, match=r"'open'.*the run's modes are \('strict',\)"):
        plan(config, modes=["open"])


def test_pairwise_judge_plan(tmp_path: Path) -> None:
    config = make_config(
        tmp_path, {"a": "oracle", "b": "oracle", "c": "oracle"}, judge={"mode": "pairwise"}
    )
    # C(3,2) pairs x 2 orders x 3 axes = 18 per chunk
    assert plan(config).judge["planned_calls"] == 18 * 4 * 3


def test_same_live_spec_twice_is_not_a_guard(tmp_path: Path) -> None:
    spec = "oai-http:url=http://127.0.0.1:9"
    assert plan(make_config(tmp_path, {"o": "oracle", "a": spec, "b": spec})).guards == []


def test_fresh_recording_guard(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    a.write_text("x\n")
    b.write_text("x\n")
    c.write_text("y\n")
    assert [g.backends for g in fresh_recording_guards({"a": a, "b": b, "c": c})] == [("a", "b")]
    assert fresh_recording_guards({"a": a, "c": c}) == []


def test_cached_calls_are_not_planned_unless_the_backend_is_being_recorded(
    tmp_path: Path,
) -> None:
    """A live backend's cache answers what it holds; a recorded one never reads it, but its
    cassette answers what it already holds. A local backend has no cache at all."""
    backends = {"o": "oracle", "r": f"cassette:path={RULES}", "live": "oai-http:url=http://h"}
    first = plan(make_config(tmp_path, backends))
    cache = first.backends["live"].cache_path
    assert cache is not None and first.backends["r"].cache_path is None
    assert "no calls: answered locally, not cached" in first.render()
    Path(cache).parent.mkdir(parents=True)
    shutil.copy(RULES, cache)  # the same prompts, so the same keys: every call is cached
    cached = plan(make_config(tmp_path, backends))
    assert cached.backends["live"].planned_calls == {"freeform": 0, "open": 0, "strict": 0}
    recorded = plan(make_config(tmp_path, backends, record_cassette={"live": tmp_path / "x.jsonl"}))
    assert recorded.backends["live"].planned_calls == {"freeform": 8, "open": 8, "strict": 8}
    assert recorded.backends["live"].cache_path == cache  # written, never read
    assert "calls already recorded in its cassette: freeform: 0" in recorded.render()
    target = tmp_path / "y.jsonl"
    lines = RULES.read_text().splitlines(keepends=True)
    target.write_text("".join(line for line in lines if '"ontology_mode":"freeform"' in line))
    same_model = {**backends, "live": "oai-http:url=http://h,model=rules-tidy"}  # the file's
    resumed = plan(make_config(tmp_path, same_model, record_cassette={"live": target}))
    assert resumed.backends["live"].cache_hits == {"freeform": 4, "open": 0, "strict": 0}
    assert resumed.backends["live"].planned_calls == {"freeform": 0, "open": 8, "strict": 8}


def test_a_torn_last_line_plans_as_the_run_reads_it_and_a_corrupt_cache_is_a_guard(
    tmp_path: Path,
) -> None:
    """After a full disk cut a record short, the run makes that call again (the torn line is
    not a record) and aborts on nothing; the plan counts the same. A cache corrupt in the middle
    would fail the run: the plan says so as a guard instead of counting 0 cached."""
    backends = {"o": "oracle", "live": "oai-http:url=http://h,model=rules-tidy"}
    target = tmp_path / "torn.jsonl"
    lines = [line for line in RULES.read_text().splitlines(keepends=True) if "freeform" in line]
    target.write_text("".join(lines[:3]))
    whole = plan(make_config(tmp_path, backends, record_cassette={"live": target}))
    target.write_text("".join(lines[:3]) + lines[3][:50])
    torn = plan(make_config(tmp_path, backends, record_cassette={"live": target}))
    assert torn.backends["live"].cache_hits == whole.backends["live"].cache_hits
    assert torn.backends["live"].cache_hits["freeform"] >= 1  # it had said 0 already recorded
    assert torn.backends["live"].planned_calls == whole.backends["live"].planned_calls
    assert not torn.guards
    cache = Path(plan(make_config(tmp_path, backends)).backends["live"].cache_path or "")
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(lines[0][:50] + "\n" + "".join(lines[1:]))
    corrupt = plan(make_config(tmp_path, backends))
    assert [g.check for g in corrupt.guards] == ["cassette_integrity"]
    assert f"{cache}:1: Invalid JSON" in corrupt.guards[0].message


def test_a_chunk_beyond_a_models_context_is_a_note_for_a_live_run(tmp_path: Path) -> None:
    from evals_pipeline.core.models import Episode
    from evals_pipeline.core.plan import LARGE_CHUNK_CHARS, plan_run

    huge = Episode(name="huge", body="word " * (LARGE_CHUNK_CHARS // 5 + 1))
    small = Episode(name="small", body="Ada met Bob.")

    def notes(backends: dict[str, str]) -> list[str]:
        config = make_config(tmp_path, backends, modes=("freeform",))
        return plan_run(
            config, [small, huge], None, corpus_path="c", corpus_digest="d", environ={}
        ).notes

    live = notes({"o": "oracle", "live": "oai-http:url=http://127.0.0.1:9"})
    assert len(live) == 1 and "1 chunk(s) hold over 400,000 characters" in live[0]
    assert "huge (400,005 chars)" in live[0] and "small" not in live[0]
    assert notes({"o": "oracle", "p": "oracle"}) == []  # nothing is sent anywhere


def test_a_cassette_path_that_is_a_folder_is_a_guard_beside_another_cassette(
    tmp_path: Path,
) -> None:
    """The byte-identity guard compares files only; the integrity guard names the folder."""
    folder = tmp_path / "cassettes"
    folder.mkdir()
    config = make_config(
        tmp_path,
        {"o": "oracle", "a": f"cassette:path={folder}", "r": f"cassette:path={RULES}"},
        judge={"mode": "both"},
    )
    p = plan(config, judge_coverage=True)
    assert [(g.check, g.backends) for g in p.guards] == [("cassette_integrity", ("a",))]
    assert "is a folder" in p.guards[0].message


def test_a_judge_cache_that_is_a_folder_is_named_in_the_plan(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"o": "oracle", "r": f"cassette:path={RULES}"})
    config = config.model_copy(
        update={"judge": config.judge.model_copy(update={"cache": tmp_path})}
    )
    cache = plan(config, judge_coverage=True).judge["cache"]
    assert "is a folder" in cache["error"]


def test_judge_coverage_reads_a_recorded_backends_own_cassette(tmp_path: Path) -> None:
    """The run serves a recorded backend from its cassette, so its judge prompts can be
    rendered from there: not "unknown until its extractions exist"."""
    target = tmp_path / "rec.jsonl"
    shutil.copy(RULES, target)
    live = "oai-http:url=http://127.0.0.1:9,model=rules-tidy"
    config = make_config(tmp_path, {"o": "oracle", "live": live}, record_cassette={"live": target})
    cache = plan(config, modes=["open"], judge_coverage=True).judge["cache"]
    assert cache["unknown"] == 0 and cache["uncached"] > 0


def test_a_url_whose_user_info_takes_the_keys_header_is_a_note(tmp_path: Path) -> None:
    """httpx sends a URL's user info as Basic auth, in the Authorization header the API key
    would have had: the key went unsent, silently, and a gateway wanting it refused every call.
    The note names the backend and the variables, never the credentials."""
    from evals_pipeline.core.plan import plan_run

    backends = {
        "o": "oracle",
        "gw": "oai-http:url=http://user:pw-gw-3c1f@127.0.0.1:9/v1/chat/completions",
        "plain": "oai-http:url=http://127.0.0.1:9/v1/chat/completions",
    }
    config = make_config(tmp_path, backends, modes=("freeform",))

    def notes(environ: dict[str, str]) -> list[str]:
        return plan_run(config, [], None, corpus_path="c", corpus_digest="d", environ=environ).notes

    assert notes({}) == []  # no key to lose
    [note] = notes({"EVALS_OAI_API_KEY": "sk-oai-0123456789"})
    assert note.startswith("gw: its url carries user info") and "EVALS_OAI_API_KEY" in note
    anthropic = {
        "ANTHROPIC_API_KEY": "sk-ant-0123456789",
        "EVALS_ANTHROPIC_BASE_URL": "http://u:pw-anth-77@127.0.0.1:9",
    }
    [note] = notes(anthropic)
    assert note.startswith("EVALS_ANTHROPIC_BASE_URL carries user info") and "judge" in note
    assert not any("pw-" in n for n in notes({**anthropic, "EVALS_OAI_API_KEY": "k" * 12}))


def test_the_bench_plan_notes_a_url_whose_user_info_takes_the_keys_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evals_pipeline.core.bench.plan import bench_plan
    from evals_pipeline.core.config import BenchConfig

    url = "http://user:pw-gw-3c1f@127.0.0.1:9/v1/chat/completions"
    bench = BenchConfig(backends={"gw": f"oai-http:url={url}"}, output_dir=tmp_path / "bench")
    config = make_config(tmp_path, {"o": "oracle"}, bench=bench)
    monkeypatch.delenv("EVALS_OAI_API_KEY", raising=False)
    assert "note:" not in bench_plan(config, [])
    monkeypatch.setenv("EVALS_OAI_API_KEY", "sk-oai-0123456789")
    assert bench_plan(config, []).splitlines()[-1].startswith("note: gw: its url carries user")


def test_the_bench_refusal_reads_the_environment_it_is_given(tmp_path: Path) -> None:
    """The bench plan read this process's environment whatever `preflight` was given: a run
    checked against another environment saw a key it would not have."""
    from evals_pipeline.core.bench.gold import load_gold
    from evals_pipeline.core.config import BenchConfig
    from evals_pipeline.core.errors import ConfigError
    from evals_pipeline.core.preflight import refuse_bench_aborts
    from evals_pipeline_tests.pipeline_fixtures import write_webnlg

    gold = load_gold("webnlg", write_webnlg(tmp_path / "g"))
    bench = BenchConfig(
        backends={"a": "anthropic:model=claude-x"},
        corpora={"webnlg": gold.path},
        output_dir=tmp_path / "bench",
    )
    config = make_config(tmp_path, {"o": "oracle"}, bench=bench)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY is not set"):
        refuse_bench_aborts(config, [gold], {})
    refuse_bench_aborts(config, [gold], {"ANTHROPIC_API_KEY": "sk-ant-test"})
