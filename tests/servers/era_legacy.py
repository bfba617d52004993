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
from handshake_tools import add_handshake_tools  # type: ignore[import-not-found]
from mcp.server.fastmcp import Context, FastMCP

mcp = FastMCP("era-legacy", log_level="WARNING")
add_handshake_tools(mcp)
VISIT_URL = "https://example.com/visit"
VISIT_ID = "visit-1"


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


if __name__ == "__main__":
    mcp.run()
