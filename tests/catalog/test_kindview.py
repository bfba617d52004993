"""KindView: a persistent chunked sorted sequence behaves as one sorted tuple and dict.

The model is a plain dict of key -> entry; every view, however it was edited,
must answer ``len``, iteration, ``get``, ``in``, ``after`` and ``slice``
exactly as the sorted model does, keep its chunks within their bounds
(kindview rule 2) and share every chunk an edit did not touch (rule 1).
Most tests shrink the chunks to a handful of entries, so a few dozen keys
cross many chunk boundaries.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.catalog import kindview
from gateway.catalog.kindview import CHUNK_MIN, CHUNK_SIZE, Entry, KindView

KEYS = [f"k{n:03d}" for n in range(60)]


@contextmanager
def small_chunks(size: int = 4, smallest: int = 1) -> Iterator[None]:
    """Chunks of ``size`` entries at most (``smallest`` at least) for the block."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kindview, "CHUNK_SIZE", size)
        patch.setattr(kindview, "CHUNK_MIN", smallest)
        yield


def _entry(key: str, generation: int = 0) -> Entry:
    return Entry(key, f"b{key[-1]}", key, f'{{"name":"{key}","g":{generation}}}'.encode())


def _view(keys: list[str]) -> KindView:
    return KindView(_entry(key) for key in sorted(set(keys)))


def _held(view: KindView, keys: list[str]) -> dict[str, Entry]:
    """The model of ``view`` restricted to ``keys`` (each of which it holds)."""
    wanted = set(keys)
    held = {entry.key: entry for entry in view if entry.key in wanted}
    assert set(held) == wanted
    return held


def check(view: KindView, model: dict[str, Entry]) -> None:
    """``view`` answers as the sorted ``model`` and keeps the chunk invariants."""
    keys = sorted(model)
    flat = tuple(model[key] for key in keys)
    assert len(view) == len(flat)
    assert tuple(view) == flat
    assert view.keys() == tuple(keys)
    assert view == KindView(flat)
    assert view.backend_counts() == Counter(e.backend for e in flat)
    assert view.backends() == {e.backend for e in flat}
    assert view.encoded_size() == sum(len(e.encoded) for e in flat)
    for key in [*KEYS, "", "k", "k0005", "zzz"]:
        assert view.get(key) is model.get(key)
        assert (key in view) == (key in model)
        assert view.after(key) == bisect.bisect_right(keys, key)
    assert view.after(None) == 0
    for start in range(-1, len(flat) + 2):
        for stop in range(start, len(flat) + 3):
            assert view.slice(start, stop) == flat[max(start, 0) : max(stop, 0)]
    chunks = view._chunks
    sizes = [chunk.length for chunk in chunks]
    assert all(size <= kindview.CHUNK_SIZE for size in sizes)
    if len(chunks) > 1:
        assert all(size >= kindview.CHUNK_MIN for size in sizes)
    assert all(chunk.entries for chunk in chunks)
    assert view._firsts == tuple(chunk.keys[0] for chunk in chunks)
    assert view._lengths == tuple(len(chunk.entries) for chunk in chunks)
    assert len(view._dicts) == len(chunks)
    assert all(d is chunk.by_key for d, chunk in zip(view._dicts, chunks, strict=True))


edits = st.lists(
    st.tuples(
        st.lists(st.sampled_from(KEYS), max_size=12),  # removed
        st.lists(st.sampled_from(KEYS), max_size=12),  # put
        st.integers(0, 3),  # generation of the put entries
    ),
    min_size=1,
    max_size=10,
)


@settings(max_examples=300)
@given(st.lists(st.sampled_from(KEYS), max_size=40), edits, st.sampled_from([(4, 1), (5, 2)]))
def test_every_edit_answers_as_the_sorted_dict_it_stands_for(
    start: list[str], steps: list[tuple[list[str], list[str], int]], bounds: tuple[int, int]
) -> None:
    """Gateway choice (issue 17): the chunked view is an optimisation of one sorted tuple."""
    with small_chunks(*bounds):
        view = _view(start)
        model = _held(view, start)
        for removed, put, generation in steps:
            came = {key: _entry(key, generation) for key in put}
            before, before_model = view, dict(model)
            view = view.edited(removed, came)
            for key in removed:
                model.pop(key, None)
            model.update(came)
            check(view, model)
            # Equality across an edit, where the two views share chunks.
            assert (view == before) == (sorted(model.items()) == sorted(before_model.items()))
            assert (before == view) == (view == before)


