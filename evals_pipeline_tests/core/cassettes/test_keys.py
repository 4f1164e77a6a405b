"""Cassette keys: the fast encoder hashes exactly the canonical JSON of the key's material."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from evals_pipeline.core.cassettes import keys
from evals_pipeline.core.cassettes.keys import (
    _flat_sha256,
    _sha256,
    extract_key,
    extract_request,
)
from evals_pipeline.core.models import Episode
from evals_pipeline.core.ontology import load_ontology
from evals_pipeline.core.options import ExtractOptions
from evals_pipeline.core.prompts import render_extract_prompts
from evals_pipeline_tests.pipeline_fixtures import ONTOLOGY, REPO

WEBNLG = REPO.parent / "shared" / "data" / "webnlg" / "dev.jsonl"

AWKWARD = [
    Episode(name="plain", body="Ada Lovelace wrote the first program."),
    Episode(
        name='quotes "and" \\ backslashes',
        body='She said "no" \\ then\n\ttabbed\r\n and \u2028 separated \x00 nul',
        group_id="g/1",
        reference_time=datetime(2024, 5, 1, 12, 30, tzinfo=UTC),
        custom_instructions="Ignore dates. 日本語 too.",
        context=("earlier text", "émigré café 🚀"),
    ),
    Episode(name="a message", body="ok\u00a0then", source_type="message"),
]


def _options() -> list[ExtractOptions]:
    ontology = load_ontology(ONTOLOGY)
    return [ExtractOptions.for_mode(m, ontology) for m in ("freeform", "open", "strict")]


def _material(episode: Episode, options: ExtractOptions) -> dict[str, object]:
    return {"call_type": "extract", **extract_request(episode, options)}


@pytest.mark.parametrize("episode", AWKWARD, ids=lambda e: e.name)
def test_fast_key_is_the_sha256_of_the_canonical_json(episode: Episode) -> None:
    for options in _options():
        material = _material(episode, options)
        assert extract_key(episode, options) == _sha256(material)
        # twice: the second time the system prompts' encodings come from the cache
        assert _flat_sha256(material) == _sha256(material)


def test_fast_key_matches_on_real_webnlg_texts() -> None:
    if not WEBNLG.exists():
        pytest.skip(f"{WEBNLG} is not on this machine")
    options = _options()
    with WEBNLG.open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    for row in rows:
        episode = Episode(name=row["id"], body=row["text"])
        for opts in options:
            assert extract_key(episode, opts) == _sha256(_material(episode, opts))


def test_a_key_changes_with_the_options_even_when_strings_are_cached() -> None:
    episode = AWKWARD[0]
    keys = {extract_key(episode, o) for o in _options()}
    assert len(keys) == 3
    prompts = render_extract_prompts(episode, _options()[2])
    assert extract_key(episode, _options()[2], prompts) in keys


def test_keys_are_remembered_by_value_and_never_confused_between_episodes_or_options() -> None:
    """The plan, each step's guards, the cache, the recorder and the replayer key one chunk,
    often from equal but distinct objects (each step reads the corpus back from storage)."""
    keys._EXTRACT_KEYS.clear()
    keys._BY_IDENTITY.clear()
    options = _options()
    first = {(e.name, o.mode): extract_key(e, o) for e in AWKWARD for o in options}
    assert len(keys._BY_IDENTITY) == len(AWKWARD) * len(options)
    assert {(e.name, o.mode): extract_key(e, o) for e in AWKWARD for o in options} == first
    remembered = len(keys._EXTRACT_KEYS)
    assert remembered == len(AWKWARD) * len(options) == len(set(first.values()))
    copies = [Episode.model_validate(e.model_dump()) for e in AWKWARD]
    fresh_options = _options()  # equal options, distinct objects
    again = {(e.name, o.mode): extract_key(e, o) for e in copies for o in fresh_options}
    assert again == first and len(keys._EXTRACT_KEYS) == remembered
    # Each remembered key is what the key's material hashes to.
    for episode in AWKWARD:
        for option in options:
            assert first[episode.name, option.mode] == _sha256(_material(episode, option))
    edited = AWKWARD[0].model_copy(update={"custom_instructions": "new"})
    assert extract_key(edited, options[0]) != first[AWKWARD[0].name, "freeform"]


def test_equal_reference_times_in_different_offsets_get_their_own_keys() -> None:
    """`12:00+00:00 == 13:00+01:00`, but the prompt shows the time as written."""
    from datetime import timedelta, timezone

    utc = Episode(name="t", body="b", reference_time=datetime(2024, 1, 1, 12, tzinfo=UTC))
    plus_one = utc.model_copy(
        update={"reference_time": datetime(2024, 1, 1, 13, tzinfo=timezone(timedelta(hours=1)))}
    )
    assert utc == plus_one  # what made a by-value memo confuse them
    options = _options()[0]
    assert extract_key(utc, options) != extract_key(plus_one, options)
    assert extract_key(plus_one, options) == _sha256(_material(plus_one, options))
