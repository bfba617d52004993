"""The catalog's incremental merge agrees with the whole rebuild, and is taken when it can be.

``Catalog.publish`` and ``withdraw`` merge one backend's change into the last
snapshot while no two backends claim one public name; ``build_snapshot`` over
every listing is the definition. The property test drives random sequences
of changes over a tiny name space, so clashes, renames, duplicates, items
without a name and shared prefixes all happen, and compares the two after
every step.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.catalog import catalog as catalog_module
from gateway.catalog import kindview
from gateway.catalog.catalog import Catalog
from gateway.catalog.naming import NamingRules
from gateway.catalog.snapshot import (
    BackendListing,
    Kind,
    KindView,
    Snapshot,
    build_snapshot,
    merge,
)

RULES = NamingRules()
BACKENDS = ("alpha", "beta", "gamma", "delta")
NAMES = ("a", "b", "c", "alpha__a")


def _items(key: str, names: list[str | None]) -> tuple[dict[str, Any], ...]:
    return tuple(
        {key: name, "description": "x"} if name else {"description": "no name"} for name in names
    )


@st.composite
def listings(draw: st.DrawFn) -> BackendListing:
    backend = draw(st.sampled_from(BACKENDS))
    prefix = draw(st.sampled_from([backend, backend, "", "shared"]))
    name_lists = st.lists(st.one_of(st.none(), st.sampled_from(NAMES)), max_size=4)
    uris = st.lists(st.sampled_from(["file:///a", "file:///b", "mem://c"]), max_size=3)
    return BackendListing(
        backend,
        prefix,
        tools=_items("name", draw(name_lists)),
        prompts=_items("name", draw(name_lists)),
        resources=tuple({"uri": uri, "name": "r"} for uri in draw(uris)),
        on_collision=draw(st.sampled_from(["error", "skip", "rename"])),
    )


def _state(snapshot: Snapshot) -> tuple[Any, ...]:
    views = tuple(
        (tuple(view), view.keys(), {e.key: view.get(e.key) for e in view})
        for view in (snapshot.view(kind) for kind in Kind)
    )
    return views, snapshot.prefixes, snapshot.unprefixed, snapshot.problems


@settings(max_examples=500)  # clashes need a few steps to set up: look hard
@given(
    st.lists(
        st.one_of(listings(), st.sampled_from(BACKENDS)),  # a name alone: withdraw it
        min_size=1,
        max_size=12,
    )
)
def test_every_change_gives_the_snapshot_a_whole_rebuild_gives(steps: list[Any]) -> None:
    """Gateway choice: the incremental merge is an optimisation, never a second definition."""
    _agrees_step_by_step(steps)


def _agrees_step_by_step(steps: list[Any]) -> None:
    catalog = Catalog(RULES, {"gone": "omega"})
    current: dict[str, BackendListing] = {}
    for step in steps:
        before = catalog.snapshot
        if isinstance(step, str):
            changed = catalog.withdraw(step)
            current.pop(step, None)
        else:
            changed = catalog.publish(step)
            current[step.backend] = step
        rebuilt = build_snapshot(
            [current[name] for name in sorted(current)], RULES, prefixes={"gone": "omega"}
        )
        assert _state(catalog.snapshot) == _state(rebuilt)
        assert changed == frozenset(
            kind for kind in Kind if before.view(kind) != rebuilt.view(kind)
        )
        for kind in Kind:
            _check_chunks(catalog.snapshot.view(kind))


def _check_chunks(view: KindView) -> None:
    """Kindview rules 2 and 3: bounded chunks, each starting at its first key."""
    chunks = view._chunks
    assert all(0 < chunk.length <= kindview.CHUNK_SIZE for chunk in chunks)
    if len(chunks) > 1:
        assert all(chunk.length >= kindview.CHUNK_MIN for chunk in chunks)
    assert view._firsts == tuple(chunk.keys[0] for chunk in chunks)
    assert view._lengths == tuple(len(chunk.entries) for chunk in chunks)
    assert all(d is chunk.by_key for d, chunk in zip(view._dicts, chunks, strict=True))
    assert view.keys() == tuple(sorted(view.keys()))


WIDE = (*(f"n{n:02d}" for n in range(24)), "alpha__n01", "beta__n02")


@st.composite
def wide_listings(draw: st.DrawFn) -> BackendListing:
    """Listings of up to 16 tools from a wider name space: many chunks of four."""
    backend = draw(st.sampled_from(BACKENDS))
    prefix = draw(st.sampled_from([backend, backend, backend, "", "shared"]))
    tools = draw(st.lists(st.one_of(st.none(), st.sampled_from(WIDE)), max_size=16))
    prompts = draw(st.lists(st.sampled_from(WIDE), max_size=6))
    return BackendListing(
        backend,
        prefix,
        tools=_items("name", tools),
        prompts=_items("name", prompts),
        on_collision=draw(st.sampled_from(["error", "skip", "rename"])),
    )


@settings(max_examples=300)
@given(
    st.lists(st.one_of(wide_listings(), st.sampled_from(BACKENDS)), min_size=1, max_size=14),
    st.sampled_from([(4, 1), (6, 2)]),
)
def test_changes_across_chunk_boundaries_give_what_a_whole_rebuild_gives(
    steps: list[Any], bounds: tuple[int, int]
) -> None:
    """Gateway choice (issue 17): chunks emptied, overfilled, first or last, collisions, renames.

    Chunks of four or six entries, so every change crosses chunk boundaries.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kindview, "CHUNK_SIZE", bounds[0])
        patch.setattr(kindview, "CHUNK_MIN", bounds[1])
        _agrees_step_by_step(steps)


