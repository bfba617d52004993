"""Smoke tests for the test peers: each one starts and answers the official SDK client.

These talk to the peers directly (no gateway) so that a failure here points at a
peer, not at the gateway. The everything server is a hard requirement: if its
node_modules are missing this fails, telling you the command to install them.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.types import (
    EmbeddedResource,
    PaginatedRequestParams,
    PromptReference,
    ResourceLink,
    ResourceTemplateReference,
    TextContent,
    TextResourceContents,
)
from pydantic import AnyUrl

try:
    from tests.servers.paths import (
        EVERYTHING_INSTALL_HINT,
        everything_command,
        python_server_command,
    )
except ModuleNotFoundError:  # no tests/__init__.py: pytest put tests/ itself on sys.path
    from servers.paths import (  # type: ignore[no-redef]
        EVERYTHING_INSTALL_HINT,
        everything_command,
        python_server_command,
    )

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp.types import CallToolResult


@asynccontextmanager
async def connect(
    argv: list[str], env: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=argv[0],
        args=argv[1:],
        env={**get_default_environment(), **env} if env else None,
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def text_of(result: CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def test_alpha_tools() -> None:
    async with connect(python_server_command("alpha")) as session:
        info = session.get_server_capabilities()
        assert info is not None
        assert info.completions is not None
        tools = await session.list_tools()
        assert sorted(t.name for t in tools.tools) == [
            "add",
            "echo",
            "embed",
            "fail",
            "pid",
            "progress",
            "sleep",
        ]
        assert tools.nextCursor is None

        echoed = await session.call_tool("echo", {"text": "hi"})
        assert not echoed.isError
        assert text_of(echoed) == "alpha: hi"
        assert echoed.structuredContent == {"result": "alpha: hi"}

        added = await session.call_tool("add", {"a": 2, "b": 3})
        assert text_of(added) == "5"

        failed = await session.call_tool("fail", {})
        assert failed.isError
        assert "alpha failed on purpose" in text_of(failed)

        embedded = await session.call_tool("embed", {})
        assert not embedded.isError
        resource, link = embedded.content
        assert isinstance(resource, EmbeddedResource)
        assert isinstance(resource.resource, TextResourceContents)
        assert str(resource.resource.uri) == "alpha://readme"
        assert isinstance(link, ResourceLink)
        assert str(link.uri) == "alpha://items/7"

        slept = await session.call_tool("sleep", {"seconds": 0.01})
        assert text_of(slept) == "slept"

        seen: list[tuple[float, float | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total))

        done = await session.call_tool("progress", {"steps": 3}, progress_callback=on_progress)
        assert text_of(done) == "done"
        assert seen == [(1, 3), (2, 3), (3, 3)]


async def test_alpha_resources_prompts_completions() -> None:
    async with connect(python_server_command("alpha")) as session:
        init_resources = await session.list_resources()
        assert [str(r.uri) for r in init_resources.resources] == ["alpha://readme"]
        templates = await session.list_resource_templates()
        assert [t.uriTemplate for t in templates.resourceTemplates] == ["alpha://items/{item_id}"]

        readme = await session.read_resource(AnyUrl("alpha://readme"))
        assert isinstance(readme.contents[0], TextResourceContents)
        assert readme.contents[0].text == "Alpha readme"
        item = await session.read_resource(AnyUrl("alpha://items/42"))
        assert isinstance(item.contents[0], TextResourceContents)
        assert item.contents[0].text == "item 42"

        prompts = await session.list_prompts()
        assert [p.name for p in prompts.prompts] == ["greet"]
        greeting = await session.get_prompt("greet", {"name": "ada"})
        assert greeting.messages

        template_ref = ResourceTemplateReference(type="ref/resource", uri="alpha://items/{item_id}")
        items = await session.complete(template_ref, {"name": "item_id", "value": ""})
        assert items.completion.values == ["1", "2", "7"]
        items = await session.complete(template_ref, {"name": "item_id", "value": "7"})
        assert items.completion.values == ["7"]
        names = await session.complete(
            PromptReference(type="ref/prompt", name="greet"), {"name": "name", "value": "a"}
        )
        assert names.completion.values == ["ada", "alan"]


async def test_beta() -> None:
    async with connect(python_server_command("beta")) as session:
        tools = await session.list_tools()
        assert sorted(t.name for t in tools.tools) == ["echo", "multiply"]
        echoed = await session.call_tool("echo", {"text": "hi"})
        assert text_of(echoed) == "beta: hi"
        product = await session.call_tool("multiply", {"a": 1.5, "b": 4})
        assert product.structuredContent == {"result": 6.0}

        resources = await session.list_resources()
        assert [(str(r.uri), r.mimeType) for r in resources.resources] == [
            ("beta://config", "application/json")
        ]
        prompts = await session.list_prompts()
        assert [p.name for p in prompts.prompts] == ["haiku"]


async def test_paging_tools_by_cursor() -> None:
    async with connect(python_server_command("paging")) as session:
        pages: list[list[str]] = []
        cursor: str | None = None
        while True:
            params = PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            page = await session.list_tools(params=params)
            pages.append([t.name for t in page.tools])
            cursor = page.nextCursor
            if cursor is None:
                break
        assert [len(p) for p in pages] == [3, 3, 3, 1]
        assert [name for p in pages for name in p] == [f"tool_{i:02d}" for i in range(10)]

        called = await session.call_tool("tool_07", {})
        assert not called.isError
        assert text_of(called) == "tool_07"


async def test_paging_other_lists_follow_page_size() -> None:
    async with connect(python_server_command("paging"), env={"PAGING_PAGE_SIZE": "2"}) as session:
        resources: list[str] = []
        templates: list[str] = []
        prompts: list[str] = []
        cursor: str | None = None
        while True:
            r = await session.list_resources(params=PaginatedRequestParams(cursor=cursor))
            assert len(r.resources) <= 2
            resources += [str(x.uri) for x in r.resources]
            if (cursor := r.nextCursor) is None:
                break
        while True:
            t = await session.list_resource_templates(params=PaginatedRequestParams(cursor=cursor))
            assert len(t.resourceTemplates) <= 2
            templates += [x.uriTemplate for x in t.resourceTemplates]
            if (cursor := t.nextCursor) is None:
                break
        while True:
            p = await session.list_prompts(params=PaginatedRequestParams(cursor=cursor))
            assert len(p.prompts) <= 2
            prompts += [x.name for x in p.prompts]
            if (cursor := p.nextCursor) is None:
                break
        assert resources == [f"paging://r/{i}" for i in range(7)]
        assert templates == ["paging://t/{id}", "paging://u/{id}"]
        assert prompts == [f"prompt_{i}" for i in range(5)]


@pytest.mark.node
async def test_everything() -> None:
    argv = everything_command()
    if argv is None:
        pytest.fail(
            "the reference server @modelcontextprotocol/server-everything is not installed; "
            f"run `{EVERYTHING_INSTALL_HINT}` from the repository root"
        )
    async with connect(argv) as session:
        tools = await session.list_tools()
        names = {t.name for t in tools.tools}
        assert {"echo", "get-sum", "get-tiny-image", "trigger-long-running-operation"} <= names
        assert tools.nextCursor is None
        echoed = await session.call_tool("echo", {"message": "hi"})
        assert not echoed.isError
        assert text_of(echoed) == "Echo: hi"
