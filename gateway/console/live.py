"""``/admin/events``: the overview's figures as server-sent events.

One event every :data:`INTERVAL` seconds (per-backend state, calls in
flight, the window's rates), until the browser goes away or the gateway
starts to stop: the request's own nursery runs the sender, a watcher of
the ASGI receive channel (an ``http.disconnect`` cancels the nursery) and a
watcher of the gateway's ``stopping`` event (which ends the response, so a
drain does not wait on a console tab). Nothing outlives the request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio

from gateway.frontend.http_util import cancel_on_disconnect

if TYPE_CHECKING:
    from collections.abc import Callable

    from gateway.frontend import http_util as h

INTERVAL: Final = 2.0
_encoder = msgspec.json.Encoder()


def event(figures: dict[str, Any]) -> bytes:
    """One SSE ``figures`` event."""
    return b"event: figures\ndata: " + _encoder.encode(figures) + b"\n\n"


async def stream(
    receive: h.Receive,
    send: h.Send,
    figures: Callable[[], dict[str, Any]],
    stopping: trio.Event | None = None,
) -> None:
    """Send ``figures()`` every ``INTERVAL`` seconds until the client disconnects.

    When ``stopping`` is set first, the response is ended properly (the
    browser's EventSource reconnects to whatever serves next).
    """
    headers = [
        (b"content-type", b"text/event-stream"),
        (b"cache-control", b"no-store"),
        (b"x-accel-buffering", b"no"),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancel_on_disconnect, receive, nursery.cancel_scope)
        if stopping is not None:
            nursery.start_soon(_cancel_when, stopping, nursery.cancel_scope)
        nursery.start_soon(_send_every, send, figures)
    if stopping is not None and stopping.is_set():
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _send_every(send: h.Send, figures: Callable[[], dict[str, Any]]) -> None:
    while True:
        body = event(figures())
        await send({"type": "http.response.body", "body": body, "more_body": True})
        await trio.sleep(INTERVAL)


async def _cancel_when(done: trio.Event, scope: trio.CancelScope) -> None:
    await done.wait()
    scope.cancel()
