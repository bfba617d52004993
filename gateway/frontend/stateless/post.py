"""A modern (2026-07-28) POST on the MCP endpoint: one request, no session.

The decisions are the sans-IO rules of ``protocol/`` (``eras``,
``envelope``, ``routing_headers``, ``modern_errors``, ``caching``); this
module only reads the HTTP request, asks them, and writes the answer:

1. Validation runs before anything is routed, first failure wins: the
   envelope and the standard headers (``parse_envelope``: -32602, -32020,
   -32022), the method (-32601, 404), then for ``tools/call`` the
   ``Mcp-Param-*`` headers against the *public* tool's schema (-32020). Each
   failure is a ``Rejection`` with its own status (400, or 404 for -32601),
   answered and counted in the one place every refusal is.
2. No ``Mcp-Session-Id`` is read, minted or echoed.
3. The answer is JSON first; progress, and log messages when ``_meta``
   asked for them, switch it to SSE on this request's own stream. Errors
   from routing carry their status too when they go out as JSON.
4. Every result gets ``resultType``; discover, lists and ``resources/read``
   get cache hints; tools with an invalid ``x-mcp-header`` use are left out
   of tools/list, each drop logged once per list served.
5. The response stream closing is a cancellation: the call is cancelled,
   which sends ``notifications/cancelled`` to the backend
   (``S/basic/patterns/cancellation.mdx``), and nothing more is written.

The ``Mcp-Param-*`` headers are not forwarded to backends: today's backend
legs speak the handshake era, where those headers mean nothing (the backend
leg of issue 14, step 5, mints them for modern backends).
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, Final

import structlog
import trio

from gateway.catalog.profiles import DEFAULT_PROFILE
from gateway.catalog.snapshot import Kind
from gateway.errors import LocalProtocolError, http_status_for
from gateway.frontend import http_util as h
from gateway.frontend.rejection import Rejection
from gateway.frontend.stateless.listen_stream import (
    Listeners,
    ListenLimitReached,
    serve_listen,
)
from gateway.frontend.streamable.post_response import respond_to_request
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.eras import (
    LEGACY_BACKEND_HINT,
    check_method,
    modern_result,
    parse_modern,
)
from gateway.protocol.jsonrpc import ErrorResponse, Response
from gateway.protocol.stateless.cache_hints import hint_of
from gateway.protocol.stateless.error_codes import ModernProtocolError
from gateway.protocol.stateless.listen import LISTEN, parse_filter
from gateway.protocol.stateless.routing_headers import check_param_headers, fold_headers
from gateway.router.context import ModernRequest
from gateway.telemetry import tracing

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager

    from gateway.identity.principal import Principal
    from gateway.protocol.jsonrpc import Request
    from gateway.protocol.stateless.envelope import Envelope
    from gateway.router import Emit, Router

logger = structlog.get_logger("gateway.frontend")
# The four list methods, whose pages carry the hint the router merged, and
# resources/read, whose result carries its backend's (router/modern).
# A principal past its listen streams (listen_stream rule 6): its own limit.
TOO_MANY_STREAMS: Final = 429
HINTED_METHODS: Final = frozenset(kind.list_method for kind in Kind) | {"resources/read"}


def _error_status(reply: bytes) -> int:
    """The HTTP status of an encoded answer sent as JSON (rule 3)."""
    try:
        message = jsonrpc.decode(reply)
    except LocalProtocolError:
        return 200
    return http_status_for(message.code) if isinstance(message, ErrorResponse) else 200


def validate(
    router: Router,
    scope: h.Scope,
    request: Request,
    profile: str = DEFAULT_PROFILE,
    caller: Principal | None = None,
) -> tuple[Envelope, dict[str, Any]]:
    """Rule 1: the envelope, headers and method of a modern request.

    ``Mcp-Param-*`` headers are checked against the schema of the tool as
    ``caller`` sees it: a tool the access policy hides has none.

    Returns:
        The envelope and the decoded params.

    Raises:
        ModernProtocolError: the first failed check, with its code and status.
        LocalProtocolError: params that are not an object (-32602).
    """
    params = mcp.decode_params(request.params)
    headers = fold_headers(
        (bytes(k).decode("latin-1"), bytes(v).decode("latin-1")) for k, v in scope["headers"]
    )
    envelope = parse_modern(request.method, params, headers)
    check_method(request.method)
    if request.method == "tools/call":
        schema = router.public_tool_schema(params.get("name"), profile, caller)
        if schema is not None:
            check_param_headers(schema, params.get("arguments"), headers)
    return envelope, params


def finish(router: Router, request: Request, params: dict[str, Any], reply: bytes) -> bytes:
    """Rule 4: the router's encoded answer as a modern client receives it."""
    if not reply:
        return reply
    message = jsonrpc.decode(reply)
    if not isinstance(message, Response):
        return reply
    result = mcp.decode_object(message.result)
    if result is None:
        return reply
    # A list page's hint was merged by the router from the backends' own
    # (router/lists), a read's is its backend's (router/modern); anything
    # else gets the safe default.
    hint = hint_of(result) if request.method in HINTED_METHODS else LEGACY_BACKEND_HINT
    body, dropped = modern_result(request.method, result, params, hint)
    for tool in dropped:
        logger.warning("tool.dropped", tool=tool.name, reason=tool.reason, era="2026-07-28")
    return jsonrpc.encode_response(request.id, mcp.encode(body))


