"""One POST of a Streamable HTTP session, and whatever comes back for it.

What comes back depends on the server and on the message: ``202`` and
nothing for a notification or a response; for a request, either one
``application/json`` body or a ``text/event-stream`` that carries the
request's notifications and server-to-client requests, then its response.
:func:`post` returns as soon as the response headers are in; the body is
read by its own task in the session's nursery, so a tool call that streams
for minutes never holds up another send.

Rules:

1. A request is never left hanging: when its POST fails with an HTTP
   status, a wrong content type or a stream that ends before the answer,
   the request gets a JSON-RPC error response (-32603, naming the cause)
   through ``receive`` (robustness D13).
2. An answer that means the server forgot our session breaks the session
   with ``SessionExpired`` (see ``streamable_session``). The transport never
   retries a message itself.
3. A POST stream cut before its answer, with an event id, is resumed by GET
   with ``Last-Event-ID`` after the server's ``retry:``; one that yields
   nothing new ``MAX_RESUME_ATTEMPTS`` times in a row is given up (rule 1).
4. A 2026-07-28 request (its ``_meta`` holds the envelope) is POSTed with
   its ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` and
   ``Mcp-Param-*`` headers and no session id; it is cancelled by closing
   its response (the revision's cancellation on HTTP), not by a POSTed
   ``notifications/cancelled``: also while its response headers are not
   in yet (the POST itself is cancelled), and after its answer (nothing is
   sent). On a session that speaks 2026-07-28 no ``notifications/cancelled``
   is ever POSTed: there is no session for it to name a request of.
5. A 2026-07-28 ``subscriptions/listen`` is answered with an event stream;
   a JSON body can only be its error or final result, written at once. One
   that has not ended within ``LISTEN_JSON_BODY_TIMEOUT`` (a server that
   streams a never-ending ``application/json`` body) fails the request
   with a -32603 naming what the server did (robustness E16).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Final

import msgspec
import trio

from gateway.errors import ConnectError, LocalProtocolError, TransportClosed, TransportError
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.stateless import backend_leg
from gateway.protocol.stateless.listen import LISTEN
from gateway.telemetry import tracing
from gateway.transports.base import map_exceptions
from gateway.transports.framing import SseParser
from gateway.transports.http_base import (
    HTTP_ERRORS,
    JSON_MEDIA_TYPE,
    LAST_EVENT_ID_HEADER,
    MAX_MESSAGE_BYTES,
    SSE_MEDIA_TYPE,
    Outgoing,
    close_response,
    describe_status,
    discard_body,
    error_message,
    media_type,
    read_body,
    read_sse,
    split_json_body,
)

if TYPE_CHECKING:
    import httpx

    from gateway.protocol.jsonrpc import RequestId
    from gateway.transports.framing import SseEvent
    from gateway.transports.streamable_session import HttpSession

POST_ACCEPT: Final = f"{JSON_MEDIA_TYPE}, {SSE_MEDIA_TYPE}"
# The notification that cancels a request; towards a modern backend over
# HTTP it closes the request's stream instead of being POSTed.
CANCELLED: Final = "notifications/cancelled"
# Resuming a POST's stream (GET with Last-Event-ID) that yields nothing new
# this many times in a row is given up; the request then fails (rule 1).
MAX_RESUME_ATTEMPTS: Final = 3
# How much of an error response is read to explain it (a JSON-RPC error
# body's message); the rest, an HTML page say, is not worth reading.
ERROR_BODY_LIMIT: Final = 16 * 1024
# How long the JSON body of a listen may take to end (rule 5): under the
# listen's acknowledgement wait (``listen_client.LISTEN_ACK_TIMEOUT``), so
# the failure names the body, not a missing acknowledgement.
LISTEN_JSON_BODY_TIMEOUT: Final = 2.0


async def post(session: HttpSession, message: bytes) -> Outgoing:
    """POST one message; return what it carried once the response headers are in.

    Raises:
        TransportClosed: the channel was closed.
        TransportBroken: the session ended (``SessionExpired`` when the server
            forgot it) or the POST failed.
        ConnectError: the backend could not be reached (the session breaks too).
    """
    session.check_open()
    outgoing = Outgoing.of(message)
    modern = _modern_headers(session, message)
    if modern is None:
        return outgoing  # a cancellation, done by closing the request's stream
    headers = session.request_headers(POST_ACCEPT)
    headers.update(modern)
    headers["content-type"] = JSON_MEDIA_TYPE
    trace = tracing.outgoing_http_headers()  # None unless tracing is on
    if trace is not None:
        headers.update(trace)
    if modern:
        outgoing = dataclasses.replace(outgoing, modern=True)
        session.speaks_modern = True
    elif outgoing.initialize_id is not None:
        session.speaks_modern = False
    listen = modern.get("Mcp-Method") == LISTEN
    request = session.client.build_request("POST", session.url, content=message, headers=headers)
    with session.stream_scope(outgoing) as waiting:
        # A modern request cancelled before its headers are in: the POST is
        # closed, which is the cancel (rule 4).
        response = await session.send(request)
    if waiting.cancelled_caught:
        return outgoing
    handed_off = False
    try:
        if session.closed:
            raise TransportClosed("channel closed")
        handed_off = _dispatch(session, response, outgoing, listen=listen)
    finally:
        if not handed_off:
            await discard_body(response)  # noqa: ASYNC102 - its close is shielded; a cancel skips only the drain
    return outgoing


def _modern_headers(session: HttpSession, message: bytes) -> dict[str, str] | None:
    """The 2026-07-28 headers of ``message``; None when it must not be POSTed (rule 4).

    A ``notifications/cancelled`` for a modern request still streaming is
    done the 2026-07-28 way, by closing that request's response stream.
    """
    try:
        decoded = jsonrpc.decode(message)
    except LocalProtocolError:
        return {}
    if isinstance(decoded, jsonrpc.Notification) and decoded.method == CANCELLED:
        body = mcp.decode_object(decoded.params) if decoded.params is not None else None
        target = body.get("requestId") if body else None
        scope = session.modern_streams.get(target) if isinstance(target, int | str) else None
        if scope is not None:
            scope.cancel()
            return None
        return None if session.speaks_modern else {}
    if not isinstance(decoded, jsonrpc.Request) or decoded.params is None:
        return {}
    params = mcp.decode_object(decoded.params)
    return backend_leg.http_headers(decoded.method, params, session.tool_schema)


def _dispatch(
    session: HttpSession, response: httpx.Response, outgoing: Outgoing, *, listen: bool = False
) -> bool:
    """Decide what a POST's response means; True when a task now owns it.

    ``listen``: the POST is a 2026-07-28 ``subscriptions/listen`` (rule 5).
    """
    status = response.status_code
    if session.expire_on(status):
        session.inbox.raise_if_ended()
    kind = media_type(response)
    if 200 <= status < 300:
        if outgoing.initialize_id is not None:
            session.capture_session_id(response)
        if status in (202, 204):
            return False
        if kind == JSON_MEDIA_TYPE:
            limit = LISTEN_JSON_BODY_TIMEOUT if listen else math.inf
            session.nursery.start_soon(_read_json, session, response, outgoing, limit)
            return True
        if kind == SSE_MEDIA_TYPE:
            session.nursery.start_soon(_read_stream, session, response, outgoing)
            return True
        if not outgoing.request_ids and not kind:
            return False  # a bodiless 200 to a notification: fine
    elif 400 <= status < 500 and status != 401 and kind == SSE_MEDIA_TYPE and outgoing.modern:
        # A 2026-07-28 refusal streamed as SSE: its JSON-RPC error is the answer.
        session.nursery.start_soon(_read_stream, session, response, outgoing)
        return True
    problem = describe_status(response)
    if 200 <= status < 300 or kind not in (JSON_MEDIA_TYPE, ""):
        problem += f" ({kind or 'no content type'})"
    if not outgoing.request_ids:
        session.log.warning("backend.http.post.rejected", problem=problem)
        return False
    session.nursery.start_soon(_fail_from_response, session, response, outgoing, problem)
    return True


async def _deliver(
    session: HttpSession, message: bytes, outgoing: Outgoing, awaiting: set[RequestId]
) -> None:
    """Note what the message answers, then hand it to ``receive``."""
    if awaiting:
        try:
            decoded = jsonrpc.decode(message)
        except LocalProtocolError:
            decoded = []
        for member in decoded if isinstance(decoded, list) else [decoded]:
            if isinstance(member, jsonrpc.Response | jsonrpc.ErrorResponse):
                if member.id is not None:
                    awaiting.discard(member.id)
                if isinstance(member, jsonrpc.Response) and member.id == outgoing.initialize_id:
                    # Peeked at in passing so that every later request
                    # carries MCP-Protocol-Version (2025-06-18).
                    session.learn_version(member.result)
    await session.deliver(message)


async def _read_json(
    session: HttpSession, response: httpx.Response, outgoing: Outgoing, limit: float
) -> None:
    with session.stream_scope(outgoing):
        await _read_json_body(session, response, outgoing, limit)


async def _read_json_body(
    session: HttpSession, response: httpx.Response, outgoing: Outgoing, limit: float
) -> None:
    awaiting = set(outgoing.request_ids)
    problem = "backend ended the response without answering"
    try:
        with trio.move_on_after(limit) as scope:
            body = await read_body(response, MAX_MESSAGE_BYTES)
        if scope.cancelled_caught:
            problem = (
                f"{LISTEN} answered {response.status_code} {JSON_MEDIA_TYPE}, not an event "
                f"stream, and the body had not ended after {limit:g} s"
            )
            body = b""
        for message in split_json_body(body):
            await _deliver(session, message, outgoing, awaiting)
    except TransportError as exc:
        problem = f"backend response failed: {exc}"
    except msgspec.DecodeError:
        problem = "backend sent a body that is not JSON"
    finally:
        await close_response(response)  # noqa: ASYNC102 - shields itself, with a deadline
    await session.fail(awaiting, problem)


async def _read_stream(session: HttpSession, response: httpx.Response, outgoing: Outgoing) -> None:
    with session.stream_scope(outgoing):
        await _read_stream_body(session, response, outgoing)


async def _read_stream_body(
    session: HttpSession, response: httpx.Response, outgoing: Outgoing
) -> None:
    awaiting = set(outgoing.request_ids)
    parser = SseParser(MAX_MESSAGE_BYTES)
    problem = "backend closed the stream before answering"
    try:
        await _pump(session, response, parser, outgoing, awaiting)
    except TransportError as exc:
        problem = f"backend stream failed: {exc}"
    finally:
        await close_response(response)  # noqa: ASYNC102 - shields itself, with a deadline
    # A stream with event ids can be resumed where it stopped (spec,
    # "Resumability and Redelivery"; 2025-11-25 servers close POST
    # streams on purpose and expect the client to poll this way).
    idle = 0
    while awaiting and parser.last_event_id and idle < MAX_RESUME_ATTEMPTS:
        if session.inbox.ended is not None:
            return
        await trio.sleep(session.reconnect_delay(parser.retry))
        before = (parser.last_event_id, len(awaiting))
        if not await _resume(session, parser, outgoing, awaiting):
            break
        idle = 0 if (parser.last_event_id, len(awaiting)) != before else idle + 1
    await session.fail(awaiting, problem)


async def _pump(
    session: HttpSession,
    response: httpx.Response,
    parser: SseParser,
    outgoing: Outgoing,
    awaiting: set[RequestId],
) -> None:
    """Deliver a POST stream's messages until it ends or has answered everything.

    Reading stops once every request of the POST is answered: the server
    has nothing more to say there (spec: it SHOULD close the stream after
    the response), and a resumed stream may stay open regardless, which
    would hold a connection for the channel's life.
    """
    with trio.CancelScope() as scope:

        async def on_event(event: SseEvent) -> None:
            if event.event == "message" and event.data:
                await _deliver(session, event.data.encode(), outgoing, awaiting)
                if outgoing.request_ids and not awaiting:
                    scope.cancel()

        await read_sse(response, parser, on_event)


async def _resume(
    session: HttpSession, parser: SseParser, outgoing: Outgoing, awaiting: set[RequestId]
) -> bool:
    """One GET with Last-Event-ID for a POST's stream; False when refused."""
    headers = session.request_headers(SSE_MEDIA_TYPE)
    headers[LAST_EVENT_ID_HEADER] = parser.last_event_id
    try:
        with map_exceptions(HTTP_ERRORS):
            async with session.client.stream("GET", session.url, headers=headers) as response:
                if session.expire_on(response.status_code):
                    return False
                if response.status_code != 200 or media_type(response) != SSE_MEDIA_TYPE:
                    session.log.debug("backend.http.resume.refused", status=response.status_code)
                    return False
                await _pump(session, response, parser, outgoing, awaiting)
    except ConnectError as exc:
        session.unreachable(exc)
        return False
    except TransportError as exc:
        session.log.debug("backend.http.resume.dropped", error=str(exc))
    return True


