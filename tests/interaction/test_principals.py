"""Issue 25: backend sessions follow principals; every question reaches its asker.

Two principals with static tokens (``auth.tokens``) and several hosts each
(the official ``mcp`` client), through the real gateway, over the reference
server ``everything`` and the official-SDK server ``session_state``, both on
stdio with ``session: auto`` (per principal once auth is on). The table test
crosses every kind of backend-session state; the concurrency test has five
hosts each asked a question while another host's call is in flight.

Backends are real processes, so waits are real time, each bounded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from typing import Any

import httpx
import pytest
import trio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.context import RequestContext
from pydantic import AnyUrl, FileUrl

from tests.frontend.test_modern_http import modern, send, sse_messages
from tests.frontend.test_streamable_http import http_client
from tests.harness import Running, everything_backend, gateway_config, sdk_backend, start_gateway

TOKENS = {"alice": "alice-token-0123456789abcdef", "bob": "bob-token-0123456789abcdef0"}
CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
WAIT = 10.0  # the bound on any wait for something a real peer does at once
# Hosts: (label, principal); two of alice's, one of bob's.
HOSTS = (("alice-1", "alice"), ("alice-2", "alice"), ("bob-1", "bob"))


def text_of(result: types.CallToolResult) -> str:
    """The concatenated text content of a tool result."""
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


class Host:
    """One host (an SDK client) of a principal, and what the gateway sent it."""

    def __init__(self, label: str, principal: str) -> None:
        self.label = label
        self.principal = principal
        self.asked: list[str] = []
        self.logs: list[types.LoggingMessageNotificationParams] = []
        self.updates: list[str] = []
        self.session: ClientSession | None = None
        self.roots_asked = 0
        self.home: str | None = None  # the root it lists: file:///home/<home or label>
        self._heard = trio.Event()

    async def wait_until(self, condition: Callable[[], bool]) -> None:
        """Return once ``condition`` holds of what this host heard (bounded by WAIT)."""
        with trio.fail_after(WAIT):
            while not condition():
                await self._heard.wait()
                self._heard = trio.Event()

    def _hear(self) -> None:
        self._heard.set()

    @property
    def client(self) -> ClientSession:
        assert self.session is not None
        return self.session

    async def roots(self, context: RequestContext[ClientSession, Any]) -> types.ListRootsResult:
        self.roots_asked += 1
        self._hear()
        home = self.home or self.label
        uri = FileUrl(f"file:///home/{home}")
        return types.ListRootsResult(roots=[types.Root(uri=uri, name=home)])

    async def elicit(
        self, context: RequestContext[ClientSession, Any], params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.asked.append(params.message)
        return types.ElicitResult(
            action="accept", content={"name": self.label, "check": True, "email": "a@b.c"}
        )

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)
        self._hear()

    async def message(self, message: Any) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ResourceUpdatedNotification
        ):
            self.updates.append(str(message.root.params.uri))
            self._hear()


@asynccontextmanager
async def connected(url: str, host: Host) -> AsyncIterator[Host]:
    """``host`` as an initialized SDK client, authenticated as its principal."""
    headers = {"authorization": f"Bearer {TOKENS[host.principal]}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=300)) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(
            read,
            write,
            list_roots_callback=host.roots,
            elicitation_callback=host.elicit,
            logging_callback=host.log,
            message_handler=host.message,  # type: ignore[arg-type]
        ) as session,
    ):
        await session.initialize()
        host.session = session
        yield host


@asynccontextmanager
async def principals_gateway(
    nursery: trio.Nursery, labels: tuple[tuple[str, str], ...] = HOSTS, **backend: Any
) -> AsyncIterator[tuple[Running, dict[str, Host]]]:
    """A gateway with auth on over everything and session_state, and hosts connected."""
    config = gateway_config(
        [everything_backend(**backend), sdk_backend("session_state", "state", **backend)],
        auth={"tokens": TOKENS},
    )
    running = await start_gateway(nursery, config)
    hosts = {label: Host(label, principal) for label, principal in labels}
    async with AsyncExitStack() as stack:
        for host in hosts.values():
            await stack.enter_async_context(connected(running.url, host))
        yield running, hosts


async def call(host: Host, tool: str, **arguments: Any) -> str:
    """Call ``tool``; its text, whether or not it is an error."""
    with trio.fail_after(WAIT):
        result = await host.client.call_tool(tool, arguments)
    return ("error: " if result.isError else "") + text_of(result)


# -- the table: one row per kind of backend-session state ------------------------


async def _roots(hosts: dict[str, Host]) -> dict[str, str]:
    """Each host asks both backends for the roots they know."""
    seen = {}
    for label, host in hosts.items():
        seen[label] = await call(host, "everything__get-roots-list") + await call(
            host, "state__roots"
        )
    return seen


async def _memory(hosts: dict[str, Host]) -> dict[str, str]:
    """Each host's session remembers a word; each recalls what its session holds."""
    for label, host in hosts.items():
        await call(host, "state__remember", text=label)
    return {label: await call(host, "state__recall") for label, host in hosts.items()}


