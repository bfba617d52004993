"""The HTTP/1.1 engine's connection loop, over in-memory streams (no sockets).

Each test hands one end of ``trio.testing.memory_stream_pair()`` to
``Http1Server.handle`` and plays the host on the other end with h11's client
side, so what is checked is the bytes a host sees. The ASGI app is a small
one of the test's own: what the loop promises (keep-alive, pipelining,
limits, disconnects, shutdown) does not depend on the gateway's endpoint,
which the HTTP tests run on both engines. Timeouts run on trio's MockClock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import h11
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from gateway.frontend import http_util as h
from gateway.frontend.engine import http1_response
from gateway.frontend.engine.http1_exchange import COALESCE_LIMIT, READ_SIZE
from gateway.frontend.engine.http1_response import DATE, DateCache, UnsafeHeader
from gateway.frontend.engine.http1_server import Http1Server, Limits
from tests.frontend.http1_pieces import PIECES

LIMITS = Limits(max_header_bytes=4096, header_timeout=8.0, idle_timeout=8.0, drain_timeout=5.0)


@dataclass
class App:
    """Answers by path; records what the loop told it."""

    calls: list[str] = field(default_factory=list)
    disconnects: list[str] = field(default_factory=list)
    received: list[h.Message] = field(default_factory=list)
    release: trio.Event = field(default_factory=trio.Event)
    started: trio.Event = field(default_factory=trio.Event)

    async def __call__(self, scope: h.Scope, receive: h.Receive, send: h.Send) -> None:
        path = scope["path"]
        self.calls.append(f"{scope['method']} {path}")
        if path == "/echo":
            body = b""
            while True:
                message = await receive()
                self.received.append(message)
                if message["type"] == "http.disconnect":
                    self.disconnects.append(path)
                    return
                body += message["body"]
                if not message["more_body"]:
                    break
            await h.respond(send, 200, body, content_type=b"text/plain")
        elif path == "/refuse":  # answers without reading the body, as a 413 does
            await h.respond(send, 413, b"too large", content_type=b"text/plain")
        elif path == "/stream":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"one", "more_body": True})
            self.started.set()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch, receive, path, nursery.cancel_scope)
                await self.release.wait()
                await send({"type": "http.response.body", "body": b"two", "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                nursery.cancel_scope.cancel()
        elif path == "/slow":
            self.started.set()
            await self.release.wait()
            await h.respond(send, 200, b"done", content_type=b"text/plain")
        elif path == "/fail":
            raise RuntimeError("boom")
        else:
            await h.respond(send, 404, b"no", content_type=b"text/plain")

    async def _watch(self, receive: h.Receive, path: str, scope: trio.CancelScope) -> None:
        message = await receive()
        if message["type"] == "http.disconnect":
            self.disconnects.append(path)
            scope.cancel()


class CountingStream(trio.abc.HalfCloseableStream):
    """Wraps the server's end to count its writes (one per complete response)."""

    def __init__(self, inner: trio.abc.HalfCloseableStream) -> None:
        self.inner = inner
        self.writes: list[bytes] = []
        self.received = 0

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self.inner.receive_some(max_bytes)
        self.received += len(data)
        return data

    async def send_eof(self) -> None:
        await self.inner.send_eof()

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class Host:
    """The host's end: raw bytes out, responses parsed with h11's client side."""

    stream: trio.abc.HalfCloseableStream
    server_end: CountingStream
    server: Http1Server
    done: trio.Event
    buffer: bytes = b""

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def response(self, method: str = "GET") -> tuple[h11.Response, bytes]:
        """The next complete response (to a request of ``method``: HEAD has no body)."""
        conn = h11.Connection(h11.CLIENT)
        conn.send(h11.Request(method=method, target="/", headers=[("Host", "test")]))
        conn.send(h11.EndOfMessage())
        if self.buffer:
            conn.receive_data(self.buffer)  # b"" would mean the server closed
        head: h11.Response | None = None
        body = b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(bytes(await self.stream.receive_some()))
            elif isinstance(event, h11.Response):
                head = event
            elif isinstance(event, h11.Data):
                body += bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                self.buffer = bytes(conn.trailing_data[0])
                return head, body
            elif not isinstance(event, h11.InformationalResponse):
                raise AssertionError(event)

    async def rest(self) -> bytes:
        """Everything until the server closes."""
        data, self.buffer = self.buffer, b""
        while chunk := await self.stream.receive_some():
            data += chunk
        return data


