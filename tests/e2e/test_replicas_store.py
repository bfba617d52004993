"""Three replicas on one redis-server behind HAProxy, with faults (issue 26).

Three ``python -m gateway serve`` processes share one ``redis-server`` (the
store) and exactly the secrets docs/operations.md lists for replicas
(``store``, ``pagination.cursor_secret``, ``mrtr.state_secret``); HAProxy
balances every request round robin with no stickiness. Several principals,
two clients each, call tools through it at once while the run shows:

- one rate-limit budget per credential across the replicas;
- a console login made on one replica honoured on the others;
- a token revoked by a reload of one replica refused by the others;
- a replica SIGKILLed with calls known to be in flight on it: HAProxy
  routes around it, no call of the others is lost, the killed calls fail
  cleanly (an HTTP error or a cut connection, never a wrong answer) and
  their retry succeeds;
- the redis-server stopped and started again mid-run: calls keep being
  served, rate limits fail open with their warning, a console cookie is
  503 while the store is down and honoured again once it is back (the
  time to recover is printed), and what the store held is still there.

The alpha test server (one stdio child per replica) answers ``add`` with a
checkable sum and holds ``sleep`` calls until a file appears, writing its
process id first: its parent is the replica holding the call.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Final

import httpx
import pytest
import trio

from tests.frontend.test_modern_http import modern, modern_headers, sse_messages
from tests.redis_server import RedisServer, free_port

ROOT: Final = Path(__file__).resolve().parents[2]
ALPHA: Final = str(ROOT / "tests" / "servers" / "alpha.py")
ADMIN: Final = "admin-token-of-the-replica-run-0123"
TOKENS: Final = {name: f"token-of-{name}-0123456789abcdef" for name in ("alice", "bob", "carol")}
TOKENS["dave"] = "token-of-dave-0123456789abcdef"  # spends the shared budget
TOKENS["erin"] = "token-of-erin-0123456789abcdef"  # revoked by a reload of one replica
BURST: Final = 60
# Every call a load worker makes (retries included) is under this cap, so
# two workers of one principal never reach BURST, whatever the machine's speed.
CALLS_PER_WORKER_AND_PHASE: Final = 12
LOAD_PRINCIPALS: Final = ("alice", "bob")
WORKERS_PER_PRINCIPAL: Final = 2
HELD_CALLS: Final = 4
READY_TIMEOUT: Final = 120.0
COOKIE: Final = "mcp_gateway_console"

pytestmark = pytest.mark.skipif(
    shutil.which("haproxy") is None or shutil.which("redis-server") is None,
    reason="haproxy or redis-server is missing: `make haproxy redis` (make test installs both)",
)


def _config(port: int, store_url: str, tokens: dict[str, str]) -> str:
    return json.dumps(
        {
            "server": {"host": "127.0.0.1", "port": port},
            "logging": {"level": "warning", "format": "json"},
            "auth": {"tokens": tokens},
            "limits": {"token_rate": 0.001, "token_burst": BURST},
            "admin": {"enabled": True, "tokens": [ADMIN]},
            # Exactly what docs/operations.md "What replicas must share" lists.
            "store": {"url": store_url, "key_prefix": "three:", "timeout": 0.5},
            "pagination": {"cursor_secret": "three-replicas-cursor-secret"},
            "mrtr": {"state_secret": "three-replicas-state-secret"},
            "shutdown": {"drain_timeout": 2},
            "backends": [
                {"name": "alpha", "transport": "stdio", "command": sys.executable,
                 "args": [ALPHA], "required": True},
            ],
        }
    )  # fmt: skip


def _haproxy_config(port: int, replicas: list[int]) -> str:
    servers = "\n".join(
        f"    server gw{index} 127.0.0.1:{replica} check inter 250ms fall 1 rise 2"
        for index, replica in enumerate(replicas)
    )
    return f"""global
    maxconn 500
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    retries 2
    option redispatch 1
    option http-server-close
frontend mcp
    bind 127.0.0.1:{port}
    default_backend gateways
