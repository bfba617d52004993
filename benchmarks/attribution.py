"""What exact attribution of backends' questions costs per call (issue 25, E14).

    PYTHONPATH=$PWD .venv/bin/python -m benchmarks.attribution [--calls 40] [--repeat 3]

One gateway with auth on (one static token) in front of the official-SDK
stdio server ``tests/servers/session_state.py``, once with ``session:
shared`` and once with ``session: per_principal``, in the same process.
``--clients`` hosts of one principal (the official ``mcp`` client, in
process) call ``pid`` ``--calls`` times each, all hosts at once, so their
calls overlap; then one host alone (no overlap: the bookkeeping only).
Modes alternate, ``--repeat`` times. Per-principal sessions keep the calls
of one host per backend session at a time; overlapping hosts get extra
sessions of the principal, opened on first overlap and kept warm.

Prints the mean wall time per call over a warm round (after one round that
opens the sessions), the median over the repeats, the ratio per_principal /
shared, the backend sessions opened and the cold round's time. Then, once,
every host of the per-principal gateway is asked a question in each of
``--calls`` rounds with all hosts' questions outstanding together, and the
misrouted answers are counted (the E14 criterion: 0).

Hosts and gateway share one process and this machine's cores, so the
absolute figures include the client's own cost; the ratio is the figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from contextlib import AsyncExitStack
from typing import Any

import httpx
import trio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.context import RequestContext

from gateway.telemetry.logs import configure_logging
from tests.harness import gateway_config, sdk_backend, start_gateway

TOKEN = "bench-token-0123456789abcdef"


async def _host(
    stack: AsyncExitStack, url: str, label: str, answers: dict[str, Any]
) -> ClientSession:
    async def elicit(
        context: RequestContext[ClientSession, Any], params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        gate = answers["gate"]
        gate["arrived"] += 1
        if gate["arrived"] >= gate["parties"]:
            gate["all"].set()
        await gate["all"].wait()
        return types.ElicitResult(action="accept", content={"name": label})

    http = await stack.enter_async_context(
        httpx.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}, timeout=60)
    )
    read, write, _ = await stack.enter_async_context(streamable_http_client(url, http_client=http))
    session = await stack.enter_async_context(
        ClientSession(read, write, elicitation_callback=elicit)
    )
    await session.initialize()
    return session


async def _round(hosts: list[ClientSession], calls: int) -> float:
    """Every host calls ``pid`` ``calls`` times, all hosts at once; the wall time."""

    async def one(host: ClientSession) -> None:
        for _ in range(calls):
            result = await host.call_tool("state__pid", {})
            assert not result.isError

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for host in hosts:
            nursery.start_soon(one, host)
    return time.perf_counter() - started


async def _questions(hosts: list[ClientSession], rounds: int, answers: dict[str, Any]) -> int:
    """Rounds of every host asked at once; the answers that reached another host."""
    misrouted = 0
    for _ in range(rounds):
        answers["gate"] = {"arrived": 0, "parties": len(hosts), "all": trio.Event()}
        got: dict[int, str] = {}

        async def ask(n: int, host: ClientSession, got: dict[int, str] = got) -> None:
            result = await host.call_tool("state__ask", {"question": "who?"})
            got[n] = "".join(c.text for c in result.content if isinstance(c, types.TextContent))

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for n, host in enumerate(hosts):
                    nursery.start_soon(ask, n, host)
        misrouted += sum(1 for n, text in got.items() if text != f"host-{n}")
    return misrouted


async def _mode(session: str, clients: int, calls: int, *, ask: bool) -> dict[str, Any]:
    config = gateway_config(
        [sdk_backend("session_state", "state", session=session)],
        auth={"tokens": {"bench": TOKEN}},
    )
    answers: dict[str, Any] = {}
    async with trio.open_nursery() as nursery, AsyncExitStack() as stack:
        running = await start_gateway(nursery, config)
        hosts = [await _host(stack, running.url, f"host-{n}", answers) for n in range(clients)]
        cold = await _round(hosts, calls)
        warm = await _round(hosts, calls)
        backend = running.gateway.pool.backends["state"]
        figures: dict[str, Any] = {
            "mode": session,
            "cold_round_s": round(cold, 3),
            "warm_round_s": round(warm, 3),
            "per_call_ms": round(warm / (clients * calls) * 1e3, 3),
            "backend_sessions": backend.open_links,
        }
        if ask:
            figures["questions"] = clients * calls
            figures["misrouted"] = await _questions(hosts, calls, answers)
        await stack.aclose()
        nursery.cancel_scope.cancel()
    return figures


async def _main(clients: int, calls: int, repeat: int) -> None:
    runs: dict[str, list[dict[str, Any]]] = {}
    for attempt in range(repeat):
        for hosts in (1, clients):
            for mode in ("shared", "per_principal"):
                ask = mode != "shared" and hosts == clients and attempt == 0
                runs.setdefault(f"{mode}/{hosts}", []).append(
                    await _mode(mode, hosts, calls, ask=ask)
                )
    print(json.dumps(runs, indent=2))
    for hosts in (1, clients):
        shared = statistics.median(r["per_call_ms"] for r in runs[f"shared/{hosts}"])
        own = statistics.median(r["per_call_ms"] for r in runs[f"per_principal/{hosts}"])
        sessions = runs[f"per_principal/{hosts}"][0]["backend_sessions"]
        print(
            f"{hosts} host(s), per call (median of {repeat} warm rounds): shared {shared:.2f} ms, "
            f"per_principal {own:.2f} ms, ratio {own / shared:.2f}; {sessions} backend "
            "session(s) of the principal"
        )
    first = runs[f"per_principal/{clients}"][0]
    print(f"{first['misrouted']} of {first['questions']} questions misrouted")


def main() -> None:
    """Parse the arguments and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=5)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    configure_logging("error")  # the gateway's lines would cost more than the calls
    trio.run(_main, args.clients, args.calls, args.repeat)


if __name__ == "__main__":
    main()
