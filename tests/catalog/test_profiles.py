"""Profile views of the catalog snapshot (issue 15, step 2): sans-IO, no trio."""

from __future__ import annotations

import tracemalloc
from fnmatch import fnmatchcase

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.catalog.catalog import Catalog
from gateway.catalog.cursor import CursorCodec
from gateway.catalog.naming import NamingRules
from gateway.catalog.pages import plan_page, render_page
from gateway.catalog.profiles import (
    DEFAULT_PROFILE,
    SEARCH,
    Globs,
    Override,
    Profile,
    ProfileViews,
    restrict,
)
from gateway.catalog.snapshot import BackendListing, Kind, Snapshot, build_snapshot
from gateway.errors import INVALID_PARAMS, LocalProtocolError

_decoder = msgspec.json.Decoder()


def _snapshot() -> Snapshot:
    return build_snapshot(
        [
            BackendListing(
                backend="files",
                prefix="files",
                tools=({"name": "read_file"}, {"name": "write_file"}),
                prompts=({"name": "summarize"},),
                resources=({"uri": "file:///a.txt"}, {"uri": "file:///secret.txt"}),
                templates=({"uriTemplate": "file:///{path}"},),
            ),
            BackendListing(
                backend="web",
                prefix="web",
                tools=({"name": "fetch"},),
                resources=({"uri": "https://example.com/"},),
            ),
        ],
        NamingRules(),
    )


CODING = Profile(
    "coding",
    backends=Globs(include=("files",)),
    tools=Globs(exclude=("files__write_*",)),
    resources=Globs(exclude=("files+file:///secret*",)),
)


def test_a_view_lists_only_the_profiles_items() -> None:
    """Issue 15: a profile selects backends, then public names by globs."""
    view = restrict(_snapshot(), CODING)
    assert view.view(Kind.TOOLS).keys() == ("files__read_file",)
    assert view.view(Kind.PROMPTS).keys() == ("files__summarize",)
    assert view.view(Kind.RESOURCES).keys() == ("files+file:///a.txt",)
    assert view.view(Kind.TEMPLATES).keys() == ("files+file:///{path}",)


def test_a_view_shares_the_snapshots_entries_and_copies_no_item() -> None:
    """Issue 15: views are computed from the shared snapshot, not by copying it."""
    snap = _snapshot()
    view = restrict(snap, CODING)
    entry = view.view(Kind.TOOLS).slice(0, 1)[0]
    assert entry is snap.resolve(Kind.TOOLS, "files__read_file")
    assert entry.encoded is snap.view(Kind.TOOLS).get("files__read_file").encoded


def test_a_profile_that_selects_everything_is_the_snapshot_itself() -> None:
    """Gateway choice: the main endpoint costs nothing."""
    snap = _snapshot()
    assert restrict(snap, Profile(DEFAULT_PROFILE)) is snap
    assert ProfileViews().view(DEFAULT_PROFILE, snap) is snap


def test_names_outside_the_profile_resolve_as_unknown() -> None:
    """Issue 15: out-of-profile is unknown, the same lookup miss as a name that never existed."""
    view = restrict(_snapshot(), CODING)
    assert view.resolve(Kind.TOOLS, "files__write_file") is None
    assert view.resolve(Kind.TOOLS, "web__fetch") is None
    assert view.resolve(Kind.TOOLS, "files__no_such_tool") is None
    assert view.resolve(Kind.TOOLS, "files__read_file") is not None


def test_an_excluded_backends_prefix_is_not_in_the_views_prefix_table() -> None:
    """Gateway choice: no "backend unavailable" hint for a backend outside the profile."""
    view = restrict(_snapshot(), CODING)
    assert view.prefixes == {"files": "files"}
    assert view.resolve_uri("web+https://example.com/") is None
    assert view.resolve_uri("web+https://example.com/other") is None


def test_unlisted_uris_routed_by_prefix_go_through_the_same_decision() -> None:
    """Issue 15: resources/read of an excluded URI is "not found", listed or not."""
    view = restrict(_snapshot(), CODING)
    assert view.resolve_uri("files+file:///secret.txt") is None
    assert view.resolve_uri("files+file:///secret-2.txt") is None  # never listed
    assert view.resolve_uri("files+file:///b.txt") == ("files", "file:///b.txt")
    assert _snapshot().resolve_uri("files+file:///secret.txt") == ("files", "file:///secret.txt")


