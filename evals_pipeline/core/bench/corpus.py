"""The benchmark corpus: cases under `corpus/cases/<family>/<instance>/`, schemas, SPLITS.yaml.

Each case directory holds `case.yaml` (description, schema files to merge, optional budget and
recast), `episodes.jsonl` (one text per line, optional earlier `context`) and `expected.yaml`
(the graph each text states, and what it must not be read as). Loading is strict: a scorer
trusts the expected graph blindly, so a misquoted span, a value its field would not make, an
unknown handle, type, relation or property, or a split naming an unknown case is an
InputFileError naming the file and the field (`expected.yaml [ep-1.vertices.ship.quote]`).

`CORPUS_DIGEST` pins the shipped corpus: sha256 over every case file, schema and SPLITS.yaml
in sorted path order. Change any of them and bump `CORPUS_VERSION` and the digest together.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NoReturn

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from ..errors import InputFileError
from ..files import (
    jsonl_lines,
    load_yaml,
    parse_json,
    read_input_bytes,
    validate_file_model,
)
from ..models import Edge, Entity, ExtractionResult, PropertyValue
from ..ontology import EntityType, Ontology, load_ontology
from .values import is_canonical, normalise_text, states

CORPUS_VERSION = "1.1.0"
CORPUS_DIGEST = "524bb5248be46c06aa199e998421989e9b602d33c98f32560dfc5ae97aeed3b0"

CASE_FILES = ("case.yaml", "episodes.jsonl", "expected.yaml")
SPLITS_FILE = "SPLITS.yaml"
SPLIT_NAMES: tuple[str, ...] = ("dev", "test")
Split = Literal["dev", "test"]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _CaseFile(_Strict):
    description: str = Field(min_length=1)
    schema_files: tuple[str, ...] = Field(alias="schema", min_length=1)
    # Strict, as the project file's counts: YAML's `true` or `"3"` had loaded as a budget.
    budget: StrictInt | None = Field(default=None, ge=1)
    recast: StrictBool = False


class _EpisodeLine(_Strict):
    source_id: str = Field(min_length=1)
    body: str = Field(min_length=1)
    context: tuple[str, ...] = ()


class _Vertex(_Strict):
    type: str = Field(min_length=1)
    name: str = Field(min_length=1)
    quote: str = Field(min_length=1)
    properties: dict[str, PropertyValue] = Field(default_factory=dict)
    mention: StrictBool = False
    # property -> index of the context item that states it (identity values only).
    from_context: dict[str, StrictInt] = Field(default_factory=dict)


class _Edge(_Strict):
    source: str = Field(min_length=1)
    relation: str = Field(min_length=1)
    target: str = Field(min_length=1)
    quote: str = Field(min_length=1)


class _ForbiddenVertex(_Strict):
    type: str = Field(min_length=1)
    name: str | None = None  # None: any unmatched vertex of the type is forbidden


class _ForbiddenEdge(_Strict):
    source: str = Field(min_length=1)
    relation: str = Field(min_length=1)
    target: str = Field(min_length=1)


class _Forbidden(_Strict):
    vertices: tuple[_ForbiddenVertex, ...] = ()
    edges: tuple[_ForbiddenEdge, ...] = ()


class _Expected(_Strict):
    vertices: dict[str, _Vertex]
    edges: tuple[_Edge, ...] = ()
    forbidden: _Forbidden = Field(default_factory=_Forbidden)


@dataclass(frozen=True)
class Vertex:
    handle: str
    type: str
    name: str
    quote: str
    properties: Mapping[str, PropertyValue]
    mention: bool = False
    from_context: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class EdgeRef:
    """An edge between handles; `quote` is empty for a forbidden edge."""

    source: str
    relation: str
    target: str
    quote: str = ""


@dataclass(frozen=True)
class ForbiddenVertex:
    type: str
    name: str | None


@dataclass(frozen=True)
class ExpectedGraph:
    vertices: Mapping[str, Vertex]
    edges: tuple[EdgeRef, ...]
    forbidden_vertices: tuple[ForbiddenVertex, ...] = ()
    forbidden_edges: tuple[EdgeRef, ...] = ()

    def as_result(self) -> ExtractionResult:
        """The graph as an extractor would reply it (what the oracle row answers)."""
        names = {h: v.name for h, v in self.vertices.items()}
        return ExtractionResult(
            entities=tuple(
                Entity(name=v.name, type=v.type, quote=v.quote, properties=dict(v.properties))
                for v in self.vertices.values()
            ),
            edges=tuple(
                Edge(
                    source=names[e.source],
                    target=names[e.target],
                    relation=e.relation,
                    quote=e.quote,
                )
                for e in self.edges
            ),
        )


@dataclass(frozen=True)
class BenchEpisode:
    source_id: str
    body: str
    context: tuple[str, ...]
    expected: ExpectedGraph


@dataclass(frozen=True)
class BenchCase:
    family: str
    instance: str
    description: str
    schema_files: tuple[str, ...]
    schema: Ontology
    budget: int | None
    recast: bool
    episodes: tuple[BenchEpisode, ...]
    digest: str
    split: Split

    @property
    def id(self) -> str:
        return f"{self.family}/{self.instance}"


@dataclass(frozen=True)
class BenchCorpus:
    """The cases of one split (or all, `split=None`); `digest` is of the whole corpus."""

    root: Path
    cases: tuple[BenchCase, ...]
    digest: str
    split: Split | None
    version: str = CORPUS_VERSION

    @property
    def modified(self) -> bool:
        return self.digest != CORPUS_DIGEST

    def episode_name(self, case: BenchCase, episode: BenchEpisode) -> str:
        """The episode's name, which the prompt shows (`<document name=...>`): opaque, as the
        case id names the failure it tests (`injection/clinics` had told the model an
        injection was coming). Stable, and unique per case; part of the cassette key, as the
        prompt is (a change of it needs the bench cassettes recorded again)."""
        token = hashlib.sha256(case.id.encode("utf-8")).hexdigest()[:12]
        return f"case-{token}/{episode.source_id}"

    def expected_results(self) -> dict[str, ExtractionResult]:
        """Episode name -> expected graph as a reply (the oracle's answers)."""
        return {
            self.episode_name(c, e): e.expected.as_result() for c in self.cases for e in c.episodes
        }


def _hash(entries: Iterable[tuple[str, bytes]]) -> str:
    h = hashlib.sha256()
    for label, data in sorted(entries):
        h.update(label.encode("utf-8") + b"\0" + str(len(data)).encode() + b"\0" + data)
    return h.hexdigest()


def _case_dirs(root: Path) -> list[Path]:
    """Every case folder, `family/instance/` holding a case.yaml. A folder at that depth
    without one (a `case.yml`, a case nested a level too deep) or a case.yaml a level too
    shallow is an error: such a case had been left out without a word, and a split naming it
    said "unknown case"."""

    def folders(path: Path) -> list[Path]:
        return sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))

    found = []
    for family in folders(root):
        if (family / "case.yaml").exists():
            raise InputFileError(
                family / "case.yaml", "a case is a folder in its family's: family/instance/"
            )
        for case in folders(family):
            if not (case / "case.yaml").is_file():
                held = ", ".join(sorted(p.name for p in case.iterdir())) or "nothing"
                raise InputFileError(case, f"a case folder without a case.yaml (it holds {held})")
            found.append(case)
    return found


