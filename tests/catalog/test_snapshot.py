"""Specification tests for ``gateway.catalog.snapshot`` (merged immutable catalog)."""

from __future__ import annotations

import json

import pytest

from gateway.catalog.catalog import Catalog
from gateway.catalog.naming import NamingRules
from gateway.catalog.snapshot import (
    EMPTY_SNAPSHOT,
    BackendListing,
    Entry,
    Kind,
    KindView,
    build_snapshot,
)

RULES = NamingRules()


def keys(listings: list[BackendListing], kind: Kind = Kind.TOOLS) -> tuple[str, ...]:
    return build_snapshot(listings, RULES).view(kind).keys()


# --- building ---------------------------------------------------------------


def test_items_of_all_backends_are_merged_and_sorted_by_public_key() -> None:
    """Gateway choice: one sorted order makes keyset paging stable across snapshots."""
    snapshot = build_snapshot(
        [
            BackendListing("zeta", "z", tools=({"name": "b"}, {"name": "a"})),
            BackendListing("alpha", "a", tools=({"name": "y"},)),
            BackendListing("mid", "", tools=({"name": "B"}, {"name": "m"})),
        ],
        RULES,
    )
    view = snapshot.view(Kind.TOOLS)
    assert view.keys() == ("B", "a__y", "m", "z__a", "z__b")
    assert tuple(e.key for e in view) == view.keys()
    assert [(e.backend, e.original) for e in view] == [
        ("mid", "B"),
        ("alpha", "y"),
        ("mid", "m"),
        ("zeta", "a"),
        ("zeta", "b"),
    ]


def test_encoded_tool_keeps_unknown_fields_and_carries_the_public_name() -> None:
    """Spec: an item is re-encoded with only its identity changed (STYLE 5)."""
    item = {
        "name": "echo",
        "title": "Echo",
        "description": "d",
        "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}},
        "outputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
        "_meta": {"vendor/key": [1, 2]},
        "x-future": {"nested": [None, 1.5]},
    }
    snapshot = build_snapshot([BackendListing("b", "p", tools=(item,))], RULES)
    entry = snapshot.resolve(Kind.TOOLS, "p__echo")
    assert entry is not None
    assert json.loads(entry.encoded) == {**item, "name": "p__echo"}
    assert item["name"] == "echo"  # the backend's own item is not mutated


def test_encoded_resource_and_template_carry_public_uris() -> None:
    """Gateway choice: resource uri and template uriTemplate become prefix + "+" + uri."""
    resource = {"uri": "file:///a", "name": "a", "mimeType": "text/plain", "size": 3}
    template = {"uriTemplate": "file:///{path}", "name": "t", "x-extra": 1}
    snapshot = build_snapshot(
        [BackendListing("b", "fs", resources=(resource,), templates=(template,))], RULES
    )
    (res,) = snapshot.view(Kind.RESOURCES)
    assert json.loads(res.encoded) == {**resource, "uri": "fs+file:///a"}
    (tpl,) = snapshot.view(Kind.TEMPLATES)
    assert json.loads(tpl.encoded) == {**template, "uriTemplate": "fs+file:///{path}"}
    assert tpl.original == "file:///{path}"


def test_prompts_are_namespaced_like_tools() -> None:
    """Gateway choice: prompt names follow the tool naming rules."""
    snapshot = build_snapshot([BackendListing("b", "p", prompts=({"name": "greet"},))], RULES)
    assert snapshot.view(Kind.PROMPTS).keys() == ("p__greet",)
    assert snapshot.view(Kind.TOOLS).keys() == ()


def test_duplicate_names_within_a_backend_keep_the_first_and_are_reported() -> None:
    """Gateway choice: a misbehaving backend loses its duplicate, never the catalog."""
    snapshot = build_snapshot(
        [BackendListing("b", "p", tools=({"name": "x", "description": "first"}, {"name": "x"}))],
        RULES,
    )
    entry = snapshot.resolve(Kind.TOOLS, "p__x")
    assert entry is not None
    assert json.loads(entry.encoded)["description"] == "first"
    assert len(snapshot.problems) == 1
    assert snapshot.problems[0].startswith("b: tools 'x' skipped")
    assert "already taken by b:'x'" in snapshot.problems[0]


