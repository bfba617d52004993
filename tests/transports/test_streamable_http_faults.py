"""The Streamable HTTP client transport against a fake server that misbehaves on cue.

The fake (tests/transports/fake_http.py) is a raw ASGI app served by
hypercorn in this test's trio run, on a real loopback socket, port 0. Each
test swaps in the answer it needs and then reads back exactly what the
transport sent.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
import trio
import trio.testing
from structlog.testing import capture_logs

from gateway.config import HttpBackend
from gateway.errors import ConnectError, RemoteProtocolError, TransportBroken, TransportClosed
from gateway.session.peer import Peer, open_session
from gateway.transports.streamable_http import (
    MAX_RECONNECT_DELAY,
    MIN_RECONNECT_DELAY,
    StreamableHttpChannel,
    open_streamable_http,
)
from tests.subprocess_servers import free_port
from tests.transports.fake_http import (
    SESSION_ID,
    Recorded,
    Reply,
    json_reply,
    result_of,
    serve_fake,
    sse_event,
)
from tests.transports.peer_helpers import LATEST, initialize, open_peer, raw

DEADLINE = 5.0


def backend(base_url: str, **extra: Any) -> HttpBackend:
    return HttpBackend(name="fake", url=base_url + "/mcp", **extra)


def streamable(url: str) -> AbstractAsyncContextManager[tuple[StreamableHttpChannel, Peer]]:
    """A session over the Streamable HTTP channel to the fake, within DEADLINE."""
    return open_peer(open_streamable_http(backend(url)), DEADLINE)


async def test_html_502_page_fails_the_call_with_an_internal_error_naming_the_status() -> None:
    """Robustness D13: a proxy's text/html 502 page is not a JSON-RPC answer; the caller
    gets -32603 naming the status at once instead of hanging."""

    async def bad_gateway(request: Recorded) -> Reply:
        return Reply(502, {"content-type": "text/html"}, [b"<html><h1>502</h1></html>"])

    async with serve_fake() as (fake, url):
        fake.methods["tools/call"] = bad_gateway
        async with streamable(url) as (_channel, peer):
            await initialize(peer)
            with pytest.raises(RemoteProtocolError) as caught:
                await peer.request("tools/call", raw({"name": "x", "arguments": {}}))
            # The channel is still good for the next call.
            assert await peer.request("tools/list") is not None
    assert caught.value.code == -32603
    assert "502" in caught.value.message
    assert "text/html" in caught.value.message


async def test_wrong_content_type_on_success_fails_the_call() -> None:
    """Robustness D13: a 200 whose body is neither JSON nor SSE cannot carry the answer."""

    async def plain(request: Recorded) -> Reply:
        return Reply(200, {"content-type": "text/plain"}, [b"ok"])

    async with serve_fake() as (fake, url):
        fake.methods["tools/list"] = plain
        async with streamable(url) as (_channel, peer):
            await initialize(peer)
            with pytest.raises(RemoteProtocolError) as caught:
                await peer.request("tools/list")
    assert caught.value.code == -32603
    assert "HTTP 200" in caught.value.message
    assert "text/plain" in caught.value.message


async def test_json_rpc_error_body_of_a_4xx_is_named_in_the_error() -> None:
    """Gateway choice: when the server explains a 4xx with a JSON-RPC error body, its
    message is kept, so the operator sees why (e.g. "Bad Request: No valid session ID")."""

    async def bad_request(request: Recorded) -> Reply:
        body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": "Bad Request"}}
        return json_reply(body, status=400)

    async with serve_fake() as (fake, url):
        fake.methods["tools/list"] = bad_request
        async with streamable(url) as (_channel, peer):
            await initialize(peer)
            with pytest.raises(RemoteProtocolError) as caught:
                await peer.request("tools/list")
    assert caught.value.code == -32603
    assert caught.value.message == "backend request failed: HTTP 400 Bad Request: Bad Request"
    assert caught.value.data == {"httpStatus": 400}


async def test_rejected_notification_is_only_logged() -> None:
    """Gateway choice: a notification has no one waiting, so a refused one is logged."""

    async def refuse(request: Recorded) -> Reply:
        return Reply(500)

    async with serve_fake() as (fake, url):
        with trio.fail_after(DEADLINE):
            async with open_streamable_http(backend(url)) as channel:
                fake.notification = refuse
                with capture_logs() as logs:
                    await channel.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert [e["event"] for e in logs] == ["backend.http.post.rejected"]
    assert "500" in logs[0]["problem"]


async def test_forgotten_session_breaks_send_and_receive_with_session_expired() -> None:
    """Spec + robustness D14/B11: 404 on a request carrying our session id means the
    server lost the session; send() raises and receive() breaks, so the supervisor
    re-initializes. The transport itself never retries."""

    async def gone(request: Recorded) -> Reply:
        return Reply(404, {"content-type": "text/plain"}, [b"Session not found"])

    async with serve_fake() as (fake, url), streamable(url) as (channel, peer):
        await initialize(peer)
        fake.default = gone
        with pytest.raises(TransportBroken, match=r"session expired \(404\)"):
            await peer.request("tools/list")
        await peer.closed.wait()
        assert str(peer.close_reason) == "session expired (404)"
        with pytest.raises(TransportBroken, match="session expired"):
            await channel.send(b'{"jsonrpc":"2.0","id":9,"method":"ping"}')
    assert len([r for r in fake.of("POST") if r.message.get("method") == "tools/list"]) == 1
    assert fake.of("DELETE") == []  # nothing left to end


async def test_404_before_any_session_is_an_ordinary_error() -> None:
    """Spec: 404 means "session expired" only when we sent a session id; before
    initialize it is just a wrong URL, reported to the caller."""

    async def missing(request: Recorded) -> Reply:
        return Reply(404)

    async with serve_fake() as (fake, url):
        fake.methods["initialize"] = missing
        async with streamable(url) as (_channel, peer):
            with pytest.raises(RemoteProtocolError, match="HTTP 404"):
                await initialize(peer)


async def test_headers_session_id_and_protocol_version_on_every_later_request() -> None:
    """Spec: POST Accept lists JSON and SSE; the session id from the InitializeResult's
    response and MCP-Protocol-Version go on every later request; configured headers
    go on all of them, and nothing else (no inbound Authorization, no cookies)."""
    async with serve_fake() as (fake, url):
        cfg = backend(url, headers={"X-Backend-Token": "secret-1"})
        async with open_peer(open_streamable_http(cfg), DEADLINE) as (_channel, peer):
            await initialize(peer)
            await peer.request("tools/list")
    posts = fake.of("POST")
    first, later = posts[0], posts[1:]
    assert first.header("accept") == "application/json, text/event-stream"
    assert first.header("content-type") == "application/json"
    assert first.header("mcp-session-id") is None
    assert first.header("mcp-protocol-version") is None
    for request in later:
        assert request.header("mcp-session-id") == SESSION_ID
        assert request.header("mcp-protocol-version") == LATEST
    allowed = {
        "host",
        "accept",
        "accept-encoding",
        "connection",
        "user-agent",
        "content-type",
        "content-length",
        "mcp-session-id",
        "mcp-protocol-version",
        "last-event-id",
        "x-backend-token",
    }
    for request in fake.requests:
        assert request.header("x-backend-token") == "secret-1"
        assert {name for name, _ in request.headers} <= allowed, request.headers
        assert (request.header("user-agent") or "").startswith("mcp-gateway/")


async def test_posts_reuse_one_connection() -> None:
    """Gateway choice: bodies we do not need (202s) are still read to the end, so the
    connection goes back to the pool instead of one new TCP connection per message."""
    async with serve_fake() as (fake, url), streamable(url) as (_channel, peer):
        await initialize(peer)
        for _ in range(5):
            await peer.notify("notifications/roots/list_changed")
            await peer.request("tools/list")
    assert len({r.client_port for r in fake.of("POST")}) == 1


async def test_configured_headers_cannot_override_protocol_headers() -> None:
    """Gateway choice: Accept, Content-Type and the session headers are the transport's;
    a config that sets them (in any case) does not break the protocol."""
    async with serve_fake() as (fake, url):
        cfg = backend(url, headers={"ACCEPT": "text/html", "Content-Type": "text/plain"})
        async with open_peer(open_streamable_http(cfg), DEADLINE) as (_channel, peer):
            await initialize(peer)
    post = fake.of("POST")[0]
    assert [v for k, v in post.headers if k == "accept"] == ["application/json, text/event-stream"]
    assert [v for k, v in post.headers if k == "content-type"] == ["application/json"]


async def test_close_deletes_the_session_and_ignores_405() -> None:
    """Spec: DELETE with the session id ends the session; 405 means the server does not
    allow it, which is fine."""

    async def not_allowed(request: Recorded) -> Reply:
        return Reply(405)

    async with serve_fake() as (fake, url):
        fake.delete = not_allowed
        with trio.fail_after(DEADLINE):
            async with open_streamable_http(backend(url)) as channel, open_session(channel) as peer:
                await initialize(peer)
            with pytest.raises(TransportClosed):
                await channel.receive()
    deletes = fake.of("DELETE")
    assert len(deletes) == 1
    assert deletes[0].header("mcp-session-id") == SESSION_ID


async def test_no_delete_without_a_session_id() -> None:
    """Spec: a server that gives no session id has no session to delete."""

    async def stateless(request: Recorded) -> Reply:
        return json_reply(result_of(request, {"protocolVersion": LATEST, "capabilities": {}}))

    async with serve_fake() as (fake, url):
        fake.methods["initialize"] = stateless
        async with streamable(url) as (channel, peer):
            await initialize(peer)
            assert channel.session_id is None
    assert fake.of("DELETE") == []


async def test_invalid_session_id_is_refused() -> None:
    """Spec: a session id is visible ASCII; anything else would go back out in our
    headers, so the channel breaks instead."""

    async def odd(request: Recorded) -> Reply:
        reply = json_reply(result_of(request, {"protocolVersion": LATEST}))
        reply.headers["mcp-session-id"] = "has space"
        return reply

    async with serve_fake() as (fake, url):
        fake.methods["initialize"] = odd
        with trio.fail_after(DEADLINE):
            async with open_streamable_http(backend(url)) as channel:
                with pytest.raises(TransportBroken, match="invalid Mcp-Session-Id"):
                    await channel.send(b'{"jsonrpc":"2.0","id":1,"method":"initialize"}')


async def test_json_array_body_yields_each_member() -> None:
    """Spec (2025-03-26 batches): an application/json array answers several requests;
    each member comes out of receive() on its own."""

    async def batch(request: Recorded) -> Reply:
        return json_reply(
            [result_of(request, {"n": 1}), {"jsonrpc": "2.0", "id": 99, "result": {}}]
        )

    async with serve_fake() as (fake, url):
        fake.default = batch
        with trio.fail_after(DEADLINE):
            async with open_streamable_http(backend(url)) as channel:
                await channel.send(b'{"jsonrpc":"2.0","id":5,"method":"tools/list"}')
                first = await channel.receive()
                second = await channel.receive()
    assert first == b'{"jsonrpc": "2.0", "id": 5, "result": {"n": 1}}'
    assert second == b'{"jsonrpc": "2.0", "id": 99, "result": {}}'


async def test_sse_answer_yields_notifications_then_the_response() -> None:
    """Spec: a request may be answered with an SSE stream carrying its notifications and
    then its response; only `message` events are messages."""

    async def streamed(request: Recorded) -> Reply:
        progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}
        return Reply(
            200,
            {"content-type": "text/event-stream"},
            [
                b": keep-alive\n\n",
                sse_event(progress),
                sse_event("ignored", event="other"),
                sse_event(result_of(request, {"ok": True})),
            ],
        )

    async with serve_fake() as (fake, url):
        fake.default = streamed
        with trio.fail_after(DEADLINE):
            async with open_streamable_http(backend(url)) as channel:
                await channel.send(b'{"jsonrpc":"2.0","id":1,"method":"tools/call"}')
                first = await channel.receive()
                second = await channel.receive()
    assert b"notifications/progress" in first
    assert second == b'{"jsonrpc": "2.0", "id": 1, "result": {"ok": true}}'


async def test_stream_that_ends_before_the_answer_fails_the_call() -> None:
    """Rule: a request is never left hanging; a stream without event ids that ends
    before the response cannot be resumed, so the caller gets -32603."""

    async def cut(request: Recorded) -> Reply:
        return Reply(200, {"content-type": "text/event-stream"}, [b": nothing\n\n"])

    async with serve_fake() as (fake, url):
        fake.default = cut
        async with streamable(url) as (_channel, peer):
            await initialize(peer)
            with pytest.raises(RemoteProtocolError, match="closed the stream before answering"):
                await peer.request("tools/call", raw({"name": "x"}))


async def test_send_returns_while_another_posts_stream_is_still_open() -> None:
    """Gateway choice: each POST's stream is read in its own task; a stream held open by
    the server does not delay another request's answer."""
    release = trio.Event()

    async def held(request: Recorded) -> Reply:
        async def chunks() -> AsyncIterator[bytes]:
            yield b": started\n\n"
            await release.wait()
            yield sse_event(result_of(request, {"slow": True}))

        return Reply(200, {"content-type": "text/event-stream"}, chunks())

    async with serve_fake() as (fake, url):
        fake.methods["tools/call"] = held
        with trio.fail_after(DEADLINE):
            async with (
                open_streamable_http(backend(url)) as channel,
                open_session(channel) as peer,
                trio.open_nursery() as nursery,
            ):
                await initialize(peer)
                slow_done = trio.Event()

                async def slow() -> None:
                    await peer.request("tools/call", raw({"name": "slow"}))
                    slow_done.set()

                nursery.start_soon(slow)
                await fake.wait_for(
                    lambda: any(r.body.find(b"tools/call") >= 0 for r in fake.requests)
                )
                assert await peer.request("tools/list") is not None
                assert not slow_done.is_set()
                release.set()
                await slow_done.wait()


