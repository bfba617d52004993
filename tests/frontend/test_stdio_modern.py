"""stdio mode serving 2026-07-28 (modern) hosts, over in-memory stdin/stdout.

A real gateway (its router, registry and backends: the ``headers`` and
``watched`` test peers, behind ``tests/servers/recorder.py`` where the test
must see what the backend was sent) with a ``StdioServer`` on a pair of
in-memory byte streams standing in for the host's pipes. The rules are in
``gateway/frontend/stdio.py`` (the era of the connection) and
``gateway/frontend/stateless/stdio_requests.py`` (the modern requests); docs/eras.md.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

import pytest
import trio
import trio.testing
from structlog.testing import capture_logs

from gateway.frontend.stdio import StdioServer
from gateway.transports.framing import LineFramer
from tests.frontend.test_listen_http import SUB_ID, until_sent
from tests.frontend.test_modern_http import HEADERS, MODERN, modern
from tests.frontend.test_streamable_http import initialize_request, request
from tests.harness import Running, gateway_config, start_gateway, stdio_backend
from tests.interaction.test_beside_a_call import WAIT, Recorder, forwarded_call
from tests.servers.paths import python_server_command
from tests.servers.recorder import recorded

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

LEGACY: Final = "2025-11-25"
VERSION_KEY: Final = "io.modelcontextprotocol/protocolVersion"


def cancel(request_id: object) -> dict[str, Any]:
    """The host's ``notifications/cancelled`` for ``request_id``."""
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request_id},
    }


class Host:
    """The host's ends of the pipes: write requests to stdin, read stdout line by line."""

    def __init__(self, stdin: trio.abc.SendStream, stdout: trio.abc.ReceiveStream) -> None:
        self._stdin = stdin
        self._stdout = stdout
        self._framer = LineFramer(1 << 24)
        self._ready: list[bytes] = []

    async def send(self, message: dict[str, Any] | list[Any]) -> None:
        """One message as one line."""
        await self.send_line(json.dumps(message).encode())

    async def send_line(self, line: bytes) -> None:
        """Raw bytes, then a newline."""
        await self._stdin.send_all(line + b"\n")

    async def next(self) -> dict[str, Any]:
        """The next message the gateway wrote (bounded by WAIT)."""
        with trio.fail_after(WAIT):
            while not self._ready:
                chunk = await self._stdout.receive_some(65536)
                assert chunk, "stdout closed"
                self._ready.extend(self._framer.feed(bytes(chunk)))
        message: dict[str, Any] = json.loads(self._ready.pop(0))
        return message

    async def until_id(self, msg_id: object) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The answer to ``msg_id`` and every message written before it."""
        before: list[dict[str, Any]] = []
        while True:
            message = await self.next()
            if message.get("id") == msg_id and "method" not in message:
                return message, before
            before.append(message)

    async def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send a request; its answer (other messages before it are skipped)."""
        await self.send(message)
        answer, _ = await self.until_id(message["id"])
        return answer

    async def close(self) -> None:
        """stdin EOF: the host is gone."""
        await self._stdin.aclose()


async def serve(
    nursery: trio.Nursery,
    running: Running,
    startup: Callable[[], Awaitable[None]] | None = None,
) -> Host:
    """A StdioServer for ``running``'s gateway on in-memory pipes; the host's ends."""
    host_stdin, server_stdin = trio.testing.memory_stream_one_way_pair()
    server_stdout, host_stdout = trio.testing.memory_stream_one_way_pair()
    gateway = running.gateway
    server = StdioServer(
        gateway.router, gateway.clients, server_stdin, server_stdout, startup=startup
    )
    nursery.start_soon(server.run)
    return Host(host_stdin, host_stdout)


def error(answer: dict[str, Any]) -> dict[str, Any]:
    """The error object of an answer that must be one."""
    assert "error" in answer, answer
    result: dict[str, Any] = answer["error"]
    return result


@pytest.fixture(name="running")
async def _running(nursery: trio.Nursery) -> Running:
    return await start_gateway(nursery, gateway_config([HEADERS]))


@pytest.fixture(name="host")
async def _host(nursery: trio.Nursery, running: Running) -> Host:
    return await serve(nursery, running)


# -- the requests ----------------------------------------------------------------


