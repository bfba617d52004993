"""gateway.backends.stateless.listen_client over a scripted 2026-07-28 backend, no network.

The scripted backend answers each ``subscriptions/listen`` the way the test
says (acknowledge and hold, end the stream with the final result, refuse),
so each rule of the module is exercised every run, on trio's MockClock.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import structlog
import trio
from trio.testing import MockClock

from gateway.backends.stateless.listen_client import RELISTEN, UpstreamListen, listen_filter
from gateway.catalog.snapshot import Kind
from gateway.errors import INVALID_PARAMS, METHOD_NOT_FOUND, RemoteProtocolError
from gateway.protocol import jsonrpc
from gateway.protocol.stateless.listen import ACKNOWLEDGED, SUBSCRIPTION_ID_KEY
from gateway.session.peer import Peer, open_session

ALL_LISTS = {
    "tools": {"listChanged": True},
    "prompts": {"listChanged": True},
    "resources": {"listChanged": True, "subscribe": True},
}


class ScriptedBackend:
    """A MessageChannel playing a modern backend: each listen gets the next reply.

    Replies: ``"hold"`` acknowledges and keeps the stream open; ``"end"``
    acknowledges and ends it with the final result; ``"refuse"`` answers
    -32601. ``tools/never`` is never answered; other requests get an empty
    result.
    """

    def __init__(self, replies: list[str], dishonour: frozenset[str] = frozenset()) -> None:
        self.replies = replies
        self.dishonour = dishonour
        self.listens: list[dict[str, Any]] = []
        self.cancelled: list[Any] = []
        self.other: list[str] = []
        self.listened = trio.Event()  # re-armed after each listen
        self._out_send, self._out = trio.open_memory_channel[bytes](16)

    async def send(self, message: bytes) -> None:
        request = jsonrpc.decode(message)
        assert isinstance(request, jsonrpc.Request | jsonrpc.Notification)
        if not isinstance(request, jsonrpc.Request):
            if request.method == "notifications/cancelled":
                self.cancelled.append(jsonrpc.from_raw(request.params)["requestId"])
            return
        if request.method == "tools/never":
            return
        if request.method != "subscriptions/listen":
            self.other.append(request.method)
            await self._out_send.send(jsonrpc.encode_response(request.id, jsonrpc.EMPTY_OBJECT))
            return
        self.listens.append(jsonrpc.from_raw(request.params))
        self.listened.set()
        self.listened = trio.Event()
        reply = self.replies.pop(0) if self.replies else "hold"
        if reply == "refuse":
            await self._out_send.send(
                jsonrpc.encode_error(request.id, METHOD_NOT_FOUND, "no such method")
            )
            return
        tag = {"_meta": {SUBSCRIPTION_ID_KEY: request.id}}
        honoured = dict(self.listens[-1]["notifications"])
        if "resourceSubscriptions" in honoured:
            uris = [u for u in honoured["resourceSubscriptions"] if u not in self.dishonour]
            honoured["resourceSubscriptions"] = uris
        ack = {**tag, "notifications": honoured}
        await self._out_send.send(jsonrpc.encode_notification(ACKNOWLEDGED, jsonrpc.to_raw(ack)))
        if reply == "end":
            final = {"resultType": "complete", **tag}
            await self._out_send.send(jsonrpc.encode_response(request.id, jsonrpc.to_raw(final)))

    async def receive(self) -> bytes:
        return await self._out.receive()

    async def aclose(self) -> None:
        pass


def _listen_for(
    capabilities: dict[str, Any], changed: list[tuple[Kind, ...]], uris: set[str] | None = None
) -> UpstreamListen:
    return UpstreamListen(
        capabilities,
        set() if uris is None else uris,
        changed.append,
        structlog.get_logger("test"),
        random.Random(7),
    )


def _acking(listen: UpstreamListen) -> Any:
    def on_notification(method: str, params: Any) -> None:
        if method == ACKNOWLEDGED:
            listen.acknowledged(params)

    return on_notification


@asynccontextmanager
async def _listening(
    backend: ScriptedBackend, listen: UpstreamListen
) -> AsyncIterator[trio.Nursery]:
    """``listen`` running over a session with ``backend``, acks routed to it; yields its nursery."""
    async with (
        open_session(backend, on_notification=_acking(listen)) as peer,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(listen.run, peer)  # noqa: ASYNC113 - the tests wait on listen.ready
        yield nursery


def test_the_filter_asks_only_for_the_lists_the_backend_declares() -> None:
    """Rule 1: ``listChanged: true`` per section, nothing else; resources cover templates
    and skills."""
    wanted, kinds = listen_filter(ALL_LISTS)
    assert wanted == {
        "toolsListChanged": True,
        "promptsListChanged": True,
        "resourcesListChanged": True,
    }
    assert kinds == (Kind.TOOLS, Kind.PROMPTS, Kind.RESOURCES, Kind.TEMPLATES, Kind.SKILLS)
    wanted, kinds = listen_filter({"tools": {"listChanged": False}, "prompts": {}, "logging": {}})
    assert (wanted, kinds) == ({}, ())
    assert listen_filter({"tools": {"listChanged": "yes"}}) == ({}, ())


def test_a_backend_that_declares_nothing_needs_no_listen() -> None:
    """Rule 1: no listChanged and no subscribe: the supervisor starts no listen."""
    assert not _listen_for({"tools": {}, "resources": {}}, []).wanted
    assert _listen_for({"resources": {"subscribe": True}}, []).wanted
    assert _listen_for({"prompts": {"listChanged": True}}, []).wanted


def test_subscribed_uris_are_asked_for_only_when_the_backend_declares_subscribe() -> None:
    """Rule 1: ``resourceSubscriptions`` needs ``resources.subscribe``; sorted, no repeats."""
    uris = frozenset({"b://2", "b://1"})
    wanted, _ = listen_filter({"resources": {"subscribe": True}}, uris)
    assert wanted == {"resourceSubscriptions": ["b://1", "b://2"]}
    assert listen_filter({"resources": {"listChanged": True}}, uris)[0] == {
        "resourcesListChanged": True
    }


async def test_subscribe_only_backend_waits_for_a_subscription(autojump_clock: MockClock) -> None:
    """Rules 1, 4: nothing to ask for yet: ready at once, the first subscribe opens a stream."""
    backend = ScriptedBackend(["hold"])
    listen = _listen_for({"resources": {"subscribe": True}}, [])
    async with _listening(backend, listen) as nursery:
        with trio.fail_after(1):
            await listen.ready.wait()
        await trio.sleep(60)
        assert backend.listens == []
        with trio.fail_after(1):
            await listen.bridge("resources/subscribe", jsonrpc.to_raw({"uri": "b://x"}))
        nursery.cancel_scope.cancel()
    assert backend.listens == [{"notifications": {"resourceSubscriptions": ["b://x"]}}]


async def test_the_listen_is_acknowledged_and_stays_out_of_in_flight(
    autojump_clock: MockClock,
) -> None:
    """Rules 2, 3: ready on the ack; a standing listen does not make the peer busy."""
    backend = ScriptedBackend(["hold"])
    changed: list[tuple[Kind, ...]] = []
    listen = _listen_for(ALL_LISTS, changed)
    async with (
        open_session(backend, on_notification=_acking(listen)) as peer,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(listen.run, peer)
        with trio.fail_after(1):
            await listen.ready.wait()
        assert peer.in_flight == 0
        await _request_counts_as_in_flight(peer)
        nursery.cancel_scope.cancel()
    assert backend.listens == [
        {
            "notifications": {
                "toolsListChanged": True,
                "promptsListChanged": True,
                "resourcesListChanged": True,
            }
        }
    ]
    assert changed == []


async def _request_counts_as_in_flight(peer: Peer) -> None:
    """An ordinary request beside the listen still counts (the pinger must wait for it)."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(peer.request, "tools/never")
        await trio.testing.wait_all_tasks_blocked()
        assert peer.in_flight == 1
        nursery.cancel_scope.cancel()
    assert peer.in_flight == 0


