"""Robustness B1 and shutdown: stdio backends that die, and backends that will not die.

Real child processes (``tests/servers/misbehaving.py``) behind the real
gateway, in-process. Processes are inspected through ``/proc``: a pid is
"alive" when it exists and is not a zombie, and a process group is "empty"
when no process, zombie or not, still carries its id.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path
from typing import Final

import trio

from gateway.backends.state import BackendState
from tests.harness import gateway_config, start_gateway
from tests.robustness.support import (
    Host,
    Reply,
    alive,
    group_members,
    http_client,
    misbehaving,
    open_host,
    read_pid,
    wait_until,
)

INTERNAL_ERROR: Final = -32603
FAST_RESTART: Final = {"initial_delay": 0.1, "max_delay": 1}


def assert_unavailable(reply: Reply, backend: str) -> None:
    """The answer is -32603 with data.reason backend_unavailable naming ``backend``."""
    error = reply.error
    assert error is not None, reply.answer
    assert error["code"] == INTERNAL_ERROR, error
    assert error["data"] == {"reason": "backend_unavailable", "backend": backend}, error


async def test_a_backend_killed_mid_call_fails_its_calls_within_a_second_and_others_carry_on(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """B1: SIGKILL with five calls in flight: each fails with -32603 backend_unavailable
    within 1 s of the kill, the child is reaped (its process group is empty), the backend
    restarts once, and concurrent calls to another backend all succeed."""
    pid_file = tmp_path / "victim.pid"
    victim = misbehaving("victim", "--pid-file", str(pid_file), restart=FAST_RESTART)
    config = gateway_config([victim, misbehaving("other")])
    running = await start_gateway(nursery, config)
    backend = running.gateway.pool.backends["victim"]
    with trio.fail_after(5):
        pid = await read_pid(pid_file)
    failed: list[tuple[Reply, float]] = []
    others: list[Reply] = []
    done = trio.Event()

    async def doomed_call(host: Host) -> None:
        failed.append((await host.call("victim__hang"), trio.current_time()))

    async def other_calls(host: Host, worker: int) -> None:
        count = 0
        while not done.is_set():
            others.append(await host.call("other__echo", {"text": f"{worker}-{count}"}))
            count += 1

    async with open_host(running) as host, open_host(running) as bystander:
        with trio.fail_after(15):
            async with trio.open_nursery() as calls:
                for _ in range(5):
                    calls.start_soon(doomed_call, host)
                for worker in range(3):
                    calls.start_soon(other_calls, bystander, worker)
                with trio.fail_after(5):
                    # The bystanders are under way before the kill...
                    await wait_until(lambda: backend.in_flight == 5 and len(others) >= 5)
                killed_at = trio.current_time()
                os.kill(pid, signal.SIGKILL)
                with trio.fail_after(5):
                    await wait_until(lambda: len(failed) == 5)
                answered_by_then = len(others)
                with trio.fail_after(5):
                    # ...and still answered after it: counted, not given a guessed 0.2 s.
                    await wait_until(lambda: len(others) >= max(answered_by_then, 5) + 6)
                done.set()
        for reply, at in failed:
            assert_unavailable(reply, "victim")
            assert at - killed_at <= 1.0, at - killed_at
        assert len(others) > 10
        assert all(
            reply.error is None and not reply.answer["result"]["isError"] for reply in others
        )
        with trio.fail_after(10):
            await wait_until(lambda: group_members(pid) == [])
        with trio.fail_after(10):
            await wait_until(lambda: backend.restarts == 1 and backend.state is BackendState.UP)
        with trio.fail_after(5):
            assert await read_pid(pid_file) != pid
        assert (await host.call("victim__echo", {"text": "back"})).text == "back"
        metrics = (await host.client.get("/metrics")).text
    assert 'mcp_gateway_backend_restarts_total{backend="victim"} 1.0' in metrics


async def test_a_backend_that_exits_in_the_middle_of_a_call_fails_it_at_once(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """B1: a backend that exits (os._exit) on reading a tools/call fails that call with
    -32603 backend_unavailable within 1 s, is reaped, and comes back."""
    pid_file = tmp_path / "crashing.pid"
    entry = misbehaving("crashing", "--pid-file", str(pid_file), restart=FAST_RESTART)
    running = await start_gateway(nursery, gateway_config([entry]))
    backend = running.gateway.pool.backends["crashing"]
    with trio.fail_after(5):
        pid = await read_pid(pid_file)
    async with open_host(running) as host:
        started = trio.current_time()
        reply = await host.call("crashing__crash")
        assert trio.current_time() - started <= 1.0
        assert_unavailable(reply, "crashing")
        with trio.fail_after(10):
            await wait_until(lambda: group_members(pid) == [])
        with trio.fail_after(10):
            await wait_until(lambda: backend.state is BackendState.UP and backend.restarts == 1)
        assert (await host.call("crashing__echo", {"text": "again"})).text == "again"


async def test_a_backend_ignoring_sigterm_and_its_grandchild_do_not_outlive_the_gateway(
    tmp_path: Path,
) -> None:
    """B9 (no child left behind, `pgrep -g` empty): a backend that ignores stdin EOF and
    SIGTERM, and a grandchild it started that ignores SIGTERM too, are both gone within a
    bounded time once the gateway stops."""
    pid_file = tmp_path / "stubborn.pid"
    grandchild_file = tmp_path / "grandchild.pid"
    entry = misbehaving(
        "stubborn",
        "--ignore-sigterm",
        "--pid-file",
        str(pid_file),
        "--grandchild-pid-file",
        str(grandchild_file),
        stop_grace=0.3,
    )
    with trio.fail_after(10):
        async with trio.open_nursery() as gateway_nursery:
            await start_gateway(gateway_nursery, gateway_config([entry]))
            child = await read_pid(pid_file)
            grandchild = await read_pid(grandchild_file)
            assert alive(child)
            assert alive(grandchild)
            assert {child, grandchild} <= set(group_members(child))
            gateway_nursery.cancel_scope.cancel()
    with trio.fail_after(5):
        await wait_until(lambda: not alive(child) and not alive(grandchild))
    assert not [pid for pid in group_members(child) if alive(pid)]


async def test_every_metric_family_is_exposed_once_so_prometheus_can_scrape_it(
    nursery: trio.Nursery,
) -> None:
    """B1/B20: /metrics names each family in exactly one TYPE line; Prometheus rejects an
    exposition that repeats one ("second TYPE line for metric name"), losing every metric."""
    running = await start_gateway(nursery, gateway_config([misbehaving("plain")]))
    async with http_client(running) as client:
        text = (await client.get("/metrics")).text
    types = Counter(line.split()[2] for line in text.splitlines() if line.startswith("# TYPE "))
    repeated = {name: count for name, count in types.items() if count > 1}
    assert repeated == {}
