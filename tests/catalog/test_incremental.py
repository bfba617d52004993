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
from gateway.catalog.catalog import Catalog
from gateway.catalog.naming import NamingRules
from gateway.catalog.snapshot import BackendListing, Kind, Snapshot, build_snapshot

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

    def refuse(*args: Any, **kwargs: Any) -> Snapshot:
        raise AssertionError("a whole rebuild for one prefixed backend's change")

    monkeypatch.setattr(catalog_module, "build_snapshot", refuse)
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
    real = build_snapshot

    def counted(*args: Any, **kwargs: Any) -> Snapshot:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(catalog_module, "build_snapshot", counted)
    catalog.publish(BackendListing("beta", "", tools=({"name": "echo"},)))
    assert calls == [1]
    assert catalog.snapshot.view(Kind.TOOLS).get("echo").backend == "alpha"
    assert catalog.snapshot.problems  # beta's echo, skipped and said so
    catalog.withdraw("alpha")  # not clean any more: rebuilt, and beta's echo comes in
    assert calls == [1, 1]
    assert catalog.snapshot.view(Kind.TOOLS).get("echo").backend == "beta"
