"""Sans-IO framing: newline-delimited messages (stdio).

Fed raw bytes as they arrive, the framer yields complete lines. A line that
grows past the limit without a newline is a broken peer (robustness D2): the
framer says so instead of buffering without bound.
"""

from __future__ import annotations

from typing import Final

from gateway.errors import TransportBroken

DEFAULT_MAX_LINE_BYTES: Final = 16 * 1024 * 1024


class LineFramer:
    """Split a byte stream into lines without their line endings.

    Args:
        max_line_bytes: the longest line accepted; beyond it ``feed`` raises.
    """

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self._max = max_line_bytes
        self._buffer = bytearray()
        # Where to resume the newline search: never rescan what was scanned,
        # or a long line trickled in small chunks costs quadratic time.
        self._scanned = 0

    def feed(self, data: bytes) -> list[bytes]:
        """Add bytes; return the lines they complete (blank lines skipped).

        Raises:
            TransportBroken: a line exceeded the limit.
        """
        self._buffer += data
        lines: list[bytes] = []
        start = 0
        while True:
            end = self._buffer.find(b"\n", max(start, self._scanned))
            if end < 0:
                break
            line = bytes(self._buffer[start:end]).rstrip(b"\r")
            if len(line) > self._max:
                raise TransportBroken(f"line of {len(line)} bytes exceeds {self._max}")
            if line.strip():
                lines.append(line)
            start = end + 1
        del self._buffer[:start]
        self._scanned = len(self._buffer)
        if self._scanned > self._max:
            raise TransportBroken(f"line exceeds {self._max} bytes without a newline")
        return lines

    @property
    def pending(self) -> int:
        """Bytes buffered towards the next line."""
        return len(self._buffer)
