"""Gold corpora a bench run scores against: our exact-match cases, or a WebNLG file.

Both are ground truth written by people, unlike the prose corpus's reference backend: the cases
by this project (each isolating one failure mode), WebNLG by others (see
`shared/data/webnlg/README.md`), which guards against a bias we share with our own labels. A
folder is a cases corpus (`corpus/cases` layout); a `.jsonl` file is a WebNLG file, with its
per-category ontologies in the `ontologies/` folder beside it.

A WebNLG run casts each text under its category's ontology and scores triples exactly, after the
WebNLG 2020 scorer's normalisation, aligned one-to-one (`core.scoring.webnlg`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import InputFileError
from ..extractors.base import Extractor
from ..files import no_such_path
from ..models import Episode, ExtractionResult, OntologyMode
from ..ontology import Ontology
from ..options import ExtractOptions
from ..runner import ChunkRun, extract_all, run_sync
from ..scoring.webnlg import prf, score_triples
from ..webnlg import WebNLGCorpus, category_of, load_webnlg, load_webnlg_ontology
from .corpus import BenchCorpus, load_bench_corpus, schemas_dir
from .runner import (
    bench_calls,
    render_markdown,
    row_source,
    run_bench,
    shown_rate,
    usage_totals,
)

GoldKind = Literal["cases", "webnlg"]
GoldSplit = Literal["all", "dev", "test"]


@dataclass(frozen=True)
class GoldCorpus:
    """A loaded gold corpus under the name the project file gives it."""

    name: str
    kind: GoldKind
    path: Path
    cases: BenchCorpus | None = None
    webnlg: WebNLGCorpus | None = None
    ontologies: Mapping[str, Ontology] | None = None  # WebNLG: category -> ontology

    @property
    def digest(self) -> str:
        source = self.cases or self.webnlg
        assert source is not None
        return source.digest

    @property
    def episode_count(self) -> int:
        if self.cases is not None:
            return sum(len(c.episodes) for c in self.cases.cases)
        assert self.webnlg is not None
        return len(self.webnlg.chunks)

    def expected_graphs(self) -> dict[str, ExtractionResult]:
        """Episode name -> gold graph: what the oracle backend replies with."""
        if self.cases is not None:
            return self.cases.expected_results()
        assert self.webnlg is not None
        return self.webnlg.expected_graphs()

    def calls(self, ontology_mode: OntologyMode) -> list[tuple[Episode, ExtractOptions]]:
        """Every extraction a bench row makes over this corpus (recasts included), each under
        the options it is made with: what a plan checks a cassette's coverage against."""
        if self.cases is not None:
            return bench_calls(self.cases, ontology_mode)
        assert self.webnlg is not None and self.ontologies is not None
        return [
            (chunk.episode, ExtractOptions.for_mode(ontology_mode, self.ontologies[category]))
            for category, chunks in self.webnlg.by_category().items()
            for chunk in chunks
        ]

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "path": str(self.path),
            "digest": self.digest,
            "episodes": self.episode_count,
        }
        if self.cases is not None:
            out |= {
                "version": self.cases.version,
                "split": self.cases.split or "all",
                "cases": len(self.cases.cases),
                "publishable": self.cases.split == "test" and not self.cases.modified,
            }
        else:
            assert self.webnlg is not None
            out["categories"] = list(self.webnlg.categories)
        return out


def gold_inputs(path: Path | str) -> list[Path]:
    """What a gold corpus reads besides itself lives beside it: a cases folder's schemas, a
    WebNLG file's category ontologies."""
    path = Path(path)
    return [path, schemas_dir(path) if path.is_dir() else _category_ontologies(path)]


def _category_ontologies(path: Path) -> Path:
    return path.parent / "ontologies"


def _check_predicates(
    corpus: WebNLGCorpus, ontologies: Mapping[str, Ontology], folder: Path
) -> None:
    """Every gold predicate is a relation of its category's ontology: one that is not can never
    be produced in strict mode (the parser drops it), so the oracle row would fall short."""
    for chunk in corpus.chunks:
        category = category_of(chunk)
        declared = {rt.name for rt in ontologies[category].relation_types}
        assert chunk.expected is not None  # every WebNLG entry is labelled
        for i, edge in enumerate(chunk.expected.edges):
            if edge.relation not in declared:
                raise InputFileError(
                    corpus.path,
                    f"entry {chunk.episode.name!r}: predicate {edge.relation!r} is not a "
                    f"relation of {folder / f'{category}.yaml'}",
                    field=f"triples[{i}].predicate",
                )