async def test_discover_then_lists_carry_result_type_and_hints_and_drop_bad_annotations(
    host: Host,
) -> None:
    """S/server/discover.mdx and caching.mdx, as on HTTP; tools with an invalid
    x-mcp-header are left out on stdio too (docs/eras.md, stdio)."""
    discover = (await host.ask(modern(1, "server/discover")))["result"]
    assert discover["supportedVersions"][0] == MODERN
    assert LEGACY in discover["supportedVersions"]
    assert discover["resultType"] == "complete"
    assert discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-gateway"
    tools = (await host.ask(modern(2, "tools/list")))["result"]
    names = {tool["name"] for tool in tools["tools"]}
    assert "headers__lookup" in names
    assert "headers__broken" not in names
    assert (tools["resultType"], tools["ttlMs"], tools["cacheScope"]) == ("complete", 0, "private")
    called = await host.ask(
        modern(3, "tools/call", {"name": "headers__lookup", "arguments": {"region": "eu"}})
    )
    assert called["result"]["resultType"] == "complete"
    assert called["result"]["content"][0]["text"].startswith("eu:")


async def test_progress_and_asked_for_log_messages_reach_stdout_before_the_answer(
    host: Host,
) -> None:
    """Progress under the host's token; log messages only at or above ``logLevel``."""
    await host.send(
        modern(
            4,
            "tools/call",
            {"name": "headers__progress", "arguments": {"steps": 3}},
            progressToken="tok",
        )
    )
    answer, before = await host.until_id(4)
    assert answer["result"]["content"][0]["text"] == "done"
    progress = [m["params"] for m in before if m.get("method") == "notifications/progress"]
    assert [p["progress"] for p in progress] == [1, 2, 3]
    assert {p["progressToken"] for p in progress} == {"tok"}

    chatty = {"name": "headers__chatty", "arguments": {}}
    await host.send(modern(5, "tools/call", chatty))
    _, before = await host.until_id(5)
    assert [m for m in before if m.get("method") == "notifications/message"] == []
    await host.send(modern(6, "tools/call", chatty, **{"io.modelcontextprotocol/logLevel": "info"}))
    _, before = await host.until_id(6)
    logged = [m["params"]["level"] for m in before if m.get("method") == "notifications/message"]
    assert logged == ["info", "warning"]


async def test_a_legacy_backends_elicitation_becomes_input_required_on_stdio(
    host: Host,
) -> None:
    """The MRTR bridge (router/held) works with stdio's writer: input_required, then
    the retry with a new id gets the backend's own result."""
    caps = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
    ask = {"name": "headers__ask", "arguments": {}}
    first = (await host.ask(modern(7, "tools/call", ask, **caps)))["result"]
    assert first["resultType"] == "input_required"
    ((key, entry),) = first["inputRequests"].items()
    assert entry["method"] == "elicitation/create"
    retry = {**ask, "inputResponses": {key: {"action": "decline"}}}
    retry["requestState"] = first["requestState"]
    second = (await host.ask(modern(8, "tools/call", retry, **caps)))["result"]
    assert second["resultType"] == "complete"
    assert second["content"][0]["text"] == "decline"


async def test_a_bad_request_state_and_a_missing_capability_are_their_errors(
    host: Host,
) -> None:
    """A tampered requestState is -32602; a backend asking for what the request did not
    declare fails the call with -32021 naming it (docs/eras.md, MRTR)."""
    ask = {"name": "headers__ask", "arguments": {}}
    lacking = error(await host.ask(modern(1, "tools/call", ask)))
    assert lacking["code"] == -32021
    assert "elicitation" in lacking["data"]["requiredCapabilities"]
    caps = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
    first = (await host.ask(modern(2, "tools/call", ask, **caps)))["result"]
    (key,) = first["inputRequests"]
    state = first["requestState"]
    bad = ("A" if state[0] != "A" else "B") + state[1:]
    retry = {**ask, "inputResponses": {key: {"action": "accept"}}, "requestState": bad}
    refused = error(await host.ask(modern(3, "tools/call", retry, **caps)))
    assert (refused["code"], refused["message"]) == (-32602, "Invalid or expired requestState")
    retry["requestState"] = state
    done = (await host.ask(modern(4, "tools/call", retry, **caps)))["result"]
    assert done["content"][0]["text"] == "accept"


async def test_many_requests_in_flight_are_each_answered_once_under_their_own_id(
    host: Host,
) -> None:
    """Requests run concurrently; every answer is a whole line naming its own request."""
    count = 40
    for n in range(count):
        lookup = {"name": "headers__lookup", "arguments": {"region": f"r{n}", "count": n}}
        await host.send(modern(100 + n, "tools/call", lookup))
    answers: dict[object, str] = {}
    while len(answers) < count:
        message = await host.next()
        assert message["id"] not in answers
        answers[message["id"]] = message["result"]["content"][0]["text"]
    assert answers == {100 + n: f"r{n}:{n}:False" for n in range(count)}