def test_cross_backend_clash_with_an_unprefixed_backend_is_reported() -> None:
    """Gateway choice: the first listing keeps the public name; the other is reported."""
    snapshot = build_snapshot(
        [
            BackendListing("plain", "", tools=({"name": "a__x"},)),
            BackendListing("alpha", "a", tools=({"name": "x"},)),
        ],
        RULES,
    )
    entry = snapshot.resolve(Kind.TOOLS, "a__x")
    assert entry is not None
    assert entry.backend == "plain"
    assert snapshot.problems == (
        "alpha: tools 'x' skipped: public name 'a__x' already taken by plain:'a__x'",
    )


@pytest.mark.parametrize(
    "item",
    [{"description": "no name"}, {"name": ""}, {"name": 5}, {"name": None}, {"name": ["x"]}],
)
def test_items_without_a_usable_name_are_skipped_and_reported(item: dict[str, object]) -> None:
    """Gateway choice: an item without a string identity cannot be addressed; skip it."""
    snapshot = build_snapshot([BackendListing("b", "p", tools=(item, {"name": "ok"}))], RULES)
    assert snapshot.view(Kind.TOOLS).keys() == ("p__ok",)
    assert snapshot.problems == ("b: tools item without a valid 'name' skipped",)


def test_resolve_of_an_unknown_name_is_none() -> None:
    """Gateway choice: the router turns None into an unknown-tool error."""
    snapshot = build_snapshot([BackendListing("b", "p", tools=({"name": "x"},))], RULES)
    assert snapshot.resolve(Kind.TOOLS, "p__y") is None
    assert snapshot.resolve(Kind.PROMPTS, "p__x") is None
    assert EMPTY_SNAPSHOT.resolve(Kind.TOOLS, "x") is None


# --- KindView ---------------------------------------------------------------


def _view(*names: str) -> KindView:
    entries = tuple(Entry(n, "b", n, b"{}") for n in names)
    return KindView(entries)


@pytest.mark.parametrize(
    ("key", "index"),
    [(None, 0), ("", 0), ("a", 1), ("b", 1), ("c", 2), ("d", 2), ("e", 3), ("zzz", 3)],
)
def test_kind_view_after_is_the_first_index_strictly_after_the_key(
    key: str | None, index: int
) -> None:
    """Gateway choice: keyset paging resumes after the last key, even if it has gone."""
    assert _view("a", "c", "e").after(key) == index


def test_kind_view_backends_names_contributing_backends() -> None:
    """Gateway choice: used to tell which backends feed a list."""
    snapshot = build_snapshot(
        [
            BackendListing("one", "o", tools=({"name": "x"},)),
            BackendListing("two", "t", prompts=({"name": "y"},)),
        ],
        RULES,
    )
    assert snapshot.view(Kind.TOOLS).backends() == frozenset({"one"})
    assert KindView().backends() == frozenset()


# --- URIs -------------------------------------------------------------------


def test_prefixed_uri_resolves_to_its_backend_listed_or_not() -> None:
    """Spec: resources are routed by prefix; a template-matched URI is never listed."""
    snapshot = build_snapshot([BackendListing("files", "fs", resources=({"uri": "f:/a"},))], RULES)
    assert snapshot.resolve_uri("fs+f:/a") == ("files", "f:/a")
    assert snapshot.resolve_uri("fs+f:/never-listed") == ("files", "f:/never-listed")


def test_configured_prefix_of_a_down_backend_still_resolves() -> None:
    """Gateway choice: its URIs get "unavailable", not "unknown resource"."""
    snapshot = build_snapshot([], RULES, prefixes={"db": "database"})
    assert snapshot.resolve_uri("db+sql://t") == ("database", "sql://t")


def test_unknown_uri_without_unprefixed_backends_resolves_to_none() -> None:
    """Gateway choice: no prefix and no unprefixed backend means unknown resource."""
    snapshot = build_snapshot([BackendListing("files", "fs")], RULES)
    assert snapshot.resolve_uri("file:///x") is None
    assert snapshot.resolve_uri("zz+file:///x") is None


def test_unprefixed_backends_resolve_their_listed_uris() -> None:
    """Gateway choice: a listed URI of an unprefixed backend goes to that backend."""
    snapshot = build_snapshot(
        [
            BackendListing("b-plain", "", resources=({"uri": "file:///b"},)),
            BackendListing("a-plain", "", resources=({"uri": "file:///a"},)),
            BackendListing("files", "fs", resources=({"uri": "file:///f"},)),
        ],
        RULES,
    )
    assert snapshot.unprefixed == ("a-plain", "b-plain")
    assert snapshot.resolve_uri("file:///b") == ("b-plain", "file:///b")
    assert snapshot.resolve_uri("file:///a") == ("a-plain", "file:///a")
    assert snapshot.resolve_uri("fs+file:///f") == ("files", "file:///f")


