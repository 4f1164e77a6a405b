"""IdentityMemo: remembered by identity, never confused by an equal object or a reused id;
`forget_all` empties every memo of the process."""

from __future__ import annotations

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
