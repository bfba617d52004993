"""Issue 4 end to end: everything that travels beside a call.

Progress, cancellation, id remapping, timeouts, the backends' own requests
(sampling, elicitation, roots), log messages, resource subscriptions and
per-client backend sessions, between real peers: the official ``mcp`` client
(or raw httpx where the exact wire matters), the real gateway, and real
backends (alpha, an official-SDK server, and the reference server
``everything``). Where the backend side must be seen, alpha runs behind
``tests/servers/recorder.py``, which logs every line it is sent and sends.

Backends are real processes, so waits are real time, each bounded.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Generic, TypeVar

import httpx
import pytest
import trio
from mcp import ClientSession, types
from mcp.shared.context import RequestContext
from mcp.shared.exceptions import McpError
from pydantic import AnyUrl, FileUrl

from tests.harness import (
    Running,
    everything_backend,
    gateway_config,
    initialize_message,
    open_client,
    sdk_backend,
    start_gateway,
    stdio_backend,
)
from tests.servers.paths import python_server_command
from tests.servers.recorder import read_log, recorded

T = TypeVar("T")
Message = dict[str, Any]

PROTOCOL_VERSION = "2025-11-25"
WAIT = 5.0  # the bound on any wait for something a real peer does at once


# -- helpers -----------------------------------------------------------------


class Seen(Generic[T]):
    """What a callback received, in order, with a bounded wait for a match."""

    def __init__(self) -> None:
        self.items: list[T] = []
        self._changed = trio.Event()

    def add(self, item: T) -> None:
        self.items.append(item)
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, predicate: Callable[[T], bool]) -> T:
        """The first item that matches, waiting (bounded by WAIT) for it."""
        with trio.fail_after(WAIT):
            while True:
                for item in self.items:
                    if predicate(item):
                        return item
                await self._changed.wait()


@dataclass
class Recorder:
    """The lines alpha was sent (``>``) and sent back (``<``), via tests/servers/recorder.py."""

    log: Path

    def sent(self) -> list[Message]:
        """Messages the gateway sent to the backend, in order."""
        return [m for direction, m in read_log(self.log) if direction == ">"]

    async def wait_sent(self, predicate: Callable[[Message], bool]) -> Message:
        """The first message sent to the backend that matches, waiting (bounded by WAIT)."""
        with trio.fail_after(WAIT):
            while True:
                for message in self.sent():
                    if predicate(message):
                        return message
                await trio.sleep(0.02)  # a real process writes the file: poll it

    async def wait_cancelled(self, backend_id: Any) -> Message:
        """The ``notifications/cancelled`` naming ``backend_id``, waiting (bounded by WAIT)."""
        return await self.wait_sent(
            lambda m: (
                m.get("method") == "notifications/cancelled"
                and m.get("params", {}).get("requestId") == backend_id
            )
        )


def forwarded_call(tool: str, **arguments: Any) -> Callable[[Message], bool]:
    """Matches the backend-side tools/call of ``tool`` with these arguments."""

    def match(message: Message) -> bool:
        params = message.get("params", {})
        return (
            message.get("method") == "tools/call"
            and params.get("name") == tool
            and all(params.get("arguments", {}).get(k) == v for k, v in arguments.items())
        )

    return match


async def start_recorded_alpha(
    nursery: trio.Nursery, tmp_path: Path, **extra: Any
) -> tuple[Running, Recorder]:
    """A gateway whose only backend is alpha behind the recorder."""
    log = tmp_path / "alpha.log"
    argv = recorded(log, python_server_command("alpha"))
    running = await start_gateway(nursery, gateway_config([stdio_backend("alpha", argv, **extra)]))
    return running, Recorder(log)


def messages_of(response: httpx.Response) -> list[Message]:
    """The JSON-RPC messages of a POST's answer, JSON or SSE, in order."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()]
    messages = []
    for event in response.text.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].lstrip(" ") for line in event.split("\n") if line.startswith("data:")]
        if data:
            messages.append(json.loads("\n".join(data)))
    return messages