def test_unlisted_uri_without_a_known_prefix_goes_to_the_first_unprefixed_backend() -> None:
    """Gateway choice: unprefixed backends are ordered by name; the first gets the rest."""
    snapshot = build_snapshot(
        [BackendListing("zed", ""), BackendListing("abe", ""), BackendListing("files", "fs")],
        RULES,
    )
    assert snapshot.resolve_uri("mem://anything") == ("abe", "mem://anything")
    assert snapshot.resolve_uri("other+mem://x") == ("abe", "other+mem://x")


def test_listed_uri_of_an_unprefixed_backend_is_not_routed_to_a_prefixed_backend() -> None:
    """Spec: a listed URI resolves to its lister, or the clash is reported (naming)."""
    snapshot = build_snapshot(
        [
            BackendListing("svn", "svn", resources=({"uri": "file:///repo"},)),
            BackendListing("local", "", resources=({"uri": "svn+ssh://host/repo"},)),
        ],
        RULES,
    )
    listed = snapshot.view(Kind.RESOURCES).get("svn+ssh://host/repo")
    if listed is not None:
        assert snapshot.resolve_uri("svn+ssh://host/repo") == ("local", "svn+ssh://host/repo")
    else:
        assert any("svn+ssh://host/repo" in problem for problem in snapshot.problems)


def test_publishing_a_backend_reports_exactly_the_kinds_it_adds() -> None:
    """Gateway choice: list_changed goes out only for lists a host would see change."""
    catalog = Catalog(RULES)
    changed = catalog.publish(
        BackendListing("b", "p", tools=({"name": "t"},), templates=({"uriTemplate": "x:{y}"},))
    )
    assert changed == frozenset({Kind.TOOLS, Kind.TEMPLATES})
    assert catalog.snapshot.view(Kind.TOOLS).keys() == ("p__t",)


def test_republishing_an_identical_listing_reports_nothing() -> None:
    """Gateway choice: a backend re-listing after a restart changes nothing visible."""
    catalog = Catalog(RULES)
    listing = BackendListing("b", "p", tools=({"name": "t"},))
    catalog.publish(listing)
    assert catalog.publish(BackendListing("b", "p", tools=({"name": "t"},))) == frozenset()


def test_changing_an_item_field_reports_that_kind_only() -> None:
    """Gateway choice: a changed description is a changed list."""
    catalog = Catalog(RULES)
    catalog.publish(BackendListing("b", "p", tools=({"name": "t"},), prompts=({"name": "q"},)))
    changed = catalog.publish(
        BackendListing(
            "b", "p", tools=({"name": "t", "description": "new"},), prompts=({"name": "q"},)
        )
    )
    assert changed == frozenset({Kind.TOOLS})


def test_withdrawing_a_backend_reports_the_kinds_that_lose_items() -> None:
    """Gateway choice: a backend going down removes its items from every list."""
    catalog = Catalog(RULES)
    catalog.publish(BackendListing("a", "a", tools=({"name": "t"},)))
    catalog.publish(BackendListing("b", "b", resources=({"uri": "u:/1"},)))
    assert catalog.withdraw("b") == frozenset({Kind.RESOURCES})
    assert catalog.snapshot.view(Kind.RESOURCES).keys() == ()
    assert catalog.snapshot.view(Kind.TOOLS).keys() == ("a__t",)


def test_withdrawing_an_unknown_backend_reports_nothing() -> None:
    """Gateway choice: withdraw is idempotent."""
    catalog = Catalog(RULES)
    catalog.publish(BackendListing("a", "a", tools=({"name": "t"},)))
    assert catalog.withdraw("nope") == frozenset()
    assert catalog.withdraw("a") == frozenset({Kind.TOOLS})
    assert catalog.withdraw("a") == frozenset()


def test_publish_or_withdraw_of_only_invisible_items_reports_nothing() -> None:
    """Gateway choice: skipped or clashing items change problems, not what hosts see."""
    catalog = Catalog(RULES)
    catalog.publish(BackendListing("plain", "", tools=({"name": "a__x"},)))
    changed = catalog.publish(
        BackendListing("zz-alpha", "a", tools=({"name": "x"}, {"description": "nameless"}))
    )
    assert changed == frozenset()
    assert len(catalog.snapshot.problems) == 2
    assert catalog.withdraw("zz-alpha") == frozenset()
    assert catalog.publish(BackendListing("empty", "e")) == frozenset()


