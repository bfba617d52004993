"""``subscriptions/listen`` (2026-07-28) over HTTP, bridged to a handshake-era backend.

A real gateway in front of the ``watched`` test peer (``tests/servers/watched.py``,
behind the recorder so the tests see what the backend was sent), spoken to
with ``httpx``. Every wait is on a message, never on time: a notification
filtered out is shown absent by the next one that is let through
(the backend sends them in order). "S/" is the spec's
``docs/specification/2026-07-28/``.
"""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

import httpx
import pytest
import trio
from pydantic import AnyUrl

from gateway.runtime.app import drain
from tests.frontend.test_modern_http import modern, modern_headers, send
from tests.frontend.test_streamable_http import http_client
from tests.harness import Running, gateway_config, open_client, start_gateway, stdio_backend
from tests.servers.paths import python_server_command
from tests.servers.recorder import read_log, recorded

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path


pytestmark = pytest.mark.usefixtures("engine")

SUB_ID: Final = "io.modelcontextprotocol/subscriptionId"
WAIT: Final = 15.0


class Stream:
    """The JSON-RPC messages of one open listen response, read as they come."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.aiter_lines()

    async def next(self) -> dict[str, Any]:
        """The next message (comments and blank lines skipped)."""
        with trio.fail_after(WAIT):
            async for line in self._lines:
                if line.startswith("data: "):
                    message: dict[str, Any] = json.loads(line[len("data: ") :])
                    return message
        raise AssertionError("the stream ended")


@asynccontextmanager
async def listen(
    client: httpx.AsyncClient, msg_id: object, notifications: dict[str, Any]
) -> AsyncIterator[Stream]:
    """Open a listen stream; leaving the block closes it (the client's teardown)."""
    message = modern(0, "subscriptions/listen", {"notifications": notifications})
    message["id"] = msg_id
    headers = modern_headers(message)
    body = json.dumps(message).encode()
    async with client.stream("POST", "/mcp", content=body, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        yield Stream(response)


async def call(client: httpx.AsyncClient, name: str, **arguments: Any) -> None:
    """A modern ``tools/call`` of the watched backend's tool ``name``."""
    response = await send(
        client, modern(7, "tools/call", {"name": f"watched__{name}", "arguments": arguments})
    )
    assert response.status_code == 200, response.text


def sent(log: Path, method: str) -> list[str]:
    """The URIs of each ``method`` request the backend received."""
    return [m["params"]["uri"] for d, m in read_log(log) if d == ">" and m.get("method") == method]


async def until_sent(log: Path, method: str, count: int) -> list[str]:
    """Wait (bounded) until the backend has received ``count`` ``method`` requests."""
    with trio.fail_after(WAIT):
        while len(sent(log, method)) < count:  # noqa: ASYNC110 - a file another process writes
            await trio.sleep(0.02)
    return sent(log, method)


async def no_listeners(running: Running) -> None:
    """Wait (bounded) until the gateway has torn every listen stream down."""
    with trio.fail_after(WAIT):
        while len(running.gateway.clients.listeners):  # noqa: ASYNC110 - the server's side
            await trio.sleep(0.01)


@pytest.fixture(name="log")
def _log(tmp_path: Path) -> Path:
    return tmp_path / "watched.log"


@pytest.fixture(name="running")
async def _running(nursery: trio.Nursery, log: Path) -> Running:
    backend = stdio_backend("watched", recorded(log, python_server_command("watched")))
    return await start_gateway(nursery, gateway_config([backend]))


@pytest.fixture(name="client")
async def _client(running: Running) -> AsyncIterator[httpx.AsyncClient]:
    async with http_client(running) as client:
        yield client


async def public_uris(client: httpx.AsyncClient) -> list[str]:
    """The watched resources' public URIs, from a modern resources/list."""
    response = await send(client, modern(3, "resources/list"))
    return sorted(r["uri"] for r in response.json()["result"]["resources"])


async def test_discover_advertises_list_changed_and_subscribe(client: httpx.AsyncClient) -> None:
    """S/server/discover.mdx: the capabilities promise what listen delivers."""
    caps = (await send(client, modern(1, "server/discover"))).json()["result"]["capabilities"]
    assert caps["tools"]["listChanged"] is True
    assert caps["prompts"]["listChanged"] is True
    assert caps["resources"] == {"listChanged": True, "subscribe": True}


async def test_ack_first_then_only_what_was_asked_each_tagged(
    client: httpx.AsyncClient, log: Path
) -> None:
    """S/basic/patterns/subscriptions.mdx: the ack names the honoured subset (an
    unknown URI and a URI the backend refuses are left out), then list_changed and
    resources/updated for the subscribed URI only, each with the subscription id."""
    a, _ = await public_uris(client)
    asked = {"toolsListChanged": True, "resourceSubscriptions": [a, "nope://x", a + "/refused"]}
    async with listen(client, "L1", asked) as stream:
        ack = await stream.next()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"] == {
            "_meta": {SUB_ID: "L1"},
            "notifications": {"toolsListChanged": True, "resourceSubscriptions": [a]},
        }
        assert "watch://a" in sent(log, "resources/subscribe")

        await call(client, "grow")
        changed = await stream.next()
        assert changed["method"] == "notifications/tools/list_changed"
        assert changed["params"]["_meta"] == {SUB_ID: "L1"}

        await call(client, "touch", uri="watch://b")  # not subscribed: filtered
        await call(client, "touch", uri="watch://a")
        updated = await stream.next()
        assert updated["method"] == "notifications/resources/updated"
        assert updated["params"] == {"uri": a, "_meta": {SUB_ID: "L1"}}


async def test_unrequested_list_changed_is_not_sent(client: httpx.AsyncClient) -> None:
    """S/basic/patterns/subscriptions.mdx: MUST NOT send types not requested."""
    a, _ = await public_uris(client)
    async with listen(client, 2, {"resourceSubscriptions": [a]}) as stream:
        ack = await stream.next()
        assert ack["params"]["notifications"] == {"resourceSubscriptions": [a]}
        await call(client, "grow")  # tools/list_changed: not asked for
        await call(client, "touch", uri="watch://a")
        updated = await stream.next()
        assert updated["method"] == "notifications/resources/updated"
        assert updated["params"]["_meta"] == {SUB_ID: 2}


async def test_closing_the_stream_unsubscribes_at_the_backend(
    client: httpx.AsyncClient, running: Running, log: Path
) -> None:
    """Teardown by the client: the backend is unsubscribed and nothing is left behind."""
    a, _ = await public_uris(client)
    async with listen(client, 3, {"resourceSubscriptions": [a]}) as stream:
        await stream.next()
        assert len(running.gateway.clients.listeners) == 1
    assert await until_sent(log, "resources/unsubscribe", 1) == ["watch://a"]
    await no_listeners(running)


async def test_two_listeners_share_one_backend_subscription(
    client: httpx.AsyncClient, log: Path
) -> None:
    """Refcounted like legacy subscribers: one subscribe, both hear the update, and the
    backend is unsubscribed only when the last listener goes."""
    a, _ = await public_uris(client)
    async with listen(client, "one", {"resourceSubscriptions": [a]}) as one:
        await one.next()
        async with listen(client, "two", {"resourceSubscriptions": [a]}) as two:
            await two.next()
            assert sent(log, "resources/subscribe") == ["watch://a"]
            await call(client, "touch", uri="watch://a")
            assert (await one.next())["params"]["_meta"] == {SUB_ID: "one"}
            assert (await two.next())["params"]["_meta"] == {SUB_ID: "two"}
        await call(client, "touch", uri="watch://a")  # one still listens
        assert (await one.next())["params"]["uri"] == a
        assert sent(log, "resources/unsubscribe") == []
    assert await until_sent(log, "resources/unsubscribe", 1) == ["watch://a"]


async def test_shutdown_ends_the_stream_with_the_complete_result(
    client: httpx.AsyncClient, running: Running
) -> None:
    """S/basic/patterns/subscriptions.mdx §Graceful Closure."""
    async with listen(client, 9, {"toolsListChanged": True}) as stream:
        await stream.next()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain, running.gateway)
            final = await stream.next()
        assert final == {
            "jsonrpc": "2.0",
            "id": 9,
            "result": {"resultType": "complete", "_meta": {SUB_ID: 9}},
        }


