"""The capacity of a backend's stdout pipe: grown while a large message crosses it.

A Linux pipe holds 64 KiB by default, so a 10 MiB result crosses it in 160
turns of write, wake-up and read between the child and the gateway; with a
1 MiB pipe it takes 10 (issue 17: the 10 MiB payload row, 16 ms against 7 ms
measured for the transfer alone). The pipe is not simply made large for
good: the kernel charges a pipe's whole capacity to its user whether it is
full or empty, and past ``/proc/sys/fs/pipe-user-pages-soft`` (64 MiB) every
new pipe the user creates is cut to two pages, which 200 backends with three
pipes each would come close to. So the pipe grows when a line has outgrown
the default capacity and returns to it once no line is in progress. Where
the kernel refuses (the limit above, a lower ``pipe-max-size``) or the
platform has no ``F_SETPIPE_SZ``, the pipe keeps its size: slower, never
wrong.
"""

from __future__ import annotations

import fcntl
from typing import Final

# The capacity asked for while a large line crosses: the default
# /proc/sys/fs/pipe-max-size, the most an unprivileged process may set.
GROWN_PIPE_BYTES: Final = 1024 * 1024
# A line buffered past this has outgrown a default pipe (64 KiB): grow.
GROW_AT_BYTES: Final = 64 * 1024

_SET_SIZE: Final[int | None] = getattr(fcntl, "F_SETPIPE_SZ", None)
_GET_SIZE: Final[int | None] = getattr(fcntl, "F_GETPIPE_SZ", None)


class PipeSizer:
    """Decides, after each read, whether the pipe should be large or as it was.

    Args:
        fd: the read end of the pipe.
        read_bytes: how much to read at a time while the pipe has its own size.
    """

    def __init__(self, fd: int, read_bytes: int) -> None:
        self._fd = fd
        self._small_read = read_bytes
        self._base: int | None = None  # the pipe's own capacity, once known
        self._grown = False
        # A refused grow is not retried until the current line is done.
        self._refused = False

    @property
    def read_bytes(self) -> int:
        """How much one read should ask for: a whole grown pipe, or the default."""
        return GROWN_PIPE_BYTES if self._grown else self._small_read

    @property
    def grown(self) -> bool:
        """Whether the pipe has the large capacity now."""
        return self._grown

    def after_read(self, pending: int) -> None:
        """Grow or restore the pipe, given the bytes of an unfinished line.

        Args:
            pending: bytes buffered towards the next line (``LineFramer.pending``).
        """
        if pending >= GROW_AT_BYTES:
            if not (self._grown or self._refused):
                self._grow()
        elif pending == 0:
            self._refused = False
            if self._grown:
                self._restore()

    def _grow(self) -> None:
        if _SET_SIZE is None or _GET_SIZE is None:
            self._refused = True
            return
        try:
            if self._base is None:
                self._base = fcntl.fcntl(self._fd, _GET_SIZE)
            if self._base >= GROWN_PIPE_BYTES:
                self._refused = True  # already as large: nothing to do, nothing to undo
                return
            fcntl.fcntl(self._fd, _SET_SIZE, GROWN_PIPE_BYTES)
        except OSError:  # EPERM: over the user's pipe allowance; EBADF: closed
            self._refused = True
            return
        self._grown = True

    def _restore(self) -> None:
        assert _SET_SIZE is not None
        assert self._base is not None
        try:
            fcntl.fcntl(self._fd, _SET_SIZE, self._base)
        except OSError:
            # EBUSY: more than the old capacity is in the pipe right now (the
            # next message). Stay grown; the next read with no line pending
            # tries again.
            return
        self._grown = False
