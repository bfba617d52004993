"""A backend on the official Python SDK 2.x (``MCPServer``), serving both eras.

Run with ``.venv-sdk2/bin/python tests/servers/modern_sdk2.py [stdio|http PORT]``
(mcp 2.x cannot share a virtualenv with the 1.x peers). The backend-leg tests
(``tests/e2e/test_modern_backend.py``) put it behind the gateway: the gateway's
probe finds 2026-07-28 here, and the tools report what the gateway sent them
(the request's ``_meta``, its HTTP headers) so the tests can check the
per-request envelope the gateway builds towards a modern backend.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Final

import anyio
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    InputRequiredResult,
    SamplingMessage,
    TextContent,
)
from pydantic import Field

# SDK2_CACHE_HINTS=1 gives discover, tools/list and resources/read hints of
# their own (tests/e2e/test_modern_cache_hints.py); unset, the SDK's default
# ({0, private}), which the other tests expect.
CACHE_HINTS: Final = (
    {
        "server/discover": CacheHint(ttl_ms=30000, scope="public"),
        "tools/list": CacheHint(ttl_ms=20000, scope="public"),
        "resources/read": CacheHint(ttl_ms=45000, scope="public"),
    }
    if os.environ.get("SDK2_CACHE_HINTS") == "1"
    else None
)

server = MCPServer(
    "sdk2-modern",
    instructions="An SDK 2.x backend for the backend-leg tests.",
    cache_hints=CACHE_HINTS,
)


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool()
def whoami(ctx: Context) -> str:
    """What this request carried: its version, capabilities and ``_meta``."""
    meta = ctx.request_context.meta
    dumped: Any = None
    if meta is not None:
        dumped = (
            meta.model_dump(mode="json", by_alias=True) if hasattr(meta, "model_dump") else meta
        )
    caps = ctx.client_capabilities
    headers = ctx.headers
    return json.dumps(
        {
            "protocol_version": ctx.protocol_version,
            "meta": json.loads(json.dumps(dumped, default=str)),
            "capabilities": None
            if caps is None
            else caps.model_dump(mode="json", exclude_none=True),
            "headers": None if headers is None else {k.lower(): v for k, v in headers.items()},
        }
    )


@server.tool()
def lookup(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], ctx: Context
) -> str:
    """Echo the ``region`` argument and the ``Mcp-Param-Region`` header that came with it."""
    headers = ctx.headers or {}
    lowered = {k.lower(): v for k, v in headers.items()}
    return json.dumps({"region": region, "header": lowered.get("mcp-param-region")})


@server.tool()
async def slow(steps: int, ctx: Context) -> str:
    """Report ``steps`` progress notifications, then answer."""
    for step in range(steps):
        await ctx.report_progress(step + 1, steps)
    return "done"


@server.tool()
async def wait_forever(marker: str) -> str:
    """Write ``started`` to the file ``marker``, wait; on cancellation write ``cancelled``."""
    _mark(marker, "started")
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        _mark(marker, "cancelled")
        raise
    return "never"


def _mark(marker: str, text: str) -> None:
    """Write ``text`` to the marker file (small, local: no need to leave the loop)."""
    Path(marker).write_text(text)


@server.tool()
async def chatty(ctx: Context) -> str:
    """Log one debug and one warning message, then answer."""
    await ctx.debug("debug line")
    await ctx.warning("warning line")
    return "logged"


@server.tool()
async def ask_name(ctx: Context) -> Any:
    """Ask for a name with ``input_required`` (MRTR), keeping a state; then greet.

    Round 1 answers ``input_required`` with an elicitation and the state
    ``"round-1:ü"`` (non-ASCII: the gateway must give it back byte for
    byte). The retry must bring that state and the answer.
    """
    responses = ctx.input_responses
    if not responses:
        return InputRequiredResult(
            input_requests={
                "name": ElicitRequest(
                    params=ElicitRequestFormParams(
                        message="What is your name?",
                        requested_schema={
                            "type": "object",
                            "properties": {"name": {"type": "string"}},
                            "required": ["name"],
                        },
                    )
                )
            },
            request_state="round-1:\u00fc",
        )
    answer = responses.get("name")
    dumped = answer.model_dump(mode="json") if hasattr(answer, "model_dump") else answer
    return json.dumps({"state": ctx.request_state, "answer": dumped})


@server.tool()
async def ask_visit(ctx: Context) -> Any:
    """Send the host to a page (URL-mode ``input_required``); then report the action."""
    responses = ctx.input_responses
    if not responses:
        return InputRequiredResult(
            input_requests={
                "visit": ElicitRequest(
                    params=ElicitRequestURLParams(
                        message="Open this page to go on.", url="https://example.com/visit"
                    )
                )
            },
        )
    answer = responses.get("visit")
    dumped = answer.model_dump(mode="json") if hasattr(answer, "model_dump") else answer
    return json.dumps({"action": (dumped or {}).get("action")})


@server.tool()
async def ask_sample(ctx: Context) -> Any:
    """Ask for a sampling round (state-free ``input_required``), then report the answer."""
    responses = ctx.input_responses
    if not responses:
        return InputRequiredResult(
            input_requests={
                "llm": CreateMessageRequest(
                    params=CreateMessageRequestParams(
                        messages=[
                            SamplingMessage(
                                role="user", content=TextContent(type="text", text="Say hi")
                            )
                        ],
                        max_tokens=10,
                    )
                )
            },
        )
    answer = responses.get("llm")
    dumped = answer.model_dump(mode="json") if hasattr(answer, "model_dump") else answer
    return json.dumps({"state": ctx.request_state, "answer": dumped})


_grown: list[str] = []


def _grown_tool() -> str:
    """A tool ``grow`` added; it only says so."""
    return "grown"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add a tool ``grown_<n>`` and publish tools list_changed to listen streams.

    On 2026-07-28 the only way a server tells a client its list changed is a
    ``subscriptions/listen`` stream, so the era matrix
    (``tests/interaction/test_era_matrix.py``) sees whether the gateway follows it.
    """
    name = f"grown_{len(_grown) + 1}"
    _grown.append(name)
    server.add_tool(_grown_tool, name=name)
    await ctx.notify_tools_changed()
    return name


@server.resource("sdk2://note")
def note() -> str:
    """A fixed text resource."""
    return "a note from sdk2"


@server.tool()
async def touch_note(ctx: Context) -> str:
    """Publish ``resources/updated`` for ``sdk2://note`` to the listen streams that asked.

    On 2026-07-28 a resource subscription is a URI in a listen stream's
    ``resourceSubscriptions``; the gateway holds that stream for its clients.
    """
    await ctx.notify_resource_updated("sdk2://note")
    return "touched"


@server.prompt()
def greet(name: str) -> str:
    """A one-message prompt."""
    return f"Hello, {name}!"


def main() -> None:
    """Serve on stdio, or on Streamable HTTP at 127.0.0.1:PORT/mcp.

    ``SDK2_START_DELAY`` (seconds) holds the start first, as a machine busy
    starting many interpreters does (``tests/e2e/test_late_probe.py``).
    """
    time.sleep(float(os.environ.get("SDK2_START_DELAY", "0")))
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
