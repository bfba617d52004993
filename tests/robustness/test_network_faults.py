"""Robustness B12 and B18: an HTTP backend behind a black hole, and a backend swamped with calls.

B12 uses two kinds of black hole on loopback: a listening socket whose accept
queue is full (the kernel drops further SYNs, so a TCP connect hangs as
behind a firewall that drops packets), and a small TCP proxy in this file
that, on cue, swallows every byte in both directions (a middlebox that stops
forwarding mid-life). The backend behind the proxy is the fake HTTP server
of ``tests/transports/fake_http.py``.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, Final

import trio
import trio.testing

from gateway.backends.state import BackendState
from tests.harness import gateway_config, start_gateway, wait_for_states
from tests.robustness.support import Reply, misbehaving, open_host, wait_until
from tests.transports.fake_http import FakeHttpBackend, Recorded, json_reply, result_of, serve_fake

INTERNAL_ERROR: Final = -32603
REQUEST_TIMEOUT: Final = -32001

# The catalogue's bounds (±10 % of 0.5 s, within 100 ms). B12 runs on trio's
# MockClock (its sockets are in-process loopback), so its timings are exact
# and these bounds cannot be missed through scheduling noise.
LATE = 0.9
FAST = 0.25


# -- black holes -----------------------------------------------------------------------


@asynccontextmanager
async def syn_black_hole() -> AsyncIterator[int]:
    """A loopback port where every TCP connect hangs (accept queue full, SYNs dropped)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port: int = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):  # fills the queue
            yield port


