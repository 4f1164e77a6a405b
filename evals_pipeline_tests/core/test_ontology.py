from pathlib import Path

import pytest

from evals_pipeline.core.errors import ConfigError, OntologyError
from evals_pipeline.core.models import Edge, Entity, ExtractionResult
from evals_pipeline.core.ontology import Ontology, RelationType, load_ontology
from evals_pipeline.core.options import ExtractOptions, resolve_ontology_mode

GOOD = """\
name: people
mode: open
entity_types:
  - name: Person
    description: A human being.
  - name: Organization
relation_types:
  - name: WORKS_FOR
    source: [Person]
    target: [Organization]
  - name: KNOWS
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ontology.yaml"
    path.write_text(text)
    return path


def test_loads_types_and_endpoints(tmp_path: Path) -> None:
    onto = load_ontology(write(tmp_path, GOOD))
    assert onto.entity_type_names == {"Person", "Organization"}
    assert onto.relation_type_names == {"WORKS_FOR", "KNOWS"}
    assert onto.relation_types[0].source == ("Person",)
    assert onto.mode == "open"


def test_invalid_yaml_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\nentity_types:\n  - name: [unclosed\n")
    with pytest.raises(OntologyError) as err:
        load_ontology(path)
    assert err.value.path == path
    assert err.value.line == 4 or err.value.line == 3
    assert str(path) in str(err.value)


def test_unknown_endpoint_type_names_the_field(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("target: [Organization]", "target: [Company]"))
    with pytest.raises(OntologyError) as err:
        load_ontology(path)
    assert err.value.field == "relation_types[0].target[0]"
    assert "Company" in str(err.value)


def test_unknown_field_is_rejected_with_its_path(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("  - name: KNOWS", "  - name: KNOWS\n    colour: red"))
    with pytest.raises(OntologyError) as err:
        load_ontology(path)
    assert err.value.field == "relation_types[1].colour"


def test_duplicate_type_rejected(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("  - name: Organization", "  - name: Person"))
    with pytest.raises(OntologyError, match="duplicate entity type"):
        load_ontology(path)


WITH_PROPERTIES = GOOD.replace(
    "    description: A human being.\n",
    "    description: A human being.\n"
    "    properties:\n"
    "      - {name: born, type: date}\n"
    "      - {name: record, type: string}\n"
    "    identity: [record]\n",
)


def test_an_identity_naming_an_undeclared_property_names_the_field(tmp_path: Path) -> None:
    assert load_ontology(write(tmp_path, WITH_PROPERTIES)).entity_types[0].identity == ("record",)
    path = write(tmp_path, WITH_PROPERTIES.replace("identity: [record]", "identity: [born, ssn]"))
    with pytest.raises(OntologyError) as err:
        load_ontology(path)
    assert err.value.field == "entity_types[0].identity[1]"
    assert "undeclared property 'ssn'" in str(err.value) and str(path) in str(err.value)


def test_a_property_declared_twice_names_the_type(tmp_path: Path) -> None:
    path = write(tmp_path, WITH_PROPERTIES.replace("{name: record,", "{name: born,"))
    with pytest.raises(OntologyError) as err:
        load_ontology(path)
    assert err.value.field == "entity_types[0].properties"
    assert "duplicate property" in str(err.value)


def test_not_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(OntologyError, match="mapping"):
        load_ontology(write(tmp_path, "- a\n- b\n"))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(OntologyError, match="not found"):
        load_ontology(tmp_path / "nope.yaml")


def test_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(OntologyError, match="UTF-8"):
        load_ontology(path)


def test_vocabulary_violations(tmp_path: Path) -> None:
    onto = load_ontology(write(tmp_path, GOOD))
    result = ExtractionResult(
        entities=(Entity(name="A", type="Person"), Entity(name="B", type="Robot")),
        edges=(Edge(source="A", target="B", relation="LIKES"),),
    )
    assert onto.vocabulary_violations(
        (e.type for e in result.entities), (e.relation for e in result.edges)
    ) == (1, 1)


def test_an_ontology_of_relations_only_puts_no_entity_type_outside() -> None:
    """The strict prompt lets the model type entities freely when the ontology lists no entity
    types (WebNLG's): every entity had counted as outside the (empty) list."""
    relations_only = Ontology(relation_types=(RelationType(name="WORKS_FOR"),))
    assert relations_only.vocabulary_violations(["Person", None], ["WORKS_FOR", "LIKES"]) == (0, 1)


def test_mode_resolution_rules(tmp_path: Path) -> None:
    onto = load_ontology(write(tmp_path, GOOD))
    assert resolve_ontology_mode(None, None) == "freeform"
    with pytest.raises(ConfigError, match="without --ontology"):
        resolve_ontology_mode(None, "strict")
    # With an ontology and no flag: strict, even though the file says open.
    assert resolve_ontology_mode(onto, None) == "strict"
    assert resolve_ontology_mode(onto, "open") == "open"


def test_options_tie_mode_to_ontology(tmp_path: Path) -> None:
    onto = load_ontology(write(tmp_path, GOOD))
    assert ExtractOptions.for_mode("freeform", onto).ontology is None
    assert ExtractOptions.for_mode("strict", onto).ontology == onto
    with pytest.raises(ConfigError):
        ExtractOptions.for_mode("open", None)
    with pytest.raises(ValueError):
        ExtractOptions(mode="strict")
