"""One HTTP request on the HTTP/1.1 engine, as the ASGI ``receive`` and ``send`` of the app.

Theory of operation:

- **receive** hands the app the request body, all that is buffered in one
  message (a small POST is one call), then, once the body is complete, waits
  for the host to hang up and returns ``http.disconnect``: the frontend's
  streams and modern requests cancel on it. While it waits it reads the
  socket, so a pipelined next request is parsed and queued (about one
  header block's worth and one read at most; then it only waits for the
  response to end).
  The host closing its side (EOF, a half-close included) counts as a
  disconnect, as it does on hypercorn.
- **send** holds ``http.response.start`` back until the first body message,
  so a complete response (status line, headers, body up to 64 KiB) leaves in
  one ``send_all``; a larger body follows the head in a write of its own
  rather than be copied. A streamed response (``more_body``) is chunked and each
  message is written, so flushed, as it comes (SSE).
- A write to a host that is gone is dropped, not raised: a call in flight
  still completes (the spec: a disconnect is not a cancellation), and the
  connection is closed after the app returns.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final
from urllib.parse import unquote

import trio

from gateway.frontend.engine import http1_response as wire_format
from gateway.frontend.engine.request_parser import END, Request, RequestParser
from gateway.transports import fd_io

if TYPE_CHECKING:
    from collections.abc import Callable

    from gateway.frontend import http_util as h

# The most read from a socket at once: a typical request in one read, and
# a bound on what one read can add to the parser's queue.
READ_SIZE: Final = 64 * 1024

_DISCONNECT: Final = {"type": "http.disconnect"}
_ASGI: Final = {"version": "3.0", "spec_version": "2.3"}
_CLOSE: Final = (b"connection", b"close")
_CHUNKED: Final = (b"transfer-encoding", b"chunked")
# Bodies up to this size leave in the same write as the head (one syscall a
# response); larger ones in a write of their own, so they are not copied.
COALESCE_LIMIT: Final = 64 * 1024


class Wire:
    """One connection's stream and parser, shared by its successive exchanges.

    Args:
        stream: the accepted stream (TCP, or TLS over it).
        max_header_bytes: the largest request head; also the most bytes of
            a next request buffered while a response is still being produced.
        body_timeout: the longest wait for the next bytes of a request body;
            a host silent that long mid-body is treated as gone.
    """

    def __init__(
        self, stream: trio.abc.Stream, max_header_bytes: int, body_timeout: float = math.inf
    ) -> None:
        self.stream = stream
        self.max_header_bytes = max_header_bytes
        self.body_timeout = body_timeout
        self.parser = RequestParser(max_header_bytes)
        # The host hung up or a write failed: nothing more is read or written.
        self.broken = False
        # Close after this response: it said so, or it was cut.
        self.must_close = False
        # Input from the host we did not read (a refused or unread body):
        # the close lets the host finish sending first (http1_server._close).
        self.unread = False
        # Plain TCP is written through its descriptor (fd_io: no scheduler
        # pass when the kernel takes the bytes); TLS through its stream.
        self._socket = stream.socket if isinstance(stream, trio.SocketStream) else None
        self._writing = False

    async def read(self) -> bytes:
        """Bytes from the host; ``b""`` once it closed or the stream broke."""
        if self.broken:
            return b""
        try:
            data = bytes(await self.stream.receive_some(READ_SIZE))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        if not data:
            self.broken = True
        return data

    async def write(self, data: bytes) -> None:
        """Write to the host; a host that is gone makes this a no-op from then on."""
        if self.broken:
            return
        if self._writing:  # what trio's own stream would say; fd_io does not check
            raise trio.BusyResourceError("another task is writing to this connection")
        self._writing = True
        try:
            if self._socket is not None:
                # fileno() at the moment of use: -1 once closed, never a reused number.
                await fd_io.write_all(self._socket.fileno(), data)
            else:
                await self.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.broken = True
        finally:
            self._writing = False


def build_scope(
    request: Request,
    scheme: str,
    client: tuple[str, int] | None,
    server: tuple[str, int] | None,
) -> h.Scope:
    """The ASGI HTTP scope of one parsed request."""
    raw_path, _, query = request.target.partition(b"?")
    path = raw_path.decode("latin-1")
    return {
        "type": "http",
        "asgi": _ASGI,
        "http_version": request.http_version,
        "method": request.method.decode("ascii"),
        "scheme": scheme,
        "path": unquote(path) if "%" in path else path,
        "raw_path": raw_path,
        "query_string": query,
        "root_path": "",
        "headers": request.headers,
        "client": client,
        "server": server,
    }


class Exchange:
    """The ASGI side of one request: ``receive`` and ``send`` over the connection.

    Args:
        wire: the connection.
        request: the request's head.
        closing: returns True when the connection will close after this
            response (the server is shutting down): the response says so.
    """

    def __init__(self, wire: Wire, request: Request, closing: Callable[[], bool]) -> None:
        self._wire = wire
        self._head = request.method == b"HEAD"
        self._keep_alive = request.keep_alive
        self._expect_continue = request.expect_continue
        self._closing = closing
        self._chunked = False
        self._bodyless = False
        self._continued = False
        self._body_done = False
        self._status = 500
        self._headers: list[tuple[bytes, bytes]] = []
        self.started = False
        self.complete = False
        self._waiter: trio.CancelScope | None = None

    # -- receive -------------------------------------------------------------

    async def receive(self) -> h.Message:
        """The ASGI ``receive``: body messages, then ``http.disconnect``."""
        if self._wire.broken or self.complete:
            return dict(_DISCONNECT)
        if not self._body_done:
            return await self._read_body()
        await self._wait_for_hangup()
        return dict(_DISCONNECT)

    def pull_buffered_body(self) -> bool:
        """Take the rest of the body if it is all buffered; True when it is complete.

        A request without a body still has its end to pull: without this a
        GET the app never ``receive``s from would look unfinished and close
        its connection.
        """
        events = self._wire.parser.events
        while not self._body_done:
            if not events:
                return False
            event = events[0]
            if event is END:
                self._body_done = True
            elif type(event) is not bytes:  # a refusal (a malformed chunk) or the host's close
                return False
            events.popleft()
        return True

    async def _read_body(self) -> h.Message:
        wire = self._wire
        if self._expect_continue and not self._continued:
            self._continued = True
            await wire.write(wire_format.CONTINUE)
        events = wire.parser.events
        chunks: list[bytes] = []
        while True:
            if events:
                event = events.popleft()
                if type(event) is bytes:
                    chunks.append(event)
                elif event is END:
                    self._body_done = True
                    return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
                else:  # a malformed chunk, or the host closed mid-body
                    wire.broken = True
                    return dict(_DISCONNECT)
            elif chunks:
                return {"type": "http.request", "body": b"".join(chunks), "more_body": True}
            else:
                with trio.move_on_after(wire.body_timeout) as stalled:
                    data = await wire.read()
                if stalled.cancelled_caught or not data:  # stopped, or the host closed
                    wire.broken = True
                    return dict(_DISCONNECT)
                wire.parser.feed(data)

    async def _wait_for_hangup(self) -> None:
        """Read until the host closes or the response ends, whichever is first."""
        wire = self._wire
        parser = wire.parser
        while not (wire.broken or self.complete):
            with trio.CancelScope() as waiter:  # the response's end cancels it
                self._waiter = waiter
                if parser.events and parser.backlog >= wire.max_header_bytes:
                    await trio.sleep_forever()  # enough of what follows is queued
                data = await wire.read()
            self._waiter = None
            if waiter.cancelled_caught:
                return
            if data:
                parser.feed(data)

    # -- send ----------------------------------------------------------------

    async def send(self, message: h.Message) -> None:
        """The ASGI ``send``: the head waits for the first body message."""
        kind = message["type"]
        if kind == "http.response.start":
            self._status = message["status"]
            self._headers = list(message.get("headers", ()))
            return
        if kind != "http.response.body" or self.complete:
            return
        body: bytes = message.get("body", b"")
        more: bool = message.get("more_body", False)
        if not self.started:
            head = self._start(None if more else len(body))  # may raise: nothing written
            self.started = True
            framed = self._frame(body, more)
            if len(framed) > COALESCE_LIMIT:
                # A large body gets a write of its own: joining it to the head
                # would copy it (a 10 MiB result: 10 MiB more at the peak).
                await self._wire.write(head)
                out = framed
            else:
                out = head + framed
        else:
            out = self._frame(body, more)
        if out:
            await self._wire.write(out)
        if not more:
            # Only now: the app's disconnect watcher wakes on this and may
            # cancel the task that was still writing the response's end.
            self._ended()

    def _frame(self, body: bytes, more: bool) -> bytes:
        """Body bytes as they go on the wire: as they are, chunked, or nothing."""
        if self._bodyless:
            return b""
        if self._chunked:
            out = wire_format.chunk(body)
            return out if more else out + wire_format.LAST_CHUNK
        return body

    def _start(self, length: int | None) -> bytes:
        """The head: framing chosen from ``length`` (None: the body streams)."""
        status, headers = self._status, self._headers
        self._bodyless = not wire_format.has_body(self._head, status)
        has_length = any(name.lower() == b"content-length" for name, _ in headers)
        # Input we will not read (an unread body), a host that asked, or a
        # server on its way out: say the connection closes.
        close = not self._keep_alive or self._closing() or not self.pull_buffered_body()
        if self._bodyless or has_length:
            pass
        elif length is not None:
            headers.append((b"content-length", b"%d" % length))
        elif self._keep_alive:
            self._chunked = True
            headers.append(_CHUNKED)
        else:
            close = True  # an HTTP/1.0 host: the close ends the body
        if close:
            headers.append(_CLOSE)
            self._wire.must_close = True
        return wire_format.head(status, headers)

    def _ended(self) -> None:
        self.complete = True
        if self._waiter is not None:
            self._waiter.cancel()

    async def finish(self) -> None:
        """After the app returned: a response it never started is a 500; a cut one, a close."""
        if not self.started:
            self._status = 500
            self._headers = [(b"content-type", b"text/plain")]
            await self.send({"type": "http.response.body", "body": b"Internal Server Error"})
        elif not self.complete:
            self._wire.must_close = True  # the host cannot tell where it was cut
        self._ended()

    def __repr__(self) -> str:
        return f"<Exchange status={self._status} started={self.started} complete={self.complete}>"