backend gateways
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
{servers}
"""


class Replica:
    """One gateway process: its port, config file and log (stderr, JSON lines)."""

    def __init__(self, index: int, tmp: Path) -> None:
        self.index = index
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = tmp / f"gateway-{index}.json"
        self.log = tmp / f"gateway-{index}.log"
        self.process: trio.Process | None = None

    def events(self) -> list[str]:
        """The ``event`` of every JSON log line so far."""
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                found.append(json.loads(line).get("event", ""))
        return found


@contextlib.asynccontextmanager
async def _process(argv: list[str], log: Path | None = None) -> AsyncIterator[trio.Process]:
    with open(log or "/dev/null", "wb") as out:  # noqa: ASYNC230 - opened once, before the child
        process = await trio.lowlevel.open_process(
            argv, stdout=subprocess.DEVNULL, stderr=out, cwd=ROOT
        )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            with trio.CancelScope(deadline=trio.current_time() + 10, shield=True) as waited:
                await process.wait()
            if waited.cancelled_caught:
                process.kill()
                with trio.CancelScope(deadline=trio.current_time() + 10, shield=True):
                    await process.wait()


async def _wait_ready(http: httpx.AsyncClient, url: str, process: trio.Process) -> None:
    with trio.fail_after(READY_TIMEOUT):
        while True:
            with contextlib.suppress(httpx.TransportError):
                if (await http.get(url)).status_code < 500:
                    return
            assert process.returncode is None, f"{url}: the process exited"
            await trio.sleep(0.05)


def _answer(response: httpx.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        message: dict[str, Any] = sse_messages(response)[-1]
        return message
    body: dict[str, Any] = response.json()
    return body


async def _call(
    http: httpx.AsyncClient, url: str, principal: str, tool: str, arguments: dict[str, Any]
) -> httpx.Response:
    message = modern(1, "tools/call", {"name": f"alpha__{tool}", "arguments": arguments})
    headers = {**modern_headers(message), "authorization": f"Bearer {TOKENS[principal]}"}
    return await http.post(url + "/mcp", json=message, headers=headers)


async def _list(http: httpx.AsyncClient, url: str, principal: str) -> int:
    """A modern ``tools/list`` (no backend round trip): the status it gets."""
    message = modern(1, "tools/list")
    headers = {**modern_headers(message), "authorization": f"Bearer {TOKENS[principal]}"}
    return (await http.post(url + "/mcp", json=message, headers=headers)).status_code


def _text(response: httpx.Response) -> str:
    """The call's first text block; raises on anything but a successful answer."""
    response.raise_for_status()
    result = _answer(response)["result"]
    assert not result.get("isError"), result
    text: str = result["content"][0]["text"]
    return text


class Load:
    """Load workers calling ``add`` through HAProxy; each failure is retried once."""

    def __init__(self, front: str) -> None:
        self.front = front
        self.outcomes: Counter[str] = Counter()
        self.failures: list[str] = []
        self.stop = trio.Event()
        self._numbers = itertools.count(1)

    async def worker(self, principal: str) -> None:
        """Calls until told to stop (at most CALLS_PER_WORKER_AND_PHASE, retries included)."""
        async with httpx.AsyncClient(timeout=60) as http:
            calls = 0
            while not self.stop.is_set() and calls < CALLS_PER_WORKER_AND_PHASE:
                a, b = next(self._numbers), 1000
                calls += 1
                outcome = await self._one(http, principal, a, b)
                if outcome == "failed" and calls < CALLS_PER_WORKER_AND_PHASE:
                    calls += 1
                    await trio.sleep(0.3)  # past HAProxy's health check of the dead one
                    outcome = "retry-" + await self._one(http, principal, a, b)
                self.outcomes[outcome] += 1
                await trio.sleep(0.05)

    async def _one(self, http: httpx.AsyncClient, principal: str, a: int, b: int) -> str:
        try:
            response = await _call(http, self.front, principal, "add", {"a": a, "b": b})
            if response.status_code != 200:
                self.failures.append(f"HTTP {response.status_code}")
                return "failed"
            return "ok" if _text(response) == str(a + b) else "wrong"
        except (httpx.TransportError, httpx.DecodingError) as exc:
            self.failures.append(type(exc).__name__)
            return "failed"

    async def run(self, nursery: trio.Nursery) -> None:
        """Start every worker in ``nursery``."""
        for principal in LOAD_PRINCIPALS:
            for _ in range(WORKERS_PER_PRINCIPAL):
                nursery.start_soon(self.worker, principal)


async def _login(http: httpx.AsyncClient, replica: Replica) -> str:
    response = await http.post(replica.url + "/admin/login", data={"token": ADMIN})
    assert response.status_code == 303, response.text
    found = re.match(rf"{COOKIE}=([^;]+);", response.headers["set-cookie"])
    assert found is not None
    return found.group(1)


