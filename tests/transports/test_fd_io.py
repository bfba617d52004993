"""``gateway.transports.fd_io`` on real pipes and sockets.

The helpers skip trio's scheduler pass when the kernel is ready, so what
trio's streams guaranteed must be checked here instead: every byte arrives
in order past a full pipe buffer, end of file is ``b""``, a closed
descriptor and a vanished peer are trio's two error types, a waiter is woken
by the stream's close, cancellation is honoured on entry, and a read that
found data at once still yields (a flooding backend cannot starve others).
"""

from __future__ import annotations

import os
import socket

import pytest
import trio
import trio.testing

from gateway.transports import fd_io


def _pipe() -> tuple[trio.lowlevel.FdStream, trio.lowlevel.FdStream]:
    read_end, write_end = os.pipe()
    return trio.lowlevel.FdStream(read_end), trio.lowlevel.FdStream(write_end)


async def test_a_write_larger_than_the_pipe_arrives_whole_and_in_order() -> None:
    reader, writer = _pipe()
    data = bytes(range(256)) * 4096  # 1 MiB: the pipe holds 64 KiB, so the writer waits
    received = bytearray()

    async def read_all() -> None:
        while len(received) < len(data):
            received.extend(await fd_io.read_some(reader.fileno(), 65536))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_all)
        await fd_io.write_all(writer.fileno(), data)
    assert bytes(received) == data
    await reader.aclose()
    await writer.aclose()


async def test_end_of_file_reads_as_empty_bytes() -> None:
    reader, writer = _pipe()
    await fd_io.write_all(writer.fileno(), b"last")
    await writer.aclose()
    assert await fd_io.read_some(reader.fileno(), 100) == b"last"
    assert await fd_io.read_some(reader.fileno(), 100) == b""
    await reader.aclose()


async def test_writing_to_a_pipe_nobody_reads_is_a_broken_resource() -> None:
    reader, writer = _pipe()
    await reader.aclose()
    with pytest.raises(trio.BrokenResourceError):
        await fd_io.write_all(writer.fileno(), b"x")
    await writer.aclose()


async def test_a_closed_stream_is_a_closed_resource_for_reads_and_writes() -> None:
    reader, writer = _pipe()
    await reader.aclose()
    await writer.aclose()
    assert reader.fileno() == writer.fileno() == -1
    with pytest.raises(trio.ClosedResourceError):
        await fd_io.read_some(reader.fileno(), 10)
    with pytest.raises(trio.ClosedResourceError):
        await fd_io.write_all(writer.fileno(), b"x")


async def test_a_waiting_reader_is_woken_by_the_streams_close() -> None:
    reader, writer = _pipe()
    outcome: list[type[BaseException]] = []

    async def wait_for_data() -> None:
        try:
            await fd_io.read_some(reader.fileno(), 10)
        except trio.ClosedResourceError as exc:
            outcome.append(type(exc))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait_for_data)
        await trio.testing.wait_all_tasks_blocked()
        await reader.aclose()
    assert outcome == [trio.ClosedResourceError]
    await writer.aclose()


async def test_a_cancelled_caller_writes_nothing() -> None:
    reader, writer = _pipe()
    with trio.CancelScope() as scope:
        scope.cancel()
        await fd_io.write_all(writer.fileno(), b"never")
    await writer.aclose()
    assert await fd_io.read_some(reader.fileno(), 10) == b""
    await reader.aclose()


async def test_a_read_that_finds_data_at_once_still_yields() -> None:
    reader, writer = _pipe()
    await fd_io.write_all(writer.fileno(), b"ready")
    with trio.testing.assert_checkpoints():
        assert await fd_io.read_some(reader.fileno(), 10) == b"ready"
    await reader.aclose()
    await writer.aclose()


async def test_a_socket_whose_peer_closed_is_a_broken_resource() -> None:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    theirs.close()
    with pytest.raises(trio.BrokenResourceError):
        await fd_io.write_all(ours.fileno(), b"x")
    ours.close()