def test_refresh_names_only_the_profiles_whose_lists_changed() -> None:
    """Issue 15: list_changed reaches a profile's clients only when its view changed."""
    catalog = Catalog(NamingRules())
    web_only = Profile("web", backends=Globs(include=("web",)))
    views = ProfileViews([CODING, web_only])
    catalog.publish(BackendListing(backend="files", prefix="files", tools=({"name": "a"},)))
    old = catalog.snapshot
    views.view("web", old)
    catalog.publish(
        BackendListing(backend="files", prefix="files", tools=({"name": "a"}, {"name": "b"}))
    )
    changed = views.refresh(old, catalog.snapshot)
    assert changed == {"default": {Kind.TOOLS}, "coding": {Kind.TOOLS}}
    old = catalog.snapshot
    catalog.publish(
        BackendListing(
            backend="files",
            prefix="files",
            tools=({"name": "a"}, {"name": "b"}, {"name": "write_x"}),
        )
    )
    assert views.refresh(old, catalog.snapshot) == {"default": {Kind.TOOLS}}


def test_a_configured_default_profile_replaces_everything() -> None:
    """Issue 15: `{server.path}` is profile `default`, everything unless configured."""
    views = ProfileViews([Profile(DEFAULT_PROFILE, backends=Globs(include=("web",)))])
    assert views.view(DEFAULT_PROFILE, _snapshot()).view(Kind.TOOLS).keys() == ("web__fetch",)
    assert views.names == ("default",)
    assert views.profile("nope") is None


def test_a_cursor_from_one_profile_is_invalid_params_on_another() -> None:
    """Issue 15: a cursor from one profile is -32602 on another."""
    codec = CursorCodec(b"k")
    first = plan_page("tools", _snapshot().view(Kind.TOOLS), None, 1).next
    assert first is not None
    cursor = codec.encode(msgspec.structs.replace(first, profile="coding"))
    assert codec.decode(cursor, "tools", "coding").after == "files__read_file"
    for other in ("", "web"):
        with pytest.raises(LocalProtocolError) as info:
            codec.decode(cursor, "tools", other)
        assert info.value.code == INVALID_PARAMS
        assert "coding" not in info.value.message


BACKENDS = ("alpha", "beta", "gamma")
NAMES = st.text(alphabet="abcxyz_", min_size=1, max_size=5)


@settings(max_examples=150, deadline=None)
@given(
    lists=st.dictionaries(st.sampled_from(BACKENDS), st.sets(NAMES, max_size=10), max_size=3),
    backends=st.sets(st.sampled_from(BACKENDS)),
    include=st.sampled_from(["*", "*a*", "*__x*", "beta__*"]),
    exclude=st.sampled_from([(), ("*z",), ("alpha__*",)]),
    page_size=st.integers(min_value=0, max_value=4),
)
def test_a_profiles_paginated_walk_returns_exactly_its_items(
    lists: dict[str, set[str]],
    backends: set[str],
    include: str,
    exclude: tuple[str, ...],
    page_size: int,
) -> None:
    """Issue 15: walking a profile's tools/list yields exactly the profile's items, once each."""
    snap = build_snapshot(
        [
            BackendListing(backend=b, prefix=b, tools=tuple({"name": n} for n in sorted(names)))
            for b, names in lists.items()
        ],
        NamingRules(),
    )
    profile = Profile(
        "p", backends=Globs(include=tuple(sorted(backends))), tools=Globs((include,), exclude)
    )
    expected = [
        f"{b}__{n}"
        for b, names in lists.items()
        for n in names
        if b in backends and profile.tools.allows(f"{b}__{n}")
    ]
    codec = CursorCodec(b"k")
    view = ProfileViews([profile]).view("p", snap).view(Kind.TOOLS)
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(len(expected) + 2):
        position = None if cursor is None else codec.decode(cursor, "tools", "p")
        plan = plan_page("tools", view, position, page_size)
        following = plan.next
        if following is not None:
            following = msgspec.structs.replace(following, profile="p")
        cursor = None if following is None else codec.encode(following)
        body = _decoder.decode(render_page("tools", [e.encoded for e in plan.entries], cursor))
        seen += [tool["name"] for tool in body["tools"]]
        if cursor is None:
            break
    assert cursor is None
    assert seen == sorted(expected)


@pytest.mark.parametrize("tools", [1_000, 10_000])
def test_memory_of_a_view_is_a_few_pointers_per_own_item(tools: int) -> None:
    """Issue 15: memory per profile is proportional to its own items, not the catalog's."""
    listing = BackendListing(
        backend="big",
        prefix="big",
        tools=tuple(
            {"name": f"tool_{i:05}", "description": "d" * 200, "inputSchema": {"type": "object"}}
            for i in range(tools)
        ),
    )
    snap = build_snapshot([listing], NamingRules())
    tenth = Profile("p", tools=Globs(include=("big__tool_????0",)))
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        view = restrict(snap, tenth)
        grown = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(before, "filename"))
    finally:
        tracemalloc.stop()
    own = len(view.view(Kind.TOOLS))
    assert own == tools // 10
    # A tuple of entries, a tuple of keys and a dict: well under 200 bytes an item,
    # while one item's encoded form alone is over 250 bytes.
    assert grown < 200 * own + 4096
    assert len(snap.view(Kind.TOOLS).slice(0, 1)[0].encoded) > 250


