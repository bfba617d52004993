"""Handshake-era sessions across replicas: a session opened on one is served by another."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import httpx
import msgspec
import pytest
import trio
from mcp import ClientSession as SdkSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ElicitResult

from gateway.errors import RemoteProtocolError
from gateway.frontend import session_records as records
from gateway.frontend.clients import ASKED_ELSEWHERE, ClientRegistry
from gateway.protocol.headers import MCP_SESSION_ID_HEADER
from gateway.store.api import StoreUnavailable
from gateway.store.embedded import EmbeddedStore
from tests.harness import MCP_POST_HEADERS, Running, gateway_config, sdk_backend, start_gateway

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from tests.redis_server import RedisServer

ALICE: Final = "token-of-alice-0123456789"
BOB: Final = "token-of-bob-0123456789xx"


async def _replica(nursery: trio.Nursery, redis_server: RedisServer, prefix: str) -> Running:
    config = gateway_config(
        [sdk_backend("alpha"), sdk_backend("era_legacy", "b")],
        auth={"tokens": {"alice": ALICE, "bob": BOB}},
        store={"url": redis_server.url, "key_prefix": prefix},
    )
    return await start_gateway(nursery, config)


@asynccontextmanager
async def _sdk_host(url: str) -> AsyncIterator[tuple[SdkSession, str]]:
    """The official client as alice, initialized on ``url``; yields it and its session id."""

    async def elicit(context: Any, params: Any) -> ElicitResult:
        return ElicitResult(action="decline")

    async with (
        httpx.AsyncClient(headers={"authorization": f"Bearer {ALICE}"}) as http,
        streamable_http_client(url, http_client=http) as (read, write, session_id),
        SdkSession(read, write, elicitation_callback=elicit) as session,
    ):
        await session.initialize()
        sid = session_id()
        assert sid is not None
        yield session, sid


async def _post(
    http: httpx.AsyncClient, url: str, sid: str, method: str, params: Any = None, *, token: str
) -> httpx.Response:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": method}
    if params is not None:
        body["params"] = params
    headers = {
        **MCP_POST_HEADERS,
        "authorization": f"Bearer {token}",
        MCP_SESSION_ID_HEADER: sid,
        "mcp-protocol-version": "2025-11-25",
    }
    return await http.post(url, headers=headers, content=json.dumps(body))


def _result(response: httpx.Response) -> Any:
    """The JSON-RPC message of a response, JSON or one SSE event."""
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])
    return response.json()


async def test_a_session_opened_on_one_replica_is_served_by_another_and_deleted_there(
    nursery: trio.Nursery, redis_server: RedisServer
) -> None:
    """Gateway choice (issue 26 item 4): lists, calls, reads, ping on B; DELETE on B ends A's."""
    first = await _replica(nursery, redis_server, "sessions-served:")
    second = await _replica(nursery, redis_server, "sessions-served:")
    assert first.gateway.session_records is not None
    with trio.fail_after(10):
        await first.gateway.session_records.listening.wait()
    async with _sdk_host(first.url) as (host, sid), httpx.AsyncClient() as http:
        assert (await host.call_tool("alpha__echo", {"text": "on A"})).isError is False
        tools = _result(await _post(http, second.url, sid, "tools/list", token=ALICE))
        names = {tool["name"] for tool in tools["result"]["tools"]}
        assert {"alpha__echo", "b__add"} <= names
        called = _result(
            await _post(
                http,
                second.url,
                sid,
                "tools/call",
                {"name": "b__add", "arguments": {"a": 2, "b": 3}},
                token=ALICE,
            )
        )
        assert called["result"]["isError"] is False
        assert "5" in called["result"]["content"][0]["text"]
        listed = _result(await _post(http, second.url, sid, "resources/list", token=ALICE))
        uris = [r["uri"] for r in listed["result"]["resources"] if r["name"].endswith("readme")]
        read = _result(
            await _post(http, second.url, sid, "resources/read", {"uri": uris[0]}, token=ALICE)
        )
        assert read["result"]["contents"]
        assert _result(await _post(http, second.url, sid, "ping", token=ALICE))["result"] == {}
        progress = await _post(
            http,
            second.url,
            sid,
            "tools/call",
            {"name": "alpha__progress", "arguments": {"steps": 2}, "_meta": {"progressToken": "p"}},
            token=ALICE,
        )
        assert progress.status_code == 200
        assert progress.text.count('"notifications/progress"') == 2, progress.text
        held = second.gateway.clients.get(sid)
        assert held is not None and held.owner_elsewhere
        # The first replica still holds it and serves the official client.
        assert (await host.list_tools()).tools
        deleted = await http.delete(
            second.url,
            headers={"authorization": f"Bearer {ALICE}", MCP_SESSION_ID_HEADER: sid},
        )
        assert deleted.status_code == 200
        owner = first.gateway.clients.get(sid)
        assert owner is not None
        with trio.fail_after(10):
            while not owner.closed:  # a close wakes the outbox's readers
                await owner.outbox.wait_after(owner.outbox.last_id)
        assert first.gateway.clients.get(sid) is None
        for running in (first, second):
            gone = await _post(http, running.url, sid, "tools/list", token=ALICE)
            assert gone.status_code == 404