# -- checks before routing ---------------------------------------------------------


async def test_envelope_failures_are_json_rpc_errors_and_decide_no_era(host: Host) -> None:
    """-32602 for a broken envelope, -32022 naming both eras for an unknown version;
    neither locks the connection, so the host's fallback to initialize works."""
    incomplete = request(
        1, "tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}
    )
    assert error(await host.ask(incomplete))["code"] == -32602
    bad_level = modern(2, "tools/list", **{"io.modelcontextprotocol/logLevel": "loud"})
    assert error(await host.ask(bad_level))["code"] == -32602
    unknown = error(
        await host.ask(
            modern(
                3, "server/discover", **{"io.modelcontextprotocol/protocolVersion": "2099-01-01"}
            )
        )
    )
    assert unknown["code"] == -32022
    assert unknown["data"]["requested"] == "2099-01-01"
    assert unknown["data"]["supported"][0] == MODERN and LEGACY in unknown["data"]["supported"]
    init = await host.ask(initialize_request(LEGACY, msg_id=4))
    assert init["result"]["protocolVersion"] == LEGACY


async def test_methods_the_gateway_does_not_serve_are_method_not_found(host: Host) -> None:
    """Removed methods (-32601 saying so) and unknown ones; the connection goes on."""
    ping = error(await host.ask(modern(1, "ping")))
    assert ping["code"] == -32601
    assert "removed in 2026-07-28" in ping["message"]
    assert error(await host.ask(modern(2, "resources/subscribe", {"uri": "x"})))["code"] == -32601
    assert error(await host.ask(modern(3, "no/such")))["code"] == -32601
    bad_filter = modern(4, "subscriptions/listen", {"notifications": {"toolsListChanged": "yes"}})
    assert error(await host.ask(bad_filter))["code"] == -32602
    assert "result" in await host.ask(modern(5, "server/discover"))


async def test_a_line_that_is_not_json_is_a_parse_error_and_the_session_goes_on(
    host: Host,
) -> None:
    """-32700 with a null id, before the era is decided and after."""
    await host.send_line(b"{not json")
    assert error(await host.next())["code"] == -32700
    assert "result" in await host.ask(modern(1, "server/discover"))
    await host.send_line(b"\xff\xfe")
    garbage = await host.next()
    assert (error(garbage)["code"], garbage["id"]) == (-32700, None)
    assert "result" in await host.ask(modern(2, "tools/list"))


async def test_a_duplicate_id_in_flight_is_refused(host: Host) -> None:
    """Two requests with one id could not be told apart, nor cancelled one by one."""
    sleep = modern(9, "tools/call", {"name": "headers__sleep", "arguments": {"seconds": 30}})
    await host.send(sleep)
    await host.send(modern(9, "tools/list"))
    refused = await host.next()
    assert (refused["id"], error(refused)["code"]) == (9, -32600)
    await host.send(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}
    )
    assert "result" in await host.ask(modern(9, "server/discover"))  # the id is free again


# -- mixing eras on one connection --------------------------------------------------


async def test_a_modern_connection_refuses_initialize_and_requests_without_envelope(
    host: Host,
) -> None:
    """As the SDK's dual-era stdio server: the first served request locks the era."""
    assert "result" in await host.ask(modern(1, "server/discover"))
    refused = error(await host.ask(initialize_request(LEGACY, msg_id=2)))
    assert refused["code"] == -32022
    assert refused["data"] == {"supported": [MODERN], "requested": LEGACY}
    odd = initialize_request(LEGACY, msg_id=6)
    odd["params"]["protocolVersion"] = 5
    assert error(await host.ask(odd))["data"] == {"supported": [MODERN]}  # nothing to echo
    assert error(await host.ask(request(3, "tools/list")))["code"] == -32602
    await host.send([modern(4, "tools/list")])
    assert error(await host.next())["code"] == -32600  # 2026-07-28 has no batches
    assert "result" in await host.ask(modern(5, "tools/list"))


async def test_a_legacy_connection_refuses_enveloped_requests_and_keeps_working(
    host: Host,
) -> None:
    """initialize opens a legacy session exactly as before; the envelope is then -32600."""
    init = await host.ask(initialize_request(LEGACY, msg_id=1))
    assert init["result"]["serverInfo"]["name"] == "mcp-gateway"
    await host.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    refused = error(await host.ask(modern(2, "tools/list")))
    assert refused["code"] == -32600
    assert "handshake era" in refused["message"]
    tools = (await host.ask(request(3, "tools/list")))["result"]
    assert "headers__broken" in {t["name"] for t in tools["tools"]}  # legacy: no x-mcp-header rule
    assert "resultType" not in tools
    assert "result" in await host.ask(request(4, "ping"))


