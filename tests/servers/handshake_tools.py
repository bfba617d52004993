"""The handshake-era tool set two SDK 1.x test peers share: a call, two questions, a list change.

``era_legacy.py`` (stdio) and ``broken_listen.py`` (HTTP behind a broken
2026-07-28 leg) both stand for "a handshake-era backend with every feature a
host can reach through the gateway"; one definition keeps the two contracts
the same, so the tests that read their answers read one shape:

* ``add(a, b)``: a plain call;
* ``ask_name()``: ``elicitation/create`` (form), answers with what came back;
* ``ask_sample()``: ``sampling/createMessage``, answers with the reply;
* ``grow()``: adds a tool ``grown_<n>`` and sends ``notifications/tools/list_changed``.

Imported by the scripts beside it (a script's own folder is first on
``sys.path``), never by the gateway.
"""

from __future__ import annotations

import json

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import SamplingMessage, TextContent


def _grown_tool() -> str:
    """A tool ``grow`` added; it only says so."""
    return "grown"


def add_handshake_tools(server: FastMCP) -> None:
    """Register ``add``, ``ask_name``, ``ask_sample`` and ``grow`` on ``server``."""
    grown: list[str] = []

    @server.tool()
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    @server.tool()
    async def ask_name(ctx: Context) -> str:  # type: ignore[type-arg]
        """Elicit a name (form mode); answer with the action and content as JSON."""
        result = await ctx.session.elicit_form(
            "What is your name?",
            {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
            related_request_id=ctx.request_id,
        )
        return json.dumps({"action": result.action, "content": result.content})

    @server.tool()
    async def ask_sample(ctx: Context) -> str:  # type: ignore[type-arg]
        """Ask the host's model to say hi; answer with the model and its text as JSON."""
        result = await ctx.session.create_message(
            [SamplingMessage(role="user", content=TextContent(type="text", text="Say hi"))],
            max_tokens=10,
            related_request_id=ctx.request_id,
        )
        text = result.content.text if isinstance(result.content, TextContent) else None
        return json.dumps({"model": result.model, "text": text})

    @server.tool()
    async def grow(ctx: Context) -> str:  # type: ignore[type-arg]
        """Add a tool ``grown_<n>`` and tell the client its tool list changed."""
        name = f"grown_{len(grown) + 1}"
        grown.append(name)
        server.add_tool(_grown_tool, name=name)
        await ctx.session.send_tool_list_changed()
        return name