async def test_a_stream_the_backend_ends_is_opened_again_and_every_list_relisted(
    autojump_clock: MockClock,
) -> None:
    """Rule 4: after a jittered backoff, a new listen; a change may have been missed."""
    backend = ScriptedBackend(["end", "end", "hold"])
    changed: list[tuple[Kind, ...]] = []
    listen = _listen_for({"tools": {"listChanged": True}}, changed)
    async with _listening(backend, listen) as nursery:
        started = trio.current_time()
        with trio.fail_after(RELISTEN.ceiling(0) + RELISTEN.ceiling(1) + 1):
            while len(backend.listens) < 3:
                await backend.listened.wait()
        assert trio.current_time() - started <= RELISTEN.ceiling(0) + RELISTEN.ceiling(1) + 0.1
        nursery.cancel_scope.cancel()
    assert listen.streams_opened == 3
    assert changed == [(Kind.TOOLS,), (Kind.TOOLS,)]


async def test_a_backend_without_listen_is_not_asked_again(autojump_clock: MockClock) -> None:
    """Rule 5: -32601 means no listen on this session; a subscription gets that error."""
    backend = ScriptedBackend(["refuse"])
    changed: list[tuple[Kind, ...]] = []
    listen = _listen_for(ALL_LISTS, changed)
    async with open_session(backend, on_notification=_acking(listen)) as peer:
        with trio.fail_after(1):
            await listen.run(peer)
        await trio.sleep(3600)
        with pytest.raises(RemoteProtocolError) as refused:
            await listen.bridge("resources/subscribe", jsonrpc.to_raw({"uri": "b://x"}))
    assert refused.value.code == METHOD_NOT_FOUND
    assert listen.ready.is_set()
    assert len(backend.listens) == 1 and changed == []


