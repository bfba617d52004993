"""Specification tests for ``gateway.backends.listing``: the guarded paged walk (sans-IO).

Every test drives the pure step function by hand, page by page, with no
event loop: the answers are the bytes a backend would send (robustness D15).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.backends.listing import (
    Failed,
    Guard,
    Listed,
    PageRequest,
    Step,
    begin,
    filtered,
    guard_report,
    merged,
    step,
    usable_tools,
    wanted,
)
from gateway.catalog.snapshot import BackendListing, Kind
from gateway.config import parse
from gateway.errors import RemoteProtocolError


def page(names: list[str], cursor: str | None = None, key: str = "tools") -> msgspec.Raw:
    """One page of a list result, as the backend's bytes."""
    body: dict[str, Any] = {key: [{"name": name} for name in names]}
    if cursor is not None:
        body["nextCursor"] = cursor
    return msgspec.Raw(json.dumps(body).encode())


def names(listed: Listed) -> list[str]:
    """The item names a finished walk kept."""
    return [str(item["name"]) for item in listed.items]


def config(**extra: Any) -> Any:
    """The parsed config of one backend."""
    entry = {"name": "alpha", "transport": "stdio", "command": "x"} | extra
    return parse(json.dumps({"backends": [entry]}), env={}).backends[0]


def test_the_first_request_has_no_cursor_and_the_kinds_list_method() -> None:
    """Spec (utilities/pagination): the first page is asked for without params."""
    walk = begin(Kind.TEMPLATES, max_pages=5, max_items=10)
    assert isinstance(walk, PageRequest)
    assert walk.method == "resources/templates/list"
    assert walk.params is None


def test_each_next_request_carries_the_cursor_of_the_page_before() -> None:
    """Spec: the client sends the ``nextCursor`` it got as ``cursor``."""
    walk: Step = step(begin(Kind.TOOLS, max_pages=5, max_items=10), page(["a"], cursor="c1"))
    assert isinstance(walk, PageRequest)
    assert walk.method == "tools/list"
    assert walk.params is not None
    assert json.loads(bytes(walk.params)) == {"cursor": "c1"}


def test_a_page_without_next_cursor_finishes_the_walk_with_every_item_in_order() -> None:
    """Spec: the last page has no ``nextCursor``."""
    walk: Step = step(begin(Kind.TOOLS, max_pages=5, max_items=10), page(["a", "b"], cursor="c1"))
    assert isinstance(walk, PageRequest)
    done = step(walk, page(["c"]))
    assert isinstance(done, Listed)
    assert names(done) == ["a", "b", "c"]
    assert (done.pages, done.received, done.guard) == (2, 3, None)


def test_a_repeated_cursor_ends_the_walk_and_keeps_what_came() -> None:
    """Robustness D15: a backend that hands out the same cursor again is not followed."""
    walk: Step = step(begin(Kind.TOOLS, max_pages=100, max_items=1000), page(["a"], cursor="same"))
    assert isinstance(walk, PageRequest)
    done = step(walk, page(["b"], cursor="same"))
    assert isinstance(done, Listed)
    assert done.guard is Guard.CURSOR_REPEATED
    assert names(done) == ["a", "b"]
    assert done.pages == 2


def test_a_cursor_seen_several_pages_ago_also_counts_as_repeated() -> None:
    """Robustness D15: a cycle longer than one page is caught too."""
    walk: Step = begin(Kind.TOOLS, max_pages=100, max_items=1000)
    for name, cursor in [("a", "x"), ("b", "y"), ("c", "z"), ("d", "x")]:
        assert isinstance(walk, PageRequest)
        walk = step(walk, page([name], cursor=cursor))
    assert isinstance(walk, Listed)
    assert walk.guard is Guard.CURSOR_REPEATED
    assert names(walk) == ["a", "b", "c", "d"]


