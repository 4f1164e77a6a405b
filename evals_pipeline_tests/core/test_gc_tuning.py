"""fewer_gc_passes and gc_paused change the collector only inside the block, then restore it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from evals_pipeline.core.gc_tuning import BULK_THRESHOLDS, fewer_gc_passes, gc_paused


@pytest.fixture(autouse=True)
def _default_thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


def test_raised_inside_restored_after_even_nested_and_on_error() -> None:
    with pytest.raises(RuntimeError), fewer_gc_passes():
        assert gc.get_threshold() == BULK_THRESHOLDS
        with fewer_gc_passes():
            assert gc.get_threshold() == BULK_THRESHOLDS
        assert gc.get_threshold() == BULK_THRESHOLDS  # inner exit keeps the outer's
        raise RuntimeError("boom")
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.isenabled()


def test_never_lowers_a_threshold_already_higher() -> None:
    gc.set_threshold(1_000_000, 5, 100)
    with fewer_gc_passes():
        assert gc.get_threshold() == (1_000_000, BULK_THRESHOLDS[1], 100)
    assert gc.get_threshold() == (1_000_000, 5, 100)


def test_works_as_a_decorator() -> None:
    @fewer_gc_passes()
    def inside() -> tuple[int, int, int]:
        return gc.get_threshold()

    assert inside() == BULK_THRESHOLDS
    assert gc.get_threshold() == (700, 10, 10)


def test_gc_paused_disables_inside_and_restores_even_nested_and_on_error() -> None:
    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # inner exit keeps the outer's pause
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_gc_paused_leaves_a_disabled_collector_disabled() -> None:
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