async def _watch_disconnect(receive: h.Receive, cancel_scope: trio.CancelScope) -> None:
    """Cancel the request when its response stream closes (rule 5)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            cancel_scope.cancel()
            return


async def serve_modern(
    router: Router,
    scope: h.Scope,
    receive: h.Receive,
    send: h.Send,
    request: Request,
    listeners: Listeners | None = None,
    profile: str = DEFAULT_PROFILE,
    principal: str | None = None,
    callers: Callable[[str, str | None], AbstractContextManager[None]] | None = None,
    caller: Principal | None = None,
) -> None:
    """Answer one modern request POSTed to the endpoint of ``profile``.

    ``principal`` (its key) is whom the request was authenticated as: its
    cursors and ``requestState`` are made for, and checked against, it;
    ``caller`` is that principal itself, for the access policy.
    ``callers`` (``ClientRegistry.modern_caller``) names that principal as
    the caller of the request's backend sessions while it runs (a held
    call: until it ended, over its rounds), so a ``token_exchange``
    backend exchanges that caller's token and a ``user_consent`` one uses
    that principal's.

    ``subscriptions/listen`` goes to ``frontend.listen`` when ``listeners`` is given.

    Raises:
        Rejection: a failed check (rule 1), answered by ``rejection.answer``.
    """
    try:
        envelope, params = validate(router, scope, request, profile, caller)
        asked = parse_filter(params) if request.method == LISTEN else None
    except (ModernProtocolError, LocalProtocolError) as exc:
        status = http_status_for(exc.code)
        raise Rejection(
            status, exc.message, code=exc.code, msg_id=request.id, data=exc.data
        ) from None
    if asked is not None and listeners is not None:
        try:
            await serve_listen(
                router, listeners, receive, send, request, envelope, asked, profile, caller
            )
        except ListenLimitReached as exc:  # raised before the stream starts
            raise Rejection(
                TOO_MANY_STREAMS,
                exc.message,
                code=exc.code,
                msg_id=request.id,
                data=exc.data,
                reason="listen_limit",
            ) from None
        return
    if request.method == "server/discover":
        version = envelope.protocol_version
        with tracing.answered(request.method, params, version=version, profile=profile):
            result = mcp.encode(router.discover_result(profile))
        await h.respond(send, 200, jsonrpc.encode_response(request.id, result))
        return

    async def route(emit: Emit) -> bytes:
        """Route under a scope the stream's closing cancels (rule 5); b"" if it did."""
        modern = ModernRequest(
            envelope=envelope, emit=emit, profile=profile, principal=principal, caller=caller
        )
        reply = b""
        naming = ExitStack()
        if callers is not None:
            naming.enter_context(callers(modern.session_id, principal))
        try:
            reply = await _route(modern)
        finally:
            held = modern.held
            if held is not None and held.awaiting_retry:
                # The call goes on in later rounds (a backend session it opens
                # then, e.g. after a sign-in, is still this caller's).
                held.when_done(naming.close)
            else:
                naming.close()
        return finish(router, request, params, reply)

    async def _route(modern: ModernRequest) -> bytes:
        reply = b""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_watch_disconnect, receive, nursery.cancel_scope)
            reply = await router.handle_modern(modern, request, params)
            nursery.cancel_scope.cancel()
        return reply

    await respond_to_request(send, None, route, _error_status)