@dataclass
class RawClient:
    """A host speaking Streamable HTTP by hand, to choose its own ids and tokens."""

    http: httpx.AsyncClient
    url: str
    session_id: str = ""

    def _headers(self) -> dict[str, str]:
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }
        if self.session_id:
            headers["mcp-session-id"] = self.session_id
            headers["mcp-protocol-version"] = PROTOCOL_VERSION
        return headers

    async def post(self, message: Message) -> httpx.Response:
        return await self.http.post(self.url, content=json.dumps(message), headers=self._headers())

    async def request(self, msg_id: Any, method: str, params: Message) -> list[Message]:
        """POST a request; the messages of its answer."""
        response = await self.post(
            {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
        )
        assert response.status_code == 200, response.text
        return messages_of(response)

    async def notify(self, method: str, params: Message | None = None) -> int:
        """POST a notification; the HTTP status."""
        message: Message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        return (await self.post(message)).status_code

    async def delete(self) -> int:
        """End the session; the HTTP status."""
        return (await self.http.delete(self.url, headers=self._headers())).status_code


@asynccontextmanager
async def open_raw(url: str) -> AsyncIterator[RawClient]:
    """An initialized raw session (no client capabilities)."""
    async with httpx.AsyncClient(timeout=30.0) as http:
        raw = RawClient(http, url)
        response = await raw.post(
            initialize_message("raw", "0", msg_id=0, revision=PROTOCOL_VERSION)
        )
        assert response.status_code == 200, response.text
        raw.session_id = response.headers["mcp-session-id"]
        assert await raw.notify("notifications/initialized") == 202
        yield raw


def call_text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


def result_text(message: Message) -> str:
    return "\n".join(b["text"] for b in message["result"]["content"] if b["type"] == "text")


async def pid_of(client: ClientSession) -> int:
    result = await client.call_tool("alpha__pid", {})
    assert not result.isError
    return int(call_text(result))


async def wait_process_gone(pid: int) -> None:
    """Return once process ``pid`` no longer exists (bounded by WAIT)."""
    with trio.fail_after(WAIT):
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            await trio.sleep(0.05)  # another process's exit: poll it


@pytest.fixture(name="everything")
async def _everything(nursery: trio.Nursery) -> Running:
    """A gateway with alpha and the reference server."""
    return await start_gateway(
        nursery, gateway_config([sdk_backend("alpha"), everything_backend()])
    )


# -- progress ----------------------------------------------------------------


@pytest.mark.node
async def test_each_client_gets_every_step_of_its_own_progress_and_none_of_another_clients(
    everything: Running,
) -> None:
    """Spec (issue 4): progress reaches only the client that asked, every step, increasing.

    Both SDK clients number their requests alike, so their progress tokens are
    equal: any progress routed to the wrong client would reach its callback.
    """
    seen: dict[str, list[tuple[float, float | None]]] = {}

    async def calls(client: ClientSession, label: str, steps: int, order: list[str]) -> None:
        # One call at a time per SDK client: its Streamable HTTP writer can send
        # the wrong body for requests queued together (late-bound closure).
        for tool in order:
            steps_seen: list[tuple[float, float | None]] = []
            seen[f"{label}/{tool}"] = steps_seen

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                steps_seen.append((progress, total))  # noqa: B023 - awaited within this iteration

            args: Message = {"steps": steps}
            if tool == "everything__trigger-long-running-operation":
                args["duration"] = steps / 10
            result = await client.call_tool(tool, args, progress_callback=on_progress)
            assert not result.isError, call_text(result)
            after = len(steps_seen)
            await client.send_ping()
            assert len(steps_seen) == after  # none after the result

    alpha, everything_tool = "alpha__progress", "everything__trigger-long-running-operation"
    with trio.fail_after(20):
        async with (
            open_client(everything.url) as one,
            open_client(everything.url) as two,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(calls, one, "one", 3, [alpha, everything_tool])
            nursery.start_soon(calls, two, "two", 4, [everything_tool, alpha])
    assert seen == {
        f"one/{alpha}": [(n, 3) for n in range(1, 4)],
        f"one/{everything_tool}": [(n, 3) for n in range(1, 4)],
        f"two/{alpha}": [(n, 4) for n in range(1, 5)],
        f"two/{everything_tool}": [(n, 4) for n in range(1, 5)],
    }


@pytest.mark.node
async def test_progress_carries_the_clients_own_token_and_ends_before_the_response(
    everything: Running,
) -> None:
    """Spec: progress comes back under the token the client sent, increasing, then the response."""
    async with open_raw(everything.url) as raw:
        for msg_id, token in ((1, "my-token"), (2, 42)):
            params = {
                "name": "alpha__progress",
                "arguments": {"steps": 3},
                "_meta": {"progressToken": token},
            }
            with trio.fail_after(WAIT):
                messages = await raw.request(msg_id, "tools/call", params)
            *progress, response = messages
            assert [m["method"] for m in progress] == ["notifications/progress"] * 3
            assert [m["params"]["progressToken"] for m in progress] == [token] * 3
            assert all(type(m["params"]["progressToken"]) is type(token) for m in progress)
            assert [m["params"]["progress"] for m in progress] == [1, 2, 3]
            assert response["id"] == msg_id
            assert result_text(response) == "done"


# -- cancellation, ids, timeouts ----------------------------------------------


async def call_sleep_30(raw: RawClient, msg_id: str | int, answers: list[httpx.Response]) -> None:
    """``alpha__sleep`` for 30 s as request ``msg_id``; its HTTP answer goes to ``answers``."""
    params = {"name": "alpha__sleep", "arguments": {"seconds": 30}}
    message = {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": params}
    answers.append(await raw.post(message))


async def test_a_cancelled_call_is_cancelled_at_the_backend_under_its_id_and_gets_no_response(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Spec (issue 4): notifications/cancelled reaches the backend with the backend-side id;
    the client gets no response."""
    running, recorder = await start_recorded_alpha(nursery, tmp_path)
    async with open_raw(running.url) as raw:
        answers: list[httpx.Response] = []
        with trio.fail_after(WAIT):
            async with trio.open_nursery() as calls:
                calls.start_soon(call_sleep_30, raw, "same-1", answers)
                forwarded = await recorder.wait_sent(forwarded_call("sleep", seconds=30))
                assert await raw.notify("notifications/cancelled", {"requestId": "same-1"}) == 202
                cancelled_at = trio.current_time()
            ended = trio.current_time() - cancelled_at  # out of the nursery: the POST ended
        assert ended < 2.0
        cancelled = await recorder.wait_cancelled(forwarded["id"])
        assert forwarded["id"] != "same-1"
        assert cancelled["params"]["requestId"] == forwarded["id"]
        (answer,) = answers
        assert answer.status_code == 200
        assert [m for m in messages_of(answer) if "result" in m or "error" in m] == []


async def test_two_clients_using_the_same_request_ids_at_once_each_get_their_own_answer(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Spec (issue 4): host ids are remapped; each backend-side id is distinct on the link."""
    running, recorder = await start_recorded_alpha(nursery, tmp_path)
    answers: dict[tuple[str, Any], list[Message]] = {}

    async def ask(raw: RawClient, label: str, msg_id: Any) -> None:
        text = f"{label}-{msg_id!r}"
        answers[label, msg_id] = await raw.request(
            msg_id, "tools/call", {"name": "alpha__echo", "arguments": {"text": text}}
        )

    with trio.fail_after(10):
        async with (
            open_raw(running.url) as first,
            open_raw(running.url) as second,
            trio.open_nursery() as calls,
        ):
            for raw, label in ((first, "first"), (second, "second")):
                for msg_id in (1, "1"):
                    calls.start_soon(ask, raw, label, msg_id)
    assert len(answers) == 4
    for (label, msg_id), messages in answers.items():
        (answer,) = messages
        assert answer["id"] == msg_id
        assert type(answer["id"]) is type(msg_id)
        assert result_text(answer) == f"alpha: {label}-{msg_id!r}"
    echoes = [m for m in recorder.sent() if forwarded_call("echo")(m)]
    assert sorted(m["params"]["arguments"]["text"] for m in echoes) == sorted(
        f"{label}-{msg_id!r}" for label, msg_id in answers
    )
    assert len({json.dumps(m["id"]) for m in echoes}) == 4


async def test_deleting_a_session_cancels_its_call_in_flight_at_the_backend(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Spec (issue 4): ending a client session cancels its calls; the backend is told."""
    running, recorder = await start_recorded_alpha(nursery, tmp_path)
    async with open_raw(running.url) as raw:
        answers: list[httpx.Response] = []
        with trio.fail_after(WAIT):
            async with trio.open_nursery() as calls:
                calls.start_soon(call_sleep_30, raw, 7, answers)
                forwarded = await recorder.wait_sent(forwarded_call("sleep", seconds=30))
                assert await raw.delete() == 200
                deleted_at = trio.current_time()
                await recorder.wait_cancelled(forwarded["id"])
                told = trio.current_time() - deleted_at
        assert told < 2.0
        assert [m for m in messages_of(answers[0]) if "result" in m] == []


async def test_a_call_the_backend_does_not_answer_in_time_fails_with_a_timeout_and_is_cancelled(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Spec (issue 4): past timeouts.request the client gets -32001 naming the backend and the
    seconds, and the backend gets notifications/cancelled."""
    running, recorder = await start_recorded_alpha(nursery, tmp_path, timeouts={"request": 1.0})
    async with open_client(running.url) as client:
        started = trio.current_time()
        with trio.fail_after(10), pytest.raises(McpError) as caught:
            await client.call_tool("alpha__sleep", {"seconds": 30})
        elapsed = trio.current_time() - started
    assert 0.8 <= elapsed <= 5.0
    error = caught.value.error
    assert error.code == -32001
    assert "'alpha'" in error.message
    assert re.search(r"within \d+(\.\d+)? s", error.message), error.message
    assert isinstance(error.data, dict)
    assert error.data["backend"] == "alpha"
    assert 0.8 <= error.data["seconds"] <= 5.0
    forwarded = await recorder.wait_sent(forwarded_call("sleep", seconds=30))
    await recorder.wait_cancelled(forwarded["id"])


# -- the backends' own requests -------------------------------------------------


async def _sample(
    context: RequestContext[ClientSession, Any], params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text="sampled!"),
        model="test-model",
        stopReason="endTurn",
    )


@pytest.mark.node
async def test_a_backends_sampling_request_is_answered_by_the_calling_client(
    everything: Running,
) -> None:
    """Spec (issue 4): sampling/createMessage goes to the client whose call caused it."""
    async with open_client(everything.url, sampling_callback=_sample) as client:
        with trio.fail_after(10):
            result = await client.call_tool(
                "everything__trigger-sampling-request", {"prompt": "hi"}
            )
    assert not result.isError, call_text(result)
    assert "sampled!" in call_text(result)


@pytest.mark.node
async def test_sampling_for_a_client_without_the_capability_fails_the_tool_promptly(
    everything: Running,
) -> None:
    """Spec (issue 4): the backend gets an error at once, never a hang; the gateway carries on."""
    async with open_client(everything.url) as client:
        with trio.fail_after(10):
            try:
                result = await client.call_tool(
                    "everything__trigger-sampling-request", {"prompt": "hi"}
                )
            except McpError:
                pass  # a JSON-RPC error is as good as isError here
            else:
                assert result.isError, call_text(result)
            echoed = await client.call_tool("everything__echo", {"message": "still here"})
    assert call_text(echoed) == "Echo: still here"


@pytest.mark.node
async def test_sampling_while_two_clients_have_calls_in_flight_is_refused_not_guessed(
    everything: Running,
) -> None:
    """Spec (issue 4, router rule 7): with several possible owners the backend gets an error
    at once; no client is asked."""
    progressed = Seen[float]()
    asked = Seen[types.CreateMessageRequestParams]()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        progressed.add(progress)

    async def sample(
        context: RequestContext[ClientSession, Any], params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        asked.add(params)
        return await _sample(context, params)

    long_running = "everything__trigger-long-running-operation"
    with trio.fail_after(10):
        async with (
            open_client(everything.url, sampling_callback=sample) as busy,
            open_client(everything.url, sampling_callback=sample) as asking,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(
                partial(busy.call_tool, progress_callback=on_progress),
                long_running,
                {"duration": 1.0, "steps": 2},
            )
            await progressed.wait_for(lambda v: True)  # busy's call is in flight
            result = await asking.call_tool(
                "everything__trigger-sampling-request", {"prompt": "hi"}
            )
    assert result.isError, call_text(result)
    assert "cannot tell which client" in call_text(result)
    assert asked.items == []


@pytest.mark.node
async def test_a_backends_elicitation_request_is_answered_by_the_calling_client(
    everything: Running,
) -> None:
    """Spec (issue 4): elicitation/create goes to the caller; its answer reaches the tool."""
    asked = Seen[types.ElicitRequestParams]()

    async def elicit(
        context: RequestContext[ClientSession, Any], params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.add(params)
        return types.ElicitResult(action="accept", content={"name": "Ada Lovelace", "check": True})

    async with open_client(everything.url, elicitation_callback=elicit) as client:
        with trio.fail_after(10):
            result = await client.call_tool("everything__trigger-elicitation-request", {})
    text = call_text(result)
    assert not result.isError, text
    assert len(asked.items) == 1
    assert "- Name: Ada Lovelace" in text
    assert "- Agreed to terms: true" in text


@pytest.mark.node
async def test_a_backends_roots_request_is_answered_by_the_calling_client(
    everything: Running,
) -> None:
    """Spec (issue 4): roots/list goes to the calling client; its roots reach the tool."""

    async def roots(context: RequestContext[ClientSession, Any]) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=FileUrl("file:///tmp/x"), name="x")])

    async with open_client(everything.url, list_roots_callback=roots) as client:
        with trio.fail_after(10):
            result = await client.call_tool("everything__get-roots-list", {})
    assert not result.isError, call_text(result)
    assert "file:///tmp/x" in call_text(result)


# -- notifications ---------------------------------------------------------------


@pytest.mark.node
async def test_log_messages_reach_only_the_clients_whose_level_admits_them(
    everything: Running,
) -> None:
    """Spec (issue 4): notifications/message goes to each client at or above its own level."""
    seen_a = Seen[types.LoggingMessageNotificationParams]()
    seen_b = Seen[types.LoggingMessageNotificationParams]()

    async def log_a(params: types.LoggingMessageNotificationParams) -> None:
        seen_a.add(params)

    async def log_b(params: types.LoggingMessageNotificationParams) -> None:
        seen_b.add(params)

    async with (
        open_client(everything.url, logging_callback=log_a) as a,
        open_client(everything.url, logging_callback=log_b) as b,
    ):
        await a.set_logging_level("debug")
        await b.set_logging_level("emergency")
        result = await a.call_tool("everything__toggle-simulated-logging", {})
        assert not result.isError, call_text(result)
        message = await seen_a.wait_for(lambda p: True)
        assert message.logger is not None
        assert message.logger.startswith("everything")
        await b.send_ping()
        await a.send_ping()
    assert [p.level for p in seen_b.items if p.level != "emergency"] == []


async def _public_uri(client: ClientSession, suffix: str) -> AnyUrl:
    uris = [r.uri for r in (await client.list_resources()).resources]
    (uri,) = [u for u in uris if str(u).startswith("everything+") and str(u).endswith(suffix)]
    return uri


def _updates(seen: Seen[Any]) -> Callable[[Any], None]:
    async def handle(message: Any) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ResourceUpdatedNotification
        ):
            seen.add(str(message.root.params.uri))

    return handle  # type: ignore[return-value]


@pytest.mark.node
async def test_resource_updates_reach_only_subscribers_under_the_public_uri(
    everything: Running,
) -> None:
    """Spec (issue 4): resources/updated goes to subscribers only, with the prefixed URI;
    after unsubscribing a client gets no more."""
    updates_a = Seen[str]()
    updates_b = Seen[str]()
    toggle = "everything__toggle-subscriber-updates"
    async with (
        open_client(everything.url, message_handler=_updates(updates_a)) as a,
        open_client(everything.url, message_handler=_updates(updates_b)) as b,
    ):
        uri = await _public_uri(a, "architecture.md")
        assert str(uri).startswith("everything+demo://")
        await a.subscribe_resource(uri)
        await a.call_tool(toggle, {})  # on: one update now, then every 5 s
        assert await updates_a.wait_for(lambda u: True) == str(uri)
        await b.send_ping()
        assert updates_b.items == []

        await a.unsubscribe_resource(uri)
        await a.send_ping()
        before = len(updates_a.items)
        await b.subscribe_resource(uri)
        await a.call_tool(toggle, {})  # off
        await a.call_tool(toggle, {})  # on again: one update now, for B only
        assert await updates_b.wait_for(lambda u: True) == str(uri)
        await a.send_ping()
        assert len(updates_a.items) == before


# -- per-client backend sessions -----------------------------------------------


async def test_per_client_backend_sessions_give_each_client_its_own_process(
    nursery: trio.Nursery,
) -> None:
    """Spec (issue 4): session per_client: one backend session (here a process) per client,
    ended with the client's session."""
    running = await start_gateway(
        nursery, gateway_config([sdk_backend("alpha", session="per_client")])
    )
    with trio.fail_after(20):
        async with open_client(running.url) as two:
            async with open_client(running.url) as one:
                first = await pid_of(one)
                assert await pid_of(one) == first
                second = await pid_of(two)
                assert second != first
            # leaving `open_client` DELETEs client one's session
            await wait_process_gone(first)
            assert await pid_of(two) == second
            os.kill(second, 0)  # still there


async def test_a_shared_backend_session_serves_every_client_from_one_process(
    nursery: trio.Nursery,
) -> None:
    """Spec (issue 4): session shared: every client's calls go to the same backend process."""
    running = await start_gateway(nursery, gateway_config([sdk_backend("alpha", session="shared")]))
    with trio.fail_after(10):
        async with open_client(running.url) as one, open_client(running.url) as two:
            assert await pid_of(one) == await pid_of(two)
