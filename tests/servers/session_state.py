"""Test peer "session-state": an official-SDK stdio server whose answers depend on its session.

One process is one session, so what it remembers, the roots it is told and
the questions it asks all belong to whoever the gateway gave this session
to. Tools: ``pid``, ``remember``/``recall`` (session memory), ``roots``
(asks the host for its roots), ``ask`` (elicits a name from the host),
``wait`` (sleeps, for a call that is in flight for a while), ``visit`` (a
URL-mode elicitation, then its ``notifications/elicitation/complete``).

Run it as ``python tests/servers/session_state.py``.
"""

from __future__ import annotations

import os

import anyio
from mcp.server.fastmcp import Context, FastMCP
from pydantic import BaseModel

mcp = FastMCP("session-state", log_level="WARNING")
_memory: list[str] = []


class Name(BaseModel):
    """What ``ask`` asks the host for."""

    name: str


@mcp.tool()
def pid() -> int:
    """This process's id: one process per backend session."""
    return os.getpid()


@mcp.tool()
def remember(text: str) -> str:
    """Keep ``text`` in this session's memory."""
    _memory.append(text)
    return "ok"


@mcp.tool()
def recall() -> str:
    """Everything this session was asked to remember, comma-separated."""
    return ",".join(_memory)


@mcp.tool()
async def roots(ctx: Context) -> str:  # type: ignore[type-arg]
    """The roots the host of this session declares, comma-separated."""
    result = await ctx.session.list_roots()
    return ",".join(str(root.uri) for root in result.roots)


@mcp.tool()
async def ask(question: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Elicit a name from the host; returns the answer (or the action)."""
    result = await ctx.elicit(question, Name)
    return result.data.name if result.action == "accept" else result.action


@mcp.tool()
async def visit(url: str, elicitation_id: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Send the host to ``url`` (URL-mode elicitation); on accept, say it completed."""
    result = await ctx.elicit_url("Open this page to go on.", url, elicitation_id)
    if result.action == "accept":
        await ctx.session.send_elicit_complete(elicitation_id)
    return result.action


@mcp.tool()
async def wait(seconds: float) -> str:
    """Sleep ``seconds`` (a call that stays in flight)."""
    await anyio.sleep(seconds)
    return "done"


if __name__ == "__main__":
    mcp.run()
