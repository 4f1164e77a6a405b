"""`EvalsResource`: what it stores is safe to store; what it hands the run is the real config."""

from __future__ import annotations

from pathlib import Path

import pytest

from evals_pipeline import resources
from evals_pipeline.core.errors import ConfigError
from evals_pipeline.resources import EvalsResource
from evals_pipeline_tests.pipeline_fixtures import make_config

SECRET = "sk-sealed-7d21e0"
URL = f"http://user:{SECRET}@127.0.0.1:9/v1/chat/completions?api-key={SECRET}"


def _config(tmp_path: Path):  # type: ignore[no-untyped-def]
    backends = {
        "oracle": "oracle",
        "live": f"oai-http:url={URL}",
        "llama3.1": f"oai-http:url={URL}",
    }
    config = make_config(tmp_path, backends)
    bench = config.bench.model_copy(update={"backends": {"b-live": f"oai-http:url={URL}"}})
    return config.model_copy(update={"bench": bench})


def test_a_credential_in_a_spec_is_stored_as_its_description_and_restored_for_the_run(
    tmp_path: Path,
) -> None:
    resource = EvalsResource.from_config(_config(tmp_path))
    stored = resource.config_json + repr(resource.sealed_specs)
    assert SECRET not in stored
    assert "oai-http:url=http://127.0.0.1:9/v1/chat/completions" in resource.config_json
    assert sorted(resource.sealed_specs) == [
        "backends.live",
        "backends.llama3.1",
        "bench.backends.b-live",
    ]
    config = resource.config
    assert sorted(config.backends) == ["live", "llama3.1", "oracle"]  # a dotted name, whole
    assert config.specs["live"].params["url"] == URL
    assert config.specs["llama3.1"].params["url"] == URL
    assert config.bench_specs["b-live"].params["url"] == URL
    assert config.backends["oracle"] == "oracle"


def test_specs_without_a_credential_are_stored_as_they_are(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"oracle": "oracle", "plain": "oai-http:url=http://h:1/v1"})
    resource = EvalsResource.from_config(config)
    assert resource.sealed_specs == {}
    assert resource.config_json == config.model_dump_json()
    assert resource.config == config


def test_a_process_that_never_loaded_the_sealed_spec_says_which_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    resource = EvalsResource.from_config(_config(tmp_path))
    monkeypatch.setattr(resources, "_SEALED", {})  # as in a process that built nothing
    resources._parse.cache_clear()
    with pytest.raises(ConfigError, match=r"backends\.live: the spec carries a credential"):
        _ = resource.config


def test_an_edited_corpus_or_ontology_is_read_again_in_the_same_process(tmp_path: Path) -> None:
    """A notebook or script that materialises again after an edit: the parsed inputs had been
    kept by path alone, so the second run served the first's chunks and prompts."""
    from dagster import DagsterInstance, materialize

    from evals_pipeline.graph import build_definitions
    from evals_pipeline_tests.pipeline_fixtures import CORPUS, ONTOLOGY

    corpus, ontology = tmp_path / "chunks.jsonl", tmp_path / "prose.yaml"
    corpus.write_bytes(CORPUS.read_bytes())
    ontology.write_bytes(ONTOLOGY.read_bytes())
    config = make_config(
        tmp_path, {"oracle": "oracle"}, corpus=corpus, ontology=ontology, modes=("strict",)
    )

    def run() -> tuple[str, str]:
        defs = build_definitions(config)
        with DagsterInstance.ephemeral() as instance:
            result = materialize(
                list(defs.assets or []),
                selection=["corpus"],
                partition_key="strict",
                instance=instance,
                resources=defs.resources,
            )
            table = result.output_for_node("corpus")
        return str(table["body"].iloc[0]), str(table["extract_key"].iloc[0])

    body, key = run()
    assert run() == (body, key)  # unchanged: the same (and parsed once)
    corpus.write_text(corpus.read_text().replace("Ada Lovelace, born", "EDITED Ada Lovelace, born"))
    edited_body, edited_key = run()
    assert edited_body.startswith("EDITED ") and edited_key != key
    ontology.write_text(ontology.read_text().replace("scientist, engineer or patron", "scientist"))
    assert run()[1] != edited_key  # the strict prompt lists the types: a new key


def test_a_freshly_written_corpus_is_parsed_once_while_unchanged(tmp_path: Path) -> None:
    """Keyed by a settled stat, a file written just before a run (a benchmark's generated
    corpus) had been re-parsed by every step, a new Ontology each time, which the prompt
    memos, keyed by identity, could not reuse."""
    from evals_pipeline_tests.pipeline_fixtures import CORPUS, ONTOLOGY

    corpus, ontology = tmp_path / "chunks.jsonl", tmp_path / "prose.yaml"
    corpus.write_bytes(CORPUS.read_bytes())
    ontology.write_bytes(ONTOLOGY.read_bytes())
    first = resources._corpus(str(corpus), str(ontology), 4)
    assert resources._corpus(str(corpus), str(ontology), 4) is first
    assert resources._ontology(str(ontology)) is resources._ontology(str(ontology))


def test_an_edited_webnlg_category_ontology_is_read_again_in_the_same_process(
    tmp_path: Path,
) -> None:
    """A WebNLG gold corpus reads its categories' ontologies from the folder beside it; the
    cache had been keyed by the file alone, so an edited ontology was not seen."""
    from evals_pipeline_tests.pipeline_fixtures import write_webnlg

    path = write_webnlg(tmp_path)
    first = resources._gold("webnlg", str(path), "all")
    assert resources._gold("webnlg", str(path), "all") is first  # unchanged: parsed once
    ontology = tmp_path / "ontologies" / "Airport.yaml"
    ontology.write_text(ontology.read_text().replace("The city", "EDITED The city"))
    edited = resources._gold("webnlg", str(path), "all")
    assert edited.ontologies is not None
    (relation,) = edited.ontologies["Airport"].relation_types
    assert relation.description.startswith("EDITED ")
