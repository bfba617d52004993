"""The engine's request parser (llhttp through httptools), sans-IO: bytes in, events out.

What the swap from h11 could change is pinned here: the framing rules a
request smuggler probes (both Content-Length and Transfer-Encoding, a
repeated Content-Length, obs-fold, a bare LF, a chunk size past 64 bits),
the rules h11 kept that llhttp does not (Host, transfer codings, versions),
the head limit whether a head comes whole or in pieces, and pipelining: a
malformed request is refused in its place, after the ones before it. A
hypothesis property feeds arbitrary bytes in arbitrary pieces.
"""

from __future__ import annotations

import gc
import itertools
import weakref

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.frontend.engine.request_parser import (
    CLOSED,
    END,
    Event,
    Request,
    RequestParser,
    RequestRefused,
)
from tests.frontend.http1_pieces import PIECES

LIMIT = 4096
HEAD = b"POST /mcp HTTP/1.1\r\nHost: a\r\n"


def parse(*pieces: bytes, limit: int = LIMIT) -> list[Event]:
    """Every event of ``pieces`` fed one after another."""
    parser = RequestParser(limit)
    for piece in pieces:
        parser.feed(piece)
    return list(parser.events)


def refusal(events: list[Event]) -> tuple[int, list[Event]]:
    """The refusal that ends ``events``, and what came before it."""
    last = events[-1]
    assert isinstance(last, RequestRefused), events
    return last.status, events[:-1]


def test_a_request_is_its_head_its_body_and_its_end() -> None:
    """Spec (RFC 9112 section 6): the head, the body as sent, then the end; names lowercased."""
    events = parse(HEAD + b"Content-Length: 2\r\nX-Case: Kept\r\n\r\nhi")
    request, body, end = events
    assert isinstance(request, Request)
    assert (request.method, request.target, request.http_version) == (b"POST", b"/mcp", "1.1")
    assert request.headers == [(b"host", b"a"), (b"content-length", b"2"), (b"x-case", b"Kept")]
    assert (request.keep_alive, request.expect_continue) == (True, False)
    assert (body, end) == (b"hi", END)


def test_header_values_lose_the_whitespace_around_them() -> None:
    """Spec (RFC 9110 section 5.5): optional whitespace before and after a field value
    is not part of it (llhttp trims only the leading; the 2026-07-28 conformance suite
    sends ``Mcp-Name:   alpha__add  ``)."""
    raw = HEAD + b"Mcp-Name: \t alpha__add \t \r\nX-Inner: a  b\r\nX-Empty:   \r\n\r\n"
    request = parse(raw)[0]
    assert isinstance(request, Request)
    assert request.headers[1:] == [
        (b"mcp-name", b"alpha__add"),
        (b"x-inner", b"a  b"),
        (b"x-empty", b""),
    ]


@pytest.mark.parametrize(
    "framing",
    [
        b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
        b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
        b"Content-Length: 5\r\nContent-Length: 5\r\n",
        b"Content-Length: 5\r\nContent-Length: 6\r\n",
        b"Content-Length: 5, 5\r\n",
        b"Content-Length: +5\r\n",
        b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        b"Transfer-Encoding : chunked\r\n",
        b"X-Folded: a\r\n b\r\nContent-Length: 5\r\n",
    ],
)
def test_framing_a_smuggler_could_read_two_ways_is_refused(framing: bytes) -> None:
    """Gateway choice (RFC 9112 sections 6.1 and 6.3 allow it): a request whose body's
    length two parsers could read differently is a 400, and nothing after it is parsed."""
    smuggled = b"GET /admin HTTP/1.1\r\nHost: a\r\n\r\n"
    status, before = refusal(parse(HEAD + framing + b"\r\n0\r\n\r\n" + smuggled))
    assert status == 400
    assert not [e for e in before if isinstance(e, Request) and e.target == b"/admin"]


@pytest.mark.parametrize(
    "raw",
    [
        b"GET / HTTP/1.1\nHost: a\n\n",
        b"GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n",
        b"GET / HTTP/1.1\rHost: a\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n",
        b"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET / HTTP/1.1\r\n Host: a\r\n\r\n",
        b"NOT HTTP AT ALL\r\n\r\n",
    ],
)
def test_bare_line_ends_and_control_characters_are_refused(raw: bytes) -> None:
    """Gateway choice (RFC 9112 section 2.2 lets a recipient refuse a bare LF): a head
    with a bare LF or CR, a control character or a malformed line is a 400."""
    assert refusal(parse(raw)) == (400, [])