def corpus_digest(root: Path | str, schema_dir: Path | str | None = None) -> str:
    """sha256 over every case file, every schema and SPLITS.yaml, in sorted path order."""
    root = Path(root)
    schemas = Path(schema_dir) if schema_dir is not None else schemas_dir(root)
    entries = [
        (f"cases/{d.relative_to(root).as_posix()}/{name}", read_input_bytes(d / name))
        for d in _case_dirs(root)
        for name in CASE_FILES
    ]
    entries += [(f"schemas/{p.name}", p.read_bytes()) for p in sorted(schemas.glob("*.yaml"))]
    entries.append((f"cases/{SPLITS_FILE}", read_input_bytes(root / SPLITS_FILE)))
    return _hash(entries)


def _load_splits(root: Path, known: set[str]) -> dict[str, Split]:
    path = root / SPLITS_FILE
    data = load_yaml(path)
    if not isinstance(data, dict):
        raise InputFileError(path, "SPLITS.yaml must map dev and test to lists of cases")
    out: dict[str, Split] = {}
    for name, cases in data.items():
        if name not in SPLIT_NAMES:
            raise InputFileError(path, f"unknown split {name!r} (dev, test)", field=str(name))
        if not isinstance(cases, list):
            raise InputFileError(path, "a split must be a list of family/instance", field=name)
        for i, case in enumerate(cases):
            if not isinstance(case, str):
                raise InputFileError(
                    path, f"a case is named family/instance, not {case!r}", field=f"{name}[{i}]"
                )
            if case not in known:
                raise InputFileError(path, f"unknown case {case!r}", field=f"{name}[{i}]")
            if case in out:
                raise InputFileError(path, f"case {case!r} is in two splits", field=f"{name}[{i}]")
            out[case] = name
    for case in sorted(known - set(out)):
        raise InputFileError(path, f"case {case!r} is in no split", field=case)
    return out


