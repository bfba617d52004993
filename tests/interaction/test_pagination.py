"""Issue 3 with real peers: the official client walks every merged list.

Backends: alpha and beta (official SDK, unpaged), paging (official SDK
low-level server that pages its own lists, 3 items a page), and the
reference server. The gateway pages with a small page size of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
from mcp.shared.exceptions import McpError
from mcp.types import PaginatedRequestParams

from gateway.catalog.pages import UNAVAILABLE_META_KEY
from tests.harness import (
    Running,
    everything_backend,
    gateway_config,
    open_client,
    sdk_backend,
    start_gateway,
)

PAGE_SIZE = 4
Lister = Callable[..., Awaitable[Any]]


async def _walk(list_page: Lister, key: str) -> tuple[list[str], int, list[Any]]:
    """Follow nextCursor to the end; returns (ids, pages, results)."""
    ids: list[str] = []
    results = []
    cursor = None
    for _ in range(1000):
        result = await list_page(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        results.append(result)
        for item in getattr(result, key):
            if key == "resources":
                ids.append(str(item.uri))
            elif key == "resourceTemplates":
                ids.append(item.uriTemplate)
            else:
                ids.append(item.name)
        cursor = result.nextCursor
        if cursor is None:
            return ids, len(results), results
    raise AssertionError("walk did not end")


@pytest.fixture(name="running")
async def _running(nursery: trio.Nursery) -> Running:
    config = gateway_config(
        [sdk_backend("alpha"), sdk_backend("beta"), sdk_backend("paging"), everything_backend()],
        pagination={"page_size": PAGE_SIZE},
    )
    return await start_gateway(nursery, config)


@pytest.mark.node
async def test_a_walk_of_every_list_returns_each_item_once_in_order(running: Running) -> None:
    """Spec (issue 3): exact walks over several backends, one paging its own lists."""
    async with open_client(running.url) as client:
        for lister, key, expected_paging in [
            (client.list_tools, "tools", {f"paging__tool_0{i}" for i in range(10)}),
            (client.list_prompts, "prompts", {f"paging__prompt_{i}" for i in range(5)}),
            (client.list_resources, "resources", {f"paging+paging://r/{i}" for i in range(7)}),
            (
                client.list_resource_templates,
                "resourceTemplates",
                {"paging+paging://t/{id}", "paging+paging://u/{id}"},
            ),
        ]:
            ids, pages, results = await _walk(lister, key)
            assert len(ids) == len(set(ids)), f"{key}: an item came twice"
            assert ids == sorted(ids), f"{key}: out of order"
            assert expected_paging <= set(ids), f"{key}: the paging backend's pages were dropped"
            assert all(len(getattr(r, key)) <= PAGE_SIZE for r in results)
            assert pages == -(-len(ids) // PAGE_SIZE)


@pytest.mark.node
async def test_bad_cursors_are_invalid_params(running: Running) -> None:
    """Spec (issue 3): tampered, truncated, garbage and other-kind cursors → -32602."""
    async with open_client(running.url) as client:
        first = await client.list_tools(params=None)
        assert first.nextCursor is not None
        good = first.nextCursor
        body, _, tag = good.partition(".")
        prompts_cursor = (await client.list_prompts()).nextCursor
        assert prompts_cursor is not None
        flipped = ("A" if body[0] != "A" else "B") + body[1:]
        for bad in [
            "garbage",
            "",
            good[:-3],
            f"{flipped}.{tag}",
            f"{body}.{tag[::-1]}",
            prompts_cursor,
            "x" * 10_000,
        ]:
            with pytest.raises(McpError) as caught:
                await client.list_tools(params=PaginatedRequestParams(cursor=bad))
            assert caught.value.error.code == -32602, bad
            assert "cursor" in caught.value.error.message
        # The session survives all of that.
        assert (await client.list_tools(params=PaginatedRequestParams(cursor=good))).tools


async def test_two_gateways_with_one_secret_continue_each_others_walks(
    nursery: trio.Nursery,
) -> None:
    """Spec (issue 3): any replica with the same cursor_secret accepts the cursor."""
    shared = {"page_size": 2, "cursor_secret": "replica-secret"}
    first = await start_gateway(nursery, gateway_config([sdk_backend("alpha")], pagination=shared))
    second = await start_gateway(nursery, gateway_config([sdk_backend("alpha")], pagination=shared))
    async with open_client(first.url) as a, open_client(second.url) as b:
        page = await a.list_tools()
        assert page.nextCursor is not None
        rest = await b.list_tools(params=PaginatedRequestParams(cursor=page.nextCursor))
        names = [t.name for t in page.tools + rest.tools]
        assert names == sorted(set(names))
        assert rest.tools[0].name > page.tools[-1].name


async def test_passthrough_resources_are_fetched_page_by_page_in_the_walk(
    nursery: trio.Nursery,
) -> None:
    """Spec (issue 3): list_mode passthrough walks the backend's own pages, uncached."""
    config = gateway_config(
        [
            sdk_backend("alpha"),
            sdk_backend("paging", resources={"list_mode": "passthrough"}),
            sdk_backend("beta"),
        ],
        pagination={"page_size": 1},
    )
    running = await start_gateway(nursery, config)
    listing = running.gateway.pool.backends["paging"].listing
    assert listing is not None and listing.resources == ()
    async with open_client(running.url) as client:
        ids, _, _ = await _walk(client.list_resources, "resources")
    cached = ["alpha+alpha://readme", "beta+beta://config"]
    assert ids == cached + [f"paging+paging://r/{i}" for i in range(7)]


async def test_lists_name_the_backends_that_are_down_in_meta(nursery: trio.Nursery) -> None:
    """Spec (issue 3): lists stay complete for the others and _meta names the missing."""
    config = gateway_config(
        [
            sdk_backend("alpha"),
            sdk_backend("broken", restart={"initial_delay": 30, "max_delay": 60}),
        ]
    )
    running = await start_gateway(nursery, config, wait_up=["alpha"])
    async with open_client(running.url) as client:
        result = await client.list_tools()
    assert {t.name for t in result.tools} >= {"alpha__echo", "alpha__add"}
    assert result.meta is not None
    assert result.meta[UNAVAILABLE_META_KEY] == ["broken"]