async def test_get_stream_opens_after_initialized_and_delivers_server_messages() -> None:
    """Spec: after initialization the client GETs the endpoint for the server's own
    messages (Accept: text/event-stream, with the session id)."""

    async def stream(request: Recorded) -> Reply:
        note = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        return Reply(200, {"content-type": "text/event-stream"}, [sse_event(note)])

    notified = trio.Event()
    async with serve_fake() as (fake, url):
        fake.get = stream
        with trio.fail_after(DEADLINE):
            async with (
                open_streamable_http(backend(url)) as channel,
                open_session(channel, on_notification=lambda m, p: notified.set()) as peer,
            ):
                assert fake.of("GET") == []
                await initialize(peer)
                await notified.wait()
    get = fake.of("GET")[0]
    assert get.header("accept") == "text/event-stream"
    assert get.header("mcp-session-id") == SESSION_ID


async def test_get_stream_reconnects_with_last_event_id() -> None:
    """Spec (resumability): a dropped GET stream is reopened with Last-Event-ID set to
    the last event id received."""

    async def stream(request: Recorded) -> Reply:
        return Reply(
            200,
            {"content-type": "text/event-stream"},
            [b"retry: 100\n", sse_event({"jsonrpc": "2.0", "method": "n"}, event_id="e-7")],
        )

    async with serve_fake() as (fake, url):
        fake.get = stream
        async with streamable(url) as (_channel, peer):
            await initialize(peer)
            await fake.wait_for(lambda: len(fake.of("GET")) >= 2)
    first, second = fake.of("GET")[:2]
    assert first.header("last-event-id") is None
    assert second.header("last-event-id") == "e-7"