def test_max_pages_stops_a_backend_whose_cursors_never_end() -> None:
    """Robustness D15: at most ``max_list_pages`` requests, then the walk ends."""
    walk: Step = begin(Kind.TOOLS, max_pages=3, max_items=1000)
    requests = 0
    while isinstance(walk, PageRequest):
        requests += 1
        walk = step(walk, page([f"t{requests}"], cursor=f"c{requests}"))
    assert requests == 3
    assert isinstance(walk, Listed)
    assert walk.guard is Guard.MAX_PAGES
    assert names(walk) == ["t1", "t2", "t3"]


def test_the_last_allowed_page_without_a_cursor_is_a_complete_listing() -> None:
    """Gateway choice: reaching max_pages with the real last page trips no guard."""
    walk: Step = step(begin(Kind.TOOLS, max_pages=2, max_items=1000), page(["a"], cursor="c1"))
    assert isinstance(walk, PageRequest)
    done = step(walk, page(["b"]))
    assert isinstance(done, Listed)
    assert done.guard is None


def test_max_items_keeps_the_first_items_and_drops_the_rest() -> None:
    """Robustness D15: at most ``max_list_items`` are kept; ``received`` says how many came."""
    walk: Step = step(begin(Kind.TOOLS, max_pages=100, max_items=3), page(["a", "b"], cursor="c1"))
    assert isinstance(walk, PageRequest)
    done = step(walk, page(["c", "d", "e"], cursor="c2"))
    assert isinstance(done, Listed)
    assert done.guard is Guard.MAX_ITEMS
    assert names(done) == ["a", "b", "c"]
    assert done.received == 5


def test_exactly_max_items_counts_as_the_guard_tripping() -> None:
    """Gateway choice (unchanged from the loop it replaced): reaching the limit stops the walk."""
    walk = begin(Kind.TOOLS, max_pages=100, max_items=2)
    assert isinstance(walk, PageRequest)
    done = step(walk, page(["a", "b"]))
    assert isinstance(done, Listed)
    assert done.guard is Guard.MAX_ITEMS


def test_an_error_answer_fails_the_walk_with_that_error() -> None:
    """Gateway choice: a list that errors counts as empty; the error is kept for the log."""
    walk: Step = step(
        begin(Kind.PROMPTS, max_pages=5, max_items=10), page(["a"], cursor="c1", key="prompts")
    )
    assert isinstance(walk, PageRequest)
    error = RemoteProtocolError("boom", -32603)
    failed = step(walk, error)
    assert isinstance(failed, Failed)
    assert failed.error is error
    assert failed.kind is Kind.PROMPTS


def test_items_that_are_not_objects_are_dropped_and_the_page_key_follows_the_kind() -> None:
    """Spec: resources come under ``resources``; a non-object item is not an item."""
    walk = begin(Kind.RESOURCES, max_pages=5, max_items=10)
    assert isinstance(walk, PageRequest)
    raw = msgspec.Raw(b'{"resources":[{"uri":"a://1"},7,"x"],"tools":[{"name":"t"}]}')
    done = step(walk, raw)
    assert isinstance(done, Listed)
    assert done.items == ({"uri": "a://1"},)


def test_a_walk_is_a_value_that_a_step_never_changes() -> None:
    """Sans-IO: stepping the same walk twice gives the same answer (no hidden state)."""
    walk = begin(Kind.TOOLS, max_pages=5, max_items=10)
    assert isinstance(walk, PageRequest)
    first = step(walk, page(["a"], cursor="c1"))
    second = step(walk, page(["a"], cursor="c1"))
    assert first == second
    assert walk.items == () and walk.pages == 0