def test_publish_swaps_in_a_new_snapshot_and_leaves_the_old_one_intact() -> None:
    """Gateway choice: build-then-swap; a walk in progress keeps its snapshot."""
    catalog = Catalog(RULES)
    catalog.publish(BackendListing("a", "a", tools=({"name": "t"},)))
    before = catalog.snapshot
    catalog.publish(BackendListing("b", "b", tools=({"name": "u"},)))
    assert catalog.snapshot is not before
    assert before.view(Kind.TOOLS).keys() == ("a__t",)
    assert catalog.snapshot.view(Kind.TOOLS).keys() == ("a__t", "b__u")


def test_catalog_prefixes_resolve_down_backends_and_can_be_replaced() -> None:
    """Gateway choice: configured prefixes resolve even before a backend publishes."""
    catalog = Catalog(RULES, prefixes={"fs": "files"})
    assert catalog.snapshot.resolve_uri("fs+f:/x") == ("files", "f:/x")
    catalog.set_prefixes({"db": "database"})
    assert catalog.snapshot.resolve_uri("fs+f:/x") is None
    assert catalog.snapshot.resolve_uri("db+q:/1") == ("database", "q:/1")


def test_catalog_merges_in_backend_name_order_whatever_the_publish_order() -> None:
    """Gateway choice: clash winners do not depend on which backend came up first."""
    first, second = Catalog(RULES), Catalog(RULES)
    plain = BackendListing("b-plain", "", tools=({"name": "a__x"},))
    alpha = BackendListing("a-alpha", "a", tools=({"name": "x"},))
    first.publish(plain)
    first.publish(alpha)
    second.publish(alpha)
    second.publish(plain)
    assert first.snapshot.view(Kind.TOOLS) == second.snapshot.view(Kind.TOOLS)
    entry = first.snapshot.resolve(Kind.TOOLS, "a__x")
    assert entry is not None
    assert entry.backend == "a-alpha"


def test_empty_catalog_has_empty_views() -> None:
    """Gateway choice: a fresh catalog lists nothing and resolves nothing."""
    catalog = Catalog(RULES)
    for kind in Kind:
        assert catalog.snapshot.view(kind).keys() == ()
    assert catalog.snapshot.problems == ()


def test_an_unprefixed_collision_is_left_out_and_named_under_the_error_policy() -> None:
    """Gateway choice (issue 9): on_collision=error leaves the later item out, naming both."""
    first = BackendListing(backend="a", prefix="", tools=({"name": "echo"},))
    second = BackendListing(backend="b", prefix="", tools=({"name": "echo"},))
    snapshot = build_snapshot([first, second], NamingRules())
    assert snapshot.resolve(Kind.TOOLS, "echo").backend == "a"  # type: ignore[union-attr]
    assert snapshot.problems == (
        "b: tools 'echo' skipped: public name 'echo' already taken by a:'echo'",
    )


def test_an_unprefixed_collision_is_renamed_under_the_rename_policy() -> None:
    """Gateway choice (issue 9): on_collision=rename falls back to the backend's name as prefix."""
    first = BackendListing(backend="a", prefix="", tools=({"name": "echo"},))
    second = BackendListing(
        backend="b", prefix="", tools=({"name": "echo"},), on_collision="rename"
    )
    snapshot = build_snapshot([first, second], NamingRules())
    renamed = snapshot.resolve(Kind.TOOLS, "b__echo")
    assert renamed is not None and renamed.backend == "b" and renamed.original == "echo"
    assert snapshot.problems == ()


def test_an_unprefixed_collision_is_dropped_quietly_under_the_skip_policy() -> None:
    """Gateway choice (issue 9): on_collision=skip leaves the item out without a problem."""
    first = BackendListing(backend="a", prefix="", tools=({"name": "echo"},))
    second = BackendListing(backend="b", prefix="", tools=({"name": "echo"},), on_collision="skip")
    snapshot = build_snapshot([first, second], NamingRules())
    assert snapshot.resolve(Kind.TOOLS, "echo").backend == "a"  # type: ignore[union-attr]
    assert snapshot.problems == ()