async def test_a_malformed_filter_is_invalid_params(client: httpx.AsyncClient) -> None:
    """Rule 1 of protocol.listen: -32602 with HTTP 400, before any stream opens."""
    message = modern(4, "subscriptions/listen", {"notifications": {"toolsListChanged": "yes"}})
    response = await send(client, message)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602


async def test_a_listener_and_a_legacy_subscriber_share_the_backend_subscription(
    client: httpx.AsyncClient, running: Running, log: Path
) -> None:
    """The same refcounted table as resources/subscribe: a legacy session holding the
    URI keeps the backend subscribed after the listener goes."""
    a, _ = await public_uris(client)
    async with open_client(running.url) as legacy:
        await legacy.subscribe_resource(AnyUrl(a))
        async with listen(client, 5, {"resourceSubscriptions": [a]}) as stream:
            ack = await stream.next()
            assert ack["params"]["notifications"] == {"resourceSubscriptions": [a]}
            await call(client, "touch", uri="watch://a")
            assert (await stream.next())["params"]["uri"] == a
        assert sent(log, "resources/subscribe") == ["watch://a"]
        await no_listeners(running)
        await call(client, "touch", uri="watch://b")  # after any release the listener started
        assert sent(log, "resources/unsubscribe") == []
        await legacy.unsubscribe_resource(AnyUrl(a))
    assert await until_sent(log, "resources/unsubscribe", 1) == ["watch://a"]
