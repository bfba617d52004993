"""router.search_mode without sockets: unwrapping, the index following the catalog (issue 15)."""

from __future__ import annotations

from typing import Any, NoReturn

import msgspec
import pytest

from gateway.catalog.catalog import Catalog
from gateway.catalog.naming import NamingRules
from gateway.catalog.profiles import SEARCH, Override, Profile, ProfileViews
from gateway.catalog.snapshot import BackendListing, Kind
from gateway.protocol import mcp
from gateway.router.context import Call
from gateway.router.search_mode import SearchMode
from tests.router.fakes import FakeClient


def _decoded(raw: msgspec.Raw) -> dict[str, Any]:
    body = mcp.decode_object(raw)
    assert body is not None
    return body


class Recorder:
    """The ordinary tools/call handler, recording what reaches it."""

    def __init__(self) -> None:
        self.params: list[dict[str, Any]] = []

    async def __call__(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        self.params.append(params)
        return mcp.encode({"content": [], "isError": False})


def _setup() -> tuple[Catalog, ProfileViews, SearchMode, Recorder]:
    catalog = Catalog(NamingRules())
    catalog.publish(
        BackendListing(
            backend="files",
            prefix="files",
            tools=({"name": "read_file", "description": "Read a file from disk."},),
        )
    )
    views = ProfileViews([Profile("find", mode=SEARCH)])
    recorder = Recorder()
    return catalog, views, SearchMode(lambda: catalog.snapshot, recorder, "__"), recorder


async def test_the_index_follows_the_catalog_one_backend_at_a_time() -> None:
    """Issue 15: the index is updated incrementally when a backend's list changes."""
    catalog, views, mode, _ = _setup()
    client = FakeClient("c", profile="find")

    async def search(query: str) -> list[str]:
        call = Call(client, views.view("find", catalog.snapshot))
        result = _decoded(
            await mode.call_tool(
                call, {"name": "gateway__search_tools", "arguments": {"query": query}}
            )
        )
        return [tool["name"] for tool in result["structuredContent"]["tools"]]

    assert await search("read a file") == ["files__read_file"]
    assert await search("weather forecast") == []
    catalog.publish(
        BackendListing(
            backend="weather",
            prefix="weather",
            tools=({"name": "get_forecast", "description": "The weather forecast for a city."},),
        )
    )
    assert await search("weather forecast") == ["weather__get_forecast"]
    assert mode.index().backends() == {"files", "weather"}
    catalog.withdraw("weather")
    assert await search("weather forecast") == []
    assert mode.index().backends() == {"files"}
    mode.close()


async def test_call_tool_hands_the_ordinary_handler_the_unwrapped_call_and_the_same_meta() -> None:
    """Issue 15: call_tool routes exactly like tools/call; _meta passes through by identity."""
    catalog, views, mode, recorder = _setup()
    call = Call(FakeClient("c", profile="find"), views.view("find", catalog.snapshot))
    meta = {"progressToken": "p-1"}
    arguments = {"path": "/x"}
    await mode.call_tool(
        call,
        {
            "name": "gateway__call_tool",
            "arguments": {"name": "files__read_file", "arguments": arguments},
            "_meta": meta,
        },
    )
    (sent,) = recorder.params
    assert sent == {"name": "files__read_file", "arguments": arguments, "_meta": meta}
    assert sent["_meta"] is meta and sent["arguments"] is arguments


async def test_outside_search_mode_every_call_goes_to_the_ordinary_handler() -> None:
    """Issue 15: the gateway tools exist only in search mode."""
    catalog, _, mode, recorder = _setup()
    call = Call(FakeClient("c"), catalog.snapshot)
    await mode.call_tool(call, {"name": "gateway__search_tools", "arguments": {"query": "x"}})
    assert recorder.params == [{"name": "gateway__search_tools", "arguments": {"query": "x"}}]


async def test_follow_brings_the_index_up_to_a_new_snapshot_before_any_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 15 follow-up: the catalog-changed hook indexes, so no search pays a build."""
    catalog = Catalog(NamingRules())
    profile = Profile(
        "find",
        mode=SEARCH,
        overrides={Kind.TOOLS: {"files__read_file": Override("cat", "Print a document.")}},
    )
    views = ProfileViews([profile])
    mode = SearchMode(lambda: catalog.snapshot, Recorder(), "__", views)
    catalog.publish(
        BackendListing(
            backend="files",
            prefix="files",
            tools=({"name": "read_file", "description": "Read a file from disk."},),
        )
    )
    mode.follow(catalog.snapshot)
    index = mode.index()
    assert mode.indexed is catalog.snapshot
    assert index.backends() == {"files"}
    assert set(index.overrides("find")) == {"cat"}
    catalog.publish(
        BackendListing(
            backend="weather",
            prefix="weather",
            tools=({"name": "get_forecast", "description": "The weather forecast for a city."},),
        )
    )
    mode.follow(catalog.snapshot)
    assert mode.indexed is catalog.snapshot
    assert index.backends() == {"files", "weather"}

    def no_sync(*args: object) -> NoReturn:
        raise AssertionError("a search rebuilt the index")

    # A search now finds everything without indexing anything itself.
    monkeypatch.setattr("gateway.router.search_mode.sync_index", no_sync)
    monkeypatch.setattr("gateway.router.search_mode.sync_overrides", no_sync)
    call = Call(FakeClient("c", profile="find"), views.view("find", catalog.snapshot))

    async def search(query: str) -> list[str]:
        result = _decoded(
            await mode.call_tool(
                call, {"name": "gateway__search_tools", "arguments": {"query": query}}
            )
        )
        return [tool["name"] for tool in result["structuredContent"]["tools"]]

    assert await search("weather forecast") == ["weather__get_forecast"]
    assert await search("print a document") == ["cat"]
    assert await search("disk") == []  # only the replaced description said it
    mode.close()


def test_follow_indexes_nothing_without_a_search_mode_profile() -> None:
    """No profile in search mode: the hook costs nothing and builds no index."""
    catalog, _, _, recorder = _setup()
    mode = SearchMode(lambda: catalog.snapshot, recorder, "__", ProfileViews([Profile("p")]))
    mode.follow(catalog.snapshot)
    assert mode.indexed is not catalog.snapshot
