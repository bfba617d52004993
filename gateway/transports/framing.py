"""Sans-IO framing: newline-delimited messages (stdio) and server-sent events.

Fed raw bytes as they arrive, each parser yields complete units: lines for
stdio, events for SSE (the HTTP transports). A unit that grows past its limit
is a broken peer (robustness D2): the parser says so instead of buffering
without bound.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from gateway.errors import TransportBroken

DEFAULT_MAX_LINE_BYTES: Final = 16 * 1024 * 1024
# The largest SSE event assembled (data lines plus the line being read). One
# event carries one JSON-RPC message, so this matches the stdio line limit.
DEFAULT_MAX_EVENT_BYTES: Final = 16 * 1024 * 1024
# A piece of a line shorter than this is copied into a shared buffer rather
# than kept as an object of its own (a pipe read is up to 64 KiB or more).
_SMALL_PIECE: Final = 4096


class LineFramer:
    """Split a byte stream into lines without their line endings.

    A line that spans chunks is kept as the chunks themselves and joined once
    when its newline arrives: one copy of a 10 MiB line, where appending to a
    buffer and slicing the line out of it made two (issue 17, the 10 MiB
    payload row). Each chunk is searched for the newline once, so however
    the bytes are cut the cost stays linear.

    Args:
        max_line_bytes: the longest line accepted; beyond it ``feed`` raises.
    """

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self._max = max_line_bytes
        # The pieces of the line being assembled. A small piece is appended to
        # a trailing bytearray instead, so a line trickled a byte at a time
        # costs bytes, not an object per byte.
        self._parts: list[bytes | bytearray] = []
        self._pending = 0

    def feed(self, data: bytes) -> list[bytes]:
        """Add bytes; return the lines they complete (blank lines skipped).

        ``data`` is kept by reference until its line completes: pass bytes,
        which nobody changes afterwards.

        Raises:
            TransportBroken: a line exceeded the limit.
        """
        lines: list[bytes] = []
        start = 0
        end = data.find(b"\n")
        while end >= 0:
            # A whole chunk that is one line is not copied (bytes slicing
            # returns the object itself); otherwise one copy of the line.
            piece = data[start:end]
            if self._parts:
                self._parts.append(piece)
                piece = b"".join(self._parts)
                self._parts = []
                self._pending = 0
            line = piece.rstrip(b"\r")  # no copy when nothing to strip
            if len(line) > self._max:
                raise TransportBroken(f"line of {len(line)} bytes exceeds {self._max}")
            if line and not line.isspace():
                lines.append(line)
            start = end + 1
            end = data.find(b"\n", start)
        if start < len(data):
            self._keep(data[start:] if start else data)
            # A line at the limit may still be waiting for the \n of its \r\n.
            allowed = self._max + 1 if data.endswith(b"\r") else self._max
            if self._pending > allowed:
                raise TransportBroken(f"line exceeds {self._max} bytes without a newline")
        return lines

    def _keep(self, rest: bytes) -> None:
        """Hold ``rest`` towards the next line."""
        self._pending += len(rest)
        if len(rest) >= _SMALL_PIECE:
            self._parts.append(rest)
        elif self._parts and isinstance(self._parts[-1], bytearray):
            self._parts[-1] += rest
        else:
            self._parts.append(bytearray(rest))

    @property
    def pending(self) -> int:
        """Bytes buffered towards the next line."""
        return self._pending


_BOM: Final = b"\xef\xbb\xbf"
_LINE_END: Final = re.compile(rb"[\r\n]")
_MAX_RETRY_DIGITS: Final = 12
_MAX_RETRY: Final = 10**_MAX_RETRY_DIGITS - 1
_CR: Final = 0x0D
_LF: Final = 0x0A


@dataclass(frozen=True, slots=True, kw_only=True)
class SseEvent:
    """One dispatched server-sent event (WHATWG HTML, "event stream interpretation").

    Attributes:
        event: the event type; ``message`` when the stream named none.
        data: the data lines joined with ``\\n``.
        id: the last event ID in effect when the event was dispatched (it
            persists across events, as ``EventSource.lastEventId`` does);
            empty when none was ever set or it was reset.
        retry: the reconnection time in milliseconds that this event's own
            block set, or None. The parser's :attr:`SseParser.retry` keeps the
            latest value, including one set by a block without data.
    """

    event: str = "message"
    data: str
    id: str = ""
    retry: int | None = None


class SseParser:
    """Turn an SSE byte stream into events, whatever the chunking.

    Follows the WHATWG algorithm: a UTF-8 byte order mark at the very start is
    skipped; lines end with CRLF, LF or CR (a CR at the end of one chunk and
    an LF at the start of the next are one line end); lines starting with
    ``:`` are comments; a blank line dispatches the event when it has data;
    an ``id`` containing NUL is ignored; ``retry`` must be all ASCII digits.
    An event still being assembled when the stream ends is never dispatched.

    Args:
        max_event_bytes: the most bytes one event may accumulate (its data
            plus the line being read); beyond it ``feed`` raises, so a peer
            that never ends its event cannot grow memory without bound.
        last_event_id: the last event ID carried over from an earlier
            connection of the same stream (reconnecting keeps it).
        retry: the reconnection time carried over, in milliseconds.
    """

    def __init__(
        self,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        *,
        last_event_id: str = "",
        retry: int | None = None,
    ) -> None:
        self._max = max_event_bytes
        self._buffer = bytearray()
        # Where to resume the line-end search (see LineFramer._scanned).
        self._scanned = 0
        self._at_start = True
        # The previous chunk ended with CR: an LF opening the next chunk
        # belongs to that line end.
        self._skip_lf = False
        self._data: list[str] = []
        self._data_bytes = 0
        self._event_type = ""
        self._event_retry: int | None = None
        self.last_event_id = last_event_id
        """The last event ID buffer; sent as ``Last-Event-ID`` on reconnect."""
        self.retry = retry
        """The latest reconnection time the stream asked for, in milliseconds."""

    def feed(self, data: bytes) -> list[SseEvent]:
        """Add bytes; return the events they complete, in order.

        Raises:
            TransportBroken: an event or a line exceeded the limit.
        """
        buffer = self._buffer
        buffer += data
        if self._at_start:
            if len(buffer) < len(_BOM) and _BOM.startswith(buffer):
                return []  # could still be a BOM split across chunks
            if buffer.startswith(_BOM):
                del buffer[: len(_BOM)]
            self._at_start = False
        events: list[SseEvent] = []
        start = 0
        while True:
            if self._skip_lf:
                if start >= len(buffer):
                    break
                if buffer[start] == _LF:
                    start += 1
                self._skip_lf = False
            match = _LINE_END.search(buffer, max(start, self._scanned))
            if match is None:
                break
            end = match.start()
            line = bytes(buffer[start:end])
            if buffer[end] == _CR:
                if end + 1 < len(buffer):
                    start = end + 2 if buffer[end + 1] == _LF else end + 1
                else:
                    start = end + 1
                    self._skip_lf = True
            else:
                start = end + 1
            self._line(line, events)
        del buffer[:start]
        self._scanned = len(buffer)
        if self._data_bytes + len(buffer) > self._max:
            raise TransportBroken(f"SSE event exceeds {self._max} bytes")
        return events

    def _line(self, line: bytes, events: list[SseEvent]) -> None:
        if len(line) > self._max:
            raise TransportBroken(f"SSE line of {len(line)} bytes exceeds {self._max}")
        if not line:
            self._dispatch(events)
            return
        if line[:1] == b":":
            return
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data_bytes += len(value) + 1
            if self._data_bytes > self._max:
                raise TransportBroken(f"SSE event exceeds {self._max} bytes")
            self._data.append(value.decode("utf-8", "replace"))
        elif name == b"event":
            self._event_type = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\0" not in value:
                self.last_event_id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():
            # Digits beyond this would only be clamped by the reader; int()
            # of a long string is slow, and refused past 4300 digits.
            retry = int(value) if len(value) <= _MAX_RETRY_DIGITS else _MAX_RETRY
            self.retry = self._event_retry = retry
        # Any other field is ignored (spec).

    def _dispatch(self, events: list[SseEvent]) -> None:
        if self._data:
            events.append(
                SseEvent(
                    event=self._event_type or "message",
                    data="\n".join(self._data),
                    id=self.last_event_id,
                    retry=self._event_retry,
                )
            )
        self._data = []
        self._data_bytes = 0
        self._event_type = ""
        self._event_retry = None

    @property
    def pending(self) -> int:
        """Bytes buffered towards the current event (data and the partial line)."""
        return self._data_bytes + len(self._buffer)
