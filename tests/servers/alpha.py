"""Test peer "alpha": a stdio MCP server built with the official SDK's FastMCP.

It exercises the common surface a gateway has to carry through unchanged:

* tools: ``echo`` (same name as beta's, to prove namespacing), ``add``, ``fail``
  (an exception, so the SDK answers ``isError: true``), ``embed`` (an embedded
  resource and a resource link in one result), ``sleep`` (for timeouts and
  cancellation, or held until a file appears), ``progress``
  (``notifications/progress`` when the caller sends a progress token) and
  ``pid`` (which process answered: tells shared from per-client backend
  sessions apart);
* resources: ``alpha://readme`` and the template ``alpha://items/{item_id}``;
* prompt: ``greet``;
* completions for the template's ``item_id`` and the prompt's ``name``.

Run it as ``python tests/servers/alpha.py``; it speaks MCP on stdin/stdout and
writes nothing else to stdout.
"""

from __future__ import annotations

import os

import anyio
from mcp.server.fastmcp import Context, FastMCP
from mcp.types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    EmbeddedResource,
    PromptReference,
    ResourceLink,
    ResourceTemplateReference,
    TextResourceContents,
)
from pydantic import AnyUrl

ITEM_IDS = ["1", "2", "7"]
GREET_NAMES = ["ada", "alan", "grace"]

mcp = FastMCP("alpha", instructions="Alpha does arithmetic and echoes.", log_level="WARNING")


@mcp.tool()
def echo(text: str) -> str:
    """Echo the text back, prefixed with "alpha: "."""
    return "alpha: " + text


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool()
def fail() -> str:
    """Always fail; the SDK turns the exception into a result with isError: true."""
    raise RuntimeError("alpha failed on purpose")


@mcp.tool(structured_output=False)
def embed() -> list[EmbeddedResource | ResourceLink]:
    """Return an embedded resource (alpha://readme) and a link to alpha://items/7."""
    return [
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(
                uri=AnyUrl("alpha://readme"), mimeType="text/plain", text="Alpha readme"
            ),
        ),
        ResourceLink(
            type="resource_link",
            uri=AnyUrl("alpha://items/7"),
            name="item 7",
            mimeType="text/plain",
        ),
    ]


@mcp.tool()
async def sleep(seconds: float, release: str = "", started: str = "") -> str:
    """Sleep for the given number of seconds, then answer "slept".

    With ``release``, sleep instead until that file exists; with ``started``,
    first append a line to that file. A test then knows the call has reached
    the server and decides when it ends (a handshake, not a guessed delay).
    """
    if started:
        async with await anyio.open_file(started, "a") as file:
            await file.write(f"{os.getpid()}\n")
    if release:
        while not await anyio.Path(release).exists():  # noqa: ASYNC110 - a file has no event
            await anyio.sleep(0.01)
    else:
        await anyio.sleep(seconds)
    return "slept"


@mcp.tool()
async def progress(steps: int, ctx: Context) -> str:  # type: ignore[type-arg]
    """Report progress `steps` times (when the caller asked for it), then answer "done"."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, total=steps, message=f"step {step}/{steps}")
    return "done"


@mcp.tool()
def pid() -> int:
    """The process id of this server."""
    return os.getpid()


@mcp.resource("alpha://readme", name="readme", mime_type="text/plain")
def readme() -> str:
    """Alpha's readme."""
    return "Alpha readme"


@mcp.resource("alpha://items/{item_id}", name="item", mime_type="text/plain")
def item(item_id: str) -> str:
    """One item, by id."""
    return f"item {item_id}"


@mcp.prompt()
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"Say hello to {name}."


@mcp.completion()
async def complete(
    ref: PromptReference | ResourceTemplateReference,
    argument: CompletionArgument,
    context: CompletionContext | None,
) -> Completion | None:
    """Complete ``item_id`` of alpha://items/{item_id} and ``name`` of the greet prompt."""
    if isinstance(ref, ResourceTemplateReference):
        if ref.uri == "alpha://items/{item_id}" and argument.name == "item_id":
            values = [v for v in ITEM_IDS if v.startswith(argument.value)]
            return Completion(values=values, total=len(values), hasMore=False)
    elif ref.name == "greet" and argument.name == "name":
        values = [v for v in GREET_NAMES if v.startswith(argument.value)]
        return Completion(values=values, total=len(values), hasMore=False)
    return None


if __name__ == "__main__":
    mcp.run()
