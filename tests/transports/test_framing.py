"""Specification tests for ``gateway.transports.framing.LineFramer`` (sans-IO).

Spec (MCP transports, stdio): messages are delimited by newlines and MUST NOT
contain embedded newlines. Robustness: an oversize line is a broken peer.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.errors import TransportBroken
from gateway.transports.framing import DEFAULT_MAX_LINE_BYTES, LineFramer


def feed_all(framer: LineFramer, chunks: list[bytes]) -> list[bytes]:
    lines: list[bytes] = []
    for chunk in chunks:
        lines += framer.feed(chunk)
    return lines


def test_complete_line_in_one_chunk_is_returned_without_its_newline() -> None:
    """Spec: a newline ends a message; the newline is not part of it."""
    assert LineFramer().feed(b'{"a":1}\n') == [b'{"a":1}']


def test_line_split_across_chunks_is_reassembled() -> None:
    """Spec: the byte stream may be cut anywhere; lines come out whole."""
    framer = LineFramer()
    assert framer.feed(b'{"jsonrpc":') == []
    assert framer.pending == len(b'{"jsonrpc":')
    assert framer.feed(b'"2.0"}\n{"b"') == [b'{"jsonrpc":"2.0"}']
    assert framer.pending == len(b'{"b"')
    assert framer.feed(b":2}\n") == [b'{"b":2}']
    assert framer.pending == 0


def test_several_lines_in_one_chunk_come_out_in_order() -> None:
    """Spec: each newline-terminated line is one message."""
    assert LineFramer().feed(b"one\ntwo\nthree\npartial") == [b"one", b"two", b"three"]


def test_crlf_line_endings_are_stripped() -> None:
    """Gateway choice: a peer writing CRLF (Windows) is understood."""
    assert LineFramer().feed(b"a\r\nb\r\n") == [b"a", b"b"]


def test_crlf_split_between_chunks_is_stripped() -> None:
    """Gateway choice: the CR and the LF may arrive in different chunks."""
    framer = LineFramer()
    assert framer.feed(b"abc\r") == []
    assert framer.feed(b"\n") == [b"abc"]


def test_carriage_return_inside_a_line_is_kept() -> None:
    """Gateway choice: only line-ending CRs are stripped."""
    assert LineFramer().feed(b"a\rb\n") == [b"a\rb"]


def test_blank_and_whitespace_only_lines_are_skipped() -> None:
    """Gateway choice: empty lines between messages are not messages."""
    assert LineFramer().feed(b"\n\r\n  \n\t\r\nx\n\n") == [b"x"]


def test_line_of_exactly_the_limit_is_accepted() -> None:
    """Gateway choice: max_line_bytes is inclusive."""
    framer = LineFramer(max_line_bytes=8)
    assert framer.feed(b"x" * 8) == []
    assert framer.feed(b"\n") == [b"x" * 8]
    assert framer.feed(b"y" * 8 + b"\r\n") == [b"y" * 8]


def test_line_over_the_limit_raises_when_its_newline_arrives() -> None:
    """Spec: an oversize message is a broken peer (robustness D2)."""
    framer = LineFramer(max_line_bytes=8)
    with pytest.raises(TransportBroken, match="exceeds 8"):
        framer.feed(b"x" * 9 + b"\n")


def test_line_over_the_limit_raises_even_if_its_newline_never_arrives() -> None:
    """Gateway choice: the framer never buffers without bound waiting for a newline."""
    framer = LineFramer(max_line_bytes=8)
    with pytest.raises(TransportBroken, match="without a newline"):
        framer.feed(b"x" * 9)


def test_line_over_the_limit_raises_when_trickled_byte_by_byte() -> None:
    """Gateway choice: the limit holds however small the chunks are."""
    framer = LineFramer(max_line_bytes=8)
    for _ in range(8):
        assert framer.feed(b"x") == []
    with pytest.raises(TransportBroken):
        framer.feed(b"x")


def test_line_at_the_limit_with_crlf_split_between_chunks_is_accepted() -> None:
    """Gateway choice: the pending CR of a CRLF does not count towards the limit."""
    framer = LineFramer(max_line_bytes=4)
    assert framer.feed(b"abcd\r") == []
    assert framer.feed(b"\n") == [b"abcd"]


def test_trickled_byte_by_byte_input_yields_the_same_lines() -> None:
    """Spec: one-byte reads (a slow pipe) still produce whole lines."""
    stream = b'{"a":1}\r\n\n{"b":"' + b"x" * 20_000 + b'"}\npart'
    framer = LineFramer()
    lines = feed_all(framer, [stream[i : i + 1] for i in range(len(stream))])
    assert lines == [b'{"a":1}', b'{"b":"' + b"x" * 20_000 + b'"}']
    assert framer.pending == 4


def test_default_limit_is_sixteen_mebibytes() -> None:
    """Gateway choice: large enough for big tool results, bounded against a runaway peer."""
    assert DEFAULT_MAX_LINE_BYTES == 16 * 1024 * 1024


# Lines without newlines, joined by LF or CRLF, sometimes blank, sometimes unterminated.
line_bodies = st.binary(max_size=40).map(lambda b: b.replace(b"\n", b""))
streams = st.builds(
    lambda parts, endings, tail: (
        b"".join(p + e for p, e in zip(parts, endings, strict=False)) + tail
    ),
    st.lists(line_bodies, max_size=12),
    st.lists(st.sampled_from([b"\n", b"\r\n", b"\n\n", b"\r\r\n"]), min_size=12, max_size=12),
    line_bodies,
)


def reference_lines(stream: bytes) -> list[bytes]:
    """The lines a newline framer must produce, computed the obvious way."""
    complete = stream.split(b"\n")[:-1]
    return [line.rstrip(b"\r") for line in complete if line.rstrip(b"\r").strip()]


@settings(max_examples=300, deadline=None)
@given(stream=streams, cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=20))
def test_any_chunking_of_a_stream_yields_the_same_lines(stream: bytes, cuts: list[int]) -> None:
    """Spec: how the bytes are chunked never changes which lines come out."""
    bounds = sorted({0, len(stream), *(c for c in cuts if c < len(stream))})
    chunks = [stream[a:b] for a, b in itertools.pairwise(bounds)]
    framer = LineFramer()
    assert feed_all(framer, chunks) == reference_lines(stream)
    assert framer.pending == len(stream) - (stream.rfind(b"\n") + 1)


# Lines of up to 20 KiB, so that pieces on both sides of the framer's 4 KiB
# small-piece threshold are held, merged and joined.
long_bodies = st.integers(min_value=0, max_value=20_000).flatmap(
    lambda n: (
        st.just(b"y" * n) | st.binary(min_size=n, max_size=n).map(lambda b: b.replace(b"\n", b"-"))
    )
)


@settings(max_examples=150, deadline=None)
@given(
    parts=st.lists(long_bodies, min_size=1, max_size=5),
    endings=st.lists(st.sampled_from([b"\n", b"\r\n", b"\n\n"]), min_size=5, max_size=5),
    cuts=st.lists(st.integers(min_value=0, max_value=100_000), max_size=30),
)
def test_any_chunking_of_long_lines_yields_the_same_lines(
    parts: list[bytes], endings: list[bytes], cuts: list[int]
) -> None:
    """Spec: a line held as many pieces (issue 17: joined once) comes out byte for byte."""
    stream = b"".join(p + e for p, e in zip(parts, endings, strict=False))
    bounds = sorted({0, len(stream), *(c for c in cuts if c < len(stream))})
    chunks = [stream[a:b] for a, b in itertools.pairwise(bounds)]
    framer = LineFramer()
    assert feed_all(framer, chunks) == reference_lines(stream)
    assert framer.pending == 0


def test_a_line_at_the_limit_in_many_pieces_is_accepted_and_one_more_byte_is_not() -> None:
    """Gateway choice: the limit counts the held pieces, small and large alike."""
    framer = LineFramer(max_line_bytes=10_000)
    for piece in (b"a" * 5000, b"b" * 10, b"c" * 4990):
        assert framer.feed(piece) == []
    assert framer.pending == 10_000
    assert framer.feed(b"\r\n") == [b"a" * 5000 + b"b" * 10 + b"c" * 4990]
    framer.feed(b"d" * 6000)
    with pytest.raises(TransportBroken, match="without a newline"):
        framer.feed(b"e" * 4001)