def test_a_search_profile_lists_the_gateway_tools_and_pinned_but_serves_all_its_tools() -> None:
    """Issue 15: search mode lists two gateway tools plus pinned; direct calls still resolve."""
    searching = Profile(
        "find", backends=Globs(include=("files",)), mode=SEARCH, pinned=("files__read_file", "x")
    )
    view = ProfileViews([searching], separator="--").view("find", _snapshot())
    assert view.listed(Kind.TOOLS).keys() == (
        "files__read_file",
        "gateway--call_tool",
        "gateway--search_tools",
    )
    assert view.view(Kind.TOOLS).keys() == ("files__read_file", "files__write_file")
    assert view.resolve(Kind.TOOLS, "files__write_file") is not None
    assert view.resolve(Kind.TOOLS, "gateway--call_tool") is None  # the router answers it
    assert view.listed(Kind.PROMPTS) is view.view(Kind.PROMPTS)
    assert _snapshot().listed(Kind.TOOLS).keys() == (
        "files__read_file",
        "files__write_file",
        "web__fetch",
    )


def test_a_new_tool_reaches_the_search_profile_and_not_a_profile_without_its_backend() -> None:
    """Issue 15: list_changed per profile also when only the listed tools change."""
    catalog = Catalog(NamingRules())
    searching = Profile("find", mode=SEARCH, pinned=("b__new",))
    views = ProfileViews([searching, Profile("other", backends=Globs(include=("a",)))])
    catalog.publish(BackendListing(backend="b", prefix="b", tools=({"name": "old"},)))
    old = catalog.snapshot
    catalog.publish(
        BackendListing(backend="b", prefix="b", tools=({"name": "old"}, {"name": "new"}))
    )
    changed = views.refresh(old, catalog.snapshot)
    assert changed == {"default": {Kind.TOOLS}, "find": {Kind.TOOLS}}


@settings(max_examples=300, deadline=None)
@given(
    include=st.lists(st.text(alphabet="ab*?[]_", min_size=1, max_size=4), min_size=1, max_size=4),
    exclude=st.lists(st.text(alphabet="ab*?[]_", min_size=1, max_size=4), max_size=3),
    name=st.text(alphabet="ab_[]*?", max_size=6),
)
def test_globs_decide_exactly_as_fnmatchcase(
    include: list[str], exclude: list[str], name: str
) -> None:
    """Gateway choice: one compiled matcher per glob list, same answers as fnmatchcase."""
    expected = any(fnmatchcase(name, p) for p in include) and not any(
        fnmatchcase(name, p) for p in exclude
    )
    assert Globs(tuple(include), tuple(exclude)).allows(name) is expected


def test_an_override_renames_and_redescribes_an_item_that_still_routes_to_its_original() -> None:
    """Issue 15: overrides stay reversible through the catalog; the old name is unknown."""
    snap = _snapshot()
    profile = Profile(
        "o",
        overrides={
            Kind.TOOLS: {
                "files__read_file": Override("read", "Read one file."),
                "web__fetch": Override(description="Fetch a page."),
            },
            Kind.PROMPTS: {"files__summarize": Override("tldr")},
        },
    )
    view = restrict(snap, profile)
    assert view.view(Kind.TOOLS).keys() == ("files__write_file", "read", "web__fetch")
    read = view.resolve(Kind.TOOLS, "read")
    assert read is not None and (read.backend, read.original) == ("files", "read_file")
    assert _decoder.decode(read.encoded) == {"name": "read", "description": "Read one file."}
    fetch = view.resolve(Kind.TOOLS, "web__fetch")
    assert fetch is not None and _decoder.decode(fetch.encoded)["description"] == "Fetch a page."
    assert view.resolve(Kind.TOOLS, "files__read_file") is None
    assert view.renamed_tools == {"files__read_file": "read"}
    write = view.resolve(Kind.TOOLS, "files__write_file")
    assert write is snap.resolve(Kind.TOOLS, "files__write_file")  # not overridden: shared
    assert view.view(Kind.PROMPTS).keys() == ("tldr",)
    assert _decoder.decode(snap.resolve(Kind.TOOLS, "files__read_file").encoded) == {  # type: ignore[union-attr]
        "name": "files__read_file"
    }


def test_an_override_onto_a_name_the_profile_shows_is_not_applied_and_is_reported() -> None:
    """Issue 15: every public name leads to one item; a collision keeps the original."""
    profile = Profile("o", overrides={Kind.TOOLS: {"files__read_file": Override("web__fetch")}})
    view = restrict(_snapshot(), profile)
    assert view.view(Kind.TOOLS).keys() == ("files__read_file", "files__write_file", "web__fetch")
    assert view.problems[-1] == (
        "profile override of tools 'files__read_file' not applied: "
        "'web__fetch' is already a tool of the profile"
    )
