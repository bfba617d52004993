"""``/admin/events``: a figures event every 2 s, and nothing once the browser has gone."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing

from gateway.console import live


async def test_events_every_interval_until_disconnect(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gone = trio.Event()
    sent: list[tuple[float, dict[str, Any]]] = []
    counter = iter(range(100))

    async def receive() -> dict[str, Any]:
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append((trio.current_time(), message))

    async def browser_leaves() -> None:
        await trio.sleep(5 * live.INTERVAL + 0.5)
        gone.set()

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(browser_leaves)
        await live.stream(receive, send, lambda: {"n": next(counter)})
    ended = trio.current_time() - start
    head, *events = sent
    assert head[1]["type"] == "http.response.start"
    assert (b"content-type", b"text/event-stream") in head[1]["headers"]
    # One at once, then one per interval, for as long as the browser stayed.
    assert [round(at - start, 3) for at, _ in events] == [i * live.INTERVAL for i in range(6)]
    bodies = [message["body"] for _, message in events]
    assert bodies[0] == b'event: figures\ndata: {"n":0}\n\n'
    assert json.loads(bodies[-1].split(b"data: ")[1]) == {"n": 5}
    # The stream ended with the disconnect, not at the next tick.
    assert ended == pytest.approx(5 * live.INTERVAL + 0.5)


async def test_the_stream_ends_when_the_gateway_stops(autojump_clock: object) -> None:
    stopping = trio.Event()
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def stop_soon() -> None:
        await trio.sleep(3.0)
        stopping.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(stop_soon)
        await live.stream(receive, send, dict, stopping)
    assert trio.current_time() == pytest.approx(3.0)
    assert [m.get("more_body") for m in sent[1:]] == [True, True, False]
    assert sent[-1]["body"] == b""
