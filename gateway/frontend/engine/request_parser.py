"""HTTP/1.1 requests parsed by llhttp (through httptools), as a queue of events.

The engine's server reads the socket and feeds the bytes here; what comes
out is a queue the engine takes from one request at a time: a ``Request``
(the head), ``bytes`` (body data, chunked coding removed), ``END`` (the
request is complete), ``CLOSED`` (the host closed its side) or a
``RequestRefused`` (answer with its status, then close).

Rules / theory of operation:

- **llhttp parses; this module keeps the engine's rules.** A head costs
  about a dozen Python calls here (one a header, to lowercase its name)
  where h11 made about 200 (docs/performance.md, "The h11 engine"). Body
  data and a request's end reach the queue from C, with no Python frame.
- **Parsing runs ahead, the engine does not.** llhttp parses everything it
  is fed, so the events of a pipelined next request queue behind the
  current one's; the engine still hands the app one request at a time.
  ``backlog`` counts the bytes fed since the queue was last empty, and the
  engine reads no more while a response is produced once it reaches the
  head limit: what waits is bounded by that limit plus one read.
- **A malformed request is refused in its place.** The requests before it
  are answered; then it is a 400 (or the status below) and the connection
  closes; llhttp is not fed again (a callback that refuses raises
  ``RequestRefused``, which stops it where it is).
- **A head over ``max_header_bytes`` is a 431**: a complete one is measured
  (the request line and headers, as sent); an incomplete one as soon as the
  reads after the one it began in exceed the limit, so a head never holds
  more than the limit and one read.
- **Header values lose the whitespace around them**, as on h11 (llhttp
  trims only what comes before a value; RFC 9110 section 5.5).
- **What h11 refused that llhttp accepts is refused here too**: a
  Transfer-Encoding other than ``chunked`` (501, h11's answer); an HTTP/1.1
  request without exactly one Host (400, RFC 9112 section 3.2); a version
  other than 1.0 and 1.1 (505; llhttp accepts 0.9 and 2.0). llhttp refuses
  more than h11 did, each allowed by RFC 9112: both Content-Length and
  Transfer-Encoding, a repeated or listed Content-Length, obs-fold, a bare
  LF or CR, control characters in a header value, a method it does not
  know, a chunk size past 64 bits (all 400).
- **Upgrade is not spoken.** llhttp stops at the end of a request that asks
  to upgrade (``Connection: upgrade`` with ``Upgrade``) and leaves its body
  unread; the body is parsed by a fresh parser fed a head of the same
  framing, and the connection goes on as if the upgrade had not been asked
  (RFC 9110 section 7.8 lets a server ignore it), as it did on h11. A
  CONNECT is answered and the connection then closes: what follows it is
  not HTTP.
"""

from __future__ import annotations

from collections import deque
from functools import partial
from typing import Final, TypeAlias

import httptools

from gateway.errors import GatewayError

# The header names the parser looks at, beyond lowercasing them.
_HOST: Final = b"host"
_CONNECTION: Final = b"connection"
_EXPECT: Final = b"expect"
_TRANSFER_ENCODING: Final = b"transfer-encoding"
_CONTENT_LENGTH: Final = b"content-length"
_CHECKED: Final = frozenset((_HOST, _CONNECTION, _EXPECT, _TRANSFER_ENCODING))
_OWS: Final = frozenset(b" \t")  # optional whitespace (RFC 9110 section 5.6.3), as ints


class Request:
    """One request's head.

    Attributes:
        method: as sent (``b"POST"``).
        target: the request target, as sent.
        http_version: ``"1.1"`` or ``"1.0"``.
        headers: every header in order, names lowercased, values as sent.
        keep_alive: whether the host lets the connection carry another
            request after this one (HTTP/1.1 without ``Connection: close``;
            HTTP/1.0 keep-alive is not offered).
        expect_continue: whether the host waits for ``100 Continue`` before
            it sends the body.
    """

    __slots__ = ("expect_continue", "headers", "http_version", "keep_alive", "method", "target")

    def __init__(
        self,
        method: bytes,
        target: bytes,
        http_version: str,
        headers: list[tuple[bytes, bytes]],
        keep_alive: bool,
        expect_continue: bool,
    ) -> None:
        self.method = method
        self.target = target
        self.http_version = http_version
        self.headers = headers
        self.keep_alive = keep_alive
        self.expect_continue = expect_continue

    def __repr__(self) -> str:
        return f"<Request {self.method!r} {self.target!r} HTTP/{self.http_version}>"


class RequestRefused(GatewayError):
    """A request that cannot be served: answer ``status`` with ``reason``, then close.

    Queued as an event in the request's place; raised from llhttp's
    callbacks too, to stop it there.

    Args:
        status: 400, 431, 501 or 505.
        reason: what was wrong, for the body of the answer.
    """

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(status, reason)
        self.status = status
        self.reason = reason


