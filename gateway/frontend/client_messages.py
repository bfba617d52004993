"""What a client session does with each message, whatever carries it.

The Streamable HTTP endpoint, the legacy SSE endpoint and stdio mode differ
in how bytes arrive and leave; what a message *means* is the same for all
three and lives here: opening a session on ``initialize``, routing a request
under a cancel scope the session can reach, and taking notifications and
answers from the host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog
import trio

from gateway.catalog.profiles import DEFAULT_PROFILE
from gateway.errors import INTERNAL_ERROR, LocalProtocolError
from gateway.frontend.rejection import (
    INTERNAL_ERROR_MESSAGE,
    ROUTER_COMPONENT,
    report_internal_error,
)
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.jsonrpc import ErrorResponse, Notification, Request, RequestId, Response
from gateway.protocol.versions import negotiate_as_server
from gateway.telemetry import tracing

if TYPE_CHECKING:
    from gateway.frontend.clients import ClientRegistry, ClientSession
    from gateway.identity.principal import Principal
    from gateway.router import Emit, Router
    from gateway.telemetry.metrics import Metrics

logger = structlog.get_logger("gateway.frontend")


def open_client_session(
    router: Router,
    clients: ClientRegistry,
    request: Request,
    profile: str = DEFAULT_PROFILE,
    principal: str | None = None,
    caller: Principal | None = None,
) -> tuple[ClientSession, bytes]:
    """Create a session for an ``initialize`` request; returns it and the response.

    The session is bound to ``profile``, the endpoint it was opened on, and
    belongs to ``principal`` (its key): no other credential may use it.
    ``caller`` is that principal itself, for the access policy.

    Raises:
        LocalProtocolError: the params are not an object.
    """
    params = mcp.decode_params(request.params)
    version = negotiate_as_server(params.get("protocolVersion"))
    info = params.get("clientInfo")
    caps = params.get("capabilities")
    # A server span like a routed request's (tracing rule 5); nothing when off.
    with tracing.answered("initialize", params, version=version, profile=profile):
        session = clients.open(
            version,
            info if isinstance(info, dict) else {},
            caps if isinstance(caps, dict) else {},
            profile,
            principal,
        )
        session.caller = caller
        logger.info(
            "client.session.opened",
            client_session=session.session_id[:8],
            protocol_version=version,
            client=session.client_info.get("name"),
            profile=profile,
        )
        result = router.initialize_result(version, profile)
    return session, jsonrpc.encode_response(request.id, result)


async def route_request(
    router: Router,
    session: ClientSession,
    request: Request,
    emit: Emit | None = None,
    *,
    metrics: Metrics | None = None,
) -> bytes:
    """Route one request under a cancel scope the session can reach.

    Returns the encoded response, or ``b""`` when the host cancelled the
    request (spec: no response is sent for a cancelled request). A request
    id already in flight on this session is refused: the answer could not
    be told apart. An exception the router did not expect (a bug) is
    reported (failures.py) and answered ``-32603`` with the request's id,
    whatever carries the answer (JSON, an SSE stream, a batch, stdio).
    """
    if request.id in session.inflight:
        return jsonrpc.encode_error(
            request.id, -32600, f"invalid request: id {request.id!r} is already in use"
        )
    session.calls += 1
    with trio.CancelScope() as scope:
        session.inflight[request.id] = scope
        try:
            return await router.handle_request(session, request, emit)
        except Exception as exc:
            report_internal_error(
                exc,
                metrics,
                ROUTER_COMPONENT,
                method=request.method,
                session_id=session.session_id,
            )
            return jsonrpc.encode_error(request.id, INTERNAL_ERROR, INTERNAL_ERROR_MESSAGE)
        finally:
            if session.inflight.get(request.id) is scope:
                del session.inflight[request.id]
    return b""


async def accept_one_way(
    router: Router,
    session: ClientSession,
    message: jsonrpc.Message,
    *,
    metrics: Metrics | None = None,
) -> None:
    """Notifications and responses from the host: never answered.

    An exception the router did not expect is reported (failures.py); the
    host, who expects no answer, gets none.
    """
    if isinstance(message, Notification):
        if message.method == "notifications/initialized":
            session.initialized = True
        elif message.method == "notifications/cancelled":
            cancel(session, message)
        else:
            try:
                await router.client_notification(session, message.method, message.params)
            except Exception as exc:
                report_internal_error(
                    exc,
                    metrics,
                    ROUTER_COMPONENT,
                    method=message.method,
                    session_id=session.session_id,
                )
    elif isinstance(message, Response | ErrorResponse) and not session.answer(message):
        # Not an answer to anything we asked: dropped (robustness A35).
        logger.debug("client.response_dropped", id=message.id)


def cancel(session: ClientSession, message: Notification) -> None:
    """Cancel the session's request named by a ``notifications/cancelled``.

    Unknown, finished and malformed targets are ignored (robustness A33).
    """
    request_id = cancel_target(message)
    scope = None if request_id is None else session.inflight.get(request_id)
    if scope is not None:
        scope.cancel()


def cancel_target(message: Notification) -> RequestId | None:
    """The request a ``notifications/cancelled`` names; None when malformed."""
    try:
        params = mcp.decode_params(message.params)
    except LocalProtocolError:
        return None
    request_id = params.get("requestId")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    return request_id
