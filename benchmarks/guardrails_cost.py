"""Issue 29 benchmark: what a guardrail chain adds to one tools/call, at 0, 1, 3 and 10 filters.

One host request's whole in-process path, N times in a row, as in
``benchmarks/tracing_overhead.py``: the router, the backend's call path and a
backend session over an in-memory channel to the fake MCP server of
tests/fakes, which answers ``tools/call`` at once with a text of
``--result-bytes`` bytes of prose (no secret in it: the common case, where
every filter looks and passes). The call's arguments are one short string.

Chains, each built from the config as the daemon builds it, top-level
filters cycling through the built-in types so each point has work:
``secrets`` (results), ``arguments`` (requests, one pattern), ``size``
(requests and results), ``markers`` (results), ``schema`` (requests):

- **0**: no ``filters:`` key at all (no chain exists);
- **1**: ``secrets``;
- **1 arguments**: ``arguments`` alone (the chain's own cost, apart from
  secret detection, the dearest filter);
- **3**: ``secrets``, ``arguments``, ``size``;
- **10**: the five types twice.

Rounds alternate between chains in one process, each round starting at the
next chain, so that a busy machine slows all of them alike; the figure per
chain is the median over rounds of µs per call, and its ratio to 0 filters.

Run: ``.venv/bin/python -m benchmarks.guardrails_cost [--calls N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any, Final

PUBLIC_TOOL: Final = "fake__echo"
_TYPES: Final[tuple[dict[str, Any], ...]] = (
    {"type": "secrets"},
    {"type": "arguments", "deny": ["(?i)drop\\s+table"]},
    {"type": "size", "max_bytes": 1_000_000},
    {"type": "markers"},
    {"type": "schema"},
)
#: (label, filters): the chains measured; "1 arguments" shows the chain's own
#: cost apart from secret detection, the dearest filter.
CHAINS: Final[tuple[tuple[str, tuple[dict[str, Any], ...]], ...]] = (
    ("0", ()),
    ("1", _TYPES[:1]),
    ("1 arguments", _TYPES[1:2]),
    ("3", _TYPES[:3]),
    ("10", _TYPES * 2),
)
_PROSE: Final = (
    "The quarterly report lists revenue by region, the open orders and the "
    "shipping dates agreed with each customer; nothing in it is a credential. "
)


async def _measure(calls: int, rounds: int, result_bytes: int) -> dict[str, list[float]]:
    """Seconds per call for each chain, one sample per round."""
    import msgspec
    import trio
    from prometheus_client import CollectorRegistry

    from gateway.catalog.cursor import CursorCodec
    from gateway.catalog.naming import NamingRules
    from gateway.config import parse
    from gateway.protocol.jsonrpc import Request
    from gateway.router import Router
    from gateway.runtime.app import guardrails_of
    from gateway.telemetry.metrics import Metrics
    from tests.fakes.fake_server import Answer, FakeConnector, FakeMcpServer
    from tests.router.fakes import FakeClient

    text = (_PROSE * (result_bytes // len(_PROSE) + 1))[:result_bytes]
    samples: dict[str, list[float]] = {label: [] for label, _ in CHAINS}
    params = msgspec.Raw(
        msgspec.json.encode({"name": PUBLIC_TOOL, "arguments": {"text": "hello, world"}})
    )
    async with trio.open_nursery() as nursery:
        routers = {}
        for label, filters in CHAINS:
            document: dict[str, Any] = {
                "backends": [{"name": "fake", "transport": "stdio", "command": "unused"}]
            }
            if filters:
                document["filters"] = list(filters)
            config = parse(json.dumps(document), env={})
            server = FakeMcpServer("fake", tools={"echo": Answer(text)})
            pool = await nursery.start(
                _run, config, NamingRules("__", 64), FakeConnector({"fake": server})
            )
            guard = guardrails_of(config, Metrics(CollectorRegistry()), None)
            assert (guard is None) == (not filters)
            router = Router(
                pool, CursorCodec("bench", clock=trio.current_time), 0, guardrails=guard
            )
            await nursery.start(router.run)
            client = FakeClient("bench-client")
            router.client_opened(client)
            reply = await router.handle_request(client, Request(0, "tools/call", params))
            assert b'"result"' in reply and b'isError":true' not in reply, reply
            routers[label] = (router, client)
        for round_ in range(rounds):
            # Each round starts at the next chain: none always runs right after
            # the dearest one's garbage.
            shift = round_ % len(CHAINS)
            for label, _filters in CHAINS[shift:] + CHAINS[:shift]:
                router, client = routers[label]
                started = time.perf_counter()
                for ident in range(calls):
                    await router.handle_request(client, Request(ident, "tools/call", params))
                samples[label].append((time.perf_counter() - started) / calls)
        nursery.cancel_scope.cancel()
    return samples


async def _run(config: Any, naming: Any, connector: Any, *, task_status: Any) -> None:
    """Keep one pool open for the run (its own task owns its context)."""
    import trio

    from gateway.backends.pool import open_pool

    async with open_pool(config.backends, naming, connector) as pool:
        await pool.settled()
        task_status.started(pool)
        await trio.sleep_forever()


def main() -> None:
    """Measure every chain, alternating, and print µs per call and the ratios to 0 filters."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per round and chain")
    parser.add_argument("--rounds", type=int, default=5, help="rounds")
    parser.add_argument("--result-bytes", type=int, default=2048, help="text in each result")
    args = parser.parse_args()

    import trio

    from gateway.telemetry.logs import configure_logging

    with open(os.devnull, "w") as devnull:
        configure_logging("info", "json", devnull)
        samples = trio.run(_measure, args.calls, args.rounds, args.result_bytes)
    median = {label: statistics.median(values) * 1e6 for label, values in samples.items()}
    print(
        f"tools/call to an in-memory backend, {args.result_bytes}-byte text result; "
        f"{args.rounds} rounds x {args.calls} calls per chain\n"
    )
    print(f"{'filters':>11} {'median µs/call':>15} {'min':>8} {'max':>8} {'ratio to 0':>11}")
    for label, values in samples.items():
        print(
            f"{label:>11} {median[label]:>15.2f} {min(values) * 1e6:>8.2f} "
            f"{max(values) * 1e6:>8.2f} {median[label] / median['0']:>11.3f}"
        )


if __name__ == "__main__":
    main()
