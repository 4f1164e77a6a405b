"""Wall time of `compare_runs` on 10,000 paired episodes with 10,000 bootstrap resamples.

Why: the comparison must stay interactive on a corpus far larger than ours, so the bootstrap has
to cost a small multiple of one pass over the data, not resamples × one pass. Prints the time of
the full comparison, of a single pass (the same call with one resample: parsing, pairing, pooled
rates, per-episode changes) and their ratio.

    python benchmarks/compare_bench.py [--episodes N] [--resamples R] [--repeat K]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from evals_pipeline.core.compare import compare_runs


def synthetic_reports(n: int, seed: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two run reports over the same n episodes, B slightly better than A, with every count."""
    rng = np.random.default_rng(seed)

    def counts(p: float) -> list[dict[str, int]]:
        ent_exp = rng.integers(1, 8, n)
        edge_exp = rng.integers(0, 6, n)
        ent_tp = rng.binomial(ent_exp, p)
        edge_tp = rng.binomial(edge_exp, p - 0.1)
        ent_prod = ent_tp + rng.integers(0, 3, n)
        edge_prod = edge_tp + rng.integers(0, 3, n)
        reversed_ = rng.binomial(edge_exp - edge_tp, 0.3)
        emitted = ent_prod + edge_prod
        forbidden_total = rng.integers(0, 2, n)
        rows = zip(
            ent_tp,
            ent_prod,
            ent_exp,
            edge_tp,
            edge_prod,
            edge_exp,
            reversed_,
            emitted,
            rng.binomial(emitted, p),
            rng.binomial(emitted, 0.05),
            forbidden_total,
            rng.binomial(forbidden_total, 0.2),
            strict=True,
        )
        return [
            {
                "entities_tp": int(r[0]),
                "entities_produced": int(r[1]),
                "entities_expected": int(r[2]),
                "edges_tp": int(r[3]),
                "edges_produced": int(r[4]),
                "edges_expected": int(r[5]),
                "edges_matched": int(r[3]),
                "edges_reversed": int(r[6]),
                "items_emitted": int(r[7]),
                "items_conformant": int(r[8]),
                "quotes_ungrounded": int(r[9]),
                "forbidden_total": int(r[10]),
                "forbidden_written": int(r[11]),
            }
            for r in rows
        ]

    def report(p: float) -> dict[str, Any]:
        episodes = [
            {
                "case": f"family{i % 9}/instance{i % 37}",
                "source_id": f"ep-{i}",
                "case_digest": f"{i % 37:064x}",
                "status": "ok" if rng.random() > 0.02 else "error",
                "counts": c,
            }
            for i, c in enumerate(counts(p))
        ]
        return {
            "corpus_version": "1.1.0",
            "corpus_digest": "0" * 64,
            "split": "dev",
            "rows": {"model": {"episodes": episodes}},
        }

    return report(0.7), report(0.75)


def best_of(repeat: int, fn: Any) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    a, b = synthetic_reports(args.episodes)
    single, _ = best_of(args.repeat, lambda: compare_runs(a, b, resamples=1))
    full, result = best_of(args.repeat, lambda: compare_runs(a, b, resamples=args.resamples))
    print(
        f"{args.episodes} paired episodes, {len(result['rates'])} rates, "
        f"{args.resamples} resamples (best of {args.repeat})"
    )
    print(f"compare_runs, full:           {full:8.3f} s")
    print(f"single pass (1 resample):     {single:8.3f} s")
    print(f"ratio full / single pass:     {full / single:8.1f}x")
    for r in result["rates"]:
        if r["delta"] is None:  # not in both runs, or nothing counted in one of them
            print(f"  {r['rate']:<18} undefined")
            continue
        print(f"  {r['rate']:<18} {r['delta']:+.4f}  [{r['low']:+.4f}, {r['high']:+.4f}]")


if __name__ == "__main__":
    main()
