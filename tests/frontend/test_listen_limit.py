"""Robustness rows E6 and E23: listen streams are capped per principal.

A real gateway with two static-token principals in front of the ``headers``
test peer; ``limits.listen_streams_per_principal`` is 2 here. Streams are
held open with raw ``httpx`` (``tests/frontend/test_listen_http.py``).
"""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Final

import pytest
import trio

from gateway.frontend.stateless.listen_stream import Listeners, ListenLimitReached
from tests.frontend.test_listen_http import WAIT, listen
from tests.frontend.test_modern_http import HEADERS, modern, modern_headers
from tests.frontend.test_streamable_http import http_client
from tests.harness import gateway_config, start_gateway

if TYPE_CHECKING:
    import httpx

pytestmark = pytest.mark.usefixtures("engine")

ALICE: Final = "token-of-alice-0123"
BOB: Final = "token-of-bob-0123"
LIMIT: Final = 2
NOTIFICATIONS: Final[dict[str, Any]] = {"toolsListChanged": True}


async def _refused(client: httpx.AsyncClient) -> httpx.Response:
    message = modern(99, "subscriptions/listen", {"notifications": NOTIFICATIONS})
    return await client.post(
        "/mcp", content=json.dumps(message).encode(), headers=modern_headers(message)
    )


async def test_one_principal_past_its_listen_streams_is_refused_and_another_is_not(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice (E6, E23): HTTP 429 and -32603 naming the limit past the cap; another
    principal opens its streams as before; a closed stream makes room again."""
    config = gateway_config(
        [HEADERS],
        auth={"tokens": {"alice": ALICE, "bob": BOB}},
        limits={"listen_streams_per_principal": LIMIT},
    )
    running = await start_gateway(nursery, config)
    async with (
        http_client(running) as alice,
        http_client(running) as bob,
        AsyncExitStack() as streams,
    ):
        alice.headers["authorization"] = f"Bearer {ALICE}"
        bob.headers["authorization"] = f"Bearer {BOB}"
        first = await streams.enter_async_context(listen(alice, 1, NOTIFICATIONS))
        await first.next()  # the acknowledgement
        async with listen(alice, 2, NOTIFICATIONS) as second:
            await second.next()
            response = await _refused(alice)
            assert response.status_code == 429, response.text
            error = response.json()["error"]
            assert error["code"] == -32603
            assert error["data"] == {"reason": "listen_streams", "limit": LIMIT}
            assert "listen_streams_per_principal" in error["message"]
            for msg_id in (3, 4):
                stream = await streams.enter_async_context(listen(bob, msg_id, NOTIFICATIONS))
                await stream.next()
        with trio.fail_after(WAIT):  # the server sees the second stream close
            while len(running.gateway.clients.listeners) > 1 + 2:  # noqa: ASYNC110
                await trio.sleep(0.01)
        async with listen(alice, 5, NOTIFICATIONS) as again:
            await again.next()


def test_the_cap_counts_each_principal_apart_and_frees_room_as_streams_end() -> None:
    """Gateway choice (E23): the count is per principal (anonymous hosts are one)."""
    listeners = Listeners(per_principal=1)
    with listeners.room_for("alice"), listeners.room_for("bob"), listeners.room_for(None):
        with pytest.raises(ListenLimitReached) as caught, listeners.room_for("alice"):
            pass
        assert caught.value.data == {"reason": "listen_streams", "limit": 1}
    with listeners.room_for("alice"):
        pass
