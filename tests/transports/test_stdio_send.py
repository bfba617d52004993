"""Senders on one stdio channel take turns only when the pipe is full (a real child).

A line the kernel takes at once is written without the channel's lock; one
it takes in part holds the lock for the rest, so a second sender's line can
never land inside it.
"""

from __future__ import annotations

import sys

import trio

from gateway.transports.stdio import open_stdio

# Echoes each line's length and first byte: what arrived whole, and in what order.
ECHO_LENGTHS = (
    "import sys\n"
    "for line in sys.stdin.buffer:\n"
    "    sys.stdout.buffer.write(b'%d %s\\n' % (len(line), line[:1]))\n"
    "    sys.stdout.buffer.flush()\n"
)
LONG = 300_000  # several times a pipe's 64 KiB: its sender waits for the child mid-line


async def test_lines_longer_than_the_pipe_from_two_senders_arrive_whole() -> None:
    """Gateway choice (transports rule: one message at a time): a partly written line
    keeps its turn until its last byte, whichever sender comes next."""
    with trio.fail_after(30):
        async with open_stdio([sys.executable, "-c", ECHO_LENGTHS], stop_grace=1) as channel:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(channel.send, b"a" * LONG)
                nursery.start_soon(channel.send, b"b" * LONG)
                nursery.start_soon(channel.send, b"c")
            echoed = sorted([await channel.receive() for _ in range(3)])
    assert echoed == sorted([b"%d a" % (LONG + 1), b"%d b" % (LONG + 1), b"2 c"])