async def test_the_listen_ends_with_its_session(autojump_clock: MockClock) -> None:
    """Rule 5: a session that closes ends the listen task (it returns, no re-listen)."""
    backend = ScriptedBackend(["hold"])
    changed: list[tuple[Kind, ...]] = []
    listen = _listen_for(ALL_LISTS, changed)
    with trio.fail_after(1):
        async with (
            trio.open_nursery() as nursery,
            open_session(backend, on_notification=_acking(listen)) as peer,
        ):
            nursery.start_soon(listen.run, peer)  # noqa: ASYNC111 - the session must close first
            await listen.ready.wait()
        # The session is closed: the listen's waiter fails with TransportClosed
        # and the task returns instead of sleeping towards a re-listen.
    assert len(backend.listens) == 1 and changed == []


SUBSCRIBABLE = {"tools": {"listChanged": True}, "resources": {"subscribe": True}}


async def test_a_subscription_switches_streams_without_a_gap(autojump_clock: MockClock) -> None:
    """Rule 4: the new stream is acked before the old one is closed; the URI is honoured."""
    backend = ScriptedBackend(["hold", "hold", "hold"])
    uris: set[str] = set()
    listen = _listen_for(SUBSCRIBABLE, [], uris)
    async with _listening(backend, listen) as nursery:
        await listen.ready.wait()
        assert backend.cancelled == []
        with trio.fail_after(1):
            await listen.bridge("resources/subscribe", jsonrpc.to_raw({"uri": "b://a"}))
        await trio.testing.wait_all_tasks_blocked()
        # The first stream (id 1) is closed only after the second was acked.
        assert backend.cancelled == [1]
        assert uris == {"b://a"}
        # Already honoured: no new stream.
        await listen.bridge("resources/subscribe", jsonrpc.to_raw({"uri": "b://a"}))
        assert len(backend.listens) == 2
        await listen.bridge("resources/unsubscribe", jsonrpc.to_raw({"uri": "b://a"}))
        await trio.testing.wait_all_tasks_blocked()
        assert backend.cancelled == [1, 2] and uris == set()
        nursery.cancel_scope.cancel()
    assert [m["notifications"] for m in backend.listens] == [
        {"toolsListChanged": True},
        {"toolsListChanged": True, "resourceSubscriptions": ["b://a"]},
        {"toolsListChanged": True},
    ]


async def test_a_uri_the_backend_does_not_honour_is_refused(autojump_clock: MockClock) -> None:
    """Rule 4: not in the ack's subset: -32602, and the URI is not kept."""
    backend = ScriptedBackend(["hold", "hold"], dishonour=frozenset({"b://no"}))
    uris: set[str] = set()
    listen = _listen_for(SUBSCRIBABLE, [], uris)
    async with _listening(backend, listen) as nursery:
        await listen.ready.wait()
        with pytest.raises(RemoteProtocolError) as refused:
            await listen.bridge("resources/subscribe", jsonrpc.to_raw({"uri": "b://no"}))
        nursery.cancel_scope.cancel()
    assert refused.value.code == INVALID_PARAMS
    assert "b://no" in refused.value.message
    assert uris == set()


async def test_subscriptions_survive_a_new_session(autojump_clock: MockClock) -> None:
    """Rule 6: the URI set is the supervisor's: the next session's first stream asks for it."""
    uris = {"b://kept"}
    backend = ScriptedBackend(["hold"])
    listen = _listen_for(SUBSCRIBABLE, [], uris)
    async with _listening(backend, listen) as nursery:
        await listen.ready.wait()
        # The router's renew after a reconnect: already honoured, no switch.
        await listen.bridge("resources/subscribe", jsonrpc.to_raw({"uri": "b://kept"}))
        nursery.cancel_scope.cancel()
    assert [m["notifications"] for m in backend.listens] == [
        {"toolsListChanged": True, "resourceSubscriptions": ["b://kept"]}
    ]