async def test_a_request_without_envelope_before_initialize_is_still_refused(host: Host) -> None:
    """Neither era yet: the legacy "send initialize first", and nothing is locked."""
    assert error(await host.ask(request(1, "tools/list")))["code"] == -32600
    assert "result" in await host.ask(modern(2, "server/discover"))


async def test_initialize_with_an_envelope_stamped_on_it_is_still_the_handshake(
    host: Host,
) -> None:
    """The handshake does not exist at 2026 versions (the SDK's rule): legacy session."""
    init = initialize_request(LEGACY, msg_id=1)
    init["params"]["_meta"] = {VERSION_KEY: MODERN}
    assert (await host.ask(init))["result"]["protocolVersion"] == LEGACY
    assert error(await host.ask(modern(2, "server/discover")))["code"] == -32600


async def test_a_modern_connection_ignores_other_notifications_and_stray_responses(
    host: Host,
) -> None:
    """A modern host owes the gateway no notifications but cancels, and no responses."""
    assert "result" in await host.ask(modern(1, "server/discover"))
    await host.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    await host.send({"jsonrpc": "2.0", "id": 77, "result": {}})
    await host.send(cancel(12345))  # names nothing in flight
    await host.send(modern(2, "tools/list"))
    answer = await host.next()  # nothing was written for the three messages above
    assert answer["id"] == 2 and "result" in answer


# -- the startup wait ----------------------------------------------------------------


async def test_the_first_modern_request_waits_for_the_backends_first_attempts(
    nursery: trio.Nursery, running: Running
) -> None:
    """STARTUP_WAIT applies to a modern host's first request too, once."""
    asked = trio.Event()
    release = trio.Event()
    calls = 0

    async def startup() -> None:
        nonlocal calls
        calls += 1
        asked.set()
        await release.wait()

    host_stdin, server_stdin = trio.testing.memory_stream_one_way_pair()
    stdout = trio.testing.MemorySendStream()  # read with get_data_nowait: nothing hides
    gateway = running.gateway
    server = StdioServer(gateway.router, gateway.clients, server_stdin, stdout, startup=startup)
    nursery.start_soon(server.run)
    host = Host(host_stdin, trio.testing.MemoryReceiveStream())
    await host.send(modern(1, "tools/list"))
    await host.send(modern(2, "server/discover"))
    with trio.fail_after(WAIT):
        await asked.wait()
    await trio.testing.wait_all_tasks_blocked()
    with pytest.raises(trio.WouldBlock):  # nothing written while the wait runs
        stdout.get_data_nowait()
    release.set()
    written = b""
    with trio.fail_after(WAIT):
        while written.count(b"\n") < 2:
            written += await stdout.get_data()
    answers = [json.loads(line) for line in written.splitlines()]
    assert sorted(a["id"] for a in answers if "result" in a) == [1, 2]
    assert calls == 1


# -- cancellation --------------------------------------------------------------------