def test_an_edit_shares_every_chunk_it_does_not_touch() -> None:
    """Gateway choice (issue 17): the old and the new snapshot share the rest of the catalog."""
    keys = [f"svc{b:03d}__t{n:02d}" for b in range(200) for n in range(50)]
    view = KindView(_entry(key) for key in keys)
    changed = {f"svc100__t{n:02d}": _entry(f"svc100__t{n:02d}", 1) for n in range(50)}
    after = view.edited([], changed)
    old = {id(chunk) for chunk in view._chunks}
    new = [chunk for chunk in after._chunks if id(chunk) not in old]
    assert len(view._chunks) == -(-len(keys) // CHUNK_SIZE)
    assert 1 <= len(new) <= 2  # the 50 keys sit in one chunk or straddle two
    assert after.get("svc100__t07") is changed["svc100__t07"]
    assert after.get("svc099__t07") is view.get("svc099__t07")


def test_emptying_a_middle_chunk_merges_nothing_away() -> None:
    """A chunk whose keys all go disappears; its neighbours are untouched."""
    with small_chunks():
        view = _view(KEYS[:12])  # chunks k000-k003, k004-k007, k008-k011
        after = view.edited(KEYS[4:8], {})
        check(after, _held(view, KEYS[:4] + KEYS[8:12]))
        assert after._chunks[0] is view._chunks[0]
        assert after._chunks[-1] is view._chunks[-1]


def test_a_chunk_grown_past_its_size_is_cut_in_near_equal_parts() -> None:
    """Rule 2: no chunk over CHUNK_SIZE; the cut pieces are at least half full."""
    with small_chunks(4, 1):
        view = _view(KEYS[0:40:10])  # k000 k010 k020 k030 in one chunk
        put = {key: _entry(key) for key in KEYS[11:20]}
        after = view.edited([], put)
        check(after, {**_held(view, KEYS[0:40:10]), **put})
        assert [chunk.length for chunk in after._chunks] == [3, 3, 3, 4]  # 13 in ceil(13 / 4)


def test_keys_before_the_first_and_after_the_last_chunk_land_at_the_ends() -> None:
    """Rule 3: a key below every first key goes into chunk 0, one above into the last."""
    with small_chunks():
        view = _view(KEYS[10:20])
        after = view.edited([], {"a": _entry("a"), "zz": _entry("zz")})
        assert after.keys() == ("a", *KEYS[10:20], "zz")
        assert after.get("a") is not None
        assert after.get("zz") is not None
        assert after.after("a") == 1
        assert after.slice(10, 12) == (after.get(KEYS[19]), after.get("zz"))


def test_a_small_remainder_joins_its_neighbour() -> None:
    """Rule 2: an edit that leaves a chunk under CHUNK_MIN merges it with the next one."""
    with small_chunks(8, 2):
        view = _view(KEYS[:24])  # three chunks of eight
        after = view.edited(KEYS[8:15], {})  # the middle chunk keeps one key
        assert [chunk.length for chunk in after._chunks] == [8, 4, 5]  # 1 + 8, cut in two
        after = view.edited(KEYS[16:23], {})  # the last keeps one: it joins the one before
        assert [chunk.length for chunk in after._chunks] == [8, 4, 5]  # 8 + 1, cut in two
        after = view.edited([*KEYS[8:15], *KEYS[16:22]], {})  # 1 and 2 left, side by side
        assert [chunk.length for chunk in after._chunks] == [8, 3]


def test_removing_everything_leaves_an_empty_view_that_takes_new_entries() -> None:
    """An emptied view answers as the empty view, and an edit of it builds from nothing."""
    with small_chunks():
        view = _view(KEYS[:9])
        empty = view.edited(KEYS[:9], {})
        check(empty, {})
        assert empty == KindView()
        again = empty.edited(["k001"], {"k005": _entry("k005")})
        check(again, _held(again, ["k005"]))


def test_an_edit_with_nothing_to_do_returns_the_same_view() -> None:
    """Rule 1: no edit, no copy."""
    view = _view(KEYS[:5])
    assert view.edited([], {}) is view


def test_views_equal_by_entries_whatever_their_chunking() -> None:
    """Equality is of the sorted entries, so two routes to one catalog compare equal."""
    with small_chunks(4, 1):
        edited = _view(KEYS[:3]).edited([], {key: _entry(key) for key in KEYS[3:10]})
    built = _view(KEYS[:10])
    assert edited._firsts != built._firsts
    assert edited == built
    assert edited != _view(KEYS[:9])
    assert edited != built.edited([], {"k004": _entry("k004", 1)})
    assert edited.__eq__(object()) is NotImplemented
    big = KindView(_entry(f"k{n:05d}") for n in range(3000))
    same = big.edited([], {"k01500": _entry("k01500")})  # an equal entry, a new object
    assert same == big
    assert big.edited([], {"k01500": _entry("k01500", 1)}) != big
    assert big.edited(["k00000"], {"k00000a": _entry("k00000a")}) != big


def test_the_default_bounds_keep_a_chunk_at_least_a_quarter_full() -> None:
    """Rule 2's constants: what the docs and the benchmark figures assume."""
    assert (CHUNK_SIZE, CHUNK_MIN) == (512, 128)


def test_the_repr_shows_the_length_and_the_first_keys_only() -> None:
    """A failing assertion on a 100,000-item view prints a line, not the catalog."""
    assert repr(_view(KEYS[:2])) == "KindView(2: ['k000', 'k001'])"
    assert repr(_view(KEYS)) == f"KindView(60: {KEYS[:8]!r}, ...)"
