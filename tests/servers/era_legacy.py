"""Test peer "era_legacy": a handshake-era backend (SDK 1.x FastMCP) for the era matrix.

One server with every feature the era matrix (``tests/interaction/test_era_matrix.py``)
exercises, so a single process stands for "a legacy backend":

* ``add(a, b)``: a plain call;
* ``progress(steps)``: reports progress ``steps`` times, then answers;
* ``wait_forever(marker)``: writes ``started`` to the file ``marker``, waits;
  on cancellation writes ``cancelled`` (the same contract as the SDK 2.x
  peer's tool of that name, so one test reads both);
* ``ask_name()``: ``elicitation/create`` (form), answers with what came back;
* ``ask_sample()``: ``sampling/createMessage``, answers with the reply;
* ``ask_visit()``: ``elicitation/create`` in URL mode; on ``accept`` sends
  ``notifications/elicitation/complete``; answers with the action as JSON;
* ``grow()``: adds a tool ``grown_<n>`` and sends ``notifications/tools/list_changed``.

Run it as ``python tests/servers/era_legacy.py``; it speaks MCP on stdin/stdout.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from mcp.server.fastmcp import Context, FastMCP
from mcp.types import SamplingMessage, TextContent

mcp = FastMCP("era-legacy", log_level="WARNING")
_grown: list[str] = []
VISIT_URL = "https://example.com/visit"
VISIT_ID = "visit-1"


@mcp.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@mcp.tool()
async def progress(steps: int, ctx: Context) -> str:  # type: ignore[type-arg]
    """Report progress ``steps`` times, then answer."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, total=steps)
    return "done"


def _mark(marker: str, text: str) -> None:
    """Write ``text`` to the marker file (small, local: no need to leave the loop)."""
    Path(marker).write_text(text)


@mcp.tool()
async def wait_forever(marker: str) -> str:
    """Write ``started`` to ``marker``, wait; on cancellation write ``cancelled``."""
    _mark(marker, "started")
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        _mark(marker, "cancelled")
        raise
    return "never"


@mcp.tool()
async def ask_name(ctx: Context) -> str:  # type: ignore[type-arg]
    """Elicit a name (form mode); answer with the action and content as JSON."""
    result = await ctx.session.elicit_form(
        "What is your name?",
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        related_request_id=ctx.request_id,
    )
    return json.dumps({"action": result.action, "content": result.content})


@mcp.tool()
async def ask_visit(ctx: Context) -> str:  # type: ignore[type-arg]
    """Send the host to a page (URL mode); on accept, say the visit completed."""
    result = await ctx.session.elicit_url(
        "Open this page to go on.",
        VISIT_URL,
        VISIT_ID,
        related_request_id=ctx.request_id,
    )
    if result.action == "accept":
        await ctx.session.send_elicit_complete(VISIT_ID, related_request_id=ctx.request_id)
    return json.dumps({"action": result.action})


@mcp.tool()
async def ask_sample(ctx: Context) -> str:  # type: ignore[type-arg]
    """Ask the host's model to say hi; answer with the model and its text as JSON."""
    result = await ctx.session.create_message(
        [SamplingMessage(role="user", content=TextContent(type="text", text="Say hi"))],
        max_tokens=10,
        related_request_id=ctx.request_id,
    )
    text = result.content.text if isinstance(result.content, TextContent) else None
    return json.dumps({"model": result.model, "text": text})


def _grown_tool() -> str:
    """A tool ``grow`` added; it only says so."""
    return "grown"


@mcp.tool()
async def grow(ctx: Context) -> str:  # type: ignore[type-arg]
    """Add a tool ``grown_<n>`` and tell the client its tool list changed."""
    name = f"grown_{len(_grown) + 1}"
    _grown.append(name)
    mcp.add_tool(_grown_tool, name=name)
    await ctx.session.send_tool_list_changed()
    return name


if __name__ == "__main__":
    mcp.run()
