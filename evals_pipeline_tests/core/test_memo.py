"""IdentityMemo: remembered by identity, never confused by an equal object or a reused id;
`forget_all` empties every memo of the process."""

from __future__ import annotations

import pytest

from evals_pipeline.core import digests
from evals_pipeline.core.cassettes import keys, store
from evals_pipeline.core.memo import IdentityMemo, forget_all
from evals_pipeline.core.models import Episode
from evals_pipeline.core.options import ExtractOptions


def test_an_equal_but_distinct_object_is_a_miss() -> None:
    memo: IdentityMemo[str] = IdentityMemo(8)
    a = Episode(name="c", body="same")
    b = Episode(name="c", body="same")
    assert a == b and a is not b
    memo.put((a,), "for a")
    assert memo.get(a) == "for a"
    assert memo.get(b) is None


def test_entries_keep_their_objects_so_an_id_is_never_reused_for_another() -> None:
    memo: IdentityMemo[int] = IdentityMemo(1000)
    for i in range(500):
        memo.put((Episode(name=str(i), body="x"),), i)  # dropped by the caller at once
    fresh = [Episode(name=f"n{i}", body="y") for i in range(500)]
    assert all(memo.get(e) is None for e in fresh)


def test_a_full_memo_starts_over_and_keys_are_ordered_tuples() -> None:
    memo: IdentityMemo[str] = IdentityMemo(2)
    a, b, c = object(), object(), object()
    memo.put((a, b), "ab")
    assert memo.get(b, a) is None and memo.get(a, b) == "ab"
    memo.put((b,), "b")
    memo.put((c,), "c")  # full: cleared first
    assert len(memo) == 1 and memo.get(c) == "c" and memo.get(a, b) is None


def test_forget_all_empties_every_process_wide_memo() -> None:
    own: IdentityMemo[int] = IdentityMemo(4)
    own.put((object(),), 1)
    keys.extract_key(Episode(name="x", body="y"), ExtractOptions())
    digests._memo["somewhere"] = ((0,), "0" * 64)
    forget_all()
    assert len(own) == 0 and keys._EXTRACT_KEYS == {} and digests._memo == {}
    assert len(store._memo) == 0 and len(store._indexes) == 0


def test_a_weighed_memo_starts_over_when_its_weight_would_pass_the_bound() -> None:
    memo: IdentityMemo[str] = IdentityMemo(100, max_weight=10, weigh=lambda _objs, v: len(v))
    a, b, c, huge = object(), object(), object(), object()
    memo.put((a,), "aaaa")
    memo.put((b,), "bbbbbb")  # 4 + 6: at the bound, kept
    assert len(memo) == 2 and memo.weight == 10
    memo.put((c,), "c")  # would be 11: cleared first
    assert len(memo) == 1 and memo.get(c) == "c" and memo.get(a) is None and memo.weight == 1
    assert memo.put((huge,), "x" * 11) == "x" * 11  # heavier than the bound alone: not kept
    assert memo.get(huge) is None and memo.get(c) == "c"
    memo.put((c,), "cc")  # a replaced entry's weight is given back
    assert memo.weight == 2
    memo.clear()
    assert memo.weight == 0


def test_weight_and_bound_go_together() -> None:
    with pytest.raises(ValueError, match="together"):
        IdentityMemo(4, max_weight=10)
    with pytest.raises(ValueError, match="together"):
        IdentityMemo(4, weigh=lambda _objs, _v: 1)


def test_the_render_and_key_memos_hold_a_step_of_thousands_of_chunks() -> None:
    """A step renders and keys its whole corpus for the guards, then again for the replay: a
    memo smaller than the corpus missed every time past ~1,000 chunks."""
    from evals_pipeline.core import prompts

    forget_all()
    options = ExtractOptions()
    episodes = [Episode(name=f"c{i}", body=f"Text number {i}.") for i in range(5000)]
    renders = [prompts.render_extract_prompts(e, options) for e in episodes]
    first_keys = [keys.extract_key(e, options) for e in episodes]
    again = [prompts.render_extract_prompts(e, options) for e in episodes]
    assert all(a is r for a, r in zip(again, renders, strict=True))
    assert len(keys._BY_IDENTITY) == 5000
    assert [keys.extract_key(e, options) for e in episodes] == first_keys
    forget_all()


def test_the_render_and_key_memos_are_bounded_by_the_text_they_hold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from evals_pipeline.core import prompts

    forget_all()
    monkeypatch.setattr(prompts._RENDERS, "max_weight", 10_000)
    monkeypatch.setattr(keys._BY_IDENTITY, "max_weight", 10_000)
    options = ExtractOptions()
    body = "x" * 1_000
    episodes = [Episode(name=f"big{i}", body=body, context=("y" * 500,)) for i in range(20)]
    for episode in episodes:  # a render holds the body twice (entity and edge prompts)
        prompts.render_extract_prompts(episode, options)
        keys.extract_key(episode, options)
    assert 0 < len(prompts._RENDERS) <= 10_000 // 2_000
    assert prompts._RENDERS.weight <= 10_000
    assert 0 < len(keys._BY_IDENTITY) <= 10_000 // 1_500  # body and context
    assert keys._BY_IDENTITY.weight == 1_500 * len(keys._BY_IDENTITY)
    forget_all()