@settings(max_examples=200, deadline=None)
@given(
    pages=st.lists(
        st.tuples(st.integers(0, 4), st.one_of(st.none(), st.sampled_from("abcdef"))),
        min_size=1,
        max_size=30,
    ),
    max_pages=st.integers(1, 10),
    max_items=st.integers(1, 20),
)
def test_any_backend_ends_within_the_guards(
    pages: list[tuple[int, str | None]], max_pages: int, max_items: int
) -> None:
    """Robustness D15: whatever a backend answers, the walk sends at most ``max_pages``
    requests and keeps at most ``max_items`` items, in the order they came."""
    walk: Step = begin(Kind.TOOLS, max_pages=max_pages, max_items=max_items)
    sent: list[str] = []
    requests = 0
    script = iter(pages)
    while isinstance(walk, PageRequest):
        count, cursor = next(script, (0, None))
        batch = [f"t{len(sent) + i}" for i in range(count)]
        sent.extend(batch)
        requests += 1
        walk = step(walk, page(batch, cursor=cursor))
    assert isinstance(walk, Listed)
    assert requests <= max_pages
    assert len(walk.items) <= max_items
    assert names(walk) == sent[: len(walk.items)]
    assert walk.received == len(sent)


def test_a_kind_the_backend_does_not_offer_is_not_listed() -> None:
    """Spec (lifecycle): lists are only asked for under a declared capability."""
    cfg = config()
    assert wanted(Kind.TOOLS, {"tools": {}}, cfg)
    assert not wanted(Kind.PROMPTS, {"tools": {}}, cfg)
    assert wanted(Kind.TEMPLATES, {"resources": {}}, cfg)


def test_passthrough_resources_are_not_listed_but_their_templates_are() -> None:
    """Gateway choice: passthrough resources are fetched during each host's own walk."""
    cfg = config(resources={"list_mode": "passthrough"})
    assert not wanted(Kind.RESOURCES, {"resources": {}}, cfg)
    assert wanted(Kind.TEMPLATES, {"resources": {}}, cfg)


def test_filtered_applies_the_kinds_include_and_exclude_rules() -> None:
    """Gateway choice: include/exclude rules match the item's identity field."""
    cfg = config(tools={"exclude": ["secret*"]})
    items = ({"name": "open"}, {"name": "secret_key"}, {"nameless": True})
    assert filtered(Kind.TOOLS, items, cfg) == ({"name": "open"}, {"nameless": True})


def test_merged_replaces_the_fresh_kinds_and_keeps_the_others() -> None:
    """Gateway choice: a refresh of one list leaves the backend's other lists as they were."""
    cfg = config(prefix="a")
    old = BackendListing(
        backend="alpha", prefix="a", tools=({"name": "t"},), prompts=({"name": "p"},)
    )
    new = merged(cfg, {Kind.TOOLS: ({"name": "u"},)}, old)
    assert new.tools == ({"name": "u"},)
    assert new.prompts == ({"name": "p"},)
    assert (new.backend, new.prefix) == ("alpha", "a")
    assert merged(cfg, {Kind.TOOLS: ()}, None).prompts == ()


@pytest.mark.parametrize(
    ("method", "kinds"),
    [
        ("notifications/tools/list_changed", (Kind.TOOLS,)),
        ("notifications/prompts/list_changed", (Kind.PROMPTS,)),
        (
            "notifications/resources/list_changed",
            (Kind.RESOURCES, Kind.TEMPLATES, Kind.SKILLS),
        ),
        ("notifications/resources/updated", ()),
        ("notifications/roots/list_changed", ()),
    ],
)
def test_a_list_changed_notification_names_the_kinds_it_covers(
    method: str, kinds: tuple[Kind, ...]
) -> None:
    """Spec: one resources/list_changed covers resources, templates and (SEP-2640) skills."""
    assert Kind.changed_by(method) == kinds


def test_every_kind_names_its_list_method_capability_and_notification() -> None:
    """The kind table in one place (issue 13): each row is complete and consistent."""
    for kind in Kind:
        assert kind.list_method.endswith("/list")
        assert kind in Kind.changed_by(kind.list_changed)
        # Skills (an extension) are resources: resources/list_changed (SEP-2640).
        section = "resources" if kind is Kind.SKILLS else kind.capability
        assert kind.list_changed == f"notifications/{section}/list_changed"
        assert kind.offered_by({"extensions": {kind.capability: {}}, kind.capability: {}})