async def test_another_principal_presenting_the_id_on_another_replica_gets_404(
    nursery: trio.Nursery, redis_server: RedisServer
) -> None:
    """Gateway choice (issue 16 item 5 across replicas): exactly the unknown-session answer."""
    first = await _replica(nursery, redis_server, "sessions-principal:")
    second = await _replica(nursery, redis_server, "sessions-principal:")
    async with _sdk_host(first.url) as (_host, sid), httpx.AsyncClient() as http:
        refused = await _post(http, second.url, sid, "tools/list", token=BOB)
        assert refused.status_code == 404
        assert refused.json()["error"]["message"] == "Session not found"
        assert second.gateway.clients.get(sid) is None  # no copy kept for the wrong caller
        unknown = await _post(http, second.url, "no-such-session-id", "tools/list", token=ALICE)
        assert unknown.status_code == 404
        assert (await _post(http, second.url, sid, "ping", token=ALICE)).status_code == 200


async def test_what_needs_the_stream_holder_is_refused_on_another_replica_with_its_reason(
    nursery: trio.Nursery, redis_server: RedisServer
) -> None:
    """Gateway choice: GET 409, subscribe -32601, a question to the host fails at once; with why."""
    first = await _replica(nursery, redis_server, "sessions-refused:")
    second = await _replica(nursery, redis_server, "sessions-refused:")
    async with _sdk_host(first.url) as (_host, sid), httpx.AsyncClient() as http:
        subscribe = _result(
            await _post(
                http, second.url, sid, "resources/subscribe", {"uri": "alpha://readme"}, token=ALICE
            )
        )
        assert subscribe["error"]["code"] == -32601
        assert "another gateway replica" in subscribe["error"]["message"]
        stream = await http.get(
            second.url,
            headers={
                "accept": "text/event-stream",
                "authorization": f"Bearer {ALICE}",
                MCP_SESSION_ID_HEADER: sid,
            },
        )
        assert stream.status_code == 409
        assert "another gateway replica" in stream.json()["error"]["message"]
        asked = _result(
            await _post(
                http,
                second.url,
                sid,
                "tools/call",
                {"name": "b__ask_name", "arguments": {}},
                token=ALICE,
            )
        )
        assert "another gateway replica" in json.dumps(asked)


async def test_a_cancel_sent_to_another_replica_cancels_the_call_where_it_runs(
    nursery: trio.Nursery, redis_server: RedisServer, tmp_path: Path
) -> None:
    """Gateway choice (rule 5): notifications/cancelled on B reaches A's call; A sends no answer."""
    first = await _replica(nursery, redis_server, "sessions-cancel:")
    second = await _replica(nursery, redis_server, "sessions-cancel:")
    assert first.gateway.session_records is not None
    with trio.fail_after(10):
        await first.gateway.session_records.listening.wait()
    started = tmp_path / "started"
    arguments = {"seconds": 0, "release": str(tmp_path / "never"), "started": str(started)}
    answer: list[httpx.Response] = []
    async with _sdk_host(first.url) as (_host, sid), httpx.AsyncClient() as http:

        async def call() -> None:
            params = {"name": "alpha__sleep", "arguments": arguments}
            answer.append(await _post(http, first.url, sid, "tools/call", params, token=ALICE))

        with trio.fail_after(20):
            async with trio.open_nursery() as calls:
                calls.start_soon(call)
                while not started.exists():  # noqa: ASYNC110 - a file has no event
                    await trio.sleep(0.01)
                cancel = {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": 7, "reason": "changed my mind"},
                }
                sent = await http.post(
                    second.url,
                    headers={
                        **MCP_POST_HEADERS,
                        "authorization": f"Bearer {ALICE}",
                        MCP_SESSION_ID_HEADER: sid,
                    },
                    content=json.dumps(cancel),
                )
                assert sent.status_code == 202
    assert answer[0].status_code == 200
    assert '"result"' not in answer[0].text and '"error"' not in answer[0].text


async def test_a_log_level_set_on_another_replica_is_in_the_record_and_reaches_the_owner(
    nursery: trio.Nursery, redis_server: RedisServer
) -> None:
    """Gateway choice: logging/setLevel on B rewrites the record; A takes it at its next pass."""
    first = await _replica(nursery, redis_server, "sessions-level:")
    second = await _replica(nursery, redis_server, "sessions-level:")
    async with _sdk_host(first.url) as (host, sid), httpx.AsyncClient() as http:
        level = await _post(
            http, second.url, sid, "logging/setLevel", {"level": "debug"}, token=ALICE
        )
        assert _result(level)["result"] == {}
        stored = (
            await second.gateway.store.get(records.key_of(sid)) if second.gateway.store else None
        )
        assert stored is not None
        record = records.decode(stored)
        assert record is not None and record.log_level == "debug"
        await host.send_ping()  # the session was used on A since its record was written
        assert first.gateway.session_records is not None
        await first.gateway.session_records.keep()
        assert first.gateway.router.client_level(sid) == "debug"


