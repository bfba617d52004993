"""Test peer "headers": a stdio MCP server (official SDK 1.x FastMCP) for the modern era.

* ``lookup(region, count, verbose)``: ``x-mcp-header`` on each argument, so a
  modern host must send ``Mcp-Param-Region``/``-Count``/``-Verbose``;
* ``broken(amount)``: an ``x-mcp-header`` on a ``number`` (forbidden), so a
  modern ``tools/list`` must leave it out;
* ``chatty()``: logs at debug, info and warning, then answers, so the
  per-request ``logLevel`` filter can be seen;
* ``progress(steps)`` and ``sleep(seconds)``: progress and cancellation;
* ``ask()``: elicits, so a modern host that did not declare elicitation
  gets -32021 from the gateway.

Run it as ``python tests/servers/headers.py``; it speaks MCP on stdin/stdout.
"""

from __future__ import annotations

from typing import Annotated

import anyio
from mcp.server.fastmcp import Context, FastMCP
from pydantic import Field

mcp = FastMCP("headers", log_level="WARNING")


@mcp.tool()
def lookup(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
    count: Annotated[int, Field(json_schema_extra={"x-mcp-header": "Count"})] = 1,
    verbose: Annotated[bool, Field(json_schema_extra={"x-mcp-header": "Verbose"})] = False,
) -> str:
    """Say what was asked for."""
    return f"{region}:{count}:{verbose}"


@mcp.tool()
def broken(amount: Annotated[float, Field(json_schema_extra={"x-mcp-header": "Amount"})]) -> str:
    """A tool no modern client may list: number-typed x-mcp-header."""
    return str(amount)


@mcp.tool()
async def chatty(ctx: Context) -> str:  # type: ignore[type-arg]
    """Log at three levels, then answer."""
    await ctx.debug("debug line")
    await ctx.info("info line")
    await ctx.warning("warning line")
    return "talked"


@mcp.tool()
async def progress(steps: int, ctx: Context) -> str:  # type: ignore[type-arg]
    """Report progress ``steps`` times, then answer."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, total=steps)
    return "done"


@mcp.tool()
async def ask(ctx: Context) -> str:  # type: ignore[type-arg]
    """Elicit a form, then say what came back."""
    result = await ctx.session.elicit_form(
        "Name?",
        {"type": "object", "properties": {"name": {"type": "string"}}},
        related_request_id=ctx.request_id,
    )
    return result.action


@mcp.tool()
async def sleep(seconds: float) -> str:
    """Sleep, for cancellation tests."""
    await anyio.sleep(seconds)
    return "slept"


if __name__ == "__main__":
    mcp.run()