def test_a_chunk_size_past_64_bits_is_refused() -> None:
    """Gateway choice: a chunk size that overflows is a 400 at once, not a wait for
    bytes that would never fit in memory."""
    head = HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
    status, before = refusal(parse(head + b"1" + b"0" * 16 + b"\r\n"))
    assert status == 400
    assert [type(e) for e in before] == [Request]


def test_a_chunked_body_arrives_without_its_coding_trailers_and_extensions_dropped() -> None:
    """Spec (RFC 9112 section 7.1): chunk extensions and trailers are not body."""
    head = HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
    events = parse(head + b"2;ext=1\r\nhi\r\n", b"3\r\n!!!\r\n0\r\nX-Trailer: t\r\n\r\n")
    assert events[1:] == [b"hi", b"!!!", END]


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        (b"Transfer-Encoding: gzip\r\n", 501),
        (b"Transfer-Encoding: gzip, chunked\r\n", 501),
        (b"Transfer-Encoding: chunked, gzip\r\n", 400),
    ],
)
def test_a_transfer_coding_other_than_chunked_is_refused(headers: bytes, status: int) -> None:
    """Gateway choice, as on h11 (501): the body is handed over decoded from chunked
    only, so a request with another coding is refused rather than passed on coded."""
    assert refusal(parse(HEAD + headers + b"\r\n0\r\n\r\n"))[0] == status


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"GET / HTTP/1.1\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        (b"GET /\r\n\r\n", 505),
        (b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
        (b"GET / HTTP/1.2\r\nHost: a\r\n\r\n", 400),
    ],
)
def test_host_and_version_rules_h11_kept_are_kept(raw: bytes, status: int) -> None:
    """Spec (RFC 9112 section 3.2): an HTTP/1.1 request has exactly one Host; only
    HTTP/1.0 and 1.1 are served (llhttp alone would accept 0.9 and 2.0)."""
    assert refusal(parse(raw)) == (status, [])


def test_http_1_0_is_served_without_keep_alive_or_100_continue() -> None:
    """Gateway choice, as on h11: an HTTP/1.0 request is answered and the connection
    then closes; it needs no Host."""
    (request, end) = parse(b"GET /x HTTP/1.0\r\nExpect: 100-continue\r\n\r\n")
    assert isinstance(request, Request) and end is END
    assert (request.http_version, request.keep_alive, request.expect_continue) == (
        "1.0",
        False,
        False,
    )


def test_connection_close_and_expect_100_continue_are_read_from_the_head() -> None:
    """Spec (RFC 9112 section 9.6, RFC 9110 section 10.1.1)."""
    request = parse(HEAD + b"Connection: Close\r\nExpect: 100-Continue\r\n\r\n")[0]
    assert isinstance(request, Request)
    assert (request.keep_alive, request.expect_continue) == (False, True)


@pytest.mark.parametrize("pieces", [1, 7, 100])
def test_a_head_over_the_limit_is_431_however_it_arrives(pieces: int) -> None:
    """Gateway choice (robustness A50): a head past the limit is a 431, whether it comes
    whole or in pieces; a head just under it is served."""
    big = HEAD + b"X-Big: " + b"a" * LIMIT + b"\r\n\r\n"
    size = len(big) // pieces + 1
    events = parse(*(big[i : i + size] for i in range(0, len(big), size)))
    assert refusal(events) == (431, [])
    fits = HEAD + b"X-Big: " + b"a" * (LIMIT - len(HEAD) - 40) + b"\r\n\r\n"
    assert [type(e) for e in parse(fits)] == [Request, type(END)]