def test_a_record_key_never_holds_the_session_id_and_a_record_survives_the_round_trip() -> None:
    """Gateway choice (rule 1): the store holds a digest; the record decodes to what was written."""
    sid = "AbCdEfGhIjKlMnOpQrStUvWxYz012345"
    key = records.key_of(sid)
    assert key.startswith("sessions:") and sid not in key and len(key) == len("sessions:") + 64
    record = records.SessionRecord(
        principal="alice", profile="default", version="2025-06-18", log_level="info"
    )
    assert records.decode(records.encode(record)) == record
    assert records.decode(records.ENDED) is None
    assert records.decode(b"{not json") is None
    assert records.decode(msgspec.json.encode({"profile": 1})) is None


class _Counting(EmbeddedStore):
    """The embedded store, counting the writes of session records."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    async def put(self, key: str, value: bytes, *, ttl: float | None = None) -> None:
        """Counts, then stores."""
        self.writes += 1
        await super().put(key, value, ttl=ttl)

    async def swap(
        self, key: str, expected: bytes | None, new: bytes | None, *, ttl: float | None = None
    ) -> bool:
        """Counts, then swaps."""
        self.writes += 1
        return await super().swap(key, expected, new, ttl=ttl)


async def test_a_busy_session_rewrites_its_record_once_a_pass_and_an_idle_one_not_at_all(
    autojump_clock: Any,
) -> None:
    """Gateway choice (rule 3): no write per request; one per keeper pass while used."""
    store = _Counting()
    clients = ClientRegistry()
    keeper = records.SessionRecords(
        store, clients, lambda: 600.0, lambda sid: None, lambda sid, level: None, refresh=10.0
    )
    busy = clients.open("2025-11-25", {}, {}, principal="alice")
    idle = clients.open("2025-11-25", {}, {}, principal="alice")
    await keeper.save(busy)
    await keeper.save(idle)
    assert store.writes == 2
    async with trio.open_nursery() as nursery:
        await nursery.start(keeper.run)
        for _ in range(83):  # 83 requests over 24.9 s: passes at 10 and 20 s
            await trio.sleep(0.3)
            busy.last_seen = trio.current_time()
        nursery.cancel_scope.cancel()
    assert store.writes == 2 + 2
    assert await store.get(records.key_of(idle.session_id)) is not None


async def test_a_session_deleted_elsewhere_is_closed_here_at_the_next_pass(
    autojump_clock: Any,
) -> None:
    """Gateway choice (rule 5): a lost DELETE message is made up for by the tombstone."""
    store = EmbeddedStore()
    clients = ClientRegistry()
    keeper = records.SessionRecords(
        store, clients, lambda: 600.0, lambda sid: None, lambda sid, level: None, refresh=10.0
    )
    session = clients.open("2025-11-25", {}, {}, principal="alice")
    await keeper.save(session)
    await store.put(records.key_of(session.session_id), records.ENDED, ttl=600.0)
    await trio.sleep(1)
    session.last_seen = trio.current_time()
    await keeper.keep()
    assert clients.get(session.session_id) is None and session.closed


async def test_a_copy_held_elsewhere_refuses_to_ask_the_host_at_once() -> None:
    """Gateway choice: the host's answer could reach any replica, so no question is put."""
    clients = ClientRegistry()
    copy = clients.adopt("sid-1", "2025-11-25", {}, {"elicitation": {}}, "default", "alice")
    with pytest.raises(RemoteProtocolError) as refused:
        await copy.request("elicitation/create", None, None)
    assert refused.value.message == ASKED_ELSEWHERE
    assert copy.initialized and len(clients) == 1


class _DownOnce(EmbeddedStore):
    """The embedded store, refusing the first put (a server that was down at initialize)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = True

    async def put(self, key: str, value: bytes, *, ttl: float | None = None) -> None:
        """Fails while down, then stores."""
        if self.down:
            raise StoreUnavailable("put", "refused")
        await super().put(key, value, ttl=ttl)


async def test_a_record_the_store_refused_at_initialize_is_written_at_the_next_pass(
    autojump_clock: Any,
) -> None:
    """Gateway choice (rule 6): the session is served meanwhile; its record follows the store."""
    store = _DownOnce()
    clients = ClientRegistry()
    keeper = records.SessionRecords(
        store, clients, lambda: 600.0, lambda sid: None, lambda sid, level: None, refresh=10.0
    )
    session = clients.open("2025-11-25", {}, {}, principal="alice")
    await keeper.save(session)
    assert await store.get(records.key_of(session.session_id)) is None
    store.down = False
    await trio.sleep(1)
    session.last_seen = trio.current_time()
    await keeper.keep()
    stored = await store.get(records.key_of(session.session_id))
    assert stored is not None
    record = records.decode(stored)
    assert record is not None and record.principal == "alice"