@asynccontextmanager
async def connected(app: App, limits: Limits = LIMITS) -> AsyncIterator[Host]:
    """One connection served by the loop, in a nursery of the test's."""
    server = Http1Server(app, limits, None)
    client_end, server_end = trio.testing.memory_stream_pair()
    counting = CountingStream(server_end)
    done = trio.Event()

    async def serve(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await server.handle(counting)
        done.set()

    async with trio.open_nursery() as nursery:
        await nursery.start(serve)
        yield Host(client_end, counting, server, done)
        nursery.cancel_scope.cancel()


def request(
    method: str, path: str, body: bytes = b"", headers: tuple[tuple[str, str], ...] = ()
) -> bytes:
    """A raw HTTP/1.1 request."""
    lines = [f"{method} {path} HTTP/1.1", "Host: test"]
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def header(response: h11.Response, name: bytes) -> bytes | None:
    """One response header's value."""
    return next((value for key, value in response.headers if key == name), None)


async def test_keep_alive_serves_requests_one_after_another_each_in_one_write() -> None:
    """Keep-alive: the connection stays open between requests; a complete response
    (status line, headers, body) leaves in exactly one write."""
    app = App()
    async with connected(app) as host:
        for n in range(3):
            await host.send(request("POST", "/echo", f"hello {n}".encode()))
            response, body = await host.response()
            assert (response.status_code, body) == (200, f"hello {n}".encode())
            assert header(response, b"content-length") == str(len(body)).encode()
            assert header(response, b"date") == DATE.value()
            assert header(response, b"connection") is None
        assert not host.done.is_set()
        assert len(host.server_end.writes) == 3
        assert all(w.endswith(f"hello {n}".encode()) for n, w in enumerate(host.server_end.writes))
    assert app.calls == ["POST /echo"] * 3


async def test_pipelined_requests_are_answered_in_order_one_at_a_time() -> None:
    """Pipelining: requests sent together are read one at a time; the next reaches the
    app only after the previous response ended, and the answers come back in order."""
    app = App()
    async with connected(app) as host:
        await host.send(
            request("GET", "/slow") + request("POST", "/echo", b"second") + request("GET", "/x")
        )
        await app.started.wait()
        await trio.testing.wait_all_tasks_blocked()
        assert app.calls == ["GET /slow"]  # the others wait in the buffer
        app.release.set()
        answers = [await host.response() for _ in range(3)]
    assert [(r.status_code, b) for r, b in answers] == [
        (200, b"done"),
        (200, b"second"),
        (404, b"no"),
    ]
    assert app.calls == ["GET /slow", "POST /echo", "GET /x"]


async def test_a_body_arriving_in_pieces_reaches_the_app_as_it_comes() -> None:
    """A body split across reads is handed over piece by piece, ending with more_body False."""
    app = App()
    async with connected(app) as host:
        await host.send(b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n\r\n01234")
        await trio.testing.wait_all_tasks_blocked()
        await host.send(b"56789")
        response, body = await host.response()
    assert (response.status_code, body) == (200, b"0123456789")
    assert [m["more_body"] for m in app.received] == [True, False]


@pytest.mark.parametrize("pieces", [1, 50])
async def test_oversized_headers_are_431_and_the_connection_closes(pieces: int) -> None:
    """A header block past max_header_bytes gets 431 and the connection is closed,
    whether it arrives whole or in pieces."""
    app = App()
    async with connected(app) as host:
        raw_request = request("GET", "/echo", headers=(("X-Big", "a" * 5000),))
        size = len(raw_request) // pieces + 1
        for start in range(0, len(raw_request), size):
            try:
                await host.send(raw_request[start : start + size])
            except trio.BrokenResourceError:
                break
            await trio.testing.wait_all_tasks_blocked()
        raw = await host.rest()
        await host.stream.aclose()
        await host.done.wait()
    assert raw.startswith(b"HTTP/1.1 431 "), raw[:80]
    assert b"connection: close" in raw
    assert app.calls == []


async def test_a_malformed_request_line_is_400_and_the_connection_closes() -> None:
    """A request the parser cannot parse gets 400, then a close."""
    app = App()
    async with connected(app) as host:
        await host.send(b"NOT HTTP AT ALL\r\n\r\n")
        raw = await host.rest()
        await host.stream.aclose()
    assert raw.startswith(b"HTTP/1.1 400 "), raw[:80]
    assert app.calls == []


async def test_a_body_refused_unread_says_close_and_the_rest_is_read_before_closing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Body too large: the app answers 413 before reading; the response says
    Connection: close, and the loop reads what the host still sends before closing
    (so the host sees the 413, not a reset)."""
    app = App()
    async with connected(app) as host:
        head = request("POST", "/refuse").replace(b"Content-Length: 0", b"Content-Length: 100000")
        await host.send(head + b"x" * 1000)
        response, body = await host.response()
        assert (response.status_code, body) == (413, b"too large")
        assert header(response, b"connection") == b"close"
        await host.send(b"x" * 5000)  # still read (and discarded), not refused
        assert await host.rest() == b""  # our side is shut; the loop still reads
        assert not host.done.is_set()
        closed_at = trio.current_time()
        await host.stream.aclose()  # the host closes too: the loop ends at once
        await host.done.wait()
        assert trio.current_time() == closed_at


async def test_a_request_without_a_body_keeps_the_connection_when_the_app_never_reads() -> None:
    """A GET the app answers without receive() is complete: the connection stays."""
    app = App()
    async with connected(app) as host:
        for _ in range(2):
            await host.send(request("GET", "/nothing"))
            response, _ = await host.response()
            assert response.status_code == 404
            assert header(response, b"connection") is None
        assert not host.done.is_set()


async def test_a_disconnect_mid_body_is_http_disconnect() -> None:
    """The host hanging up in the middle of its body: the app's receive says disconnect."""
    app = App()
    async with connected(app) as host:
        head = request("POST", "/echo").replace(b"Content-Length: 0", b"Content-Length: 100")
        await host.send(head + b"0123456789")
        await trio.testing.wait_all_tasks_blocked()
        await host.stream.aclose()
        await host.done.wait()
    assert app.disconnects == ["/echo"]
    assert app.received[-1] == {"type": "http.disconnect"}


async def test_a_disconnect_mid_stream_reaches_the_app_and_ends_the_connection() -> None:
    """A streamed response is chunked and flushed per message; the host hanging up
    mid-stream is an http.disconnect for the app, which cancels its stream."""
    app = App()
    async with connected(app) as host:
        await host.send(request("GET", "/stream"))
        await app.started.wait()
        first = await host.stream.receive_some()
        assert b"transfer-encoding: chunked" in bytes(first).lower()
        assert first.endswith(b"3\r\none\r\n")  # flushed with its chunk framing
        await host.stream.aclose()
        await host.done.wait()
    assert app.disconnects == ["/stream"]


async def test_a_streamed_response_that_ends_keeps_the_connection() -> None:
    """A chunked response that ends normally leaves the connection reusable."""
    app = App()
    async with connected(app) as host:
        await host.send(request("GET", "/stream"))
        await app.started.wait()
        app.release.set()
        response, body = await host.response()
        assert (response.status_code, body) == (200, b"onetwo")
        await host.send(request("POST", "/echo", b"again"))
        assert (await host.response())[1] == b"again"
        assert not host.done.is_set()


async def test_shutdown_closes_an_idle_keep_alive_connection_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Shutdown: a connection waiting for its next request closes at once, not at
    the idle timeout."""
    app = App()
    async with connected(app) as host:
        await host.send(request("POST", "/echo", b"x"))
        await host.response()
        await trio.testing.wait_all_tasks_blocked()
        stopped_at = trio.current_time()
        host.server.stop()
        assert await host.rest() == b""
        await host.done.wait()
        assert trio.current_time() == stopped_at


async def test_shutdown_lets_the_request_in_flight_finish_and_then_closes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Shutdown during a request: it is answered (saying Connection: close), then the
    connection closes; a pipelined request behind it is not served."""
    app = App()
    async with connected(app) as host:
        await host.send(request("GET", "/slow") + request("GET", "/x"))
        await app.started.wait()
        host.server.stop()
        app.release.set()
        response, body = await host.response()
        assert (response.status_code, body) == (200, b"done")
        assert header(response, b"connection") == b"close"
        await host.done.wait()
    assert app.calls == ["GET /slow"]


async def test_headers_not_complete_within_the_header_timeout_close_without_an_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Slowloris (A26): headers trickled a byte a second are cut off at the header
    timeout, without a response."""
    app = App()
    async with connected(app) as host:
        started = trio.current_time()
        trickle = b"POST /echo HTTP/1.1\r\nHost: test\r\nX-Slow: " + b"a" * 100
        for byte in trickle:
            if host.done.is_set():
                break
            try:
                await host.send(bytes([byte]))
            except trio.BrokenResourceError:
                break
            await trio.sleep(1)
        await host.done.wait()
        assert trio.current_time() - started == pytest.approx(LIMITS.header_timeout, abs=1)
        assert await host.rest() == b""
    assert app.calls == []


async def test_an_idle_connection_closes_at_the_idle_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A keep-alive connection with no next request closes after idle_timeout."""
    app = App()
    async with connected(app) as host:
        await host.send(request("POST", "/echo", b"x"))
        await host.response()
        answered = trio.current_time()
        await host.done.wait()
        assert trio.current_time() - answered == pytest.approx(LIMITS.idle_timeout)


async def test_an_app_failure_before_the_response_is_500_and_the_loop_survives() -> None:
    """An exception escaping the app before it answered becomes a 500."""
    app = App()
    async with connected(app) as host:
        await host.send(request("GET", "/fail"))
        response, _ = await host.response()
        assert response.status_code == 500
        await host.done.wait()


async def test_head_gets_the_headers_without_the_body() -> None:
    """HEAD: the status and headers of the GET, no body; the connection stays usable."""
    app = App()
    async with connected(app) as host:
        await host.send(request("HEAD", "/x"))
        response, body = await host.response("HEAD")
        assert (response.status_code, body) == (404, b"")
        assert header(response, b"content-length") == b"2"  # the length a GET would get
        await host.send(request("GET", "/x"))
        assert (await host.response())[1] == b"no"


async def test_expect_100_continue_is_answered_when_the_app_reads_the_body() -> None:
    """A host that waits for 100 Continue gets it once the app asks for the body."""
    app = App()
    async with connected(app) as host:
        head = request("POST", "/echo", headers=(("Expect", "100-continue"),)).replace(
            b"Content-Length: 0", b"Content-Length: 4"
        )
        await host.send(head)
        first = await host.stream.receive_some()
        assert first.startswith(b"HTTP/1.1 100 ")
        await host.send(b"body")
        host.buffer = bytes(first)
        response, body = await host.response("POST")
    assert (response.status_code, body) == (200, b"body")


def test_the_date_header_is_formatted_once_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Date value is formatted once per second (the same bytes object within one)."""
    now = [1_000_000_000.2]
    monkeypatch.setattr(http1_response.time, "time", lambda: now[0])
    cache = DateCache()
    first = cache.value()
    assert first == b"Sun, 09 Sep 2001 01:46:40 GMT"
    now[0] = 1_000_000_000.9
    assert cache.value() is first
    now[0] = 1_000_000_001.0
    assert cache.value() == b"Sun, 09 Sep 2001 01:46:41 GMT"


async def test_a_host_asking_to_close_gets_its_answer_and_then_the_close() -> None:
    """Connection: close from the host: the response says close, then the loop closes."""
    app = App()
    async with connected(app) as host:
        await host.send(request("GET", "/x", headers=(("Connection", "close"),)))
        response, body = await host.response()
        assert (response.status_code, body) == (404, b"no")
        assert header(response, b"connection") == b"close"
        await host.done.wait()


async def test_an_http_1_0_stream_is_delimited_by_the_close() -> None:
    """HTTP/1.0 has no chunked encoding: a streamed body ends with the connection."""
    app = App()
    async with connected(app) as host:
        await host.send(b"GET /stream HTTP/1.0\r\n\r\n")
        await app.started.wait()
        app.release.set()
        raw = await host.rest()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK")
    assert b"connection: close" in head
    assert b"transfer-encoding" not in head.lower()
    assert body == b"onetwo"


def test_response_heads_refuse_header_injection_and_frame_chunks() -> None:
    """A CR or LF in a header cannot split the response; chunks carry their hex size;
    HEAD, 1xx, 204 and 304 responses have no body."""
    with pytest.raises(UnsafeHeader):
        http1_response.head(200, [(b"x-session", b"abc\r\nset-cookie: evil=1")])
    with pytest.raises(UnsafeHeader):
        http1_response.head(200, [(b"x-a\nb", b"v")])
    head = http1_response.head(404, [(b"content-length", b"0")])
    assert head.startswith(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\ndate: ")
    assert head.endswith(b" GMT\r\n\r\n")
    assert http1_response.chunk(b"x" * 26) == b"1a\r\n" + b"x" * 26 + b"\r\n"
    assert http1_response.chunk(b"") == b""
    assert [http1_response.has_body(False, s) for s in (100, 200, 204, 304, 413)] == [
        False,
        True,
        False,
        False,
        True,
    ]
    assert not http1_response.has_body(True, 200)


async def test_a_response_with_an_unsafe_header_is_never_written() -> None:
    """An app bug that puts CRLF in a header: nothing of that response reaches the host,
    which gets a 500 instead."""
    app = App()

    async def splitting(scope: h.Scope, receive: h.Receive, send: h.Send) -> None:
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"x", b"a\r\nb: c")]}
        )
        await send({"type": "http.response.body", "body": b"secret"})

    async with connected(app) as host:
        host.server._app = splitting
        await host.send(request("GET", "/x"))
        response, body = await host.response()
    assert response.status_code == 500
    assert b"secret" not in body


async def test_a_chunked_request_body_is_read_and_the_connection_stays() -> None:
    """A body in chunked transfer coding reaches the app whole; the connection is reused."""
    app = App()
    async with connected(app) as host:
        head = b"POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n"
        await host.send(head + b"5\r\nhello\r\n")
        await trio.testing.wait_all_tasks_blocked()
        await host.send(b"6\r\n world\r\n0\r\n\r\n")
        response, body = await host.response("POST")
        assert (response.status_code, body) == (200, b"hello world")
        assert header(response, b"connection") is None
        await host.send(request("GET", "/x"))
        assert (await host.response())[0].status_code == 404


async def test_pipelined_input_is_buffered_only_up_to_a_bound_while_a_response_streams() -> None:
    """While a streamed response is in progress the loop watches for a hang-up, but a
    host pipelining without end cannot make it buffer more than about one header
    block plus one read."""
    app = App()
    async with connected(app) as host:
        first = request("GET", "/stream")
        await host.send(first + request("GET", "/x") * 10_000)  # ~290 KB
        await app.started.wait()
        await trio.testing.wait_all_tasks_blocked()
        bound = len(first) + LIMITS.max_header_bytes + READ_SIZE
        assert host.server_end.received <= bound, host.server_end.received
        app.release.set()
        response, body = await host.response()
        assert (response.status_code, body) == (200, b"onetwo")
        assert (await host.response())[1] == b"no"  # the pipelined ones follow


async def test_a_body_that_stops_arriving_is_a_disconnect_at_the_header_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Slow client mid-body: a host that sends half its body and then nothing is treated
    as gone after header_timeout (the app's receive says disconnect), and the connection
    closes; a body whose pieces keep coming within the timeout is read whole."""
    app = App()
    async with connected(app) as host:
        head = b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n\r\n"
        await host.send(head + b"01")
        for piece in (b"23", b"45", b"67", b"89"):
            await trio.sleep(LIMITS.header_timeout - 1)
            await host.send(piece)
        response, body = await host.response("POST")
        assert (response.status_code, body) == (200, b"0123456789")
        await host.send(head + b"01234")
        started = trio.current_time()
        await host.done.wait()
        assert trio.current_time() - started == pytest.approx(LIMITS.header_timeout)
    assert app.disconnects == ["/echo"]


async def test_a_body_over_the_coalesce_limit_follows_its_head_in_a_write_of_its_own() -> None:
    """A response body past COALESCE_LIMIT is not joined to the head (that would copy
    it): the head, then the body, as two writes; the host reads one whole response."""
    app = App()
    big = b"z" * (COALESCE_LIMIT + 1)
    async with connected(app) as host:
        await host.send(request("POST", "/echo", big))
        response, body = await host.response("POST")
        assert (response.status_code, body) == (200, big)
        assert header(response, b"content-length") == str(len(big)).encode()
        head, rest = host.server_end.writes
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and head.endswith(b"\r\n\r\n")
        assert rest == big


async def test_a_request_framed_two_ways_is_400_and_what_it_smuggled_never_reaches_the_app() -> (
    None
):
    """Gateway choice (RFC 9112 section 6.3; robustness A56): both Content-Length and
    Transfer-Encoding is a 400 and a close; the request hidden in its body is not served."""
    app = App()
    smuggled = b"GET /admin HTTP/1.1\r\nHost: test\r\n\r\n"
    async with connected(app) as host:
        head = b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n"
        await host.send(head + b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled)
        raw = await host.rest()
        await host.stream.aclose()
    assert raw.startswith(b"HTTP/1.1 400 "), raw[:80]
    assert b"connection: close" in raw
    assert app.calls == []


async def test_a_malformed_request_pipelined_behind_good_ones_is_refused_after_their_answers() -> (
    None
):
    """Spec (RFC 9112 section 9.3.2): pipelined requests are answered in order; a
    malformed one among them is a 400 in its turn, then the connection closes."""
    app = App()
    async with connected(app) as host:
        await host.send(
            request("POST", "/echo", b"one") + request("GET", "/x") + b"GET / HTTP/1.1\n\n"
        )
        first, second = await host.response("POST"), await host.response()
        raw = await host.rest()
    assert [(r.status_code, b) for r, b in (first, second)] == [(200, b"one"), (404, b"no")]
    assert raw.startswith(b"HTTP/1.1 400 "), raw[:80]
    assert app.calls == ["POST /echo", "GET /x"]


FRAGMENTS = st.sampled_from(PIECES)


@given(
    pieces=st.lists(
        st.lists(st.one_of(FRAGMENTS, st.binary(max_size=16)), max_size=12).map(b"".join),
        max_size=4,
    ),
    close=st.booleans(),
)
def test_any_bytes_a_host_sends_get_no_500_and_the_server_survives(
    pieces: list[bytes], close: bool
) -> None:
    """Gateway choice (robustness A56): whatever bytes a host sends, in whatever pieces,
    the engine answers with no 500, logs no failure of its own, and ends the
    connection (at the latest at its timeouts, on virtual time)."""

    async def host_sends() -> bytes:
        async with connected(App()) as host:
            for piece in pieces:
                try:
                    await host.send(piece)
                except trio.BrokenResourceError:
                    break
                await trio.testing.wait_all_tasks_blocked()
            if close:
                await host.stream.send_eof()
            with trio.fail_after(LIMITS.header_timeout + LIMITS.idle_timeout + 10):
                raw = await host.rest()
                await host.done.wait()
            return raw

    with capture_logs() as logs:
        raw = trio.run(host_sends, clock=trio.testing.MockClock(autojump_threshold=0))
    assert b"HTTP/1.1 500 " not in raw, raw[:200]
    assert [entry for entry in logs if entry["log_level"] in ("error", "critical")] == []
