"""The MCP Streamable HTTP endpoint (``/mcp``): POST, GET and DELETE.

Checks run cheapest first and each has its own status, so a host learns
exactly what was wrong: Origin/Host (403), method (405), media types
(415/406), size (413), JSON (400 -32700), session (400/404), protocol
version header (400). A check that fails raises a
:class:`~gateway.frontend.rejection.Rejection`; ``rejection.answer`` (run by
the ASGI app) writes it, so no handler here writes a refusal itself.

What a POSTed request's response looks like (JSON first, SSE when needed)
is ``post_response.py``; the GET stream is ``get_stream.py``.

With a shared store, a session another replica opened is served from its
record (``session_records.py``); what only the replica holding the host's
GET stream can do is refused with its own answer: the GET itself (409) and
``resources/subscribe``/``unsubscribe`` (-32601, "not available here").

One module past 450 lines because it is one idea: the endpoint's checks in
their order and the three methods they guard; the responses and the GET
stream already live in modules of their own.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Final

import structlog
import trio

from gateway.catalog.profiles import DEFAULT_PROFILE
from gateway.errors import INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, LocalProtocolError
from gateway.frontend import http_util as h
from gateway.frontend.client_messages import (
    accept_one_way,
    cancel_target,
    open_client_session,
    route_request,
)
from gateway.frontend.clients import MAX_SESSION_ID_CHARS
from gateway.frontend.guard import Guard, too_many
from gateway.frontend.rejection import Rejection
from gateway.frontend.stateless.post import serve_modern
from gateway.frontend.streamable.get_stream import serve_get_stream
from gateway.frontend.streamable.post_response import may_emit_related, respond_to_request
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.eras import (
    is_modern_notification,
    is_modern_request,
    sessionless_get_or_delete_is_modern,
)
from gateway.protocol.headers import (
    JSON_MEDIA_TYPE,
    MCP_SESSION_ID_HEADER_RAW,
    SSE_MEDIA_TYPE,
)
from gateway.protocol.jsonrpc import Notification, Request
from gateway.protocol.versions import SUPPORTED_VERSIONS, supports_batches

if TYPE_CHECKING:
    from collections.abc import Callable

    from gateway.frontend.clients import ClientRegistry, ClientSession
    from gateway.frontend.origin import OriginPolicy
    from gateway.frontend.rate_limits import RateLimiter
    from gateway.frontend.session_records import SessionRecords
    from gateway.frontend.shared_limits import SharedLimiter
    from gateway.identity.authenticator import AuthHolder
    from gateway.identity.principal import Principal
    from gateway.router import Emit, Router
    from gateway.telemetry.metrics import Metrics

logger = structlog.get_logger("gateway.frontend")

#: What a replica that does not hold the session's GET stream cannot serve:
#: the notifications they start would reach no stream (docs/operations.md).
NEEDS_STREAM_HOLDER: Final = frozenset({"resources/subscribe", "resources/unsubscribe"})
STREAM_ELSEWHERE: Final = (
    "this session's stream is held by another gateway replica; route requests by "
    "Mcp-Session-Id to the replica that opened it (docs/operations.md)"
)


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")


def _params(message: Request | Notification) -> object:
    """The params' ``_meta`` as an object, or None: only to tell the era (eras.py)."""
    return mcp.decode_meta(message.params)


def _decode_error_id(exc: LocalProtocolError) -> jsonrpc.RequestId | None:
    return exc.data.get("id") if isinstance(exc.data, dict) else None


