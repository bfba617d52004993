"""HTTP/1.1 response bytes for the HTTP/1.1 engine: pre-encoded, with no state machine.

The responses are written here, because the gateway's own app is the only
thing that writes them and h11's general path (validating and normalizing
every header, three state transitions a response), which the engine used
first, cost about 24 µs of the call path's budget of 300 (measured with
timeit on the build machine). What h11 would have enforced is kept:

- a header name or value carrying CR or LF is refused (response splitting);
- no body for HEAD, 1xx, 204 and 304;
- a body is framed by Content-Length when its size is known when the head
  is written, chunked when it streams to an HTTP/1.1 host, and by closing
  the connection when it streams to an HTTP/1.0 one.

Sans-IO: no awaits; ``http1_exchange.py`` writes what these return.
"""

from __future__ import annotations

import time
from http import HTTPStatus
from typing import TYPE_CHECKING, Final

from gateway.errors import GatewayError

if TYPE_CHECKING:
    from collections.abc import Iterable

_STATUS_LINES: Final = {
    status.value: b"HTTP/1.1 %d %s\r\n" % (status.value, status.phrase.encode())
    for status in HTTPStatus
}
LAST_CHUNK: Final = b"0\r\n\r\n"
CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"


class DateCache:
    """The ``Date`` header line, formatted once a second rather than once a response."""

    def __init__(self) -> None:
        self._second = -1
        self._value = b""

    def value(self) -> bytes:
        """``Date`` for now (RFC 9110 asks it of an origin server)."""
        second = int(time.time())
        if second != self._second:
            self._second = second
            self._value = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(second)).encode()
        return self._value


DATE: Final = DateCache()


class UnsafeHeader(GatewayError, ValueError):
    """A response header would split the response (CR or LF in it): a bug in the app."""


def has_body(method_is_head: bool, status: int) -> bool:
    """Whether a response of this status, to this request, carries a body at all."""
    return not (method_is_head or status < 200 or status in (204, 304))


def status_line(status: int) -> bytes:
    """``HTTP/1.1 <status> <reason phrase>`` and its CRLF."""
    line = _STATUS_LINES.get(status)
    return b"HTTP/1.1 %d \r\n" % status if line is None else line


def head(status: int, headers: Iterable[tuple[bytes, bytes]]) -> bytes:
    """The status line and header block, ending with the blank line; adds ``Date``.

    Raises:
        UnsafeHeader: a name or value contains CR or LF.
    """
    parts = [status_line(status)]
    for name, value in headers:
        if b"\n" in value or b"\r" in value or b"\n" in name or b"\r" in name:
            raise UnsafeHeader(name[:40])
        parts += (name, b": ", value, b"\r\n")
    parts += (b"date: ", DATE.value(), b"\r\n\r\n")
    return b"".join(parts)


def chunk(data: bytes) -> bytes:
    """One chunk of a chunked body (empty data makes no chunk: that would end the body)."""
    return b"%x\r\n%s\r\n" % (len(data), data) if data else b""