def load_gold(name: str, path: Path | str, split: GoldSplit = "all") -> GoldCorpus:
    """A folder loads as exact-match cases (honouring `split`), a file as WebNLG."""
    path = Path(path)
    if path.is_dir():
        cases = load_bench_corpus(path, split=None if split == "all" else split)
        return GoldCorpus(name=name, kind="cases", path=path, cases=cases)
    if not path.exists():
        raise InputFileError(path, f"gold corpus {name!r}: {no_such_path(path)}")
    if split != "all":
        raise InputFileError(path, f"gold corpus {name!r}: a WebNLG file has no {split} split")
    corpus = load_webnlg(path)
    if not corpus.chunks:
        raise InputFileError(path, f"gold corpus {name!r} holds no entry: nothing to score")
    folder = _category_ontologies(path)
    if not folder.is_dir():
        raise InputFileError(
            path,
            f"gold corpus {name!r}: a WebNLG file reads its categories' ontologies from "
            f"{folder}/<category>.yaml, and {folder} is {no_such_path(folder)}",
        )
    ontologies: dict[str, Ontology] = {}
    for category in corpus.categories:
        file = folder / f"{category}.yaml"
        if not file.is_file():
            raise InputFileError(file, f"no ontology for WebNLG category {category!r}")
        ontologies[category] = load_webnlg_ontology(file)
    _check_predicates(corpus, ontologies, folder)
    return GoldCorpus(name=name, kind="webnlg", path=path, webnlg=corpus, ontologies=ontologies)


def run_gold(
    gold: GoldCorpus,
    extractor: Extractor,
    *,
    row_name: str,
    ontology_mode: OntologyMode = "strict",
    concurrency: int = 8,
) -> dict[str, Any]:
    """One row of a bench run over `gold`, in the report shape `write_run` writes."""
    if gold.cases is not None:
        report = run_bench(
            gold.cases,
            extractor,
            row_name=row_name,
            ontology_mode=ontology_mode,
            concurrency=concurrency,
        )
        return {"kind": "cases", "gold": gold.name, **report}
    return run_webnlg(
        gold, extractor, row_name=row_name, ontology_mode=ontology_mode, concurrency=concurrency
    )


def episode_digest(episode: Episode, graph: ExtractionResult, ontology: Ontology) -> str:
    """What a WebNLG episode is, as `compare` pairs it: its text, its gold triples and its
    category's ontology. A WebNLG file of another release with the same ids is not paired."""
    content = {
        "text": episode.body,
        "triples": sorted([e.source, e.relation, e.target] for e in graph.edges),
        "ontology": ontology.model_dump(mode="json"),
    }
    return hashlib.sha256(
        json.dumps(content, sort_keys=True, ensure_ascii=False).encode("utf-8")
    ).hexdigest()


