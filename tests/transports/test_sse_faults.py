"""The legacy HTTP+SSE client transport against a fake server that misbehaves on cue.

The fake is tests/transports/fake_http.py in its legacy mode
(``LegacySseFake``), served by hypercorn in the test's trio run on loopback.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

from gateway.config import SseBackend, Timeouts
from gateway.errors import ConnectError, RemoteProtocolError, TransportBroken
from gateway.transports.sse import open_sse
from tests.transports.fake_http import LegacySseFake, Recorded, Reply, serve_fake
from tests.transports.peer_helpers import initialize, open_peer

DEADLINE = 5.0


def backend(base_url: str, **extra: Any) -> SseBackend:
    return SseBackend(name="legacy", url=base_url + "/sse", **extra)


async def test_relative_endpoint_is_resolved_and_every_post_goes_there() -> None:
    """Spec (HTTP+SSE): the endpoint event's URL is relative to the SSE URL; messages
    are POSTed there as JSON with the configured headers, answers come on the stream."""
    async with serve_fake() as (fake, url):
        LegacySseFake(fake, "/messages?session_id=s1")
        cfg = backend(url, headers={"X-Backend-Token": "t-1"})
        async with open_peer(open_sse(cfg), DEADLINE) as (channel, peer):
            assert str(channel.endpoint) == url + "/messages?session_id=s1"
            await initialize(peer)
            assert await peer.request("tools/list") is not None
    (get,) = fake.of("GET")
    assert get.path == "/sse"
    assert get.header("accept") == "text/event-stream"
    posts = fake.of("POST")
    assert [p.message.get("method") for p in posts] == [
        "initialize",
        "notifications/initialized",
        "tools/list",
    ]
    for request in fake.requests:
        assert request.header("x-backend-token") == "t-1"
        assert request.header("authorization") is None
    for post in posts:
        assert (post.path, post.query) == ("/messages", "session_id=s1")
        assert post.header("content-type") == "application/json"


async def test_endpoint_on_another_origin_is_refused() -> None:
    """Gateway choice (rule 1): an endpoint on a different origin would receive our
    messages and credentials; connecting fails instead."""
    async with serve_fake() as (fake, url):
        LegacySseFake(fake, "http://elsewhere.example/messages")
        with trio.fail_after(DEADLINE), pytest.raises(ConnectError, match="origin"):
            async with open_sse(backend(url)):
                pass  # pragma: no cover - never entered


async def test_stream_refused_is_a_connect_error_naming_the_status() -> None:
    """MessageChannel: a GET answered with an HTML error page is ConnectError."""

    async def page(request: Recorded) -> Reply:
        return Reply(503, {"content-type": "text/html"}, [b"<html>down</html>"])

    async with serve_fake() as (fake, url):
        fake.get = page
        with (
            trio.fail_after(DEADLINE),
            pytest.raises(ConnectError, match=r"HTTP 503 \(text/html\)"),
        ):
            async with open_sse(backend(url)):
                pass  # pragma: no cover - never entered


async def test_no_endpoint_event_within_the_connect_timeout_is_a_connect_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Gateway choice: waiting for the endpoint is part of connecting, bounded by
    timeouts.connect, so a silent server cannot stall its supervisor."""

    async def silent(request: Recorded) -> Reply:
        async def chunks() -> AsyncIterator[bytes]:
            yield b": waiting\n\n"
            await trio.sleep_forever()

        return Reply(200, {"content-type": "text/event-stream"}, chunks())

    async with serve_fake() as (fake, url):
        fake.get = silent
        start = trio.current_time()
        with pytest.raises(ConnectError, match="no endpoint event within 5 s"):
            async with open_sse(backend(url, timeouts=Timeouts(connect=5))):
                pass  # pragma: no cover - never entered
        assert trio.current_time() - start == pytest.approx(5.0)


async def test_refused_post_of_a_request_fails_it_with_an_internal_error() -> None:
    """Robustness D13: an HTTP error on a request's POST is -32603 naming the status."""

    async def fail(request: Recorded) -> Reply:
        return Reply(500, {"content-type": "text/html"}, [b"<html>oops</html>"])

    async with serve_fake() as (fake, url):
        LegacySseFake(fake)
        async with open_peer(open_sse(backend(url)), DEADLINE) as (_channel, peer):
            await initialize(peer)
            fake.default = fail
            with pytest.raises(RemoteProtocolError, match="HTTP 500") as caught:
                await peer.request("tools/list")
    assert caught.value.code == -32603


async def test_post_404_means_the_session_is_gone() -> None:
    """Gateway choice: the server no longer knows the session id in the endpoint URL;
    the channel breaks so the supervisor reconnects."""

    async def gone(request: Recorded) -> Reply:
        return Reply(404)

    async with serve_fake() as (fake, url):
        LegacySseFake(fake)
        async with open_peer(open_sse(backend(url)), DEADLINE) as (_channel, peer):
            await initialize(peer)
            fake.default = gone
            with pytest.raises(TransportBroken, match=r"session expired \(404\)"):
                await peer.request("tools/list")
            await peer.closed.wait()


async def test_stream_end_breaks_the_channel() -> None:
    """Spec (HTTP+SSE): the session is the stream; when it ends, receive() raises
    TransportBroken and so does the next send()."""
    async with serve_fake() as (fake, url):
        legacy = LegacySseFake(fake)
        async with open_peer(open_sse(backend(url)), DEADLINE) as (channel, peer):
            await initialize(peer)
            legacy.end_stream()
            await peer.closed.wait()
            assert str(peer.close_reason) == "SSE stream ended"
            with pytest.raises(TransportBroken):
                await channel.send(b'{"jsonrpc":"2.0","method":"x"}')
