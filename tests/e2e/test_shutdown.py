"""Graceful shutdown (SIGTERM) and config reload (SIGHUP) of a real gateway process.

Real processes, real time, loopback only: ``python -m gateway serve`` with two
official-SDK backends (tests/servers alpha and beta) as its stdio children,
driven over raw HTTP with httpx so every status code is visible. The drain
itself is also checked in-process (``serve`` on loopback in front of an
in-memory backend that answers a call only when the test says so), so what
happens during the drain is a matter of handshakes, not of timing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import httpx
import pytest
import trio
import trio.testing
from prometheus_client import CollectorRegistry

from gateway.backends.state import BackendState
from gateway.errors import TransportError
from gateway.runtime.app import drain, serve
from tests.fakes import MemoryMessageChannel, memory_channel_pair
from tests.harness import gateway_config, initialize_message, unspawned_backend, wait_for_states
from tests.servers.paths import python_server_command
from tests.subprocess_servers import free_port

if TYPE_CHECKING:
    from gateway.config import BackendConfig

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
PROTOCOL_VERSION: Final = "2025-06-18"
POST_HEADERS: Final = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}
# The gateway imports, spawns two Python backends and initializes them.
READY_TIMEOUT: Final = 30.0
POLL_INTERVAL: Final = 0.1
DRAIN_TIMEOUT: Final = 5.0
# Robustness B9: the process exits with 0 within drain + 5 s of SIGTERM.
EXIT_SLACK: Final = 5.0
# Robustness B10 (reload): the new backend's tools are listed within this.
RELOAD_TIMEOUT: Final = 10.0
IN_FLIGHT_CALLS: Final = 5
SLEEP_SECONDS: Final = 1.0


def _backend(name: str) -> dict[str, Any]:
    argv = python_server_command(name)
    return {
        "name": name,
        "transport": "stdio",
        "command": argv[0],
        "args": argv[1:],
        "stop_grace": 0.5,
        # /readyz is 200 only once every required backend is up.
        "required": True,
        "health": {"ping_interval": 0},
    }


def _write_config(path: Path, port: int, *backends: str) -> None:
    document = {
        "server": {"host": "127.0.0.1", "port": port},
        "logging": {"level": "info", "format": "json"},
        "shutdown": {"drain_timeout": DRAIN_TIMEOUT},
        "backends": [_backend(name) for name in backends],
    }
    path.write_text(json.dumps(document))


@dataclass
class GatewayProcess:
    """A gateway child process and where to reach it."""

    process: trio.Process
    base_url: str
    log: Path

    @property
    def pid(self) -> int:
        """The gateway's pid."""
        return self.process.pid

    def children(self) -> set[int]:
        """Pids of the gateway's direct children right now (its stdio backends)."""
        pids: set[int] = set()
        for task in Path(f"/proc/{self.pid}/task").iterdir():
            pids.update(int(p) for p in (task / "children").read_text().split())
        return pids


@asynccontextmanager
async def run_gateway(config: Path, port: int, tmp_path: Path) -> AsyncIterator[GatewayProcess]:
    """Run ``python -m gateway serve -c config`` until the block ends; yield once ready."""
    log = tmp_path / "gateway.log"
    with log.open("wb") as sink:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "gateway", "serve", "-c", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=REPO_ROOT,
        )
        running = GatewayProcess(process, f"http://127.0.0.1:{port}", log)
        try:
            await _wait_ready(running)
            yield running
        finally:
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    process.send_signal(signal.SIGTERM)
                    with trio.move_on_after(DRAIN_TIMEOUT + EXIT_SLACK):
                        await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()


async def _wait_ready(gateway: GatewayProcess) -> None:
    async with httpx.AsyncClient(base_url=gateway.base_url) as client:
        with trio.fail_after(READY_TIMEOUT):
            while True:
                if gateway.process.returncode is not None:
                    raise RuntimeError(
                        f"gateway exited with {gateway.cli.process.returncode}: "
                        + gateway.log.read_text()[-2000:]
                    )
                try:
                    response = await client.get("/readyz")
                except httpx.TransportError:
                    response = None
                if response is not None and response.status_code == 200:
                    return
                await trio.sleep(POLL_INTERVAL)


def _body(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a POST answer, sent as JSON or as one SSE event."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        events: list[dict[str, Any]] = [
            json.loads(line[len("data:") :])
            for line in response.text.splitlines()
            if line.startswith("data:") and line[len("data:") :].strip()
        ]
        answers = [e for e in events if "result" in e or "error" in e]
        assert len(answers) == 1, events
        return answers[0]
    body: dict[str, Any] = response.json()
    return body