def own_errors(body: bytes, unanswered: set[RequestId], *, modern: bool = False) -> list[bytes]:
    """The JSON-RPC error responses in ``body`` that answer requests of ours.

    Each one's id leaves ``unanswered``; anything else in the body is ignored.
    For a 2026-07-28 POST (``modern``), an error with a null id (the server
    refused the POST before it read the id: a header check, a missing
    capability) answers the POST's one request, code and data intact, when
    it carried exactly one. A handshake-era server's null-id error is about
    the transport ("No valid session ID"), not the request.
    """
    found: list[bytes] = []
    try:
        messages = split_json_body(body)
    except msgspec.DecodeError:
        return found
    for message in messages:
        try:
            decoded = jsonrpc.decode(message)
        except LocalProtocolError:
            continue
        if not isinstance(decoded, jsonrpc.ErrorResponse):
            continue
        if decoded.id in unanswered:
            unanswered.discard(decoded.id)
            found.append(message)
        elif modern and decoded.id is None and len(unanswered) == 1 and len(messages) == 1:
            only = unanswered.pop()
            found.append(jsonrpc.encode_error(only, decoded.code, decoded.message, decoded.data))
    return found


async def _fail_from_response(
    session: HttpSession, response: httpx.Response, outgoing: Outgoing, problem: str
) -> None:
    """Rule 1: answer the POST's requests with an error naming what went wrong."""
    detail = None
    body = b""
    try:
        if media_type(response) == JSON_MEDIA_TYPE:
            body = await read_body(response, ERROR_BODY_LIMIT)
            detail = error_message(body)
    except TransportError:
        pass
    finally:
        await close_response(response)  # noqa: ASYNC102 - shields itself, with a deadline
    if detail:
        problem = f"{problem}: {detail}"
    if response.status_code == 401:
        # After the credential's one retry with a fresh token (if it has one).
        problem = f"backend {session.backend!r} refused the gateway's credential: {problem}"
    session.log.warning(
        "backend.http.post.failed", problem=problem, requests=len(outgoing.request_ids)
    )
    unanswered = set(outgoing.request_ids)
    if response.status_code != 401:
        # A 2026-07-28 server answers a refused request with HTTP 4xx and a
        # JSON-RPC error for it (-32022 naming its versions, -32020, -32602):
        # that error is the answer, code and data intact, not a transport fault.
        for message in own_errors(body, unanswered, modern=outgoing.modern):
            await session.deliver(message)
    await session.fail(unanswered, problem, status=response.status_code)
    # After the requests are answered: a 400 may name a forgotten session.
    session.expire_on(response.status_code, detail)