async def _session_resources(hosts: dict[str, Host]) -> dict[str, str]:
    """alice-1 makes a session resource; every host tries to read it."""
    await call(
        hosts["alice-1"],
        "everything__gzip-file-as-resource",
        name="alice-1.gz",
        data="data:text/plain;base64,YWxpY2U=",
    )
    uri = AnyUrl("everything+demo://resource/session/alice-1.gz")
    seen = {}
    for label, host in hosts.items():
        try:
            with trio.fail_after(WAIT):
                read = await host.client.read_resource(uri)
            seen[label] = f"read {len(read.contents)} alice-1"
        except Exception as exc:  # the refusal is the outcome
            seen[label] = f"refused: {type(exc).__name__}"
    return seen


async def _subscriptions(hosts: dict[str, Host]) -> dict[str, str]:
    """Everyone subscribes; only bob's session turns updates on: only bob hears them."""
    uri = AnyUrl("everything+demo://resource/static/document/architecture.md")
    for host in hosts.values():
        with trio.fail_after(WAIT):
            await host.client.subscribe_resource(uri)
    await call(hosts["bob-1"], "everything__toggle-subscriber-updates")
    await hosts["bob-1"].wait_until(lambda: bool(hosts["bob-1"].updates))
    for host in hosts.values():
        await host.client.send_ping()  # anything queued for another host has arrived
    return {label: ",".join(host.updates) for label, host in hosts.items()}


async def _log_level(hosts: dict[str, Host]) -> dict[str, str]:
    """Everyone asks for debug logs; only alice's session logs: bob hears none of it."""
    for host in hosts.values():
        with trio.fail_after(WAIT):
            await host.client.set_logging_level("debug")
    await call(hosts["alice-1"], "everything__toggle-simulated-logging")
    alice = hosts["alice-1"]
    await alice.wait_until(lambda: _heard_logs(alice))
    for host in hosts.values():
        await host.client.send_ping()
    return {label: "logs" if _heard_logs(host) else "quiet" for label, host in hosts.items()}


def _heard_logs(host: Host) -> bool:
    return any(p.logger is not None and p.logger.startswith("everything") for p in host.logs)


async def _questions(hosts: dict[str, Host]) -> dict[str, str]:
    """bob's call elicits on both backends: only bob is asked, and his answer is used."""
    await call(hosts["bob-1"], "everything__trigger-elicitation-request")
    answer = await call(hosts["bob-1"], "state__ask", question="who?")
    return {label: f"{len(host.asked)} asked" for label, host in hosts.items()} | {"answer": answer}