async def _console(http: httpx.AsyncClient, replica: Replica, cookie: str) -> int:
    response = await http.get(replica.url + "/admin/", headers={"cookie": f"{COOKIE}={cookie}"})
    return response.status_code


async def _store_state(http: httpx.AsyncClient, replica: Replica) -> str:
    state: str = (await http.get(replica.url + "/readyz")).json()["store"]["state"]
    return state


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def _parent(pid: int) -> int:
    """The parent process id of ``pid`` (Linux ``/proc``)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


async def _behind_haproxy(
    stack: contextlib.AsyncExitStack,
    http: httpx.AsyncClient,
    replicas: list[Replica],
    tmp_path: Path,
    config_of: Callable[[Replica], str],
) -> str:
    """Start every replica on its config, then HAProxy round robin before them; its URL.

    Every process is told to stop at once when ``stack`` closes (the stack
    then waits for each).
    """
    for replica in replicas:
        replica.config.write_text(config_of(replica))
        replica.process = await stack.enter_async_context(
            _process(
                [sys.executable, "-m", "gateway", "serve", "-c", str(replica.config)],
                replica.log,
            )
        )
    for replica in replicas:
        assert replica.process is not None
        await _wait_ready(http, replica.url + "/readyz", replica.process)
    front_port = free_port()
    (tmp_path / "haproxy.cfg").write_text(
        _haproxy_config(front_port, [replica.port for replica in replicas])
    )
    haproxy = shutil.which("haproxy")
    assert haproxy is not None
    balancer = await stack.enter_async_context(
        _process([haproxy, "-f", str(tmp_path / "haproxy.cfg"), "-db"])
    )
    front = f"http://127.0.0.1:{front_port}"

    def stop_all() -> None:
        for process in [balancer, *(replica.process for replica in replicas)]:
            if process is not None and process.returncode is None:
                process.send_signal(signal.SIGTERM)

    stack.callback(stop_all)
    await _wait_ready(http, front + "/readyz", balancer)
    return front


async def test_three_replicas_share_budget_login_and_reload_and_survive_a_kill_and_a_store_restart(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 26: one budget, one login, one reload; a SIGKILL and a store restart lose nothing."""
    redis = RedisServer(tmp_path)  # this run's own server: it is stopped mid-run
    redis.start()
    replicas = [Replica(index, tmp_path) for index in range(3)]
    figures: dict[str, Any] = {}
    async with contextlib.AsyncExitStack() as stack, httpx.AsyncClient(timeout=60) as http:
        stack.callback(redis.stop)
        front = await _behind_haproxy(
            stack, http, replicas, tmp_path, lambda r: _config(r.port, redis.url, TOKENS)
        )

        # 1. One budget: dave's burst is spent across all three replicas.
        statuses = [await _list(http, replicas[n % 3].url, "dave") for n in range(BURST + 6)]
        assert statuses == [200] * BURST + [429] * 6

        # 2. A console login made on replica 0 is honoured on 1 and 2, and through HAProxy.
        cookie = await _login(http, replicas[0])
        assert [await _console(http, replica, cookie) for replica in replicas] == [200] * 3

        # 3. erin's token, revoked by a reload of replica 0 alone, is refused by 1 and 2.
        for replica in replicas:
            assert _text(await _call(http, replica.url, "erin", "add", {"a": 1, "b": 2})) == "3"
            without_erin = {k: v for k, v in TOKENS.items() if k != "erin"}
            replica.config.write_text(_config(replica.port, redis.url, without_erin))
        assert replicas[0].process is not None
        replicas[0].process.send_signal(signal.SIGHUP)
        sent = trio.current_time()
        with trio.fail_after(30):  # the poll's bound (5 s) with room for a loaded machine
            for replica in replicas:
                while await _list(http, replica.url, "erin") != 401:  # noqa: ASYNC110 - another process
                    await trio.sleep(0.01)
        figures["revocation_seen_by_all_ms"] = round((trio.current_time() - sent) * 1000, 1)

        # 4. SIGKILL one replica with calls known to be in flight on it.
        release, started = tmp_path / "release", tmp_path / "started"
        held: dict[int, str] = {}

        async def hold(slot: int) -> None:
            async with httpx.AsyncClient(timeout=60) as own:
                try:
                    response = await _call(
                        own, front, "carol", "sleep",
                        {"seconds": 0, "release": str(release), "started": str(started)},
                    )  # fmt: skip
                    held[slot] = (
                        _text(response)
                        if response.status_code == 200
                        else (f"HTTP {response.status_code}")
                    )
                except (httpx.TransportError, httpx.DecodingError) as exc:
                    held[slot] = type(exc).__name__

        kill_load = Load(front)
        async with trio.open_nursery() as phase:
            await kill_load.run(phase)
            for slot in range(HELD_CALLS):
                phase.start_soon(hold, slot)
            with trio.fail_after(60):
                while len(pids := _lines(started)) < HELD_CALLS:  # noqa: ASYNC110 - a file
                    await trio.sleep(0.02)
            holders = Counter(_parent(int(pid)) for pid in pids)
            victim = next(r for r in replicas if r.process is not None and r.process.pid in holders)
            assert victim.process is not None
            victim.process.send_signal(signal.SIGKILL)
            await victim.process.wait()
            release.touch()
            await trio.sleep(1.0)  # the others keep calling after the kill
            kill_load.stop.set()
        survivors = [replica for replica in replicas if replica is not victim]
        on_victim = holders[victim.process.pid]
        outcomes = Counter(held.values())
        assert outcomes["slept"] == HELD_CALLS - on_victim, held
        assert all(
            value == "slept" or "HTTP 5" in value or "Error" in value for value in held.values()
        )
        # The killed calls' retry succeeds (through HAProxy: on a survivor).
        for _ in range(on_victim):
            assert _text(await _call(http, front, "carol", "sleep", {"seconds": 0})) == "slept"
        assert kill_load.outcomes["wrong"] == 0 and kill_load.outcomes["retry-wrong"] == 0
        # Only calls in flight on the killed replica failed: one per worker at most.
        workers = len(LOAD_PRINCIPALS) * WORKERS_PER_PRINCIPAL
        assert kill_load.outcomes["retry-ok"] == len(kill_load.failures) <= workers, (
            kill_load.outcomes, kill_load.failures,
        )  # fmt: skip
        assert kill_load.outcomes["ok"] > 0
        figures["kill"] = {"held_on_victim": on_victim, "load": dict(kill_load.outcomes)}

        # 5. Restart the redis-server mid-run.
        store_load = Load(front)
        async with trio.open_nursery() as phase:
            await store_load.run(phase)
            await trio.sleep(0.3)
            redis.stop()
            down_at = trio.current_time()
            served_before = store_load.outcomes["ok"]
            # Served while the store is down; a cookie cannot be checked: 503.
            with trio.fail_after(60):
                while store_load.outcomes["ok"] < served_before + 4:  # noqa: ASYNC110 - counts
                    await trio.sleep(0.02)
            assert [await _console(http, replica, cookie) for replica in survivors] == [503, 503]
            figures["store_down_s"] = round(trio.current_time() - down_at, 2)
            redis.start()
            back = trio.current_time()
            with trio.fail_after(60):
                for replica in survivors:
                    while await _console(http, replica, cookie) != 200:  # noqa: ASYNC110
                        await trio.sleep(0.01)
            figures["console_back_after_store_ms"] = round((trio.current_time() - back) * 1000, 1)
            store_load.stop.set()
        assert store_load.outcomes == Counter({"ok": sum(store_load.outcomes.values())}), (
            store_load.outcomes, store_load.failures,
        )  # fmt: skip
        # Fail open, said once per outage by every replica that limited alone.
        assert any("limits.store_fallback" in replica.events() for replica in survivors)
        # What the store held is still there: dave's spent budget, the login.
        with trio.fail_after(30):
            for replica in survivors:
                while (await _store_state(http, replica)) != "ok":  # noqa: ASYNC110 - another process
                    await trio.sleep(0.05)
        # A replica whose store failed asks it again 1 s after the failure.
        await trio.sleep(1.1)
        for replica in survivors:
            assert await _list(http, replica.url, "dave") == 429
        # Logout on one survivor ends the login on the other.
        page = await http.get(
            survivors[0].url + "/admin/config", headers={"cookie": f"{COOKIE}={cookie}"}
        )
        csrf = re.search(r'name="csrf" value="([A-Za-z0-9_.-]+)"', page.text)
        assert csrf is not None
        logout = await http.post(
            survivors[0].url + "/admin/logout", data={"csrf": csrf.group(1)},
            headers={"cookie": f"{COOKIE}={cookie}"},
        )  # fmt: skip
        assert logout.status_code == 303
        assert [await _console(http, replica, cookie) for replica in survivors] == [401, 401]
    print(f"\nthree replicas on one redis-server: {json.dumps(figures)}")