def _load_episodes(path: Path) -> list[_EpisodeLine]:
    out: list[_EpisodeLine] = []
    seen: set[str] = set()
    for lineno, text in jsonl_lines(path, read_input_bytes(path)):
        obj = parse_json(path, text, line=lineno)
        line = validate_file_model(_EpisodeLine, obj, path, line=lineno, kind="an episode line")
        if line.source_id in seen:
            raise InputFileError(
                path, f"duplicate source_id {line.source_id!r}", line=lineno, field="source_id"
            )
        seen.add(line.source_id)
        out.append(line)
    if not out:
        raise InputFileError(path, "no episodes")
    return out


def is_mention(et: EntityType, properties: Mapping[str, object]) -> bool:
    """A mention: an entity of a keyed type known only by its name, its key not stated.

    Entities carry no mention flag of their own, so a cast's flag is read from its output the
    same way the corpus states it: a keyed type without every key property.
    """
    return isinstance(et.identity, tuple) and not all(k in properties for k in et.identity)


def _check_vertex(
    fail: Callable[[str, str], NoReturn],
    at: str,
    v: _Vertex,
    et: EntityType | None,
    ep: _EpisodeLine,
) -> None:
    if et is None:
        fail(f"type {v.type!r} is not in the case's schema", f"{at}.type")
    assert et is not None
    if v.quote not in ep.body:
        fail(f"quote {v.quote!r} is not in the text", f"{at}.quote")
    declared = {p.name: p for p in et.properties}
    identity = et.identity if isinstance(et.identity, tuple) else ()
    if v.mention != is_mention(et, v.properties):
        # The flag is what a cast's output makes of it, so a case stating otherwise is unscorable.
        fail(
            f"mention is {str(v.mention).lower()} but the vertex "
            + ("states its complete key" if identity else f"is of a {et.identity!r}-identity type")
            if v.mention
            else "mention is false but the vertex lacks its complete key "
            f"{list(identity)} (it is known by its name only)",
            f"{at}.mention",
        )
    for prop, index in v.from_context.items():
        if prop not in identity:
            fail(f"{prop!r} is not an identity property of {et.name}", f"{at}.from_context.{prop}")
        if prop not in v.properties:
            fail(f"{prop!r} has no value", f"{at}.from_context.{prop}")
        if not 0 <= index < len(ep.context):
            fail(f"no context item {index}", f"{at}.from_context.{prop}")
    for prop, value in v.properties.items():
        pt = declared.get(prop)
        if pt is None:
            fail(f"property {prop!r} is not declared on {et.name}", f"{at}.properties.{prop}")
        assert pt is not None
        if not is_canonical(value, pt):
            fail(f"{value!r} is not what a {pt.type} field makes of it", f"{at}.properties.{prop}")
        where = ep.context[v.from_context[prop]] if prop in v.from_context else v.quote
        if pt.type in ("integer", "number", "date"):
            if not states(where, value, pt):
                fail(f"{value!r} is not stated by its quote {where!r}", f"{at}.properties.{prop}")
        elif pt.type == "string" and isinstance(value, str):
            text = where if prop in v.from_context else ep.body
            if normalise_text(value) not in normalise_text(text):
                fail(f"{value!r} is not in the text", f"{at}.properties.{prop}")


def _check_expected(
    path: Path, sid: str, spec: _Expected, ep: _EpisodeLine, schema: Ontology
) -> ExpectedGraph:
    def fail(problem: str, where: str) -> NoReturn:
        raise InputFileError(path, problem, field=f"{sid}.{where}")

    names: dict[str, str] = {}
    for handle, v in spec.vertices.items():
        at = f"vertices.{handle}"
        _check_vertex(fail, at, v, schema.entity_type(v.type), ep)
        key = normalise_text(v.name)
        if key in names:
            fail(f"name {v.name!r} is also vertex {names[key]!r}", f"{at}.name")
        names[key] = handle

    def check_edge(at: str, e: _Edge | _ForbiddenEdge) -> None:
        for end in ("source", "target"):
            if getattr(e, end) not in spec.vertices:
                fail(f"unknown handle {getattr(e, end)!r}", f"{at}.{end}")
        rt = next((r for r in schema.relation_types if r.name == e.relation), None)
        if rt is None:
            fail(f"relation {e.relation!r} is not in the case's schema", f"{at}.relation")
        for end, allowed in (("source", rt.source), ("target", rt.target)):
            vtype = spec.vertices[getattr(e, end)].type
            if allowed and vtype not in allowed:
                fail(f"{e.relation} does not take a {vtype} {end}", f"{at}.{end}")

    for i, e in enumerate(spec.edges):
        check_edge(f"edges[{i}]", e)
        if e.quote not in ep.body:
            fail(f"quote {e.quote!r} is not in the text", f"edges[{i}].quote")
    for i, fv in enumerate(spec.forbidden.vertices):
        if schema.entity_type(fv.type) is None:
            fail(f"type {fv.type!r} is not in the case's schema", f"forbidden.vertices[{i}].type")
    for i, fe in enumerate(spec.forbidden.edges):
        check_edge(f"forbidden.edges[{i}]", fe)
    return ExpectedGraph(
        vertices={
            h: Vertex(h, v.type, v.name, v.quote, dict(v.properties), v.mention, v.from_context)
            for h, v in spec.vertices.items()
        },
        edges=tuple(EdgeRef(e.source, e.relation, e.target, e.quote) for e in spec.edges),
        forbidden_vertices=tuple(ForbiddenVertex(f.type, f.name) for f in spec.forbidden.vertices),
        forbidden_edges=tuple(
            EdgeRef(f.source, f.relation, f.target) for f in spec.forbidden.edges
        ),
    )


