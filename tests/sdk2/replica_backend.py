"""A backend on the official Python SDK 2.x, over Streamable HTTP, for the replica run.

Run by ``benchmarks/replicas.py`` with ``.venv-sdk2/bin/python``: one process
shared by every gateway replica, as a real HTTP backend is. It serves both
eras (the SDK's default), and offers:

- ``add(a, b)``: a checkable answer, so a reply sent to the wrong request shows;
- ``confirm(item)``: MRTR in the 2026-07-28 way. The first round answers
  ``input_required`` with one elicitation and the item in ``requestState``;
  the retry answers with the name the client gave. The SDK seals that state
  with its own key, so only this process can open it, whichever gateway
  replica carries the retry.
- ``tool_00`` ... ``tool_{N-1}``: enough tools for a paginated walk.

Usage: ``replica_backend.py PORT [TOOLS]``.
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult

ELICIT_KEY = "confirm_name"


def build(tool_count: int) -> MCPServer:
    """The server with its tools."""
    server = MCPServer("replica-backend")

    @server.tool()
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    @server.tool()
    def confirm(item: str, ctx: Context) -> str | InputRequiredResult:
        """Ask the client who confirms ``item``, then say so."""
        responses = ctx.input_responses or {}
        answer = responses.get(ELICIT_KEY)
        if answer is None or ctx.request_state is None:
            return InputRequiredResult(
                input_requests={
                    ELICIT_KEY: ElicitRequest(
                        params=ElicitRequestFormParams(
                            message=f"Who confirms {item}?",
                            requested_schema={
                                "type": "object",
                                "properties": {"name": {"type": "string"}},
                                "required": ["name"],
                            },
                        )
                    )
                },
                request_state=f"item={item}",
            )
        content = getattr(answer, "content", None) or {}
        return f"{ctx.request_state.removeprefix('item=')} confirmed by {content.get('name')}"

    for index in range(tool_count):
        server.add_tool(_echo_as(f"tool_{index:02d}"), description=f"Echo number {index}.")
    return server


def _echo_as(name: str):  # type: ignore[no-untyped-def]  # a tool function, typed by the SDK
    def echo(text: str) -> str:
        return f"{name}:{text}"

    echo.__name__ = name
    return echo


if __name__ == "__main__":
    port = int(sys.argv[1])
    tools = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    build(tools).run("streamable-http", host="127.0.0.1", port=port)
