"""The server's own GET stream of a Streamable HTTP session.

After ``notifications/initialized`` the client GETs the session's URL for
what the server says on its own (list_changed, log messages). The stream is
kept open for the session's life: when it drops it is reopened with
``Last-Event-ID`` after the server's ``retry:`` (floored and capped,
robustness D15), and a refusal worth retrying (5xx, 409, 429) backs off.

Rules:

1. ``405`` means the server offers no such stream: listening stops, the
   session goes on.
2. An answer that means the server forgot the session breaks it with
   ``SessionExpired`` (see ``streamable_session``).
3. A backend that cannot be reached breaks the session, so the supervisor
   notices a dead server even when no call is in flight.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import trio

from gateway.errors import ConnectError, TransportError
from gateway.transports.base import map_exceptions
from gateway.transports.framing import SseParser
from gateway.transports.http_base import (
    HTTP_ERRORS,
    LAST_EVENT_ID_HEADER,
    MAX_MESSAGE_BYTES,
    SSE_MEDIA_TYPE,
    media_type,
    read_sse,
)
from gateway.transports.streamable_session import MAX_RECONNECT_DELAY

if TYPE_CHECKING:
    import httpx

    from gateway.transports.framing import SseEvent
    from gateway.transports.streamable_session import HttpSession

# A GET stream refused with a status worth retrying (5xx, 409, 429) waits
# this long, doubling per consecutive refusal up to MAX_RECONNECT_DELAY.
REFUSED_STREAM_DELAY: Final = 1.0
# Statuses of a refused GET stream that may be transient; any other 4xx
# means the server will not offer the stream.
_RETRYABLE_STREAM_STATUS: Final = frozenset({409, 429, 502, 503, 504})


async def listen(session: HttpSession) -> None:
    """Keep the server's own stream open for the session's life.

    Returns when the server offers no stream, or the session broke.
    """

    async def on_event(event: SseEvent) -> None:
        """Deliver a message event; the parser already kept its id and ``retry:``."""
        if event.event == "message" and event.data:
            await session.deliver(event.data.encode())

    last_event_id = ""
    retry: int | None = None
    refusals = 0
    while True:
        headers = session.request_headers(SSE_MEDIA_TYPE)
        if last_event_id:
            headers[LAST_EVENT_ID_HEADER] = last_event_id
        delay: float | None = None
        try:
            with map_exceptions(HTTP_ERRORS):
                async with session.client.stream("GET", session.url, headers=headers) as response:
                    status = response.status_code
                    if status == 200 and media_type(response) == SSE_MEDIA_TYPE:
                        refusals = 0
                        parser = SseParser(
                            MAX_MESSAGE_BYTES, last_event_id=last_event_id, retry=retry
                        )
                        try:
                            await read_sse(response, parser, on_event)
                        finally:
                            last_event_id, retry = parser.last_event_id, parser.retry
                        session.log.debug("backend.http.stream.ended")
                    elif not _worth_retrying(session, response):
                        return
                    else:
                        refusals += 1
                        delay = min(REFUSED_STREAM_DELAY * 2 ** (refusals - 1), MAX_RECONNECT_DELAY)
        except ConnectError as exc:
            session.unreachable(exc)
            return
        except TransportError as exc:
            session.log.debug("backend.http.stream.dropped", error=str(exc))
        await trio.sleep(delay if delay is not None else session.reconnect_delay(retry))


def _worth_retrying(session: HttpSession, response: httpx.Response) -> bool:
    """Handle a GET that did not open a stream; True when worth retrying."""
    status = response.status_code
    if status == 405:
        session.log.debug("backend.http.stream.unsupported")
        return False
    if session.expire_on(status):
        return False
    retry = status in _RETRYABLE_STREAM_STATUS or status >= 500
    session.log.warning(
        "backend.http.stream.refused",
        status=status,
        content_type=media_type(response),
        retrying=retry,
    )
    return retry
