"""A session's outbox and its GET stream without HTTP (MockClock, no sleeps).

What the outbox promises (``frontend.clients.Outbox``): a bounded ring
that drops the oldest, ids for ``Last-Event-ID``, a put that never blocks
and wakes every reader parked on it with one reused primitive. What the
stream promises (``frontend.get_stream``): a keep-alive comment at least
every ``KEEPALIVE_INTERVAL``, never an event cut in two by the keep-alive
timer on a slow socket, the session's close ends it, the host's hang-up
cancels even a stalled write.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import trio
import trio.testing

from gateway.frontend.clients import OUTBOX_CAPACITY, ClientRegistry, Outbox
from gateway.frontend.http_util import KEEPALIVE_INTERVAL, sse_event
from gateway.frontend.streamable.get_stream import serve_get_stream
from gateway.protocol import jsonrpc

TOOLS = jsonrpc.encode_notification("notifications/tools/list_changed")


# -- the ring --------------------------------------------------------------------


def test_the_ring_keeps_the_newest_and_ids_keep_counting() -> None:
    outbox = Outbox(capacity=3)
    assert outbox.last_id == 0 and outbox.after(0) == []
    ids = [outbox.put_nowait(b"m%d" % n) for n in range(1, 6)]
    assert ids == [1, 2, 3, 4, 5] and outbox.last_id == 5
    # A reader that last saw 1 gets what the ring still holds: 2 was dropped.
    assert outbox.after(1) == [(3, b"m3"), (4, b"m4"), (5, b"m5")]
    assert outbox.after(4) == [(5, b"m5")]
    assert outbox.after(5) == []
    assert outbox.after(99) == []  # an id from the future: nothing, not an error


async def test_a_reader_with_messages_waiting_gets_them_without_parking() -> None:
    outbox = Outbox()
    outbox.put_nowait(b"a")
    outbox.put_nowait(b"b")
    with trio.fail_after(1):  # it returns without anyone putting more
        assert await outbox.wait_after(0) == [(1, b"a"), (2, b"b")]


async def test_one_put_wakes_every_parked_reader_and_each_takes_what_is_newer(
    autojump_clock: Any,
) -> None:
    outbox = Outbox()
    outbox.put_nowait(b"old")
    got: dict[str, list[tuple[int, bytes]]] = {}

    async def read(name: str, last_id: int) -> None:
        got[name] = await outbox.wait_after(last_id)

    with trio.fail_after(60):  # virtual time: a reader left parked fails, not hangs
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read, "current", 1)
            nursery.start_soon(read, "also current", 1)
            await trio.testing.wait_all_tasks_blocked()
            assert got == {}  # both parked: nothing newer than 1 yet
            outbox.put_nowait(b"new")
    assert got == {"current": [(2, b"new")], "also current": [(2, b"new")]}


async def test_a_cancelled_reader_leaves_so_the_next_put_wakes_only_live_ones(
    autojump_clock: Any,
) -> None:
    # trio refuses to reschedule a task that is not parked: a reader left
    # behind by a cancellation would make the next broadcast raise.
    outbox = Outbox()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(outbox.wait_after, 0)
        nursery.start_soon(outbox.wait_after, 0)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    results: list[list[tuple[int, bytes]]] = []

    async def read() -> None:
        results.append(await outbox.wait_after(0))

    with trio.fail_after(60):  # virtual time: a reader left parked fails, not hangs
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            await trio.testing.wait_all_tasks_blocked()
            assert outbox.put_nowait(b"x") == 1
    assert results == [[(1, b"x")]]


# -- the GET stream ------------------------------------------------------------------


class Host:
    """The ASGI side of one GET stream: what was sent, and a hang-up on demand."""

    def __init__(self, write_seconds: float = 0.0) -> None:
        self.bodies: list[tuple[float, bytes]] = []
        self.ended_at: float | None = None
        self.write_seconds = write_seconds  # how long each event's write takes
        self.gone = trio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] != "http.response.body":
            return
        body: bytes = message["body"]
        if body.startswith(b"event:") and self.write_seconds:
            await trio.sleep(self.write_seconds)  # a slow socket: the write blocks
        self.bodies.append((trio.current_time(), body))
        if not message.get("more_body", False):
            self.ended_at = trio.current_time()

    def events(self) -> list[bytes]:
        return [b for _, b in self.bodies if b.startswith(b"event:")]

    def comments(self) -> list[float]:
        return [t for t, b in self.bodies if b == b": keep-alive\n\n"]


SCOPE: dict[str, Any] = {"type": "http", "headers": []}


def opened() -> tuple[ClientRegistry, Any]:
    clients = ClientRegistry()
    session = clients.open("2025-11-25", {}, {})
    session.initialized = True
    return clients, session


async def test_an_idle_stream_gets_a_comment_every_interval_and_events_do_not_stop_them(
    autojump_clock: Any,
) -> None:
    clients, session = opened()
    host = Host()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_get_stream, SCOPE, host.receive, host.send, session)
        for _ in range(10):  # an event every 7 s, then quiet
            await trio.sleep(7)
            clients.broadcast(TOOLS)
        await trio.sleep(KEEPALIVE_INTERVAL * 4)
        host.gone.set()
        hung_up = trio.current_time()
    assert host.events() == [sse_event(TOOLS, n) for n in range(1, 11)]
    writes = [t for t, _ in host.bodies] + [hung_up]
    assert max(b - a for a, b in itertools.pairwise(writes)) <= KEEPALIVE_INTERVAL
    assert len([t for t in host.comments() if t > 70]) >= 3  # the quiet minute


async def test_a_write_longer_than_the_interval_is_finished_whole_then_the_comment_follows(
    autojump_clock: Any,
) -> None:
    # The keep-alive timer must end a wait, never a write: an event cut in
    # two corrupts the stream for good.
    clients, session = opened()
    host = Host(write_seconds=KEEPALIVE_INTERVAL * 3)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_get_stream, SCOPE, host.receive, host.send, session)
        await trio.sleep(KEEPALIVE_INTERVAL - 1)
        clients.broadcast(TOOLS)
        clients.broadcast(TOOLS)
        await trio.sleep(KEEPALIVE_INTERVAL * 8)
        host.gone.set()
    assert host.events() == [sse_event(TOOLS, 1), sse_event(TOOLS, 2)]
    bodies = [b for _, b in host.bodies]
    assert bodies.index(sse_event(TOOLS, 2)) < bodies.index(b": keep-alive\n\n")


async def test_the_session_closing_ends_the_stream_at_once(autojump_clock: Any) -> None:
    clients, session = opened()
    host = Host()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_get_stream, SCOPE, host.receive, host.send, session)
        await trio.sleep(1)
        clients.broadcast(TOOLS)
        await trio.sleep(1)
        closed_at = trio.current_time()
        clients.close(session)
        await trio.sleep(KEEPALIVE_INTERVAL * 2)
        host.gone.set()
    assert host.ended_at == closed_at  # woken by the close, not by the next keep-alive
    assert host.events() == [sse_event(TOOLS, 1)]  # the close's wake-up is not an event
    assert not session.stream_open


async def test_the_host_hanging_up_cancels_even_a_stalled_write(autojump_clock: Any) -> None:
    clients, session = opened()
    host = Host(write_seconds=3600)  # a socket that never drains
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_get_stream, SCOPE, host.receive, host.send, session)
        await trio.sleep(1)
        clients.broadcast(TOOLS)
        await trio.sleep(KEEPALIVE_INTERVAL * 2)
        host.gone.set()
        hung_up = trio.current_time()
    assert trio.current_time() == hung_up  # the write did not hold the stream open
    assert host.events() == [] and not session.stream_open


@pytest.mark.parametrize(("header", "expected"), [(b"1", [2, 3]), (b"0", [1, 2, 3])])
async def test_last_event_id_replays_what_the_ring_still_holds(
    autojump_clock: Any, header: bytes, expected: list[int]
) -> None:
    clients, session = opened()
    for _ in range(3):
        clients.broadcast(TOOLS)
    host = Host()
    scope = {"type": "http", "headers": [(b"last-event-id", header)]}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_get_stream, scope, host.receive, host.send, session)
        await trio.sleep(1)
        host.gone.set()
    assert host.events() == [sse_event(TOOLS, n) for n in expected]


async def test_a_stalled_stream_delays_neither_the_broadcast_nor_the_other_streams(
    autojump_clock: Any,
) -> None:
    clients, stalled_session = opened()
    healthy_session = clients.open("2025-11-25", {}, {})
    healthy_session.initialized = True
    stalled, healthy = Host(write_seconds=3600), Host()
    async with trio.open_nursery() as nursery:
        for host, session in ((stalled, stalled_session), (healthy, healthy_session)):
            nursery.start_soon(serve_get_stream, SCOPE, host.receive, host.send, session)
        await trio.sleep(1)
        sent_at = trio.current_time()
        for _ in range(3):
            assert clients.broadcast(TOOLS) == 2  # synchronous: it never waits for a stream
        await trio.sleep(1)
        stalled.gone.set()
        healthy.gone.set()
    assert [t for t, b in healthy.bodies if b.startswith(b"event:")] == [sent_at] * 3
    assert healthy.events() == [sse_event(TOOLS, n) for n in (1, 2, 3)]
    assert stalled.events() == []


async def test_a_stream_that_fell_behind_the_ring_gets_what_is_left_with_its_ids(
    autojump_clock: Any,
) -> None:
    # The ring drops the oldest: a stream stuck on one write while more than
    # the ring's capacity arrives resumes with the newest, ids intact, so
    # the host can tell (and a reconnect's Last-Event-ID stays meaningful).
    clients, session = opened()
    host = Host(write_seconds=KEEPALIVE_INTERVAL / 2)
    capacity = OUTBOX_CAPACITY
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_get_stream, SCOPE, host.receive, host.send, session)
        await trio.sleep(1)
        clients.broadcast(TOOLS)  # id 1: its write takes a while
        await trio.sleep(1)
        for _ in range(capacity + 10):  # ids 2..139 while it writes: 2..11 fall out
            clients.broadcast(TOOLS)
        await trio.sleep(KEEPALIVE_INTERVAL / 2 * (capacity + 5))
        host.gone.set()
    ids = [int(b.split(b"id: ")[1].split(b"\n")[0]) for b in host.events()]
    assert ids == [1, *range(12, capacity + 12)]
