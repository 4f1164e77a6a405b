"""A grouped bar chart of strict F1 by ontology mode, per backend.

Uses matplotlib's object-oriented API with an explicit Agg canvas, so it neither needs a display
nor touches pyplot's global state (safe inside a long-running orchestrator process).
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..atomic import write_bytes_atomic

if TYPE_CHECKING:
    from matplotlib.axes import Axes

_MODE_COLOURS = {"freeform": "#4C72B0", "open": "#55A868", "strict": "#C44E52"}
_FALLBACK_COLOURS = ("#8172B2", "#CCB974", "#64B5CD", "#937860")


def _colour(mode: str, index: int) -> str:
    return _MODE_COLOURS.get(mode, _FALLBACK_COLOURS[index % len(_FALLBACK_COLOURS)])


def _panel(
    ax: Axes,
    title: str,
    key: str,
    backends: Sequence[str],
    labels: Sequence[str],
    modes: Sequence[str],
    cells: Mapping[str, Mapping[str, Any]],
) -> None:
    width = 0.8 / max(len(modes), 1)
    for i, mode in enumerate(modes):
        xs, heights = [], []
        for j, backend in enumerate(backends):
            value = cells.get(backend, {}).get(mode, {}).get(key)
            x = j - 0.4 + width * (i + 0.5)
            if value is None or (isinstance(value, float) and math.isnan(value)):
                # The reference (or a backend absent from this mode) has no score: mark, no bar.
                ax.text(x, 0.02, "n/a", ha="center", va="bottom", fontsize=7, rotation=90)
                continue
            xs.append(x)
            heights.append(float(value))
        ax.bar(xs, heights, width=width, label=mode, color=_colour(mode, i))
        for x, h in zip(xs, heights, strict=True):
            ax.text(x, h + 0.01, f"{h:.2f}", ha="center", va="bottom", fontsize=7)
    ax.set_title(title)
    ax.set_xticks(range(len(backends)), list(labels), rotation=20, ha="right")
    ax.set_xlim(-0.5, len(backends) - 0.5)
    ax.set_ylim(0.0, 1.1)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


CHART_FILE = "f1_by_mode.png"  # under output_dir, beside mode_matrix.md


def plot_f1_by_mode(matrix: Mapping[str, Any], path: Path) -> Path:
    """Write a PNG of edge, entity and typed-entity F1 per backend, one bar per mode; returns
    `path`.

    Output bytes are deterministic for the same matrix (no software/version metadata embedded).
    """
    path = Path(path)
    modes: list[str] = list(matrix["modes"])
    cells: Mapping[str, Mapping[str, Any]] = matrix["matrix"]
    backends = sorted(cells)
    reports: Mapping[str, Any] = matrix.get("reports") or {}
    references = {r.get("reference") for r in reports.values()}
    labels = [f"{b}\n(reference)" if references == {b} else b for b in backends]
    # On first use: matplotlib costs ~0.5 s to import, in every process that loads the graph.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(6.0, 1.6 * len(backends) + 3.0) * 3, 4.8), layout="constrained")
    FigureCanvasAgg(fig)
    edges_ax, entities_ax, types_ax = fig.subplots(1, 3, sharey=True)
    _panel(edges_ax, "Edge F1", "edges_f1", backends, labels, modes, cells)
    _panel(entities_ax, "Entity F1", "entities_f1", backends, labels, modes, cells)
    _panel(types_ax, "Typed entity F1", "types_f1", backends, labels, modes, cells)
    edges_ax.set_ylabel("F1 (agreement with reference)")
    if modes:
        edges_ax.legend(title="ontology mode", fontsize=8)
    # Agreement, not correctness, unless the reference is the oracle's hand-written labels.
    fig.suptitle("Strict F1 by ontology mode — agreement with the reference backend")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    write_bytes_atomic(path, buffer.getvalue())
    return path