async def test_get_stream_405_means_no_stream_and_no_retry(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Spec: 405 on GET means the server offers no stream of its own; fine, and final."""
    async with (
        serve_fake() as (fake, url),
        open_streamable_http(backend(url)) as channel,
        open_session(channel) as peer,
    ):
        with trio.fail_after(DEADLINE):
            await initialize(peer)
            await fake.wait_for(lambda: len(fake.of("GET")) >= 1)
        await trio.sleep(MAX_RECONNECT_DELAY + 1)
        with trio.fail_after(DEADLINE):
            assert await peer.request("tools/list") is not None
    assert len(fake.of("GET")) == 1


async def test_retry_zero_and_a_closing_stream_make_no_hot_loop(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Robustness D15: `retry: 0` on a GET stream the server keeps closing is floored at
    100 ms, so a virtual second sees ten reconnects, never a hot loop.

    MockClock works here although httpx and hypercorn wait on real sockets: on
    loopback the bytes are readable by the time trio polls, so the clock only
    jumps when every task truly sleeps. Even if it jumped early, gaps could only
    grow, which is what the assertions bound from below.
    """

    async def flapping(request: Recorded) -> Reply:
        return Reply(200, {"content-type": "text/event-stream"}, [b"retry: 0\n\n"])

    async with serve_fake() as (fake, url):
        fake.get = flapping
        async with open_streamable_http(backend(url)) as channel, open_session(channel) as peer:
            with trio.fail_after(DEADLINE):
                await initialize(peer)
                await fake.wait_for(lambda: len(fake.of("GET")) >= 1)
            await trio.sleep(1.0)
    arrivals = [r.at for r in fake.of("GET")]
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert min(gaps) == pytest.approx(MIN_RECONNECT_DELAY), gaps
    assert 2 <= len(arrivals) <= 11


async def test_get_stream_404_breaks_the_channel() -> None:
    """Spec: 404 on the GET stream with our session id is an expired session too."""

    async def gone(request: Recorded) -> Reply:
        return Reply(404)

    async with serve_fake() as (fake, url):
        fake.get = gone
        async with streamable(url) as (_channel, peer):
            await initialize(peer)
            await peer.closed.wait()
    assert str(peer.close_reason) == "session expired (404)"


async def test_unreachable_backend_raises_connect_error_and_breaks_receive() -> None:
    """Rule: nothing listening is a ConnectError for the sender, and the channel breaks
    so the supervisor sees a dead backend even with nothing in flight."""
    url = f"http://127.0.0.1:{free_port()}"
    with trio.fail_after(DEADLINE):
        async with open_streamable_http(backend(url)) as channel:
            with pytest.raises(ConnectError):
                await channel.send(b'{"jsonrpc":"2.0","id":1,"method":"initialize"}')
            with pytest.raises(TransportBroken, match="cannot reach backend"):
                await channel.receive()


async def test_missing_ca_file_is_a_connect_error() -> None:
    """Gateway choice: TLS files that cannot be loaded fail the connect, with the reason."""
    cfg = backend("https://127.0.0.1:1", ca_file="/nonexistent/ca.pem")
    with pytest.raises(ConnectError, match="cannot load TLS files"):
        async with open_streamable_http(cfg):
            pass  # pragma: no cover - never entered


async def test_receive_waiting_when_closed_raises_transport_closed() -> None:
    """MessageChannel: aclose() wakes a waiting receive() with TransportClosed."""
    async with serve_fake() as (_, url), open_streamable_http(backend(url)) as channel:
        assert isinstance(channel, StreamableHttpChannel)
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:
                caught: list[BaseException] = []

                async def wait() -> None:
                    try:
                        await channel.receive()
                    except TransportClosed as exc:
                        caught.append(exc)

                nursery.start_soon(wait)
                await trio.testing.wait_all_tasks_blocked()
                await channel.aclose()
        assert len(caught) == 1
        with pytest.raises(TransportClosed):
            await channel.send(b"{}")


async def test_cut_post_stream_is_resumed_after_retry_with_last_event_id(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Spec (resumability): a POST stream that ends after an event id, before the
    response, is resumed by GET with Last-Event-ID after the stream's retry delay."""
    calls: list[Recorded] = []

    async def primed(request: Recorded) -> Reply:
        calls.append(request)
        return Reply(
            200, {"content-type": "text/event-stream"}, [b"id: p-1\nretry: 2500\ndata:\n\n"]
        )

    async def resumed(request: Recorded) -> Reply:
        if request.header("last-event-id") != "p-1":
            return Reply(405)  # the standalone stream: not offered
        answer = {"jsonrpc": "2.0", "id": calls[0].message["id"], "result": {"late": True}}
        return Reply(
            200, {"content-type": "text/event-stream"}, [sse_event(answer, event_id="p-2")]
        )

    async with serve_fake() as (fake, url):
        fake.methods["tools/call"] = primed
        async with streamable(url) as (_channel, peer):
            await initialize(peer)
            fake.get = resumed
            result = await peer.request("tools/call", raw({"name": "x"}))
    assert bytes(result) == b'{"late": true}'
    resume = next(r for r in fake.of("GET") if r.header("last-event-id") == "p-1")
    assert resume.at - calls[0].at == pytest.approx(2.5)


async def test_cut_post_stream_whose_resume_is_refused_fails_the_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Rule: when the server will not resume (405), the request fails with -32603
    instead of waiting for an answer that cannot come."""

    async def primed(request: Recorded) -> Reply:
        return Reply(200, {"content-type": "text/event-stream"}, [b"id: p-1\ndata:\n\n"])

    async with serve_fake() as (fake, url):
        fake.methods["tools/call"] = primed
        async with streamable(url) as (_channel, peer):
            await initialize(peer)
            with pytest.raises(RemoteProtocolError, match="closed the stream before answering"):
                await peer.request("tools/call", raw({"name": "x"}))


@pytest.mark.parametrize("headers_sent", [False, True], ids=["before-headers", "streaming"])
async def test_cancelling_a_2026_07_28_request_closes_its_post_and_posts_no_notification(
    headers_sent: bool,
) -> None:
    """Spec (2026-07-28, cancellation over HTTP): the cancel is closing the request's
    response, before its headers or while it streams; a bare ``notifications/cancelled``
    (no envelope, no session) would be refused with 400."""
    release = trio.Event()

    async def slow(request: Recorded) -> Reply:
        if not headers_sent:
            await release.wait()
            return json_reply(result_of(request, {"content": []}))

        async def chunks() -> AsyncIterator[bytes]:
            yield b": open\n\n"
            await release.wait()

        return Reply(200, {"content-type": "text/event-stream"}, chunks())

    async with serve_fake() as (fake, url):
        fake.methods["tools/call"] = slow
        with trio.fail_after(DEADLINE):
            async with open_streamable_http(backend(url)) as channel, open_session(channel) as peer:
                peer.modern = True
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(
                        peer.request, "tools/call", raw({"name": "t", "arguments": {}})
                    )
                    await fake.wait_for(lambda: len(fake.of("POST")) == 1)
                    await trio.sleep(0.05)  # the headers, when sent, are in
                    nursery.cancel_scope.cancel()
                await trio.sleep(0.2)  # a POSTed cancel would have arrived by now
                release.set()
                assert await peer.request("tools/list") is not None
        posted = [r.message.get("method") for r in fake.of("POST")]
        assert posted == ["tools/call", "tools/list"]


@pytest.mark.parametrize("shape", ["json-null-id", "json", "sse"])
async def test_a_2026_07_28_refusal_keeps_its_own_code_and_data(shape: str) -> None:
    """Spec (2026-07-28, errors): a 400 carrying -32021 MissingRequiredClientCapability is
    the request's answer, code and data intact, however the backend wrote it; never -32603."""
    data = {"requiredCapabilities": {"elicitation": {}}}

    async def refuse(request: Recorded) -> Reply:
        error = {"code": -32021, "message": "Missing required client capability", "data": data}
        msg_id = None if shape == "json-null-id" else request.message["id"]
        body = {"jsonrpc": "2.0", "id": msg_id, "error": error}
        if shape == "sse":
            return Reply(400, {"content-type": "text/event-stream"}, [sse_event(body)])
        return json_reply(body, status=400)

    async with serve_fake() as (fake, url):
        fake.methods["tools/call"] = refuse
        with trio.fail_after(DEADLINE):
            async with open_streamable_http(backend(url)) as channel, open_session(channel) as peer:
                peer.modern = True
                with pytest.raises(RemoteProtocolError) as caught:
                    await peer.request("tools/call", raw({"name": "t", "arguments": {}}))
    assert (caught.value.code, caught.value.data) == (-32021, data)