def test_an_incomplete_head_is_refused_once_it_has_grown_past_the_limit() -> None:
    """Gateway choice: a head that never ends cannot grow without bound; it is refused
    once the reads after the one it began in pass the limit."""
    parser = RequestParser(LIMIT)
    parser.feed(HEAD + b"X-Big: ")
    for _ in range(LIMIT // 100 + 1):
        assert not parser.events
        parser.feed(b"a" * 100)
    assert [e.status for e in parser.events if isinstance(e, RequestRefused)] == [431]


def test_pipelined_requests_queue_in_order_and_a_malformed_one_is_refused_in_its_place() -> None:
    """Spec (RFC 9112 section 9.3.2): pipelined requests are taken in order; the ones
    before a malformed request are served, and parsing stops at it."""
    first = HEAD + b"Content-Length: 3\r\n\r\none"
    second = b"GET /two HTTP/1.1\r\nHost: a\r\n\r\n"
    events = parse(first + second[:10], second[10:] + b"BAD\n\n" + second)
    status, before = refusal(events)
    assert status == 400
    assert [e.target if isinstance(e, Request) else e for e in before] == [
        b"/mcp",
        b"one",
        END,
        b"/two",
        END,
    ]


def test_the_backlog_counts_what_was_fed_since_the_queue_was_last_empty() -> None:
    """Gateway choice: the engine stops reading ahead of a response once the backlog
    reaches the head limit, so what waits is bounded by it and one read."""
    parser = RequestParser(LIMIT)
    parser.feed(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n" * 3)
    assert parser.backlog == 3 * 27
    parser.events.clear()
    parser.feed(b"GET / HTTP/1.1\r\n")
    assert (parser.backlog, parser.head_open) == (16, True)


def test_a_close_is_an_event_and_nothing_is_parsed_after_it() -> None:
    """The host closing its side ends the events; a refusal, likewise, ends them."""
    events = parse(HEAD + b"Content-Length: 5\r\n\r\nab", b"", b"cde")
    assert events[1:] == [b"ab", CLOSED]
    refused = parse(b"GET / HTTP/1.1\r\n\r\n", b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", b"")
    assert [type(e) for e in refused] == [RequestRefused]


def test_an_upgrade_request_is_served_as_plain_http_with_its_body() -> None:
    """Gateway choice (RFC 9110 section 7.8 lets a server ignore Upgrade): the request
    keeps its body (llhttp alone would stop before it) and the connection goes on."""
    upgrade = b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AA\r\n"
    raw = (
        HEAD
        + upgrade
        + b"Content-Length: 5\r\n\r\nhello"
        + b"GET /next HTTP/1.1\r\nHost: a\r\n\r\n"
    )
    events = parse(raw)
    assert [e.target if isinstance(e, Request) else e for e in events] == [
        b"/mcp",
        b"hello",
        END,
        b"/next",
        END,
    ]
    chunked = parse(HEAD + upgrade + b"Transfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n")
    assert chunked[1:] == [b"hi", END]


def test_a_connect_is_answered_and_nothing_after_it_is_read_as_http() -> None:
    """Gateway choice: what follows a CONNECT is a tunnel's bytes, not requests."""
    events = parse(b"CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n")
    request, end, closed = events
    assert isinstance(request, Request) and (end, closed) == (END, CLOSED)
    assert not request.keep_alive


FRAGMENTS = st.sampled_from(PIECES)
REQUEST_BYTES = st.lists(st.one_of(FRAGMENTS, st.binary(max_size=24)), max_size=24).map(b"".join)


@given(data=REQUEST_BYTES, cuts=st.lists(st.integers(0, 600), max_size=6))
def test_any_bytes_in_any_pieces_give_well_formed_events_and_never_raise(
    data: bytes, cuts: list[int]
) -> None:
    """Gateway choice: whatever a host sends, the parser raises nothing; its events are
    requests each followed by body bytes and an end, and at most one refusal or close,
    last."""
    parser = RequestParser(256)
    edges = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    for start, stop in itertools.pairwise(edges):
        parser.feed(data[start:stop])
    parser.feed(b"")
    events = list(parser.events)
    in_body = False
    for n, event in enumerate(events):
        if isinstance(event, RequestRefused) or event is CLOSED:
            assert n == len(events) - 1, events
        elif isinstance(event, Request):
            assert not in_body, events
            in_body = True
        else:
            assert in_body, events
            in_body = event is not END


def test_a_closed_parser_is_freed_without_the_cyclic_collector() -> None:
    """Gateway choice: llhttp holds the parser's callbacks; closing lets go of it, so a
    closed connection's parser goes at once (serve makes full collections rare)."""
    parser = RequestParser(LIMIT)
    parser.feed(HEAD + b"\r\n")
    parser.close()
    parser.feed(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")  # ignored, not an error
    alive = weakref.ref(parser)
    collecting = gc.isenabled()
    gc.disable()
    try:
        del parser
        assert alive() is None
    finally:
        if collecting:
            gc.enable()