Row = Callable[[dict[str, Host]], Awaitable[dict[str, str]]]
TABLE: list[tuple[str, Row, Callable[[dict[str, str]], bool]]] = [
    (
        "roots",
        _roots,
        lambda s: "bob" not in s["alice-1"] + s["alice-2"] and "alice" not in s["bob-1"],
    ),
    (
        "session memory",
        _memory,
        lambda s: "bob" not in s["alice-1"] + s["alice-2"] and s["bob-1"] == "bob-1",
    ),
    (
        "session resources",
        _session_resources,
        lambda s: s["alice-1"].startswith("read") and s["bob-1"].startswith("refused"),
    ),
    (
        "subscriptions",
        _subscriptions,
        lambda s: s["bob-1"] != "" and s["alice-1"] == "" and s["alice-2"] == "",
    ),
    (
        "log level",
        _log_level,
        lambda s: s["alice-1"] == "logs" and s["bob-1"] == "quiet",
    ),
    (
        "questions",
        _questions,
        lambda s: (
            s == {"alice-1": "0 asked", "alice-2": "0 asked", "bob-1": "2 asked", "answer": "bob-1"}
        ),
    ),
]


@pytest.mark.node
@pytest.mark.parametrize(("kind", "row", "holds"), TABLE, ids=[kind for kind, _, _ in TABLE])
async def test_no_principal_sees_another_principals_backend_session_state(
    nursery: trio.Nursery, kind: str, row: Row, holds: Callable[[dict[str, str]], bool]
) -> None:
    """Gateway choice (DESIGN "Trust between people"): with auth on, a stdio backend's
    session state (roots, memory, session resources, subscriptions, log level, questions)
    stays with the principal whose calls made it."""
    async with principals_gateway(nursery) as (_, hosts):
        seen = await row(hosts)
    assert holds(seen), seen


# -- concurrency: every question reaches its asker --------------------------------


class Barrier:
    """Holds each arriving task until ``parties`` have arrived."""

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.arrived = 0
        self._all = trio.Event()

    async def wait(self) -> None:
        self.arrived += 1
        if self.arrived >= self.parties:
            self._all.set()
        await self._all.wait()


ASKERS = 5
ROUNDS = 3
ELICIT = "everything__trigger-elicitation-request"


