"""``frontend.listen`` without HTTP: keep-alives, the queue bound, the registry (MockClock)."""

from __future__ import annotations

from typing import Any

import trio

from gateway.frontend.http_util import KEEPALIVE_INTERVAL
from gateway.frontend.stateless.listen_stream import (
    LISTENER_QUEUE,
    Listener,
    Listeners,
    write_stream,
)
from gateway.protocol import jsonrpc
from gateway.protocol.stateless.envelope import Envelope
from gateway.protocol.stateless.listen import LIST_CHANGED_FIELDS, ListenFilter, honour

TOOLS = "notifications/tools/list_changed"
ENVELOPE = Envelope(protocol_version="2026-07-28", client_capabilities={})


def listener(*methods: str) -> Listener:
    asked = ListenFilter(frozenset(methods))
    return Listener(honour(1, asked, frozenset(LIST_CHANGED_FIELDS.values()), []), ENVELOPE)


async def test_an_idle_stream_gets_a_keep_alive_each_interval(autojump_clock: Any) -> None:
    chunks: list[bytes] = []

    async def send(message: Any) -> None:
        chunks.append(message["body"])

    stream = listener(TOOLS)
    with trio.move_on_after(KEEPALIVE_INTERVAL * 2.5):
        await write_stream(stream, send)
    assert b"acknowledged" in chunks[0]
    assert chunks[1:] == [b": keep-alive\n\n"] * 2


async def test_broadcast_reaches_only_listeners_that_asked_and_a_full_queue_drops() -> None:
    listeners = Listeners()
    tools, prompts = listener(TOOLS), listener("notifications/prompts/list_changed")
    listeners.add(tools)
    listeners.add(prompts)
    message = jsonrpc.encode_notification(TOOLS)
    assert listeners.broadcast(message) == 1
    assert b"subscriptionId" in tools.inbox.receive_nowait()
    for _ in range(LISTENER_QUEUE + 3):
        listeners.broadcast(message)
    assert tools.dropped == 3
    listeners.close_all()
    assert tools.ended.is_set() and prompts.ended.is_set() and listeners.closing


async def test_a_write_longer_than_the_interval_is_finished_whole(autojump_clock: Any) -> None:
    # The keep-alive timer ends a wait, never a write: an event cut in two
    # on a slow socket would corrupt the stream for good.
    chunks: list[bytes] = []

    async def send(message: Any) -> None:
        if message["body"].startswith(b"event:"):
            await trio.sleep(KEEPALIVE_INTERVAL * 3)  # a socket that drains slowly
        chunks.append(message["body"])

    stream = listener(TOOLS)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(write_stream, stream, send)
        await trio.sleep(KEEPALIVE_INTERVAL * 3 + KEEPALIVE_INTERVAL - 1)  # the ack is written
        stream.offer(jsonrpc.encode_notification(TOOLS))
        await trio.sleep(KEEPALIVE_INTERVAL * 6)
        nursery.cancel_scope.cancel()
    events = [c for c in chunks if c.startswith(b"event:")]
    assert len(events) == 2 and b"acknowledged" in events[0]
    assert TOOLS.encode() in events[1]
    assert chunks.index(events[1]) < len(chunks) - 1  # keep-alives follow it
