"""A forgotten session is a type: ``SessionExpired``, never a message to read.

The backend re-initializes at once and repeats an idempotent request once
only after ``SessionExpired`` (robustness D14, B11), so every answer that
means "the server forgot us" must surface as that type, and every other
failure must not. These tests check the type (``isinstance``), not the text,
against the fake HTTP server of tests/transports/fake_http.py.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
import trio
import trio.testing

from gateway.config import HttpBackend, SseBackend
from gateway.errors import RemoteProtocolError, SessionExpired, TransportBroken
from gateway.session.peer import Peer
from gateway.transports.http_base import Inbox
from gateway.transports.sse import open_sse
from gateway.transports.streamable_http import open_streamable_http
from gateway.transports.streamable_session import session_expired
from tests.transports.fake_http import (
    SESSION_ID,
    Handler,
    LegacySseFake,
    Recorded,
    Reply,
    json_reply,
    serve_fake,
)
from tests.transports.peer_helpers import initialize, open_peer, raw

DEADLINE = 5.0
PING = b'{"jsonrpc":"2.0","id":99,"method":"ping"}'
# What the reference server (python-sdk) answers for a session it does not know.
NO_SESSION = "Bad Request: No valid session ID provided"


def http_backend(base_url: str) -> HttpBackend:
    return HttpBackend(name="fake", url=base_url + "/mcp")


def streamable(url: str) -> AbstractAsyncContextManager[tuple[Any, Peer]]:
    """A session over the Streamable HTTP channel to the fake, within DEADLINE."""
    return open_peer(open_streamable_http(http_backend(url)), DEADLINE)


def legacy_sse(fake: Any, url: str) -> AbstractAsyncContextManager[tuple[Any, Peer]]:
    """A session over the legacy HTTP+SSE channel, the fake serving that transport."""
    LegacySseFake(fake)
    return open_peer(open_sse(SseBackend(name="legacy", url=url + "/sse")), DEADLINE)


def error_body(message: str, status: int) -> Reply:
    body = {"jsonrpc": "2.0", "id": "server-error", "error": {"code": -32600, "message": message}}
    return json_reply(body, status=status)


def answer(status: int, message: str | None = None) -> Handler:
    """A handler answering every request with ``status`` (and a JSON-RPC error body)."""

    async def handler(request: Recorded) -> Reply:
        return Reply(status) if message is None else error_body(message, status)

    return handler


async def assert_expired(peer: Peer, channel: Any) -> None:
    """The session ended with SessionExpired, and the channel keeps saying so."""
    await peer.closed.wait()
    assert isinstance(peer.close_reason, SessionExpired), repr(peer.close_reason)
    with pytest.raises(SessionExpired):
        await channel.send(PING)
    with pytest.raises(SessionExpired):
        await channel.receive()


async def assert_still_serving(peer: Peer) -> None:
    """Nothing ended the session: it answers the next request."""
    assert peer.close_reason is None
    assert await peer.request("tools/list") is not None


# -- the decision itself ---------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "session_id", "detail", "expired"),
    [
        (404, SESSION_ID, None, True),
        (404, None, None, False),  # before initialize: a wrong URL
        (400, SESSION_ID, NO_SESSION, True),
        (400, SESSION_ID, "Session not found", True),
        (400, SESSION_ID, "Bad Request: invalid params", False),
        (400, SESSION_ID, None, False),
        (400, None, NO_SESSION, False),
        (500, SESSION_ID, NO_SESSION, False),
        (403, SESSION_ID, None, False),
    ],
)
def test_which_answers_mean_the_session_expired(
    status: int, session_id: str | None, detail: str | None, expired: bool
) -> None:
    """Only a held session can expire, on a 404 or a 400 whose error names it."""
    result = session_expired(status, session_id, detail)
    assert isinstance(result, SessionExpired) is expired
    assert result is None or isinstance(result, TransportBroken)


def test_inbox_end_reason_keeps_its_type_and_attributes() -> None:
    """Every reader sees the recorded type (a fresh instance), so it can branch on it."""
    inbox = Inbox()
    reason = SessionExpired("session expired (404)")
    reason.status = 404  # type: ignore[attr-defined]
    inbox.end(reason)
    with pytest.raises(SessionExpired) as caught:
        inbox.raise_if_ended()
    assert caught.value is not reason
    assert caught.value.status == 404  # type: ignore[attr-defined]


# -- Streamable HTTP -------------------------------------------------------------


async def test_404_on_a_post_while_a_session_is_held_is_session_expired() -> None:
    """Spec: 404 to a request carrying our session id: the server forgot it."""
    async with serve_fake() as (fake, url), streamable(url) as (channel, peer):
        await initialize(peer)
        fake.default = answer(404)
        with pytest.raises(SessionExpired):
            await peer.request("tools/list")
        await assert_expired(peer, channel)


async def test_404_on_the_get_stream_is_session_expired() -> None:
    """Spec: 404 on the server's own stream, with our session id, is the same loss."""
    async with serve_fake() as (fake, url):
        fake.get = answer(404)
        async with streamable(url) as (channel, peer):
            await initialize(peer)
            await assert_expired(peer, channel)


