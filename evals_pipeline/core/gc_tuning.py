"""Fewer cyclic-GC passes while bulk work allocates many small, acyclic objects.

Loading a cassette, replaying it and scoring the result build hundreds of thousands of pydantic
models, dicts and strings. None of them form reference cycles, so reference counting frees them,
but the cyclic collector still runs every 700 net allocations, and its older-generation passes
rescan every surviving object (gigabytes of loaded records on a large replay) to find nothing.
Measured on the replay benchmark, that was over a third of a 1,000-chunk replay, and two thirds
of loading a cassette next to a large live heap.

- `gc_paused()`: no cyclic collection inside the block. For bounded, CPU-only work that creates
  no cycles: loading a cassette, building or reading a table, scoring, and `run_each` (under
  `extract_all` and `extraction_table`) over a local extractor (a cassette replay, the
  oracle). At N = 10,000 the collector's passes during replay were a fifth of the benchmark's
  core path.
  The pause is process-wide, across awaits too: any cyclic garbage of the block (tracebacks of
  failed replies) waits for its end, and so does that of other threads. Dagster's executors
  run one step at a time per process, so nothing else runs meanwhile.
- `fewer_gc_passes()`: raised thresholds, not disabled, so cyclic garbage is still collected in
  larger batches. For work that awaits I/O and may run for long (extract_all over a live model),
  and for each in-process run of the CLI's materialisation, where Dagster's own code between
  the steps would otherwise trigger full passes over every loaded cassette and table.

Both are re-entrant and thread-safe, restore the previous state when the outermost block exits,
and never change what is computed.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# Young-generation pass every 100,000 net allocations (default 700); older generations after 50
# passes of the one below (default 10).
BULK_THRESHOLDS = (100_000, 50, 50)

_lock = threading.Lock()
_depth = 0
_saved: tuple[int, int, int] | None = None
_paused_depth = 0
_was_enabled = False


@contextmanager
def fewer_gc_passes() -> Iterator[None]:
    """Raise the GC thresholds for the duration of the block."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            _saved = gc.get_threshold()
            # Never lower a threshold someone already raised further.
            gc.set_threshold(*(max(a, b) for a, b in zip(_saved, BULK_THRESHOLDS, strict=True)))
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection for the duration of the block (bounded, cycle-free work only)."""
    global _paused_depth, _was_enabled
    with _lock:
        if _paused_depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _paused_depth += 1
    try:
        yield
    finally:
        with _lock:
            _paused_depth -= 1
            if _paused_depth == 0 and _was_enabled:
                gc.enable()
