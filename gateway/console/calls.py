"""A tool called from the console: the router's own path, audited.

The call is one ``tools/call`` through ``Router.handle_request``, exactly as
a host's, from a client session of its own that no registry knows: its
principal is ``admin:console`` (the request log and the policy audit name
it), it has no stream, and it ends with the call. One ``console.call`` line
records the tool, the outcome and the duration; argument values are logged
only at debug level (they may be personal data).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import msgspec
import structlog

from gateway.frontend.clients import ClientSession
from gateway.protocol import jsonrpc
from gateway.protocol.versions import LATEST_VERSION

if TYPE_CHECKING:
    from gateway.router import Router

logger = structlog.get_logger("gateway.console")

PRINCIPAL: Final = "admin:console"
_ids = iter(range(1, 1 << 62))


@dataclass(frozen=True, slots=True)
class CallResult:
    """What the console shows after a call.

    Attributes:
        ok: a JSON-RPC result (which may itself say ``isError``).
        is_error: the tool's own ``isError`` flag.
        text: the result or the error, as indented JSON.
        duration_ms: how long the call took.
    """

    ok: bool
    is_error: bool
    text: str
    duration_ms: float


async def call_tool(router: Router, tool: str, arguments: dict[str, Any]) -> CallResult:
    """Call ``tool`` with ``arguments`` as ``admin:console``; never raises for a failed call."""
    peer = ClientSession(
        session_id="console-" + secrets.token_urlsafe(12),
        protocol_version=LATEST_VERSION,
        client_info={"name": "mcp-gateway console"},
        initialized=True,
        principal=PRINCIPAL,
    )
    request_id = next(_ids)
    params = jsonrpc.to_raw({"name": tool, "arguments": arguments})
    request = jsonrpc.Request(id=request_id, method="tools/call", params=params)
    started = time.perf_counter()
    try:
        answer = await router.handle_request(peer, request)
    finally:
        peer.cancel_all()
    elapsed = round((time.perf_counter() - started) * 1000, 3)
    decoded = msgspec.json.decode(answer)
    error = decoded.get("error") if isinstance(decoded, dict) else None
    result = decoded.get("result") if isinstance(decoded, dict) else None
    is_error = isinstance(result, dict) and result.get("isError") is True
    outcome = "error" if error is not None else ("tool_error" if is_error else "ok")
    logger.info("console.call", tool=tool[:200], outcome=outcome, duration_ms=elapsed)
    logger.debug("console.call.arguments", tool=tool[:200], arguments=arguments)
    shown = error if error is not None else result
    text = msgspec.json.format(msgspec.json.encode(shown), indent=2).decode()
    return CallResult(ok=error is None, is_error=is_error, text=text, duration_ms=elapsed)
