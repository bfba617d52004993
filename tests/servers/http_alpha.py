"""Test peer "http-alpha": an official-SDK FastMCP server over HTTP.

Usage::

    python tests/servers/http_alpha.py PORT TRANSPORT [MODE]

TRANSPORT is ``streamable-http`` (endpoint ``/mcp``) or ``sse`` (``/sse``,
posting to ``/messages/``). MODE, for Streamable HTTP only:

* ``sse`` (default): every request is answered with an SSE stream;
* ``json``: every request is answered with one ``application/json`` body;
* ``resumable``: SSE with an event store and ``retry: 100``, so streams carry
  event ids and a tool can close its stream mid-call (2025-11-25 polling).

Tools: ``echo``, ``add``, ``progress`` (progress notifications when asked),
``sleep``, ``announce`` (a tools/list_changed notification with no related
request, so it travels on the GET stream) and ``poll`` (closes its own SSE
stream, then answers: the client must resume with Last-Event-ID).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import anyio
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.types import JSONRPCMessage


@dataclass
class _Stored:
    event_id: str
    stream_id: str
    message: JSONRPCMessage | None


class MemoryEventStore(EventStore):
    """Every event ever sent, so any stream can be replayed after any id."""

    def __init__(self) -> None:
        self.events: list[_Stored] = []

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        event_id = f"ev-{len(self.events) + 1}"
        self.events.append(_Stored(event_id, stream_id, message))
        return event_id

    async def replay_events_after(
        self, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        index = next((i for i, e in enumerate(self.events) if e.event_id == last_event_id), None)
        if index is None:
            return None
        stream_id = self.events[index].stream_id
        for event in self.events[index + 1 :]:
            if event.stream_id == stream_id and event.message is not None:
                await send_callback(EventMessage(event.message, event.event_id))
        return stream_id


def build(port: int, mode: str) -> FastMCP:
    """The server for one run."""
    resumable = mode == "resumable"
    mcp = FastMCP(
        "http-alpha",
        host="127.0.0.1",
        port=port,
        log_level="WARNING",
        json_response=mode == "json",
        event_store=MemoryEventStore() if resumable else None,
        retry_interval=100 if resumable else None,
    )

    @mcp.tool()
    def echo(text: str) -> str:
        """Echo the text back, prefixed with "alpha: "."""
        return "alpha: " + text

    @mcp.resource("alpha://readme")
    def readme() -> str:
        """A fixed text, so reads (idempotent) can be tested over HTTP."""
        return "Alpha readme"

    @mcp.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @mcp.tool()
    async def progress(steps: int, ctx: Context) -> str:  # type: ignore[type-arg]  # FastMCP reads the bare annotation
        """Report progress `steps` times (when asked for), then answer "done"."""
        for step in range(1, steps + 1):
            await ctx.report_progress(step, total=steps, message=f"step {step}/{steps}")
        return "done"

    @mcp.tool()
    async def sleep(seconds: float, release: str = "", started: str = "") -> str:
        """Sleep for the given number of seconds, then answer "slept".

        With ``release``, sleep instead until that file exists; with
        ``started``, first append a line to that file (a test's handshake).
        """
        if started:
            async with await anyio.open_file(started, "a") as file:
                await file.write("started\n")
        if release:
            while not await anyio.Path(release).exists():  # noqa: ASYNC110 - a file has no event
                await anyio.sleep(0.01)
        else:
            await anyio.sleep(seconds)
        return "slept"

    @mcp.tool()
    async def announce(ctx: Context) -> str:  # type: ignore[type-arg]  # FastMCP reads the bare annotation
        """Send tools/list_changed on the session's own stream (no related request)."""
        await ctx.session.send_tool_list_changed()
        return "announced"

    @mcp.tool()
    async def poll(ctx: Context) -> str:  # type: ignore[type-arg]  # FastMCP reads the bare annotation
        """Report progress, close this request's SSE stream, report again, answer."""
        await ctx.report_progress(1, total=2)
        await ctx.close_sse_stream()
        await anyio.sleep(0.3)
        await ctx.report_progress(2, total=2)
        return "polled"

    return mcp


if __name__ == "__main__":
    port_arg, transport = sys.argv[1], sys.argv[2]
    mode_arg = sys.argv[3] if len(sys.argv) > 3 else "sse"
    server = build(int(port_arg), mode_arg)
    if transport == "sse":
        server.run(transport="sse")
    else:
        server.run(transport="streamable-http")
