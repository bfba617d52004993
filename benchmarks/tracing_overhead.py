"""Issue 18 benchmark: what the tracing hooks cost on the routing path.

One host request's whole in-process path, N times in a row: the router
(``Router.handle_request``: method table, catalog lookup, params rewrite),
the backend's call path (``Backend.request``: gate, session, ids) and a
backend session over an in-memory channel to the fake MCP server of
tests/fakes, which answers ``tools/call`` at once. No sockets, no child
process: what is left is the gateway's own work per call, where a hook's
cost would show.

Three builds of that path:

- **no hooks**: the gateway package as of the commit before the hooks
  (``git archive`` into a temporary directory, run in a child process);
- **off**: this tree with ``tracing.enabled: false`` (the default);
- **on**: this tree with tracing on, every span sampled and handed to an
  exporter that drops it (the span work without an exporter's I/O, which the
  SDK's batch processor does on its own thread in production).

Rounds alternate between builds so that a busy machine slows all of them
alike; the figure per build is the median over rounds of µs per call.

Run: ``.venv/bin/python -m benchmarks.tracing_overhead [--calls N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parents[1]
PUBLIC_TOOL: Final = "fake__echo"
_CHILD: Final = (sys.executable, "-m", "benchmarks.tracing_overhead", "--child")


async def _per_call_seconds(calls: int, rounds: int, mode: str) -> list[float]:
    """Route ``calls`` tools/call requests ``rounds`` times; seconds per call, per round."""
    import msgspec
    import trio

    from gateway.backends.pool import open_pool
    from gateway.catalog.cursor import CursorCodec
    from gateway.catalog.naming import NamingRules
    from gateway.config import parse
    from gateway.protocol.jsonrpc import Request
    from gateway.router import Router
    from tests.fakes.fake_server import FakeConnector, FakeMcpServer
    from tests.router.fakes import FakeClient

    if mode == "on":
        from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

        from gateway.config import TracingConfig
        from gateway.telemetry import tracing

        class Drop(SpanExporter):
            def export(self, spans: Any) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        tracing.configure(TracingConfig(enabled=True), Drop())
    elif mode == "off":
        from gateway.telemetry import tracing

        assert tracing.active is None
    config = parse(
        json.dumps({"backends": [{"name": "fake", "transport": "stdio", "command": "unused"}]}),
        env={},
    )
    connector = FakeConnector({"fake": FakeMcpServer("fake")})
    samples: list[float] = []
    async with (
        open_pool(config.backends, NamingRules("__", 64), connector) as pool,
        trio.open_nursery() as nursery,
    ):
        await pool.settled()
        router = Router(pool, CursorCodec("bench", clock=trio.current_time), 0)
        await nursery.start(router.run)
        client = FakeClient("bench-client")
        router.client_opened(client)
        params = msgspec.Raw(msgspec.json.encode({"name": PUBLIC_TOOL, "arguments": {}}))
        reply = await router.handle_request(client, Request(0, "tools/call", params))
        assert b'"result"' in reply, reply
        for _ in range(rounds):
            started = time.perf_counter()
            for ident in range(calls):
                await router.handle_request(client, Request(ident, "tools/call", params))
            samples.append((time.perf_counter() - started) / calls)
        nursery.cancel_scope.cancel()
    return samples


def _child(calls: int, rounds: int, mode: str) -> None:
    import trio

    from gateway.telemetry.logs import configure_logging

    # As the daemon runs: info lines only (request.routed is debug), as JSON.
    with open(os.devnull, "w") as devnull:
        configure_logging("info", "json", devnull)
        print(json.dumps(trio.run(_per_call_seconds, calls, rounds, mode)))


def _baseline_commit() -> str:
    """The commit before the one that added gateway/telemetry/tracing.py."""
    added = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "--", "gateway/telemetry/tracing.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not added:
        raise SystemExit(
            "gateway/telemetry/tracing.py is not committed yet: no baseline to compare"
        )
    return added[-1] + "^"


def _run(mode: str, calls: int, rounds: int, gateway_dir: Path | None) -> list[float]:
    """One child process measuring one build (the package from ``gateway_dir`` if given)."""
    # The baseline's package first (and as the working directory, which
    # comes before the editable install); tests/ (the fakes) from this tree.
    path = REPO if gateway_dir is None else gateway_dir
    pythonpath = str(REPO) if gateway_dir is None else f"{gateway_dir}{os.pathsep}{REPO}"
    out = subprocess.run(
        [*_CHILD, mode, "--calls", str(calls), "--rounds", str(rounds)],
        cwd=path,
        env={**os.environ, "PYTHONPATH": pythonpath},
        capture_output=True,
        text=True,
        check=True,
    )
    samples: list[float] = json.loads(out.stdout.strip().splitlines()[-1])
    return samples


def main() -> None:
    """Measure the three builds, alternating, and print µs per call and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per child process")
    parser.add_argument("--repeats", type=int, default=4, help="child processes per build")
    parser.add_argument("--child", choices=("off", "on", "nohooks"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.calls, args.rounds, args.child)
        return
    baseline = _baseline_commit()
    results: dict[str, list[float]] = {"no hooks": [], "off": [], "on": []}
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "archive", baseline, "gateway"], cwd=REPO, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        for _ in range(args.repeats):
            results["no hooks"] += _run("nohooks", args.calls, args.rounds, Path(tmp))
            results["off"] += _run("off", args.calls, args.rounds, None)
            results["on"] += _run("on", args.calls, args.rounds, None)
    median = {build: statistics.median(samples) * 1e6 for build, samples in results.items()}
    best = {build: min(samples) * 1e6 for build, samples in results.items()}
    worst = {build: max(samples) * 1e6 for build, samples in results.items()}
    print(f"routing path, tools/call to an in-memory backend; baseline {baseline}")
    print(f"{args.repeats} processes x {args.rounds} rounds x {args.calls} calls per build\n")
    print(f"{'build':<10} {'median µs/call':>15} {'min':>8} {'max':>8}")
    for build, value in median.items():
        print(f"{build:<10} {value:>15.2f} {best[build]:>8.2f} {worst[build]:>8.2f}")
    print()
    for label, figures in (("median", median), ("min", best)):
        print(
            f"{label:<6}  off / no hooks = {figures['off'] / figures['no hooks']:.3f}   "
            f"on / off = {figures['on'] / figures['off']:.3f}"
        )
    print(f"\none hook's check with tracing off: {_check_ns():.1f} ns (timeit, best of 5)")


def _check_ns() -> float:
    """What one hook costs when off: reading ``tracing.active`` and comparing it to None."""
    import timeit

    from gateway.telemetry import tracing

    assert tracing.active is None
    number = 1_000_000
    timer = timeit.Timer("tracing.active is not None", globals={"tracing": tracing})
    return min(timer.repeat(5, number)) / number * 1e9


if __name__ == "__main__":
    main()