class McpHttp:
    """A minimal raw-HTTP MCP client session against the gateway."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client
        self._ids = iter(range(1, 1_000_000))
        self.session_id = ""

    def _headers(self) -> dict[str, str]:
        return {
            **POST_HEADERS,
            "Mcp-Session-Id": self.session_id,
            "MCP-Protocol-Version": PROTOCOL_VERSION,
        }

    async def initialize(self) -> None:
        """initialize, then notifications/initialized."""
        response = await self._client.post(
            "/mcp",
            headers=POST_HEADERS,
            json=initialize_message(
                "e2e-shutdown", "0", msg_id=next(self._ids), revision=PROTOCOL_VERSION
            ),
        )
        assert response.status_code == 200, response.text
        assert _body(response)["result"]["protocolVersion"] == PROTOCOL_VERSION
        self.session_id = response.headers["mcp-session-id"]
        done = await self._client.post(
            "/mcp",
            headers=self._headers(),
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        )
        assert done.status_code == 202, done.text

    async def post(self, method: str, params: dict[str, Any] | None = None) -> httpx.Response:
        """POST one request in this session; the raw response."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
        if params is not None:
            message["params"] = params
        return await self._client.post("/mcp", headers=self._headers(), json=message)

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """One request that must succeed; its result."""
        response = await self.post(method, params)
        assert response.status_code == 200, response.text
        body = _body(response)
        assert "result" in body, body
        result: dict[str, Any] = body["result"]
        return result

    async def tool_names(self) -> set[str]:
        """Every public tool name (one page is enough for two test backends)."""
        result = await self.call("tools/list")
        assert "nextCursor" not in result
        return {tool["name"] for tool in result["tools"]}


def _text(result: dict[str, Any]) -> str:
    assert result.get("isError") is not True, result
    return "".join(block["text"] for block in result["content"] if block["type"] == "text")


def _is_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_sigterm_drains_calls_in_flight_then_exits_cleanly_with_no_backend_left(
    tmp_path: Path,
) -> None:
    """Spec (robustness B9): stop accepting, finish in-flight calls, exit 0, reap every child."""
    port = free_port()
    config = tmp_path / "gateway.yaml"
    _write_config(config, port, "alpha", "beta")
    async with (
        run_gateway(config, port, tmp_path) as gateway,
        httpx.AsyncClient(base_url=gateway.base_url, timeout=30) as client,
    ):
        host = McpHttp(client)
        await host.initialize()
        children = gateway.children()
        assert len(children) == 2, children

        # A call's outcome: the response, or the transport error that cut it off.
        outcomes: list[httpx.Response | httpx.TransportError] = []
        started, release = tmp_path / "calls-started", tmp_path / "release"
        held = {"seconds": SLEEP_SECONDS, "started": str(started), "release": str(release)}
        arguments = {"name": "alpha__sleep", "arguments": held}

        async def sleep_call() -> None:
            try:
                outcomes.append(await host.post("tools/call", arguments))
            except httpx.TransportError as exc:
                outcomes.append(exc)

        def calls_in_alpha() -> int:
            return len(started.read_text().splitlines()) if started.exists() else 0

        async def refuses_new_work() -> httpx.Response | None:
            # Polling another process: its SIGTERM handling has no event here.
            while True:
                try:
                    response = await host.post("tools/list")
                except httpx.TransportError:
                    return None  # connection refused also counts as not accepting
                if response.status_code != 200:
                    return response
                await trio.sleep(POLL_INTERVAL)

        with trio.fail_after(DRAIN_TIMEOUT + EXIT_SLACK + READY_TIMEOUT):
            async with trio.open_nursery() as calls:
                for _ in range(IN_FLIGHT_CALLS):
                    calls.start_soon(sleep_call)
                # Every call has reached alpha, which holds it until released.
                while calls_in_alpha() < IN_FLIGHT_CALLS:  # noqa: ASYNC110 - a file alpha writes
                    await trio.sleep(POLL_INTERVAL)
                gateway.process.send_signal(signal.SIGTERM)
                term_sent = trio.current_time()
                with trio.fail_after(DRAIN_TIMEOUT):
                    refused = await refuses_new_work()
                assert not outcomes, "the calls were meant to be still in flight"
                release.touch()
            await gateway.process.wait()
            exited_after = trio.current_time() - term_sent

        assert refused is None or refused.status_code == 503, refused.text
        assert gateway.process.returncode == 0, gateway.log.read_text()[-3000:]
        assert exited_after <= DRAIN_TIMEOUT + EXIT_SLACK
        assert [pid for pid in sorted(children) if not _is_gone(pid)] == []
        # Every call that was in flight at SIGTERM finished well inside the
        # drain timeout, so every one must have its answer.
        assert len(outcomes) == IN_FLIGHT_CALLS
        failed = [repr(o) for o in outcomes if isinstance(o, httpx.TransportError)]
        assert failed == []
        for response in outcomes:
            assert isinstance(response, httpx.Response)
            assert response.status_code == 200, response.text
            assert _text(_body(response)["result"]) == "slept"