class Marker:
    """A point in the stream of events: ``END`` or ``CLOSED``.

    Args:
        name: what it marks.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


END: Final = Marker("END")
CLOSED: Final = Marker("CLOSED")

Event: TypeAlias = Request | bytes | Marker | RequestRefused

# What a closed RequestParser holds in llhttp's place: a parser with no
# callbacks, so nothing refers back to the closed one.
_DETACHED: Final = httptools.HttpRequestParser(object())


def _head_size(request: Request) -> int:
    """About the size of a head on the wire (the request line and the headers)."""
    size = len(request.method) + len(request.target) + 12
    for name, value in request.headers:
        size += len(name) + len(value) + 4
    return size


class RequestParser:
    """The requests of one connection, as events (the module's docstring).

    Args:
        max_header_bytes: the largest request head.

    Attributes:
        events: what was parsed and not yet taken, in order.
        backlog: bytes fed since ``events`` was last empty.
        head_open: a head has begun and is not complete.
    """

    def __init__(self, max_header_bytes: int) -> None:
        self.events: deque[Event] = deque()
        self.backlog = 0
        self.head_open = False
        self._limit = max_header_bytes
        # The events have ended (a refusal or CLOSED queued, or the parser
        # closed): llhttp is fed no more.
        self._done = False
        self._feeding = 0  # the size of the read being fed
        self._first = 0  # the size of the read the open head began in
        self._after = 0  # bytes fed since that read, while the head was open
        self._target = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._last: Request | None = None
        # The body of an upgrade request, parsed behind a head of our own.
        self._synthetic = False
        # Called from C: no Python frame for a body piece or a request's end.
        self.on_body = self.events.append
        self.on_message_complete = partial(self.events.append, END)
        self._parser = httptools.HttpRequestParser(self)

    def feed(self, data: bytes) -> None:
        """Parse what the host sent; ``b""`` is the host closing its side."""
        events = self.events
        if not events:
            self.backlog = 0
        self.backlog += len(data)
        if self._done:
            return
        if not data:
            self._done = True
            events.append(CLOSED)
            return
        self._parse(data)

    def _parse(self, data: bytes) -> None:
        if self.head_open:
            self._after += len(data)
        self._feeding = len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade as upgrade:
            self._upgraded(data[upgrade.args[0] :])
        except httptools.HttpParserError as exc:
            self._refuse(400, str(exc) or "malformed request")
        if self.head_open and self._after > self._limit:
            self._refuse(431, "request header block too large")

    def close(self) -> None:
        """The connection is closed: let go of llhttp.

        llhttp holds this object's callbacks, and this object holds llhttp:
        without this the pair waits for a full run of the cyclic collector,
        which ``serve`` makes rare (``gateway/cli/collector.py``).
        """
        self._done = True
        self._parser = _DETACHED

    def _refuse(self, status: int, reason: str) -> RequestRefused:
        """Queue a refusal, unless the events have already ended; raise it to stop llhttp."""
        refused = RequestRefused(status, reason)
        if not self._done:
            self._done = True
            self.events.append(refused)
        return refused

    def _upgraded(self, rest: bytes) -> None:
        """llhttp stopped after a request that asked to upgrade: go on without the upgrade."""
        request = self._last
        if self._done or request is None:
            return
        if request.method == b"CONNECT":
            request.keep_alive = False  # what follows is a tunnel's bytes: not read
            self._done = True
            self.events.append(CLOSED)
            return
        framing = b""
        for name, value in request.headers:
            if name in (_CONTENT_LENGTH, _TRANSFER_ENCODING):
                framing += name + b": " + value + b"\r\n"
        self._parser = httptools.HttpRequestParser(self)
        if framing:
            if self.events and self.events[-1] is END:
                self.events.pop()  # llhttp ended it before its body
            self._synthetic = True
            self._parser.feed_data(b"POST / HTTP/1.1\r\n" + framing + b"\r\n")
            self._synthetic = False
        if rest:
            self._parse(rest)

    # -- llhttp's callbacks ----------------------------------------------------

    def on_message_begin(self) -> None:
        """A request begins."""
        self.head_open = True
        self._first = self._feeding
        self._after = 0
        self._target = b""
        self._headers = []

    def on_url(self, url: bytes) -> None:
        """Part of the request target."""
        self._target += url

    def on_header(self, name: bytes, value: bytes) -> None:
        """One header, whole."""
        # llhttp trims the whitespace before a value, not after it; RFC 9110
        # section 5.5 excludes both (the 2026-07-28 suite checks Mcp-Name's).
        if value and value[-1] in _OWS:
            value = value.rstrip(b" \t")
        self._headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        """The head is complete: queue it, or a refusal."""
        self.head_open = False
        if self._synthetic or self._done:
            return
        parser = self._parser
        version = parser.get_http_version()
        request = Request(parser.get_method(), self._target, version, self._headers, True, False)
        if self._first + self._after > self._limit and _head_size(request) > self._limit:
            raise self._refuse(431, "request header block too large")
        hosts = 0
        for name, value in self._headers:
            if name in _CHECKED:
                if name == _HOST:
                    hosts += 1
                elif name == _CONNECTION:
                    if b"close" in value.lower():
                        request.keep_alive = False
                elif name == _EXPECT:
                    request.expect_continue = b"100-continue" in value.lower()
                elif value.strip().lower() != b"chunked":  # Transfer-Encoding
                    raise self._refuse(501, "only Transfer-Encoding: chunked is supported")
        if version != "1.1":
            if version != "1.0":
                raise self._refuse(505, f"HTTP/{version} is not supported")
            request.keep_alive = request.expect_continue = False
        elif hosts != 1:
            raise self._refuse(400, "an HTTP/1.1 request needs exactly one Host header")
        self._last = request
        self.events.append(request)