class McpEndpoint:
    """Serves one MCP endpoint path.

    Args:
        router: routes requests to backends.
        clients: the client-session registry.
        origin_policy: Origin/Host checks.
        max_body_bytes: the largest POST body accepted.
        is_draining: returns True while the gateway shuts down (503).
        auth: holds the authenticator in force (a reload swaps it).
        session_limiter: the per-session token buckets.
        principal_limiter: the per-credential token buckets.
        metrics: where unexpected exceptions while routing are counted.
        records: the shared store's session records (None: sessions live in
            this process only).
    """

    def __init__(
        self,
        router: Router,
        clients: ClientRegistry,
        origin_policy: OriginPolicy,
        *,
        max_body_bytes: int,
        is_draining: Callable[[], bool] = lambda: False,
        auth: AuthHolder | None = None,
        session_limiter: RateLimiter | None = None,
        principal_limiter: RateLimiter | SharedLimiter | None = None,
        metrics: Metrics | None = None,
        path: str = "/mcp",
        records: SessionRecords | None = None,
    ) -> None:
        self._router = router
        self._clients = clients
        self.guard = Guard(origin_policy, auth, principal_limiter, path, metrics)
        self._max_body = max_body_bytes
        self._is_draining = is_draining
        self._session_limiter = session_limiter
        self._metrics = metrics
        self._records = records
        self.activity = h.Activity()

    async def __call__(
        self, scope: h.Scope, receive: h.Receive, send: h.Send, profile: str = DEFAULT_PROFILE
    ) -> None:
        """Handle one HTTP request to the endpoint, on one profile's path.

        A session belongs to the profile it was opened on: its id on another
        profile's path is "Session not found" (404), as if it did not exist.

        Raises:
            Rejection: the request is refused (answered by ``rejection.answer``).
        """
        headers = h.mcp_headers(scope)
        principal = await self.guard.admit(scope, headers)
        method = scope["method"]
        if not self._router.access.opens(principal, profile, f"HTTP {method}"):
            # 403, not 404: profile paths are no secret (each has its own
            # resource metadata), and a host told "forbidden" knows to ask for
            # other access rather than to look for a typo (docs/security.md).
            raise Rejection(
                403,
                f"Forbidden: the access policy does not let this caller open "
                f"the profile {profile!r}",
                reason="policy",
            )
        # The latest token of this caller, for token_exchange backends.
        self._clients.note_caller(principal)
        if method in ("GET", "DELETE") and sessionless_get_or_delete_is_modern(
            _text(headers.session_id), _text(headers.protocol_version)
        ):
            # 2026-07-28 has no GET stream and no session to delete (eras.py).
            raise Rejection(
                405, f"Method {method} not allowed for 2026-07-28", headers=[(b"allow", b"POST")]
            )
        if method == "POST":
            with self.activity:
                await self._post(scope, headers, receive, send, profile, principal)
        elif method == "GET":
            if not h.accepts(scope, SSE_MEDIA_TYPE):
                raise Rejection(406, "Not Acceptable: Accept must list text/event-stream")
            session = await self._session_for(scope, headers, profile, principal)
            if session.owner_elsewhere:
                raise Rejection(409, f"Conflict: {STREAM_ELSEWHERE}")
            await serve_get_stream(scope, receive, send, session)
        elif method == "DELETE":
            session = await self._session_for(scope, headers, profile, principal)
            self._clients.close(session)
            if self._records is not None:
                await self._records.end(session)
            logger.info(
                "client.session.closed", client_session=session.session_id[:8], reason="delete"
            )
            await h.respond(send, 200)
        else:
            raise Rejection(
                405, f"Method {method} not allowed", headers=[(b"allow", b"GET, POST, DELETE")]
            )

    # -- session lookup ----------------------------------------------------

    async def _session_for(
        self, scope: h.Scope, headers: h.McpHeaders, profile: str, caller: Principal | None
    ) -> ClientSession:
        raw = headers.session_id
        who = None if caller is None else caller.key
        if raw is None:
            raise Rejection(400, "Bad Request: Mcp-Session-Id header is required")
        session = self._clients.get(raw.decode("ascii")) if raw.isascii() else None
        if session is None and self._records is not None and raw.isascii():
            session = await self._load(raw.decode("ascii"), profile, who, scope["method"])
        if session is None or session.profile != profile:
            raise Rejection(404, "Session not found")
        if session.principal != who:
            # Exactly the unknown-session answer: another principal must not
            # even learn that the id exists (issue 16 item 5).
            logger.warning(
                "auth.session.mismatch",
                client_session=session.session_id[:8],
                principal=who,
                owner=session.principal,
                method=scope["method"],
            )
            raise Rejection(404, "Session not found")
        version = headers.protocol_version
        if version is not None:
            text = version.decode("latin-1")
            if text not in SUPPORTED_VERSIONS:
                raise Rejection(
                    400,
                    f"Bad Request: unsupported MCP-Protocol-Version {text[:40]!r} "
                    f"(supported: {', '.join(SUPPORTED_VERSIONS)})",
                )
            # A supported version other than the negotiated one is accepted:
            # the spec asks hosts to send the negotiated one (SHOULD) but makes
            # only unsupported values an error, and the official conformance
            # suite (server-sse-multiple-streams) relies on exactly that.
        session.last_seen = trio.current_time()
        session.caller = caller  # the same key; its claims may be fresher
        if self._session_limiter is not None:
            wait = self._session_limiter.check(session.session_id, session.last_seen)
            if wait:
                raise too_many(wait)
        return session

    async def _load(
        self, session_id: str, profile: str, who: str | None, method: str
    ) -> ClientSession | None:
        """A copy of a session another replica opened, when its record matches the request."""
        assert self._records is not None
        if len(session_id) > MAX_SESSION_ID_CHARS:
            return None
        found = await self._records.fetch(session_id)
        if found is None:
            return None
        record, value = found
        if record.profile != profile:
            return None
        if record.principal != who:
            # The unknown-session answer, as for a session held here.
            logger.warning(
                "auth.session.mismatch",
                client_session=session_id[:8],
                principal=who,
                owner=record.principal,
                method=method,
            )
            return None
        if len(self._clients) >= self._clients.max_sessions:
            raise Rejection(
                503, "too many open sessions", code=INTERNAL_ERROR, headers=[(b"retry-after", b"5")]
            )
        return self._records.adopt(session_id, record, value)

    # -- POST --------------------------------------------------------------

    async def _read_message(
        self, headers: h.McpHeaders, receive: h.Receive
    ) -> jsonrpc.Message | list[jsonrpc.Message | LocalProtocolError]:
        if self._is_draining():
            raise Rejection(
                503,
                "gateway is shutting down",
                code=INTERNAL_ERROR,
                headers=[(b"retry-after", b"1")],
            )
        if JSON_MEDIA_TYPE not in h.media_types(headers.content_type):
            raise Rejection(415, "Unsupported Media Type: Content-Type must be application/json")
        accepted = h.media_types(headers.accept)
        if not (
            h.accepts_type(accepted, JSON_MEDIA_TYPE) and h.accepts_type(accepted, SSE_MEDIA_TYPE)
        ):
            raise Rejection(
                406, "Not Acceptable: Accept must list application/json and text/event-stream"
            )
        too_large = f"Payload Too Large: limit is {self._max_body} bytes"
        length = headers.content_length
        if length is not None and length.isdigit() and int(length) > self._max_body:
            raise Rejection(413, too_large)  # refused before reading (A24)
        try:
            body = await h.read_body(receive, self._max_body)
        except h.BodyTooLarge:
            raise Rejection(413, too_large) from None
        try:
            return jsonrpc.decode(body)
        except LocalProtocolError as exc:
            raise Rejection(400, exc.message, code=exc.code, msg_id=_decode_error_id(exc)) from None

    async def _post(
        self,
        scope: h.Scope,
        headers: h.McpHeaders,
        receive: h.Receive,
        send: h.Send,
        profile: str,
        caller: Principal | None,
    ) -> None:
        message = await self._read_message(headers, receive)
        session_id = _text(headers.session_id)
        version = _text(headers.protocol_version)
        # By type first: each type is tested once (a request took five tests).
        if isinstance(message, list):
            await self._post_batch(scope, headers, send, message, profile, caller)
        elif isinstance(message, Request):
            if is_modern_request(_params(message), session_id, version):
                await serve_modern(
                    self._router,
                    scope,
                    receive,
                    send,
                    message,
                    self._clients.listeners,
                    profile=profile,
                    principal=None if caller is None else caller.key,
                    caller=caller,
                    callers=self._clients.modern_caller,
                )
            elif message.method == "initialize":
                await self._initialize(headers, send, message, profile, caller)
            else:
                session = await self._session_for(scope, headers, profile, caller)
                await self._post_request(send, session, message)
        elif isinstance(message, Notification) and is_modern_notification(
            _params(message), session_id, version
        ):
            await h.respond(send, 202)  # nothing to do: a modern client cancels by closing
        else:
            session = await self._session_for(scope, headers, profile, caller)
            await accept_one_way(self._router, session, message, metrics=self._metrics)
            await self._cancel_elsewhere(session, message)
            await h.respond(send, 202)

    async def _post_batch(
        self,
        scope: h.Scope,
        headers: h.McpHeaders,
        send: h.Send,
        members: list[jsonrpc.Message | LocalProtocolError],
        profile: str,
        caller: Principal | None,
    ) -> None:
        # Batches exist only in 2025-03-26 (robustness A6/A7).
        session = await self._session_for(scope, headers, profile, caller)
        if not supports_batches(session.protocol_version):
            raise Rejection(
                400,
                "invalid request: JSON-RPC batches are not part of protocol "
                + session.protocol_version,
            )
        replies: list[bytes] = []
        for member in members:
            if isinstance(member, LocalProtocolError):
                replies.append(
                    jsonrpc.encode_error(_decode_error_id(member), member.code, member.message)
                )
            elif isinstance(member, Request):
                if member.method == "initialize":
                    replies.append(
                        jsonrpc.encode_error(
                            member.id, INVALID_REQUEST, "initialize cannot be part of a batch"
                        )
                    )
                else:
                    replies.append(await self._route(session, member, None))
            else:
                await accept_one_way(self._router, session, member, metrics=self._metrics)
        if not replies:
            await h.respond(send, 202)
            return
        await h.respond(send, 200, b"[" + b",".join(replies) + b"]")

    async def _initialize(
        self,
        headers: h.McpHeaders,
        send: h.Send,
        request: Request,
        profile: str,
        caller: Principal | None,
    ) -> None:
        if headers.session_id is not None:
            raise Rejection(
                400,
                "invalid request: this session is already initialized; "
                "send initialize without Mcp-Session-Id to start a new one",
                msg_id=request.id,
            )
        version_header = headers.protocol_version
        asked = None if version_header is None else version_header.decode("latin-1")
        if asked is not None and asked not in SUPPORTED_VERSIONS:
            raise Rejection(
                400,
                f"Bad Request: unsupported MCP-Protocol-Version {asked[:40]!r}",
                msg_id=request.id,
            )
        if len(self._clients) >= self._clients.max_sessions:
            raise Rejection(
                503,
                "too many open sessions",
                code=INTERNAL_ERROR,
                msg_id=request.id,
                headers=[(b"retry-after", b"5")],
            )
        try:
            session, body = open_client_session(
                self._router,
                self._clients,
                request,
                profile,
                None if caller is None else caller.key,
                caller,
            )
        except LocalProtocolError as exc:
            await h.respond(send, 200, jsonrpc.encode_error(request.id, exc.code, exc.message))
            return
        if self._records is not None:
            await self._records.save(session)  # before the host can use the id anywhere
        await h.respond(
            send,
            200,
            body,
            headers=[(MCP_SESSION_ID_HEADER_RAW, session.session_id.encode("ascii"))],
        )

    async def _cancel_elsewhere(self, session: ClientSession, message: jsonrpc.Message) -> None:
        """A cancel of a request this replica does not run goes to the one that does."""
        if (
            self._records is None
            or not isinstance(message, Notification)
            or message.method != "notifications/cancelled"
        ):
            return
        target = cancel_target(message)
        if target is not None and target not in session.inflight:
            await self._records.cancel_elsewhere(session, target)

    async def _route(self, session: ClientSession, request: Request, emit: Emit | None) -> bytes:
        """Route one request of a session; what needs the stream's replica is refused here."""
        if session.owner_elsewhere and request.method in NEEDS_STREAM_HOLDER:
            return jsonrpc.encode_error(
                request.id,
                METHOD_NOT_FOUND,
                f"{request.method} is not available here: " + STREAM_ELSEWHERE,
            )
        answer = await route_request(self._router, session, request, emit, metrics=self._metrics)
        if request.method == "logging/setLevel" and self._records is not None:
            await self._records.level_changed(session)  # before the host hears it is set
        return answer

    async def _post_request(self, send: h.Send, session: ClientSession, request: Request) -> None:
        # A partial, not a closure: one coroutine fewer to enter and resume.
        route = partial(self._route, session, request)
        may_emit = may_emit_related(session.capabilities, request.params)
        await respond_to_request(send, session.session_id, route, may_emit=may_emit)
