"""The response to one POSTed request: JSON first, SSE only when needed.

The response headers wait for the first thing there is to say about the
request. When that is the answer, it goes out as ``application/json``;
when something comes first (progress, a server-to-client request), the
response switches to ``text/event-stream``, carries those messages as they
come and ends with the answer. Measured on the official SDK, JSON costs
about half the CPU of SSE (docs/architecture.md, "JSON first").

Only a request that has something to say before its answer pays for a
writer task, and that task belongs to the request's own nursery: it cannot
outlive the request, and the request cannot end before it has written.

A request that cannot have anything to say first (no progress token, and a
client that declared none of the capabilities a backend's question needs)
takes the plain path: no nursery, no writer, the route runs in the POST's
own task and its answer is one JSON body. The nursery alone cost about
9 µs a POST (docs/performance.md).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Final

import trio

from gateway.frontend import http_util as h
from gateway.protocol.headers import MCP_SESSION_ID_HEADER_RAW
from gateway.router.to_clients import ASKABLE_FEATURES

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping
    from typing import Any

    import msgspec

    from gateway.router import Emit

# Progress and server-to-client requests queued for one POST's stream while
# it is being written; beyond this, progress is dropped (it is advisory) and
# questions go to the GET stream instead, so a slow host cannot make the
# gateway buffer without bound.
RELATED_MESSAGE_BUFFER: Final = 64


def may_emit_related(capabilities: Mapping[str, Any], params: msgspec.Raw | None) -> bool:
    """Whether a handshake-era request may have messages to send before its answer.

    Two things can come first: progress, only for a request whose ``_meta``
    carries a ``progressToken``, and a backend's question (sampling,
    elicitation, roots), only to a client that declared that capability
    (``router/to_clients.py`` refuses it otherwise). The token is looked
    for in the raw bytes, without decoding: a false "yes" (the word in an
    argument) costs the nursery, never a message. JSON may spell a key with
    escapes (``"progress\\u0054oken"``), so any ``\\u00`` escape in the params
    counts as a "yes" too.
    """
    if not ASKABLE_FEATURES.isdisjoint(capabilities):
        return True
    if params is None:
        return False
    raw = bytes(params)
    return b"progressToken" in raw or b"\\u00" in raw


def _refuse(message: bytes) -> bool:
    """The ``Emit`` of the plain path: nothing is streamed, the caller falls back.

    Falling back is what every caller of an ``Emit`` already does when a
    stream is full or over: progress is dropped, a question goes to the GET
    stream. On the plain path neither can arise (see ``may_emit``), so this
    only keeps a wrong guess from losing a question.
    """
    return False


async def respond_to_request(
    send: h.Send,
    session_id: str | None,
    route: Callable[[Emit], Awaitable[bytes]],
    json_status: Callable[[bytes], int] | None = None,
    *,
    may_emit: bool = True,
) -> None:
    """Route one request with ``route`` and write its response.

    Args:
        send: the POST's ASGI ``send``.
        session_id: the client session, echoed in the SSE response's headers;
            ``None`` for a modern request, which has none.
        route: routes the request, handing related messages to the ``Emit``
            it is given; returns the encoded answer, or ``b""`` when the host
            cancelled the request.
        json_status: the HTTP status of an answer sent as JSON (a modern
            error has its own); 200 when not given. An answer at the end of
            an SSE stream goes out under the stream's 200.
        may_emit: False when the request cannot have related messages
            (:func:`may_emit_related`): the plain JSON path, with no nursery.
    """
    if not may_emit:
        reply = await route(_refuse)
        if reply:
            await h.respond(send, 200 if json_status is None else json_status(reply), reply)
        else:
            await _EventStream(send, session_id).end()  # cancelled by the host
        return
    stream = _EventStream(send, session_id)
    async with trio.open_nursery() as nursery:
        related = _RelatedWriter(stream, nursery)
        try:
            reply = await route(related.emit)
        finally:
            related.close()  # the nursery waits for the writer to drain
    if related.started:
        if reply:
            await stream.event(reply)
        await stream.end()
    elif reply:
        await h.respond(send, 200 if json_status is None else json_status(reply), reply)
    else:
        await stream.end()  # cancelled by the host: no answer at all


class _RelatedWriter:
    """Writes a request's related messages (progress, questions) as they come.

    ``emit`` is called synchronously from wherever the message arises; the
    first call starts one writer task, which switches the response to SSE and
    drains the queue in order. The request's nursery waits for the writer
    before the final answer is written, so the answer is always the last event.
    """

    def __init__(self, stream: _EventStream, nursery: trio.Nursery) -> None:
        self._stream = stream
        self._nursery = nursery
        self._queue: deque[bytes] = deque()
        self._wake = trio.Event()
        self._closed = False
        self.started = False

    def emit(self, message: bytes) -> bool:
        """Queue one message; False when full or over (the caller falls back)."""
        if self._closed or len(self._queue) >= RELATED_MESSAGE_BUFFER:
            return False
        self._queue.append(message)
        if not self.started:
            self.started = True
            self._nursery.start_soon(self._run)
        self._wake.set()
        return True

    async def _run(self) -> None:
        while True:
            while self._queue:
                await self._stream.event(self._queue.popleft())
            if self._closed:
                return
            self._wake = trio.Event()
            await self._wake.wait()

    def close(self) -> None:
        """No more messages: the writer drains what is queued and stops."""
        self._closed = True
        self._wake.set()


class _EventStream:
    """The SSE response of one POST, started on its first event."""

    def __init__(self, send: h.Send, session_id: str | None) -> None:
        self._send = send
        self._session_id = session_id
        self.started = False
        self.broken = False

    async def _write(self, message: h.Message) -> None:
        if self.broken:
            return
        try:
            await self._send(message)
        except Exception:  # the host went away; the call still completes (spec: not a cancel)
            self.broken = True

    async def _start(self) -> None:
        self.started = True
        headers = [(b"content-type", h.EVENT_STREAM), (b"cache-control", b"no-cache")]
        if self._session_id is not None:
            headers.append((MCP_SESSION_ID_HEADER_RAW, self._session_id.encode("ascii")))
        else:
            headers.append((b"x-accel-buffering", b"no"))  # streamable-http.mdx: SHOULD
        await self._write({"type": "http.response.start", "status": 200, "headers": headers})

    async def event(self, message: bytes) -> None:
        """Send one JSON-RPC message as an SSE event."""
        if not self.started:
            await self._start()
        await self._write(
            {"type": "http.response.body", "body": h.sse_event(message), "more_body": True}
        )

    async def end(self) -> None:
        """Finish the response."""
        if not self.started:
            await self._start()
        await self._write({"type": "http.response.body", "body": b"", "more_body": False})
