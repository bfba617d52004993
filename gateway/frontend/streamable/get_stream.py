"""A session's GET stream: what the gateway says to a host unasked.

Notifications (list_changed) and server-to-client requests with no POST
stream to ride on wait in the session's outbox; the GET stream writes them
as SSE events with their outbox ids, so a host that reconnects with
``Last-Event-ID`` gets what it missed (as long as the ring still holds it).
One stream per session; while it is open the session does not expire.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import trio

from gateway.frontend import http_util as h
from gateway.frontend.http_util import KEEPALIVE_INTERVAL
from gateway.frontend.rejection import Rejection
from gateway.protocol.headers import LAST_EVENT_ID_HEADER_RAW, MCP_SESSION_ID_HEADER_RAW

if TYPE_CHECKING:
    from gateway.frontend.clients import ClientSession


async def serve_get_stream(
    scope: h.Scope, receive: h.Receive, send: h.Send, session: ClientSession
) -> None:
    """Stream ``session``'s outbox until the host hangs up or the session ends.

    Raises:
        Rejection: the session already has a GET stream (409).
    """
    if session.stream_open:
        raise Rejection(409, "Conflict: this session already has a GET stream")
    last_id = session.outbox.last_id
    resume = h.header(scope, LAST_EVENT_ID_HEADER_RAW)
    if resume is not None and resume.isdigit():
        last_id = min(int(resume), session.outbox.last_id)
    session.stream_open = True
    try:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", h.EVENT_STREAM),
                    (b"cache-control", b"no-cache"),
                    (MCP_SESSION_ID_HEADER_RAW, session.session_id.encode("ascii")),
                ],
            }
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(h.cancel_on_disconnect, receive, nursery.cancel_scope)
            await _stream_outbox(session, send, last_id)
            nursery.cancel_scope.cancel()
    finally:
        session.stream_open = False
        session.last_seen = trio.current_time()


async def _stream_outbox(session: ClientSession, send: h.Send, last_id: int) -> None:
    """Write the outbox as it fills, with a keep-alive comment every ``KEEPALIVE_INTERVAL``.

    A broadcast wakes every stream at once, so the per-event path is kept
    bare: one cancel scope per keep-alive period, not per event (a scope
    entered per wait was the largest trio-side cost of a 10,000-stream
    fan-out, docs/performance.md). The period's deadline is lifted while a
    batch is written, so it can only end a wait, never cut an event in two
    on a slow socket; the host hanging up or the session ending still
    cancels a write through the stream's nursery. A busy stream also gets
    the comment each period: harmless, and it keeps the timer off the
    per-event path.
    """
    outbox = session.outbox
    await send({"type": "http.response.body", "body": b": stream open\n\n", "more_body": True})
    while not session.closed:
        with trio.move_on_after(KEEPALIVE_INTERVAL) as period:
            due = period.deadline
            while not session.closed:
                batch = await outbox.wait_after(last_id)
                period.deadline = math.inf
                if period.cancel_called:  # due between the wake-up and now: not written yet
                    break
                for event_id, message in batch:
                    if message:  # empty: the wake-up sent when the session closes
                        await send(
                            {
                                "type": "http.response.body",
                                "body": h.sse_event(message, event_id),
                                "more_body": True,
                            }
                        )
                    last_id = event_id
                period.deadline = due
        if not session.closed:
            await send(
                {"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True}
            )
    await send({"type": "http.response.body", "body": b"", "more_body": False})