async def test_sighup_reloads_the_config_file_and_an_invalid_file_leaves_the_gateway_serving(
    tmp_path: Path,
) -> None:
    """Spec (robustness B10): SIGHUP adds a backend; a bad file is rejected, the old one kept."""
    port = free_port()
    config = tmp_path / "gateway.yaml"
    _write_config(config, port, "alpha")
    async with (
        run_gateway(config, port, tmp_path) as gateway,
        httpx.AsyncClient(base_url=gateway.base_url, timeout=30) as client,
    ):
        host = McpHttp(client)
        await host.initialize()
        names = await host.tool_names()
        assert "alpha__echo" in names
        assert not any(name.startswith("beta__") for name in names)
        alpha_pid = _text(await host.call("tools/call", {"name": "alpha__pid", "arguments": {}}))

        _write_config(config, port, "alpha", "beta")
        gateway.process.send_signal(signal.SIGHUP)
        with trio.fail_after(RELOAD_TIMEOUT):
            # Polling another process: no trio.Event crosses that boundary.
            while "beta__multiply" not in await host.tool_names():  # noqa: ASYNC110
                await trio.sleep(POLL_INTERVAL)
        # alpha's config did not change, so its process (and session) was kept.
        after = _text(await host.call("tools/call", {"name": "alpha__pid", "arguments": {}}))
        assert after == alpha_pid

        config.write_text("backends: [\n  {name: alpha, transport: stdio\n")
        gateway.process.send_signal(signal.SIGHUP)
        with trio.fail_after(RELOAD_TIMEOUT):
            while 'outcome="rejected"} 1.0' not in (await client.get("/metrics")).text:  # noqa: ASYNC110
                await trio.sleep(POLL_INTERVAL)
        assert gateway.process.returncode is None
        assert {"alpha__echo", "beta__echo", "beta__multiply"} <= await host.tool_names()
        echoed = await host.call("tools/call", {"name": "beta__echo", "arguments": {"text": "hi"}})
        assert _text(echoed) == "beta: hi"
        assert (await client.get("/readyz")).status_code == 200


class GatedBackend:
    """A ``ChannelOpener`` whose backend answers ``tools/call`` only once ``release`` is set.

    ``call_arrived`` is set when the call reaches it, so a test knows the call
    is in flight without guessing how long that takes.
    """

    def __init__(self) -> None:
        self.call_arrived = trio.Event()
        self.release = trio.Event()

    def __call__(self, cfg: BackendConfig, /) -> Any:
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[MemoryMessageChannel]:
        gateway_end, server_end = memory_channel_pair(0, 16)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._serve, server_end, nursery)
            try:
                yield gateway_end
            finally:
                gateway_end.close()
                nursery.cancel_scope.cancel()

    async def _serve(self, channel: MemoryMessageChannel, nursery: trio.Nursery) -> None:
        while True:
            try:
                message = json.loads(await channel.receive())
            except TransportError:
                return
            if "id" in message and "method" in message:
                nursery.start_soon(self._answer, channel, message)

    async def _answer(self, channel: MemoryMessageChannel, message: dict[str, Any]) -> None:
        method = message["method"]
        result: dict[str, Any] = {}
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "gated", "version": "0"},
            }
        elif method == "tools/list":
            result = {"tools": [{"name": "wait", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call":
            self.call_arrived.set()
            await self.release.wait()
            result = {"content": [{"type": "text", "text": "released"}]}
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        await channel.send(json.dumps(reply).encode())


@pytest.mark.usefixtures("engine")
async def test_once_the_drain_starts_new_connections_are_refused_and_the_call_in_flight_completes(
    nursery: trio.Nursery,
) -> None:
    """Spec (robustness B9): a draining gateway stops accepting at once (hypercorn's graceful
    shutdown runs), while the call it already has finishes with its answer."""
    backend = GatedBackend()
    entry = unspawned_backend("gated")
    config = gateway_config([entry], shutdown={"drain_timeout": READY_TIMEOUT})
    gateway, binds = await nursery.start(
        partial(serve, config, registry=CollectorRegistry(), connect=backend)
    )
    await wait_for_states(gateway, {"gated": BackendState.UP})
    answers: list[httpx.Response] = []
    left: list[int] = []
    async with httpx.AsyncClient(base_url=binds[0], trust_env=False, timeout=30) as client:
        host = McpHttp(client)
        await host.initialize()

        async def call() -> None:
            answers.append(await host.post("tools/call", {"name": "gated__wait", "arguments": {}}))

        async def stop() -> None:
            left.append(await drain(gateway))

        with trio.fail_after(READY_TIMEOUT):
            async with trio.open_nursery() as work:
                work.start_soon(call)
                await backend.call_arrived.wait()
                work.start_soon(stop)
                # Everything the drain set off has run: hypercorn has seen the trigger.
                await trio.testing.wait_all_tasks_blocked()
                async with httpx.AsyncClient(base_url=binds[0], trust_env=False) as late:
                    with pytest.raises(httpx.ConnectError):
                        await late.get("/healthz")
                assert answers == []
                backend.release.set()
    [answer] = answers
    assert answer.status_code == 200, answer.text
    assert _text(_body(answer)["result"]) == "released"
    assert left == [0]