def run_webnlg(
    gold: GoldCorpus,
    extractor: Extractor,
    *,
    row_name: str,
    ontology_mode: OntologyMode = "strict",
    concurrency: int = 8,
) -> dict[str, Any]:
    """Cast every WebNLG text under its category's ontology; exact triple P/R/F1."""
    assert gold.webnlg is not None and gold.ontologies is not None
    groups = gold.webnlg.by_category()

    async def cast_all() -> list[list[ChunkRun]]:
        # Category by category (each its own ontology), each concurrent up to the limit.
        out = []
        try:
            for name, chunks in groups.items():
                options = ExtractOptions.for_mode(ontology_mode, gold.ontologies[name])  # type: ignore[index]
                out.append(
                    await extract_all(
                        extractor,
                        [c.episode for c in chunks],
                        options,
                        concurrency=concurrency,
                        tolerate_misses=True,
                    )
                )
        finally:
            await extractor.aclose()  # this loop's clients; a later run opens its own
        return out

    runs = [run for batch in run_sync(cast_all) for run in batch]
    gold_graphs = gold.webnlg.expected_graphs()
    episodes: list[dict[str, Any]] = []
    # Triples are aligned once per episode; the corpus and category scores pool those counts.
    pooled: dict[str, list[int]] = {c: [0, 0, 0] for c in groups}
    for chunk, run in zip((c for group in groups.values() for c in group), runs, strict=True):
        name, category = chunk.episode.name, category_of(chunk)
        tp, fp, fn = score_triples(
            run.outcome.result.edges if run.outcome else (), gold_graphs[name].edges
        )
        pooled[category] = [a + b for a, b in zip(pooled[category], (tp, fp, fn), strict=True)]
        stats = run.outcome.stats if run.outcome else run.stats
        episodes.append(
            {
                "case": f"webnlg/{category}",
                "source_id": name,
                "case_digest": episode_digest(
                    chunk.episode, gold_graphs[name], gold.ontologies[category]
                ),
                "status": "ok" if run.ok else "error",
                **({} if run.ok else {"error": run.error or "", "error_type": run.error_type}),
                "counts": {
                    "triples_tp": tp,
                    "triples_produced": tp + fp,
                    "triples_expected": tp + fn,
                    "tokens": (stats.input_tokens + stats.output_tokens) if stats else 0,
                    "requests": stats.requests if stats else 0,
                },
            }
        )
    tp, fp, fn = (sum(c[i] for c in pooled.values()) for i in range(3))
    overall = {"tp": tp, "fp": fp, "fn": fn, **prf(tp, fp, fn)}
    categories = {c: prf(*counts) for c, counts in pooled.items()}
    rates = {k: overall[k] for k in ("precision", "recall", "f1")}
    return {
        "kind": "webnlg",
        "gold": gold.name,
        "corpus_digest": gold.digest,
        "split": "all",
        "publishable": False,
        "ontology_mode": ontology_mode,
        "rows": {
            row_name: {
                **row_source(extractor, runs),
                "episodes": episodes,
                "usage": usage_totals(runs),
                "rates": {f"triple_{k}": v for k, v in rates.items()},
                "counts": {k: overall[k] for k in ("tp", "fp", "fn")},
                "categories": categories,
            }
        },
    }


# The rates a perfect extractor must reach on each kind of gold corpus. Not conformance: it is
# read against the schema slice shown, and what selection leaves out costs the oracle too.
CEILING: dict[GoldKind, tuple[str, ...]] = {
    "cases": ("entity_f1", "edge_f1", "property_f1", "direction", "mention"),
    "webnlg": ("triple_f1",),
}


def oracle_shortfalls(report: Mapping[str, Any], oracle_rows: list[str]) -> list[str]:
    """Every ceiling rate an oracle row misses, as `row rate=value`."""
    kind = report.get("kind", "cases")
    out = []
    for row in oracle_rows:
        rates = report["rows"][row]["rates"]
        out += [
            f"{row} {rate}={rates[rate]}"
            for rate in CEILING[kind]
            if rates.get(rate) is not None and rates[rate] != 1.0
        ]
    return out


def render_gold_markdown(report: Mapping[str, Any]) -> str:
    """The Markdown of a bench run: the exact-match table, or WebNLG's triple table."""
    if report.get("kind", "cases") == "cases":
        return render_markdown(dict(report))
    rows = report["rows"]
    lines = [
        f"# WebNLG triples: {report['gold']}",
        "",
        f"- file digest `{report['corpus_digest'][:12]}`, ontology mode "
        f"{report['ontology_mode']}; exact triple match after the WebNLG 2020 normalisation, "
        "aligned one-to-one",
        "- **not publishable**: this is the WebNLG dev file, a public dev set",
        "",
        "| row | precision | recall | F1 | tp | fp | fn | errors |",
        "|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for name, row in rows.items():
        r, c = row["rates"], row["counts"]
        errors = sum(e["status"] != "ok" for e in row["episodes"])
        shown = [shown_rate(r.get(f"triple_{k}")) for k in ("precision", "recall", "f1")]
        lines.append(
            f"| {name} | {' | '.join(shown)} | {c['tp']} | {c['fp']} | {c['fn']} | {errors} |"
        )
        if errors:
            misses = sum(e.get("error_type") == "CassetteMiss" for e in row["episodes"])
            why = f", {misses} of them cassette misses" if misses else ""
            notes.append(
                f"- {name}: {errors} of {len(row['episodes'])} episodes errored{why}. An errored "
                "episode counts every gold triple as missed: its scores measure the failure, "
                "not the model"
                + (
                    " (a cassette recorded for other texts or prompts: record one for this "
                    "file with --record-cassette)"
                    if misses
                    else ""
                )
            )
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"