def _load_case(
    root: Path, case_dir: Path, schema_dir: Path, split: Split, schemas: dict[str, Ontology]
) -> BenchCase:
    case_path = case_dir / "case.yaml"
    raw = load_yaml(case_path)
    if not isinstance(raw, dict):
        raise InputFileError(case_path, "case.yaml must be a YAML mapping")
    case = validate_file_model(_CaseFile, raw, case_path)
    merged: Ontology | None = None
    for i, name in enumerate(case.schema_files):
        file = schema_dir / name
        if not file.is_file():
            raise InputFileError(
                case_path, f"no schema {name!r} in {schema_dir}", field=f"schema[{i}]"
            )
        if name not in schemas:
            schemas[name] = load_ontology(file)
        merged = schemas[name] if merged is None else merged.merged(schemas[name])
    assert merged is not None
    episodes_path = case_dir / "episodes.jsonl"
    lines = _load_episodes(episodes_path)
    expected_path = case_dir / "expected.yaml"
    data = load_yaml(expected_path)
    if not isinstance(data, dict):
        raise InputFileError(expected_path, "expected.yaml must map source ids to graphs")
    by_id = {line.source_id: line for line in lines}
    for sid in data:
        if sid not in by_id:
            raise InputFileError(expected_path, f"no episode {sid!r}", field=str(sid))
    episodes = []
    for line in lines:
        if line.source_id not in data:
            raise InputFileError(
                expected_path, "episode has no expected graph", field=line.source_id
            )
        spec = validate_file_model(
            _Expected, data[line.source_id], expected_path, within=(line.source_id,)
        )
        graph = _check_expected(expected_path, line.source_id, spec, line, merged)
        episodes.append(BenchEpisode(line.source_id, line.body, line.context, graph))
    entries = [(name, (case_dir / name).read_bytes()) for name in CASE_FILES]
    entries += [(f"schemas/{n}", (schema_dir / n).read_bytes()) for n in case.schema_files]
    return BenchCase(
        family=case_dir.parent.name,
        instance=case_dir.name,
        description=case.description,
        schema_files=case.schema_files,
        schema=merged,
        budget=case.budget,
        recast=case.recast,
        episodes=tuple(episodes),
        digest=_hash(entries),
        split=split,
    )


def schemas_dir(root: Path | str) -> Path:
    """Where a cases folder's schemas are: `ontologies/bench/` beside the corpus's folder (a
    project's layout: `corpus/cases/` and `ontologies/bench/` under its root)."""
    return Path(root).parent.parent / "ontologies" / "bench"


def load_bench_corpus(root: Path | str, split: Split | None = None) -> BenchCorpus:
    """Load and check every case (all of them, whatever `split`), then keep `split`'s cases.
    Their schemas are read from `schemas_dir(root)`."""
    root = Path(root)
    if split is not None and split not in SPLIT_NAMES:
        raise ValueError(f"unknown split {split!r} (dev, test)")
    schemas_root = schemas_dir(root)
    dirs = _case_dirs(root)
    splits = _load_splits(root, {d.relative_to(root).as_posix() for d in dirs})
    loaded: dict[str, Ontology] = {}
    cases = tuple(
        _load_case(root, d, schemas_root, splits[d.relative_to(root).as_posix()], loaded)
        for d in dirs
    )
    return BenchCorpus(
        root=root,
        cases=tuple(c for c in cases if split is None or c.split == split),
        digest=corpus_digest(root, schemas_root),
        split=split,
    )