class BlackHoleProxy:
    """A TCP proxy to ``target_port`` that swallows everything while ``swallowing`` is set."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.swallowing = False

    async def _pump(self, source: trio.SocketStream, sink: trio.SocketStream) -> None:
        try:
            while chunk := await source.receive_some(65536):
                if not self.swallowing:
                    await sink.send_all(chunk)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await sink.aclose()

    async def handle(self, client: trio.SocketStream) -> None:
        async with client:
            try:
                upstream = await trio.open_tcp_stream("127.0.0.1", self.target_port)
            except OSError:
                return
            async with upstream, trio.open_nursery() as nursery:
                nursery.start_soon(self._pump, client, upstream)
                nursery.start_soon(self._pump, upstream, client)


@asynccontextmanager
async def black_hole_proxy(target_port: int) -> AsyncIterator[tuple[BlackHoleProxy, int]]:
    """Run a ``BlackHoleProxy`` on a loopback port for the block."""
    proxy = BlackHoleProxy(target_port)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, proxy.handle, 0, host="127.0.0.1"))
        yield proxy, listeners[0].socket.getsockname()[1]
        nursery.cancel_scope.cancel()


def echo_backend() -> FakeHttpBackend:
    """A fake HTTP MCP backend with one tool, ``echo``."""

    async def tools_list(request: Recorded) -> Any:
        return json_reply(result_of(request, {"tools": [{"name": "echo", "inputSchema": {}}]}))

    async def tools_call(request: Recorded) -> Any:
        text = str(request.message["params"].get("arguments", {}).get("text", ""))
        return json_reply(result_of(request, {"content": [{"type": "text", "text": text}]}))

    fake = FakeHttpBackend()
    fake.methods["tools/list"] = tools_list
    fake.methods["tools/call"] = tools_call
    return fake


# -- B12 ---------------------------------------------------------------------------------


async def test_a_black_holed_connect_fails_at_the_connect_timeout(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """B12: an HTTP backend whose TCP connect is black-holed fails at timeouts.connect
    (0.5 s) ± 10 %, and is marked down rather than waited on."""
    async with syn_black_hole() as port:
        entry = {
            "name": "hole",
            "transport": "http",
            "url": f"http://127.0.0.1:{port}/mcp",
            "timeouts": {"connect": 0.5, "initialize": 5},
            "restart": {"initial_delay": 30, "max_delay": 60},
        }
        started = trio.current_time()
        running = await start_gateway(nursery, gateway_config([entry]), wait_up=[])
        await wait_for_states(running.gateway, {"hole": BackendState.DOWN})
        failed_after = trio.current_time() - started
    assert 0.45 <= failed_after <= LATE, failed_after


async def test_a_backend_black_holed_mid_life_is_ejected_after_five_failures_and_recovers(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """B12: when the path to an HTTP backend starts swallowing bytes, calls time out at
    timeouts.request (0.5 s) ± 10 %; after the 5th failure the backend is ejected and the
    6th call fails within 100 ms; once the path heals it is back within one interval."""
    async with (
        serve_fake(echo_backend()) as (_, url),
        black_hole_proxy(int(url.rsplit(":", 1)[1])) as (proxy, port),
    ):
        entry = {
            "name": "far",
            "transport": "http",
            "url": f"http://127.0.0.1:{port}/mcp",
            "session": "shared",
            "timeouts": {"connect": 0.5, "initialize": 1, "request": 0.5},
            "restart": {"initial_delay": 0.2, "max_delay": 0.4},
        }
        running = await start_gateway(nursery, gateway_config([entry]))
        async with open_host(running) as host:
            assert (await host.call("far__echo", {"text": "before"})).text == "before"
            proxy.swallowing = True
            timings: list[tuple[Reply, float]] = []
            for _ in range(6):
                started = trio.current_time()
                with trio.fail_after(5):
                    reply = await host.call("far__echo", {"text": "lost"})
                timings.append((reply, trio.current_time() - started))
            for reply, took in timings[:5]:
                assert reply.error is not None and reply.error["code"] == REQUEST_TIMEOUT, reply
                assert 0.45 <= took <= LATE, took
            ejected, took = timings[5]
            assert ejected.error is not None, ejected.answer
            assert ejected.error["code"] == INTERNAL_ERROR, ejected.error
            assert ejected.error["data"]["reason"] == "backend_unavailable", ejected.error
            assert took <= FAST, took
            proxy.swallowing = False
            backend = running.gateway.pool.backends["far"]
            with trio.fail_after(10):
                await wait_until(lambda: backend.state is BackendState.UP)
            assert (await host.call("far__echo", {"text": "healed"})).text == "healed"


# -- B18 ---------------------------------------------------------------------------------


async def test_ten_times_the_in_flight_limit_queues_up_to_max_pending_then_fails_fast(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """B18: with max_in_flight 2 and max_pending 3, 20 concurrent slow calls: the backend
    never sees more than 2 at once nor more than 5 in all, the 15 others are refused within
    50 ms with -32603, and another backend's calls all succeed meanwhile."""
    log = tmp_path / "received"
    release = tmp_path / "release"
    busy = misbehaving("busy", "--received-log", str(log), max_in_flight=2, max_pending=3)
    running = await start_gateway(nursery, gateway_config([busy, misbehaving("calm")]))
    outcomes: list[tuple[Reply, float]] = []
    calm: list[Reply] = []

    def refusals() -> int:
        return sum(reply.error is not None for reply, _ in outcomes)

    async with open_host(running) as host, open_host(running) as other:

        async def slow_call() -> None:
            started = trio.current_time()
            # Held in the backend until the test creates ``release``: no call
            # can finish (and free a slot) before the whole burst is queued.
            reply = await host.call("busy__wait_for", {"path": str(release)})
            outcomes.append((reply, trio.current_time() - started))

        with trio.fail_after(10):
            async with trio.open_nursery() as calls:
                for _ in range(20):
                    calls.start_soon(slow_call)
                for i in range(10):
                    reply = await other.call("calm__echo", {"text": str(i)})
                    calm.append(reply)
                await wait_until(lambda: refusals() == 15)
                # "Refused within 50 ms", told without a wall clock: all 15
                # refusals came back while the five admitted calls were still
                # held, so none of them waited for a slot (real seconds on two
                # busy cores said 0.44 s once, and proved nothing either way).
                assert not any(reply.error is None for reply, _ in outcomes)
                release.touch()
    succeeded = [reply for reply, _ in outcomes if reply.error is None]
    refused = [(reply, took) for reply, took in outcomes if reply.error is not None]
    assert len(succeeded) == 5
    assert len(refused) == 15
    assert all(
        reply.error is not None and reply.error["code"] == INTERNAL_ERROR for reply, _ in refused
    )
    assert [reply.text for reply in calm] == [str(i) for i in range(10)]
    calls_seen = [line for line in log.read_bytes().splitlines() if b'"tools/call"' in line]
    assert len(calls_seen) == 5
