"""Pieces of HTTP/1.1 requests, well-formed and not, that property tests put together.

One list for the engine's tests and the parser's: request lines, framing
headers that conflict (Content-Length against chunked, an overflowing
length), folded and bare-LF lines, chunk sizes and bodies.
"""

from __future__ import annotations

from typing import Final

PIECES: Final = (
    b"GET /x HTTP/1.1\r\n",
    b"POST /echo HTTP/1.1\r\n",
    b"POST /refuse HTTP/1.1\r\n",
    b"GET /x HTTP/1.0\r\n",
    b"CONNECT a:1 HTTP/1.1\r\n",
    b"Host: test\r\n",
    b"Content-Length: 5\r\n",
    b"Content-Length: 99999999999999999999999\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"Connection: upgrade\r\nUpgrade: h2c\r\n",
    b"Connection: close\r\n",
    b"Expect: 100-continue\r\n",
    b" folded\r\n",
    b"\r\n",
    b"\n",
    b"5\r\nhello\r\n",
    b"ffffffffffffffffffff\r\n",
    b"0\r\n\r\n",
    b"hello",
)