async def test_404_on_resuming_a_post_stream_is_session_expired(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Spec (resumability): the GET that resumes a cut POST stream can meet the 404 too."""

    async def cut(request: Recorded) -> Reply:
        return Reply(200, {"content-type": "text/event-stream"}, [b"id: p-1\ndata:\n\n"])

    async def stream(request: Recorded) -> Reply:
        return Reply(404) if request.header("last-event-id") == "p-1" else Reply(405)

    async with serve_fake() as (fake, url):
        fake.methods["tools/call"] = cut
        fake.get = stream
        async with streamable(url) as (channel, peer):
            await initialize(peer)
            with pytest.raises(SessionExpired):
                await peer.request("tools/call", raw({"name": "x"}))
            await assert_expired(peer, channel)


async def test_400_naming_the_session_while_one_is_held_is_session_expired() -> None:
    """Gateway choice: servers that answer a forgotten session with 400 and say so
    (the reference server does) lose the session as with 404. The request itself
    is answered with the error first (robustness D13)."""
    async with serve_fake() as (fake, url), streamable(url) as (channel, peer):
        await initialize(peer)
        fake.default = answer(400, NO_SESSION)
        with pytest.raises(RemoteProtocolError, match="HTTP 400"):
            await peer.request("tools/list")
        await assert_expired(peer, channel)


async def test_400_naming_a_session_before_initialize_is_an_ordinary_error() -> None:
    """Only a session we hold can expire: before initialize there is none."""
    async with serve_fake() as (fake, url):
        fake.methods["initialize"] = answer(400, NO_SESSION)
        async with streamable(url) as (channel, peer):
            with pytest.raises(RemoteProtocolError, match="HTTP 400"):
                await initialize(peer)
            assert peer.close_reason is None
            await channel.send(PING)  # the channel is still usable


async def test_400_not_naming_a_session_is_not_session_expired() -> None:
    """A 400 about anything else fails that request only; the session goes on."""
    async with serve_fake() as (fake, url), streamable(url) as (_channel, peer):
        await initialize(peer)
        fake.methods["tools/call"] = answer(400, "Bad Request: invalid params")
        with pytest.raises(RemoteProtocolError, match="HTTP 400"):
            await peer.request("tools/call", raw({"name": "x"}))
        await assert_still_serving(peer)


async def test_500_is_not_session_expired_even_when_its_error_names_the_session() -> None:
    """A server error is not a forgotten session, whatever its message says."""
    async with serve_fake() as (fake, url), streamable(url) as (_channel, peer):
        await initialize(peer)
        fake.methods["tools/call"] = answer(500, "session store unavailable")
        with pytest.raises(RemoteProtocolError, match="HTTP 500") as caught:
            await peer.request("tools/call", raw({"name": "x"}))
        assert not isinstance(caught.value, SessionExpired)
        await assert_still_serving(peer)


async def test_500_on_the_get_stream_is_not_session_expired(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A refused stream is retried; the session is untouched."""
    refusals = iter([Reply(500)])

    async def stream(request: Recorded) -> Reply:
        return next(refusals, Reply(405))

    async with serve_fake() as (fake, url):
        fake.get = stream
        async with streamable(url) as (_channel, peer):
            await initialize(peer)
            await fake.wait_for(lambda: len(fake.of("GET")) >= 2)
            await assert_still_serving(peer)


# -- legacy HTTP+SSE ---------------------------------------------------------------


async def test_legacy_sse_404_on_a_post_is_session_expired() -> None:
    """The session id is in the endpoint URL; a 404 there means it is gone."""
    async with (
        serve_fake() as (fake, url),
        legacy_sse(fake, url) as (
            channel,
            peer,
        ),
    ):
        await initialize(peer)
        fake.default = answer(404)
        with pytest.raises(SessionExpired):
            await peer.request("tools/list")
        await assert_expired(peer, channel)


async def test_legacy_sse_500_on_a_post_is_not_session_expired() -> None:
    """A refused POST fails its request only; the stream, and so the session, goes on."""
    async with (
        serve_fake() as (fake, url),
        legacy_sse(fake, url) as (
            _channel,
            peer,
        ),
    ):
        await initialize(peer)
        serving = fake.default
        fake.default = answer(500)
        with pytest.raises(RemoteProtocolError, match="HTTP 500"):
            await peer.request("tools/list")
        fake.default = serving
        await assert_still_serving(peer)