async def test_notifications_cancelled_cancels_the_call_and_the_backends_own(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """stdio.mdx: the host cancels with notifications/cancelled; the backend gets its
    own notifications/cancelled for its id, and the host gets no answer for it."""
    log = tmp_path / "headers.log"
    backend = stdio_backend("headers", recorded(log, python_server_command("headers")))
    running = await start_gateway(nursery, gateway_config([backend]))
    host = await serve(nursery, running)
    recorder = Recorder(log)
    await host.send(
        modern(18, "tools/call", {"name": "headers__sleep", "arguments": {"seconds": 30}})
    )
    forwarded = await recorder.wait_sent(forwarded_call("sleep", seconds=30))
    await host.send(cancel(18))
    cancelled = await recorder.wait_cancelled(forwarded["id"])
    assert cancelled["params"]["requestId"] == forwarded["id"]
    await host.send(modern(19, "tools/list"))
    answer, before = await host.until_id(19)
    assert "result" in answer
    assert [m for m in before if m.get("id") == 18] == []  # no answer for the cancelled call


# -- subscriptions/listen ---------------------------------------------------------


def listen(msg_id: object, notifications: dict[str, Any]) -> dict[str, Any]:
    """A modern ``subscriptions/listen`` request."""
    message = modern(0, "subscriptions/listen", {"notifications": notifications})
    message["id"] = msg_id
    return message


async def test_listen_acks_first_tags_each_notification_and_ends_on_cancel(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """subscriptions.mdx on stdio: the ack first, then what was asked for, tagged with
    the listen id and interleaved with other answers; notifications/cancelled for the
    listen id ends it: the backend is unsubscribed and nothing more is sent for it."""
    log = tmp_path / "watched.log"
    backend = stdio_backend("watched", recorded(log, python_server_command("watched")))
    running = await start_gateway(nursery, gateway_config([backend]))
    host = await serve(nursery, running)
    listed = (await host.ask(modern(1, "resources/list")))["result"]["resources"]
    a, b = sorted(r["uri"] for r in listed)
    await host.send(listen("L1", {"toolsListChanged": True, "resourceSubscriptions": [a]}))
    ack = await host.next()
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"] == {
        "_meta": {SUB_ID: "L1"},
        "notifications": {"toolsListChanged": True, "resourceSubscriptions": [a]},
    }
    assert await until_sent(log, "resources/subscribe", 1) == ["watch://a"]

    grow = modern(2, "tools/call", {"name": "watched__grow", "arguments": {}})
    await host.send(grow)
    seen = [await host.next(), await host.next()]  # the call's answer and the list_changed
    changed = next(m for m in seen if m.get("method") == "notifications/tools/list_changed")
    assert changed["params"]["_meta"] == {SUB_ID: "L1"}
    assert any(m.get("id") == 2 and "result" in m for m in seen)

    for msg_id, uri in ((3, "watch://b"), (4, "watch://a")):  # b is not subscribed
        touch = {"name": "watched__touch", "arguments": {"uri": uri}}
        await host.send(modern(msg_id, "tools/call", touch))
    updates: list[dict[str, Any]] = []
    answered: set[object] = set()
    while answered != {3, 4} or not updates:
        message = await host.next()
        if message.get("method") == "notifications/resources/updated":
            updates.append(message)
        else:
            answered.add(message.get("id"))
    assert [u["params"] for u in updates] == [{"uri": a, "_meta": {SUB_ID: "L1"}}]
    assert b not in json.dumps(updates)

    await host.send(cancel("L1"))
    assert await until_sent(log, "resources/unsubscribe", 1) == ["watch://a"]
    with trio.fail_after(WAIT):
        while len(running.gateway.clients.listeners):  # noqa: ASYNC110 - the server's side
            await trio.sleep(0.01)

    # A second stream hears the next change; the cancelled one does not.
    await host.send(listen("L2", {"toolsListChanged": True}))
    assert (await host.next())["params"]["_meta"] == {SUB_ID: "L2"}
    await host.send(modern(5, "tools/call", {"name": "watched__grow", "arguments": {}}))
    tagged: list[object] = []
    while not tagged:
        message = await host.next()
        assert message.get("id") != "L1", message  # no final result after the host's cancel
        meta = message.get("params", {}).get("_meta", {})
        if SUB_ID in meta:
            tagged.append(meta[SUB_ID])
    assert tagged == ["L2"]


async def test_stdin_eof_ends_listen_streams_and_calls(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """The host going away (stdin EOF) leaves no listener or subscription behind."""
    log = tmp_path / "watched.log"
    backend = stdio_backend("watched", recorded(log, python_server_command("watched")))
    running = await start_gateway(nursery, gateway_config([backend]))
    host = await serve(nursery, running)
    listed = (await host.ask(modern(1, "resources/list")))["result"]["resources"]
    a = sorted(r["uri"] for r in listed)[0]
    await host.send(listen(7, {"resourceSubscriptions": [a]}))
    assert (await host.next())["method"] == "notifications/subscriptions/acknowledged"
    assert len(running.gateway.clients.listeners) == 1
    with capture_logs() as logs:
        await host.close()
        assert await until_sent(log, "resources/unsubscribe", 1) == ["watch://a"]
    assert len(running.gateway.clients.listeners) == 0
    closed = [e for e in logs if e["event"] == "client.modern.closed"]
    assert [(e["reason"], e["in_flight"]) for e in closed] == [("stdin closed", 1)]


async def test_a_listen_the_gateway_ends_gets_its_final_result(
    nursery: trio.Nursery, running: Running, host: Host
) -> None:
    """Listeners.close_all (gateway shutdown): the spec's final complete result."""
    await host.send(listen("L9", {"promptsListChanged": True}))
    assert (await host.next())["params"]["_meta"] == {SUB_ID: "L9"}
    running.gateway.clients.listeners.close_all()
    final = await host.next()
    assert final == {
        "jsonrpc": "2.0",
        "id": "L9",
        "result": {"resultType": "complete", "_meta": {SUB_ID: "L9"}},
    }