@pytest.mark.node
async def test_five_clients_of_one_principal_each_answer_their_own_question_at_once(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice (issue 25, E14): five hosts of one principal call stdio backends at
    once and every call asks its host; each question waits until all five are asked, so
    all five are outstanding together, and each is answered by its own asker."""
    labels = (*((f"alice-{n}", "alice") for n in range(ASKERS)), ("bob-1", "bob"))
    async with principals_gateway(nursery, labels) as (running, hosts):
        answers: dict[str, list[str]] = {label: [] for label in hosts}
        for round_number in range(ROUNDS):
            barrier = Barrier(ASKERS)
            for n in range(ASKERS):
                host = hosts[f"alice-{n}"]

                async def held(
                    context: RequestContext[ClientSession, Any],
                    params: types.ElicitRequestParams,
                    host: Host = host,
                    barrier: Barrier = barrier,
                ) -> types.ElicitResult:
                    await barrier.wait()  # all five questions are outstanding now
                    return await host.elicit(context, params)

                host.client._elicitation_callback = held  # type: ignore[attr-defined]

            async def ask(label: str, tool: str) -> None:
                host = hosts[label]
                with trio.fail_after(WAIT):
                    result = await host.client.call_tool(tool, {"question": label})
                answers[label].append(text_of(result))

            async with trio.open_nursery() as calls:
                # bob's long call on the same backends stays in flight meanwhile
                calls.start_soon(partial(call, hosts["bob-1"], "state__wait", seconds=1.0))
                for n in range(ASKERS):
                    tool = (
                        "state__ask"
                        if (n + round_number) % 2
                        else "everything__trigger-elicitation-request"
                    )
                    calls.start_soon(ask, f"alice-{n}", tool)
        backend = running.gateway.pool.backends["state"]
        assert backend.open_links <= ASKERS + 1
    for n in range(ASKERS):
        label = f"alice-{n}"
        assert len(hosts[label].asked) == ROUNDS
        assert all(label in answer for answer in answers[label]), answers[label]
    assert hosts["bob-1"].asked == []


# -- what a host can do, per host ----------------------------------------------------


@pytest.mark.node
async def test_a_backend_hears_roots_from_its_host_outside_any_call(
    nursery: trio.Nursery,
) -> None:
    """Spec (client/roots) with issue 25: a backend session of a principal asks for roots
    whenever it likes (after roots/list_changed, outside any call) and gets its host's."""
    async with principals_gateway(nursery, (("bob-1", "bob"),)) as (_, hosts):
        bob = hosts["bob-1"]
        assert "file:///home/bob-1" in await call(bob, "everything__get-roots-list")
        asked_before = bob.roots_asked
        bob.label = "bob-moved"  # its roots change: file:///home/bob-moved
        await bob.client.send_roots_list_changed()
        await bob.wait_until(lambda: bob.roots_asked > asked_before)  # outside any call
        seen = await call(bob, "everything__get-roots-list")
    assert "bob-moved" in seen
    assert "bob-1" not in seen


async def test_hosts_of_one_principal_share_a_backend_session_only_when_their_roots_agree(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice (issue 25: the key holds the roots its hosts declared): hosts of
    one principal with the same capabilities share a backend session when they list
    the same roots and get another when not; a host whose roots change to another's
    joins that host's session at its next call."""
    labels = (("alice-1", "alice"), ("alice-2", "alice"), ("alice-3", "alice"))
    async with principals_gateway(nursery, labels) as (_, hosts):
        hosts["alice-3"].home = "alice-1"  # the same roots as alice-1
        await call(hosts["alice-1"], "state__remember", text="one")
        seen = {label: await call(host, "state__recall") for label, host in hosts.items()}
        assert seen == {"alice-1": "one", "alice-2": "", "alice-3": "one"}
        assert [host.roots_asked for host in hosts.values()] == [1, 1, 1]
        moved = hosts["alice-2"]
        moved.home = "alice-1"
        await moved.client.send_roots_list_changed()
        with trio.fail_after(WAIT):  # the notification travels on a POST of its own
            while await call(moved, "state__recall") != "one":  # noqa: ASYNC110
                await trio.sleep(0.05)
        assert moved.roots_asked == 2  # asked again once, before the call after the change
        assert await call(hosts["alice-1"], "state__recall") == "one"


@pytest.mark.node
async def test_a_url_elicitation_reaches_its_asker_and_its_completion_follows(
    nursery: trio.Nursery,
) -> None:
    """Spec (2025-11-25 elicitation, URL mode) with issue 25: a session of a principal
    declares its host's URL mode, the backend's URL elicitation reaches the asker, and
    notifications/elicitation/complete goes back to that host only."""
    completed: dict[str, list[str]] = {"alice-1": [], "bob-1": []}
    async with principals_gateway(nursery, (("alice-1", "alice"), ("bob-1", "bob"))) as (
        _,
        hosts,
    ):
        for label, host in hosts.items():
            original = host.message

            async def message(msg: Any, label: str = label, original: Any = original) -> None:
                if isinstance(msg, types.ServerNotification) and isinstance(
                    msg.root, types.ElicitCompleteNotification
                ):
                    completed[label].append(msg.root.params.elicitationId)
                await original(msg)

            host.client._message_handler = message  # type: ignore[attr-defined]
        tools = {t.name for t in (await hosts["bob-1"].client.list_tools()).tools}
        assert "everything__trigger-url-elicitation" in tools
        answer = await call(
            hosts["bob-1"], "everything__trigger-url-elicitation", url="https://example.com/x"
        )
        assert "completed the URL elicitation" in answer, answer
        answer = await call(
            hosts["bob-1"], "state__visit", url="https://example.com/y", elicitation_id="e-1"
        )
        assert answer == "accept"
        await hosts["bob-1"].client.send_ping()
        await hosts["alice-1"].client.send_ping()
    assert completed == {"alice-1": [], "bob-1": ["e-1"]}
    assert hosts["alice-1"].asked == []
    assert len(hosts["bob-1"].asked) == 2


# -- 2026-07-28 hosts -------------------------------------------------------------


async def _modern_recall_and_remember(running: Running, principal: str, text: str) -> str:
    """As a 2026-07-28 host of ``principal``: remember ``text``, then recall; the recall."""
    auth = f"Bearer {TOKENS[principal]}"
    async with http_client(running) as client:
        for msg_id, tool, arguments in modern_steps(text):
            message = modern(msg_id, "tools/call", {"name": tool, "arguments": arguments})
            with trio.fail_after(WAIT):
                response = await send(client, message, authorization=auth)
            assert response.status_code == 200, response.text
            if response.headers["content-type"].startswith("application/json"):
                body = response.json()
            else:
                body = sse_messages(response)[-1]
    return str(body["result"]["content"][0]["text"])


def modern_steps(text: str) -> list[tuple[int, str, dict[str, Any]]]:
    """Remember ``text``, then recall."""
    return [(1, "state__remember", {"text": text}), (2, "state__recall", {})]


@pytest.mark.node
async def test_a_2026_07_28_host_never_sees_another_principals_backend_session(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice (E13, the other host era): each 2026-07-28 request of a principal
    reaches a backend session of that principal; what a handshake-era host of another
    principal left in its session stays there, and the modern host's own requests share
    their principal's session from one request to the next."""
    async with principals_gateway(nursery, (("alice-1", "alice"),)) as (running, hosts):
        await call(hosts["alice-1"], "state__remember", text="alice-1")
        bob = await _modern_recall_and_remember(running, "bob", "bob-m")
        alice = await call(hosts["alice-1"], "state__recall")
    assert bob == "bob-m"  # remembered in one request, recalled in the next; no alice-1
    assert alice == "alice-1"


async def _modern_visit(
    client: httpx.AsyncClient, msg_id: int, caps: dict[str, Any], **extra: Any
) -> tuple[int, dict[str, Any]]:
    """As a 2026-07-28 host of bob: call state__visit; (HTTP status, the last message)."""
    arguments = {"url": "https://example.com/m", "elicitation_id": "m-1"}
    params = {"name": "state__visit", "arguments": arguments, **extra}
    message = modern(msg_id, "tools/call", params, **{CAPABILITIES: caps})
    with trio.fail_after(WAIT):
        response = await send(client, message, authorization=f"Bearer {TOKENS['bob']}")
    if response.headers["content-type"].startswith("application/json"):
        return response.status_code, response.json()
    return response.status_code, sse_messages(response)[-1]


async def test_a_2026_07_28_host_gets_a_url_elicitation_from_its_principals_session(
    nursery: trio.Nursery,
) -> None:
    """Spec (2026-07-28 MRTR, URL mode) with issue 25: a handshake-era backend's URL
    elicitation on a principal's session reaches the 2026-07-28 host as input_required
    (no elicitationId), its consent reaches the backend, and no other host hears of it;
    a request that did not declare elicitation.url gets -32021 naming it."""
    async with (
        principals_gateway(nursery, (("alice-1", "alice"),)) as (running, hosts),
        http_client(running) as client,
    ):
        status, first = await _modern_visit(client, 1, {"elicitation": {"url": {}}})
        assert status == 200, first
        result = first["result"]
        assert result["resultType"] == "input_required"
        ((key, entry),) = result["inputRequests"].items()
        assert entry == {
            "method": "elicitation/create",
            "params": {
                "mode": "url",
                "message": "Open this page to go on.",
                "url": "https://example.com/m",
            },
        }
        status, done = await _modern_visit(
            client,
            2,
            {"elicitation": {"url": {}}},
            inputResponses={key: {"action": "accept"}},
            requestState=result["requestState"],
        )
        assert status == 200, done
        assert done["result"]["content"][0]["text"] == "accept"
        status, refused = await _modern_visit(client, 3, {"elicitation": {"form": {}}})
        assert status == 400, refused
        assert refused["error"]["code"] == -32021
        assert refused["error"]["data"] == {"requiredCapabilities": {"elicitation": {"url": {}}}}
        await hosts["alice-1"].client.send_ping()
    assert hosts["alice-1"].asked == []
