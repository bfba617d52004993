"""Reads and writes on non-blocking descriptors that ask the kernel first.

trio's streams pass through the scheduler once per operation even when the
kernel is ready: ``FdStream.send_all`` and ``receive_some`` yield before they
touch the descriptor, and a socket's successful ``send`` yields after it.
On the call path (one socket read and write for the host, one pipe write and
read for a stdio backend, and the lock around the pipe) those were four
scheduler passes a call, each with an ``epoll_wait`` of its own: about a
tenth of the gateway's CPU per call at one call in flight (issue 17).

These helpers make the system call first and go through trio only to wait
when it would block. Cancellation is still honoured on entry
(``checkpoint_if_cancelled``). Fairness stays where it was: a read that
finds data at once yields afterwards (a backend that floods its stdout
cannot starve the other tasks); a write that the kernel takes at once does
not, because every caller's next step is a read or a wait, which yields.

The caller owns the descriptor's discipline: one writer at a time (the
stdio channel's lock, the HTTP connection's single exchange), and the
descriptor is closed through its trio stream (``aclose`` notifies a
waiter here, which then sees ``ClosedResourceError``).
"""

from __future__ import annotations

import errno
import os

import trio


def _failure(exc: OSError) -> trio.ClosedResourceError | trio.BrokenResourceError:
    if exc.errno == errno.EBADF:
        return trio.ClosedResourceError("the descriptor was already closed")
    return trio.BrokenResourceError(str(exc))


async def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data``; waits (through trio) only while the kernel is full.

    Raises:
        trio.ClosedResourceError: the descriptor is closed.
        trio.BrokenResourceError: the peer is gone (EPIPE, ECONNRESET, ...).
    """
    await trio.lowlevel.checkpoint_if_cancelled()
    total = len(data)
    try:
        sent = os.write(fd, data)
    except BlockingIOError:
        sent = 0
    except OSError as exc:
        raise _failure(exc) from exc
    if sent == total:
        return
    await write_rest(fd, data, sent)


def write_now(fd: int, data: bytes) -> int:
    """Write what the kernel takes at once, without waiting or checkpointing; the bytes written.

    For a writer that needs a turn only when the kernel is full (the stdio
    channel): nothing yields between its check and this write. The caller
    honours cancellation first (``checkpoint_if_cancelled``), as
    ``write_all`` does, and hands a short write to ``write_rest``.

    Raises:
        trio.ClosedResourceError: the descriptor is closed.
        trio.BrokenResourceError: the peer is gone (EPIPE, ECONNRESET, ...).
    """
    try:
        return os.write(fd, data)
    except BlockingIOError:
        return 0
    except OSError as exc:
        raise _failure(exc) from exc


async def write_rest(fd: int, data: bytes, sent: int) -> None:
    """Write ``data`` from byte ``sent`` on, waiting (through trio) while the kernel is full.

    Raises:
        trio.ClosedResourceError: the descriptor is closed.
        trio.BrokenResourceError: the peer is gone (EPIPE, ECONNRESET, ...).
    """
    total = len(data)
    with memoryview(data) as view:
        while sent < total:
            await trio.lowlevel.wait_writable(fd)
            try:
                sent += os.write(fd, view[sent:])
            except BlockingIOError:
                continue
            except OSError as exc:
                raise _failure(exc) from exc


async def read_some(fd: int, max_bytes: int) -> bytes:
    """Up to ``max_bytes`` from ``fd``; ``b""`` at end of file.

    Raises:
        trio.ClosedResourceError: the descriptor is closed.
        trio.BrokenResourceError: reading failed (EIO, ECONNRESET, ...).
    """
    await trio.lowlevel.checkpoint_if_cancelled()
    try:
        data = os.read(fd, max_bytes)
    except BlockingIOError:
        pass
    except OSError as exc:
        raise _failure(exc) from exc
    else:
        # Found at once: yield now, as trio would, so a flood is fair.
        await trio.lowlevel.cancel_shielded_checkpoint()
        return data
    while True:
        await trio.lowlevel.wait_readable(fd)
        try:
            return os.read(fd, max_bytes)
        except BlockingIOError:
            continue
        except OSError as exc:
            raise _failure(exc) from exc
