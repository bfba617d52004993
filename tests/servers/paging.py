"""Test peer "paging": a low-level SDK server that pages every list it serves.

Built on ``mcp.server.lowlevel.Server`` (not FastMCP, which never pages) so that
a gateway's cursor handling meets a real paginating backend. The page size comes
from the environment variable ``PAGING_PAGE_SIZE`` (default 3). It serves:

* 10 tools ``tool_00`` .. ``tool_09``; each answers with its own name;
* 7 resources ``paging://r/0`` .. ``paging://r/6`` (text "resource N");
* 2 resource templates ``paging://t/{id}`` and ``paging://u/{id}``;
* 5 prompts ``prompt_0`` .. ``prompt_4`` (no arguments).

``tools/list``, ``resources/list``, ``resources/templates/list`` and
``prompts/list`` each honour ``cursor`` and return ``nextCursor`` until the last
page. A cursor is opaque to clients; here it is ``"p:<offset>"``, and a cursor
this server did not hand out is answered with JSON-RPC error -32602.

Run it as ``python tests/servers/paging.py``; it speaks MCP on stdin/stdout and
writes nothing else to stdout.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import McpError
from pydantic import AnyUrl

if TYPE_CHECKING:
    from collections.abc import Sequence

T = TypeVar("T")

PAGE_SIZE = int(os.environ.get("PAGING_PAGE_SIZE", "3"))
if PAGE_SIZE < 1:
    raise SystemExit("PAGING_PAGE_SIZE must be at least 1")

EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}

TOOLS = [
    types.Tool(
        name=f"tool_{i:02d}", description=f"Answers 'tool_{i:02d}'.", inputSchema=EMPTY_SCHEMA
    )
    for i in range(10)
]
RESOURCES = [
    types.Resource(uri=AnyUrl(f"paging://r/{i}"), name=f"r{i}", mimeType="text/plain")
    for i in range(7)
]
TEMPLATES = [
    types.ResourceTemplate(uriTemplate="paging://t/{id}", name="t", mimeType="text/plain"),
    types.ResourceTemplate(uriTemplate="paging://u/{id}", name="u", mimeType="text/plain"),
]
PROMPTS = [types.Prompt(name=f"prompt_{i}", description=f"Prompt number {i}.") for i in range(5)]

server: Server[Any, Any] = Server("paging", instructions="Paging pages every list.")


def _page(
    items: Sequence[T], params: types.PaginatedRequestParams | None
) -> tuple[list[T], str | None]:
    """Slice one page out of ``items``; return it and the cursor of the next page (or None)."""
    cursor = params.cursor if params is not None else None
    start = 0
    if cursor is not None:
        prefix, _, number = cursor.partition(":")
        if prefix != "p" or not number.isdigit() or int(number) > len(items):
            raise McpError(
                types.ErrorData(code=types.INVALID_PARAMS, message=f"bad cursor {cursor!r}")
            )
        start = int(number)
    end = start + PAGE_SIZE
    return list(items[start:end]), (f"p:{end}" if end < len(items) else None)


# The SDK passes the request to a list handler whose parameter is annotated with the
# request type (mcp.server.lowlevel.func_inspection.create_call_wrapper). It also calls
# the tools/list handler with ``None`` to refresh its tool cache before tools/call; that
# internal call gets every tool, so calls are validated against the real schema.
@server.list_tools()
async def list_tools(request: types.ListToolsRequest) -> types.ListToolsResult:
    if request is None:  # the SDK's own cache refresh, not a client request
        return types.ListToolsResult(tools=TOOLS)
    tools, next_cursor = _page(TOOLS, request.params)
    return types.ListToolsResult(tools=tools, nextCursor=next_cursor)


@server.call_tool()
async def call_tool(name: str, arguments: dict[str, Any]) -> list[types.ContentBlock]:
    if name not in {tool.name for tool in TOOLS}:
        raise ValueError(f"unknown tool {name!r}")
    return [types.TextContent(type="text", text=name)]


@server.list_resources()
async def list_resources(request: types.ListResourcesRequest) -> types.ListResourcesResult:
    resources, next_cursor = _page(RESOURCES, request.params)
    return types.ListResourcesResult(resources=resources, nextCursor=next_cursor)


@server.read_resource()
async def read_resource(uri: AnyUrl) -> str:
    text = str(uri)
    for prefix, label in (("paging://r/", "resource"), ("paging://t/", "t"), ("paging://u/", "u")):
        if text.startswith(prefix):
            return f"{label} {text.removeprefix(prefix)}"
    raise McpError(types.ErrorData(code=types.INVALID_PARAMS, message=f"unknown resource {text}"))


# Server.list_resource_templates() never hands the request to its handler, so this
# one is registered directly to see the cursor.
async def list_resource_templates(
    request: types.ListResourceTemplatesRequest,
) -> types.ServerResult:
    templates, next_cursor = _page(TEMPLATES, request.params)
    return types.ServerResult(
        types.ListResourceTemplatesResult(resourceTemplates=templates, nextCursor=next_cursor)
    )


server.request_handlers[types.ListResourceTemplatesRequest] = list_resource_templates


@server.list_prompts()
async def list_prompts(request: types.ListPromptsRequest) -> types.ListPromptsResult:
    prompts, next_cursor = _page(PROMPTS, request.params)
    return types.ListPromptsResult(prompts=prompts, nextCursor=next_cursor)


@server.get_prompt()
async def get_prompt(name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
    if name not in {prompt.name for prompt in PROMPTS}:
        raise McpError(
            types.ErrorData(code=types.INVALID_PARAMS, message=f"unknown prompt {name!r}")
        )
    return types.GetPromptResult(
        description=f"Prompt {name}",
        messages=[
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=name))
        ],
    )


async def main() -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
