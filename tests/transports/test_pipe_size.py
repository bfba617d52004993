"""The stdout pipe of a stdio backend grows while a large line crosses it (issue 17).

Real pipes (``os.pipe``), no child process: what is asserted is the capacity
the kernel reports with ``F_GETPIPE_SZ`` after each decision.
"""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest
import trio

from gateway.transports.pipe_size import GROW_AT_BYTES, GROWN_PIPE_BYTES, PipeSizer
from gateway.transports.stdio import READ_CHUNK_BYTES, StdioChannel, open_stdio

pytestmark = pytest.mark.skipif(
    not hasattr(fcntl, "F_SETPIPE_SZ"), reason="F_SETPIPE_SZ is Linux-only; elsewhere a no-op"
)


def capacity(fd: int) -> int:
    return fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)


@asynccontextmanager
async def child_pipe(program: str) -> AsyncIterator[tuple[StdioChannel, int, int]]:
    """A child running ``program``: its channel, its stdout pipe, and that pipe's own capacity."""
    with trio.fail_after(30):
        async with open_stdio([sys.executable, "-c", program], stop_grace=1) as channel:
            stdout = channel._process.stdout  # the pipe under test
            assert stdout is not None
            yield channel, stdout.fileno(), capacity(stdout.fileno())


@pytest.fixture(name="pipe")
def _pipe() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    yield read_end, write_end
    os.close(read_end)
    os.close(write_end)


def test_the_pipe_grows_once_a_line_outgrows_it_and_shrinks_when_it_is_done(
    pipe: tuple[int, int],
) -> None:
    """Gateway choice: large only while a large line is in progress (pipe_size.py)."""
    read_end, _ = pipe
    own = capacity(read_end)
    sizer = PipeSizer(read_end, READ_CHUNK_BYTES)
    sizer.after_read(GROW_AT_BYTES - 1)
    assert (capacity(read_end), sizer.read_bytes) == (own, READ_CHUNK_BYTES)
    sizer.after_read(GROW_AT_BYTES)
    assert (capacity(read_end), sizer.read_bytes) == (GROWN_PIPE_BYTES, GROWN_PIPE_BYTES)
    sizer.after_read(5 * GROWN_PIPE_BYTES)  # still the same line: no change
    assert capacity(read_end) == GROWN_PIPE_BYTES
    sizer.after_read(0)
    assert (capacity(read_end), sizer.read_bytes, sizer.grown) == (own, READ_CHUNK_BYTES, False)


def test_a_pipe_holding_more_than_its_old_size_stays_grown_until_it_drains(
    pipe: tuple[int, int],
) -> None:
    """Gateway choice: the kernel refuses the shrink (EBUSY); the next idle read retries."""
    read_end, write_end = pipe
    own = capacity(read_end)
    sizer = PipeSizer(read_end, READ_CHUNK_BYTES)
    sizer.after_read(GROW_AT_BYTES)
    queued = os.write(write_end, b"x" * (own + 4096))  # the next message, already waiting
    assert queued == own + 4096
    sizer.after_read(0)
    assert (capacity(read_end), sizer.grown) == (GROWN_PIPE_BYTES, True)
    while queued:
        queued -= len(os.read(read_end, queued))
    sizer.after_read(0)
    assert (capacity(read_end), sizer.grown) == (own, False)


def test_a_descriptor_that_cannot_be_resized_is_read_as_it_is() -> None:
    """Gateway choice: a refused grow (EPERM past the user's allowance, here EBADF) is no error."""
    with open(os.devnull, "rb") as handle:  # not a pipe: F_SETPIPE_SZ fails
        sizer = PipeSizer(handle.fileno(), READ_CHUNK_BYTES)
        sizer.after_read(GROW_AT_BYTES)
        assert (sizer.grown, sizer.read_bytes) == (False, READ_CHUNK_BYTES)
        sizer.after_read(0)
        assert sizer.grown is False


async def test_a_ten_mebibyte_line_from_a_child_arrives_whole_and_the_pipe_shrinks_after() -> None:
    """Spec (stdio): one line is one message, whatever its size; the pipe ends at its own size."""
    size = 10 * 1024 * 1024
    child = (
        "import sys; sys.stdin.readline(); "
        f"sys.stdout.buffer.write(b'x' * {size} + b'\\n' + b'after\\n'); sys.stdout.flush(); "
        "sys.stdin.readline()"
    )
    async with child_pipe(child) as (channel, stdout, own):
        await channel.send(b"go")
        line = await channel.receive()
        assert len(line) == size
        assert line.count(b"x") == size
        assert await channel.receive() == b"after"
        assert capacity(stdout) == own
        await channel.send(b"done")


async def test_back_to_back_large_lines_arrive_whole_and_the_pipe_ends_at_its_own_size() -> None:
    """Spec (stdio): lines come out whole however the pipe is resized between them.

    The second 3 MiB line may already fill the pipe when the first completes,
    so a shrink may be refused (EBUSY) before one succeeds; either way no byte
    is lost and the pipe ends at its own size.
    """
    size = 3 * 1024 * 1024
    child = (
        "import sys; sys.stdin.readline(); out = sys.stdout.buffer; "
        f"out.write(b'a' * {size} + b'\\n' + b'b' * {size} + b'\\n' + b'small\\n'); "
        "out.flush(); sys.stdin.readline()"
    )
    async with child_pipe(child) as (channel, stdout, own):
        await channel.send(b"go")
        first, second = await channel.receive(), await channel.receive()
        assert (len(first), first.strip(b"a")) == (size, b"")
        assert (len(second), second.strip(b"b")) == (size, b"")
        assert await channel.receive() == b"small"
        assert capacity(stdout) == own
        await channel.send(b"done")