def test_skills_are_offered_only_under_capabilities_extensions() -> None:
    """Spec (SEP-2640): the extension is an entry of ``capabilities.extensions``."""
    assert Kind.SKILLS.offered_by({"extensions": {"io.modelcontextprotocol/skills": {}}})
    assert not Kind.SKILLS.offered_by({"io.modelcontextprotocol/skills": {}})
    assert not Kind.SKILLS.offered_by({"extensions": {"io.modelcontextprotocol/skills": True}})
    assert not Kind.SKILLS.offered_by({"resources": {}})


def test_limits_below_one_are_refused_at_the_start() -> None:
    """Gateway choice: config refuses them; the walk does not guess what zero would mean."""
    with pytest.raises(ValueError, match="positive"):
        begin(Kind.TOOLS, max_pages=0, max_items=10)
    with pytest.raises(ValueError, match="positive"):
        begin(Kind.TOOLS, max_pages=1, max_items=0)


@pytest.mark.parametrize(
    ("guard", "fields"),
    [
        (Guard.MAX_ITEMS, {"method": "tools/list", "items": 7, "limit": 100_000}),
        (Guard.CURSOR_REPEATED, {"method": "tools/list", "items": 7}),
        (Guard.MAX_PAGES, {"method": "tools/list", "pages": 100}),
    ],
)
def test_a_tripped_guard_is_reported_under_its_own_event(
    guard: Guard, fields: dict[str, Any]
) -> None:
    """Robustness D11/D15: operators see which guard tripped, for which list, with numbers."""
    done = Listed(kind=Kind.TOOLS, items=(), pages=3, received=7, guard=guard)
    assert guard_report(done, config()) == (f"backend.list.{guard.value}", fields)


def _hinted(
    names_: list[str], ttl: object, scope: object, cursor: str | None = None
) -> msgspec.Raw:
    body = json.loads(bytes(page(names_, cursor)))
    body.update({"ttlMs": ttl, "cacheScope": scope})
    return msgspec.Raw(json.dumps(body).encode())


def test_a_walk_merges_the_pages_cache_hints() -> None:
    """S/server/utilities/caching.mdx: the shortest ttl, private if any page is."""
    walk = begin(Kind.TOOLS, max_pages=10, max_items=100)
    walk = step(walk, _hinted(["a"], 60000, "public", cursor="c1"))
    assert isinstance(walk, PageRequest)
    walk = step(walk, _hinted(["b"], 5000, "public", cursor="c2"))
    assert isinstance(walk, PageRequest)
    done = step(walk, _hinted(["c"], 9000, "public"))
    assert isinstance(done, Listed)
    assert (done.hint.ttl_ms, done.hint.scope) == (5000, "public")
    private = step(begin(Kind.TOOLS, max_pages=1, max_items=100), _hinted(["a"], 10, "private"))
    assert isinstance(private, Listed) and private.hint.scope == "private"


def test_pages_without_hints_are_uncacheable_even_when_a_guard_ends_the_walk() -> None:
    """caching.mdx: an absent hint reads as {0, private}; guards keep the hint."""
    walk = begin(Kind.TOOLS, max_pages=1, max_items=100)
    done = step(walk, page(["a"], cursor="more"))
    assert isinstance(done, Listed) and done.guard is not None
    assert (done.hint.ttl_ms, done.hint.scope) == (0, "private")


def _tool(name: str, header: object) -> dict[str, Any]:
    prop = {"type": "string", "x-mcp-header": header}
    return {"name": name, "inputSchema": {"type": "object", "properties": {"p": prop}}}


def test_a_tool_with_an_invalid_x_mcp_header_is_dropped_and_only_that_tool() -> None:
    """SEP-2243: an empty or non-string annotation drops its tool, with the reason."""
    good = _tool("good", "Region")
    plain = {"name": "plain", "inputSchema": {"type": "object"}}
    tools = (good, _tool("empty", ""), plain, _tool("number", 7))
    kept, dropped = usable_tools(tools)
    assert kept == (good, plain)
    assert [d.name for d in dropped] == ["empty", "number"]
    assert all(d.reason for d in dropped)
    same, none = usable_tools((good, plain))
    assert same == (good, plain) and none == []