def _backend(index: int, generation: int = 0, tools: int = 20) -> BackendListing:
    name = f"svc{index:03d}"
    items = tuple({"name": f"t{n:02d}", "description": f"g{generation}"} for n in range(tools))
    return BackendListing(name, name, tools=items)


def test_a_clean_catalog_takes_no_whole_rebuild_for_one_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Gateway choice (issue 17): one backend's change costs that backend, not the catalog."""
    catalog = Catalog(RULES)
    for index in range(30):
        catalog.publish(_backend(index))

    def refuse(*args: Any, **kwargs: Any) -> tuple[Snapshot, bool]:
        raise AssertionError("a whole rebuild for one prefixed backend's change")

    monkeypatch.setattr(catalog_module, "merge", refuse)
    assert catalog.publish(_backend(7, generation=1)) == frozenset({Kind.TOOLS})
    assert catalog.publish(_backend(7, generation=1, tools=25)) == frozenset({Kind.TOOLS})
    assert catalog.withdraw("svc003") == frozenset({Kind.TOOLS})
    assert catalog.publish(_backend(99)) == frozenset({Kind.TOOLS})
    view = catalog.snapshot.view(Kind.TOOLS)
    assert len(view) == 30 * 20 + 5
    assert view.get("svc007__t24").backend == "svc007"
    assert b'"g1"' in view.get("svc007__t00").encoded
    assert "svc003__t00" not in view


def test_a_clash_takes_the_whole_rebuild_and_its_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """A name two backends claim is decided by the rebuild's collision rules, not the merge."""
    catalog = Catalog(RULES)
    catalog.publish(BackendListing("alpha", "", tools=({"name": "echo"},)))
    calls: list[int] = []
    real = merge

    def counted(*args: Any, **kwargs: Any) -> tuple[Snapshot, bool]:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(catalog_module, "merge", counted)
    catalog.publish(BackendListing("beta", "", tools=({"name": "echo"},)))
    assert calls == [1]
    assert catalog.snapshot.view(Kind.TOOLS).get("echo").backend == "alpha"
    assert catalog.snapshot.problems  # beta's echo, skipped and said so
    catalog.withdraw("alpha")  # not clean any more: rebuilt, and beta's echo comes in
    assert calls == [1, 1]
    assert catalog.snapshot.view(Kind.TOOLS).get("echo").backend == "beta"


def test_one_backends_change_shares_the_rest_of_the_catalog_with_the_old_snapshot() -> None:
    """Gateway choice (issue 17): the new snapshot reuses every chunk the change left alone."""
    catalog = Catalog(RULES)
    for index in range(200):
        catalog.publish(_backend(index, tools=30))
    before = catalog.snapshot
    assert catalog.publish(_backend(120, generation=1, tools=30)) == frozenset({Kind.TOOLS})
    after = catalog.snapshot
    old = {id(chunk) for chunk in before.view(Kind.TOOLS)._chunks}
    fresh = [c for c in after.view(Kind.TOOLS)._chunks if id(c) not in old]
    assert len(before.view(Kind.TOOLS)._chunks) >= 10
    assert 1 <= len(fresh) <= 2
    for kind in (Kind.PROMPTS, Kind.RESOURCES, Kind.TEMPLATES):
        assert after.view(kind) is before.view(kind)  # nothing of that kind changed


def test_republishing_the_same_items_changes_no_kind_and_keeps_the_views() -> None:
    """Spec (list_changed only on a change): the same items again are no change."""
    catalog = Catalog(RULES)
    for index in range(5):
        catalog.publish(_backend(index))
    before = catalog.snapshot
    assert catalog.publish(_backend(2)) == frozenset()  # a new listing, the same items
    assert catalog.snapshot.view(Kind.TOOLS) is before.view(Kind.TOOLS)
    assert catalog.publish(_backend(2, tools=19)) == frozenset({Kind.TOOLS})
    assert "svc002__t19" not in catalog.snapshot.view(Kind.TOOLS)


def test_publishing_the_same_listing_object_again_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Gateway choice: the very listing kept, published again, costs no encoding and no copy."""
    catalog = Catalog(RULES)
    listing = _backend(1)
    catalog.publish(listing)
    catalog.publish(_backend(2))
    before = catalog.snapshot

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the kept listing encoded again")

    monkeypatch.setattr(catalog_module, "prepare_listing", refuse)
    assert catalog.publish(listing) == frozenset()
    for kind in Kind:
        assert catalog.snapshot.view(kind) is before.view(kind)


def test_withdrawing_every_backend_leaves_empty_views_that_take_new_ones() -> None:
    """Chunks emptied one backend at a time end as the empty view; the next publish starts anew."""
    catalog = Catalog(RULES)
    for index in range(40):
        catalog.publish(_backend(index, tools=30))  # 1,200 tools: three chunks or more
    assert len(catalog.snapshot.view(Kind.TOOLS)._chunks) >= 3
    for index in range(40):
        assert catalog.withdraw(f"svc{index:03d}") == frozenset({Kind.TOOLS})
    assert catalog.snapshot.view(Kind.TOOLS) == KindView()
    assert catalog.snapshot.view(Kind.TOOLS).keys() == ()
    assert catalog.publish(_backend(7)) == frozenset({Kind.TOOLS})
    assert len(catalog.snapshot.view(Kind.TOOLS)) == 20
