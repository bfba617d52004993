"""Specification tests for ``gateway.transports.framing.SseParser`` (sans-IO).

Spec: WHATWG HTML, "Server-sent events", section "Interpreting an event
stream"; MCP Streamable HTTP and HTTP+SSE carry one JSON-RPC message per
``message`` event. Robustness: an oversize event is a broken peer.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.errors import TransportBroken
from gateway.transports.framing import SseEvent, SseParser


def feed_all(parser: SseParser, chunks: list[bytes]) -> list[SseEvent]:
    events: list[SseEvent] = []
    for chunk in chunks:
        events += parser.feed(chunk)
    return events


def test_one_message_event_is_dispatched_on_the_blank_line() -> None:
    """Spec: a blank line dispatches the event assembled so far."""
    parser = SseParser()
    assert parser.feed(b'event: message\ndata: {"a":1}\n') == []
    assert parser.feed(b"\n") == [SseEvent(event="message", data='{"a":1}')]


def test_event_type_defaults_to_message() -> None:
    """Spec: with no ``event`` field the type is ``message``."""
    assert SseParser().feed(b"data: x\n\n") == [SseEvent(event="message", data="x")]


def test_multi_line_data_is_joined_with_line_feeds() -> None:
    """Spec: each ``data`` line appends its value and a LF; the last LF is dropped."""
    assert SseParser().feed(b"data: a\ndata:b\ndata:  c\n\n") == [SseEvent(data="a\nb\n c")]


def test_only_one_space_after_the_colon_is_removed() -> None:
    """Spec: a single leading space of the value is not part of it."""
    assert SseParser().feed(b"data:  two\n\n") == [SseEvent(data=" two")]


def test_field_without_colon_has_an_empty_value() -> None:
    """Spec: a line without a colon is a field name with the empty string as value."""
    assert SseParser().feed(b"data\n\n") == [SseEvent(data="")]


@pytest.mark.parametrize("ending", [b"\r\n", b"\n", b"\r"])
def test_every_line_ending_is_understood(ending: bytes) -> None:
    """Spec: lines end with CRLF, LF or CR."""
    stream = ending.join([b"event: endpoint", b"data: /messages?s=1", b"", b""])
    assert SseParser().feed(stream) == [SseEvent(event="endpoint", data="/messages?s=1")]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    """Spec: CR then LF is one line end even when the chunks split them."""
    parser = SseParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\ndata: b\r") == []
    assert parser.feed(b"\n\r") == [SseEvent(data="a\nb")]
    assert parser.feed(b"\n") == []


def test_comments_are_ignored() -> None:
    """Spec: a line starting with a colon is a comment (servers send them to keep streams open)."""
    assert SseParser().feed(b": ping\ndata: x\n: more\n\n: alone\n\n") == [SseEvent(data="x")]


def test_block_without_data_dispatches_nothing_but_resets_the_type() -> None:
    """Spec: an empty data buffer dispatches nothing; the event type is reset."""
    assert SseParser().feed(b"event: endpoint\n\ndata: x\n\n") == [SseEvent(data="x")]


def test_unknown_fields_are_ignored() -> None:
    """Spec: fields other than event, data, id and retry are ignored."""
    assert SseParser().feed(b"foo: bar\ndata: x\n\n") == [SseEvent(data="x")]


def test_leading_byte_order_mark_is_skipped_even_when_split() -> None:
    """Spec: one UTF-8 BOM at the start of the stream is not part of it."""
    parser = SseParser()
    assert parser.feed(b"\xef") == []
    assert parser.feed(b"\xbb") == []
    assert parser.feed(b"\xbfdata: x\n\n") == [SseEvent(data="x")]


def test_byte_order_mark_later_is_data() -> None:
    """Spec: only a BOM at the very start is skipped."""
    events = SseParser().feed("data: \ufeffx\n\n".encode())
    assert events == [SseEvent(data="\ufeffx")]


def test_last_event_id_persists_across_events_and_is_exposed() -> None:
    """Spec: the last event ID buffer persists until another id field changes it."""
    parser = SseParser()
    events = parser.feed(b"id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n")
    assert [e.id for e in events] == ["7", "7", ""]
    assert parser.last_event_id == ""


def test_id_without_data_still_sets_the_last_event_id() -> None:
    """Spec: the id field updates the buffer even when no event is dispatched
    (MCP 2025-11-25 priming events carry an id and empty data)."""
    parser = SseParser()
    assert parser.feed(b"id: prime-1\n\n") == []
    assert parser.last_event_id == "prime-1"


def test_id_containing_nul_is_ignored() -> None:
    """Spec: an id field whose value contains NUL is ignored."""
    parser = SseParser(last_event_id="keep")
    assert parser.feed(b"id: a\x00b\ndata: x\n\n") == [SseEvent(data="x", id="keep")]


def test_retry_sets_the_reconnection_time() -> None:
    """Spec: retry with only ASCII digits sets the reconnection time (ms)."""
    parser = SseParser()
    assert parser.feed(b"retry: 2500\n\n") == []
    assert parser.retry == 2500
    events = parser.feed(b"retry: 0\ndata: x\n\n")
    assert events == [SseEvent(data="x", retry=0)]
    assert parser.retry == 0


@pytest.mark.parametrize("value", [b"", b"-1", b"1.5", b"  10", b"1e3", "\u0661".encode()])
def test_retry_that_is_not_all_ascii_digits_is_ignored(value: bytes) -> None:
    """Spec: any other retry value is ignored."""
    parser = SseParser(retry=1000)
    parser.feed(b"retry:" + value + b"\n\n")
    assert parser.retry == 1000


def test_absurd_retry_is_kept_bounded() -> None:
    """Gateway choice: a retry of thousands of digits costs nothing and is clamped by
    the reader; the parser saturates it instead of converting it."""
    parser = SseParser()
    parser.feed(b"retry: " + b"9" * 5000 + b"\n\n")
    assert parser.retry is not None and parser.retry >= 10**11


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    """Spec: the stream is decoded as UTF-8 with replacement characters."""
    assert SseParser().feed(b"data: \xff\n\n") == [SseEvent(data="\ufffd")]


def test_incomplete_event_at_end_is_not_dispatched() -> None:
    """Spec: an event without its blank line is discarded at end of stream."""
    parser = SseParser()
    assert parser.feed(b"data: x\n") == []
    assert parser.pending > 0


def test_event_growing_past_the_limit_breaks_the_stream() -> None:
    """Robustness D2: an event that never ends cannot grow memory without bound."""
    parser = SseParser(max_event_bytes=64)
    parser.feed(b"data: " + b"x" * 30 + b"\n")
    with pytest.raises(TransportBroken, match="exceeds 64"):
        parser.feed(b"data: " + b"y" * 40 + b"\n")


def test_partial_line_past_the_limit_breaks_the_stream() -> None:
    """Robustness D2: one line without an end counts towards the event too."""
    parser = SseParser(max_event_bytes=64)
    with pytest.raises(TransportBroken, match="exceeds 64"):
        parser.feed(b"data: " + b"x" * 100)


def test_limit_is_per_event_not_per_stream() -> None:
    """Gateway choice: many events below the limit are fine, however long the stream."""
    parser = SseParser(max_event_bytes=64)
    chunk = b"data: " + b"x" * 40 + b"\n\n"
    events = feed_all(parser, [chunk] * 100)
    assert len(events) == 100


# -- properties ----------------------------------------------------------

_text = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n\x00"),
    max_size=20,
)
_field_text = _text.filter(lambda s: not s.startswith(" "))


@st.composite
def _streams(draw: st.DrawFn) -> tuple[bytes, list[SseEvent]]:
    """A random event stream and the events a correct parser must produce."""
    ending = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    lines: list[str] = []
    expected: list[SseEvent] = []
    last_id = ""
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.booleans()):
            lines.append(":" + draw(_text))
        event_type = draw(st.none() | _field_text.filter(bool))
        if event_type is not None:
            lines.append("event: " + event_type)
        event_id = draw(st.none() | _field_text)
        if event_id is not None:
            lines.append("id: " + event_id)
            last_id = event_id
        retry = draw(st.none() | st.integers(0, 100_000))
        if retry is not None:
            lines.append(f"retry: {retry}")
        data = draw(st.lists(_text, max_size=4))
        lines += ["data: " + d for d in data]
        lines.append("")
        if data:
            expected.append(
                SseEvent(
                    event=event_type or "message", data="\n".join(data), id=last_id, retry=retry
                )
            )
    bom = b"\xef\xbb\xbf" if draw(st.booleans()) else b""
    stream = bom + b"".join(line.encode() + ending for line in lines)
    return stream, expected


def _chunked(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(stream)) for c in cuts})
    edges = [0, *points, len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(edges)]


@settings(max_examples=300)
@given(case=_streams(), cuts=st.lists(st.integers(0, 400), max_size=30))
def test_any_chunking_yields_the_same_events(
    case: tuple[bytes, list[SseEvent]], cuts: list[int]
) -> None:
    """Spec: the byte stream may be cut anywhere; events come out whole and identical."""
    stream, expected = case
    assert SseParser().feed(stream) == expected
    assert feed_all(SseParser(), _chunked(stream, cuts)) == expected


@given(case=_streams())
def test_byte_at_a_time_yields_the_same_events(case: tuple[bytes, list[SseEvent]]) -> None:
    """Spec: even one byte per chunk (a slow proxy, robustness B13) changes nothing."""
    stream, expected = case
    parser = SseParser()
    assert feed_all(parser, [stream[i : i + 1] for i in range(len(stream))]) == expected


@given(junk=st.lists(st.binary(max_size=50), max_size=20))
def test_arbitrary_bytes_never_crash_the_parser(junk: list[bytes]) -> None:
    """Robustness: whatever a peer sends, the parser returns events or raises
    TransportBroken, nothing else."""
    parser = SseParser(max_event_bytes=200)
    try:
        for chunk in junk:
            for event in parser.feed(chunk):
                assert isinstance(event.data, str)
    except TransportBroken:
        pass
