"""Robustness B13: a slow network path to one HTTP backend must not slow anyone else.

A throttling TCP proxy on loopback (in this script, with trio) sits between
the gateway and the official-SDK server ``tests/servers/http_alpha.py``: in
the server-to-gateway direction it delivers at most ``--rate`` bytes per
second in chunks of at most ``--chunk`` bytes and sleeps ``--delay`` seconds
before each chunk (defaults 1 KB/s and 2 s per chunk, the catalogue's
figures); gateway-to-server bytes pass unthrottled. The proxy passes
everything through until the gateway has the backend up and its tools
listed, then starts throttling: the network turns slow under a running
gateway.

For each transport (``sse``: legacy HTTP+SSE, ``http``: Streamable HTTP
answering with SSE streams) a gateway runs with that backend as ``slow``
(``timeouts.request`` 10 s by default) and a fast stdio backend ``fast``
(benchmarks/bench_server.py). Two phases follow:

* baseline: one client session calls ``fast__echo`` sequentially (paced,
  with a burst of a few concurrent calls now and then) and records latency;
* slow: the same measurement while several other sessions keep calling
  ``slow__echo`` and ``slow__sleep`` through the throttled path.

Printed per transport: fast-path p50/p99 in both phases and the delta, the
gateway's event-loop lag histogram (bucket counts gained in each phase, from
``/metrics``), the gateway process's CPU use, and the slow calls' outcomes
(answered, timed out with -32001, other) with timings: a timeout should fire
at ``timeouts.request`` +- 10 %. The last line is
``B13: p99 delta = X ms (target < 10 ms)`` with the worse transport's delta;
the exit status is 1 when it misses the target.

Timeouts in a row eject a backend (B12); that is switched off here
(``--eject-after 0``) so the slow path keeps being exercised for the whole
phase instead of being restarted through the throttle.

Run: ``.venv/bin/python -m benchmarks.slow_network`` (about 2 minutes); see
``--help`` for the durations and the proxy's figures.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import trio

from benchmarks.common import HEADERS, ROOT, bench_backend, free_port
from tests.subprocess_servers import RunningServer, wait_for_port

HTTP_ALPHA = ROOT / "tests" / "servers" / "http_alpha.py"
PROTOCOL = "2025-11-25"
TIMEOUT_CODE = -32001
LAG = "mcp_gateway_event_loop_lag_seconds"

# transport name -> (http_alpha argv, gateway transport tag, endpoint path, label)
TRANSPORTS: dict[str, tuple[list[str], str, str, str]] = {
    "sse": (["sse"], "sse", "/sse", "legacy HTTP+SSE"),
    "http": (["streamable-http", "sse"], "http", "/mcp", "Streamable HTTP, SSE responses"),
}


# -- the throttling proxy ------------------------------------------------------------


class ThrottlingProxy:
    """A TCP proxy to ``target_port`` that, once ``throttling`` is set, slows the
    upstream-to-client direction to ``rate`` bytes/s in ``chunk``-byte pieces, each
    sent ``delay`` seconds late. Client-to-upstream bytes are never held back."""

    def __init__(self, target_port: int, rate: float, chunk: int, delay: float) -> None:
        self.target_port = target_port
        self.rate = rate
        self.chunk = chunk
        self.delay = delay
        self.throttling = False
        self.connections = 0
        self.throttled_bytes = 0
        self.throttled_chunks = 0

    async def _up(self, source: trio.SocketStream, sink: trio.SocketStream) -> None:
        try:
            while data := await source.receive_some(65536):
                await sink.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await sink.aclose()

    async def _down(self, source: trio.SocketStream, sink: trio.SocketStream) -> None:
        try:
            while data := await source.receive_some(65536):
                view = memoryview(data)
                while view:
                    if not self.throttling:
                        await sink.send_all(view)
                        break
                    piece, view = view[: self.chunk], view[self.chunk :]
                    # The fixed per-chunk delay, plus what keeps the rate at most ``rate``.
                    await trio.sleep(self.delay + len(piece) / self.rate)
                    await sink.send_all(piece)
                    self.throttled_bytes += len(piece)
                    self.throttled_chunks += 1
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await sink.aclose()

    async def handle(self, client: trio.SocketStream) -> None:
        """Relay one accepted connection until either side closes."""
        self.connections += 1
        async with client:
            try:
                upstream = await trio.open_tcp_stream("127.0.0.1", self.target_port)
            except OSError:
                return
            async with upstream, trio.open_nursery() as nursery:
                nursery.start_soon(self._up, client, upstream)
                nursery.start_soon(self._down, upstream, client)


# -- processes -------------------------------------------------------------------------


def _start_http_alpha(argv_tail: list[str], log: Path) -> RunningServer:
    port = free_port()
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, str(HTTP_ALPHA), str(port), *argv_tail],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,  # the SDK logs every dropped connection; keep it out of the report
        )
    server = RunningServer(proc, port)
    try:
        wait_for_port(port, proc)
    except BaseException:
        server.stop()
        raise
    return server


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _parse_metrics(text: str) -> dict[str, float]:
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            try:
                values[key] = float(value)
            except ValueError:
                continue
    return values


# -- a lean MCP client -------------------------------------------------------------------


def _message(response: httpx.Response) -> dict[str, Any] | None:
    """The JSON-RPC answer in a JSON or SSE body (the last ``data:`` line)."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        found = None
        for line in response.text.splitlines():
            if line.startswith("data:"):
                found = json.loads(line[5:])
        return found
    text = response.text.strip()
    return json.loads(text) if text else None


class Session:
    """One MCP session on the gateway, over a shared httpx client."""

    def __init__(self, http: httpx.AsyncClient, url: str, headers: dict[str, str]) -> None:
        self.http = http
        self.url = url
        self.headers = headers
        self._id = 0

    @classmethod
    async def open(cls, http: httpx.AsyncClient, url: str, name: str) -> Session:
        """initialize + notifications/initialized."""
        body = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": name, "version": "1"},
            },
        }
        init = await http.post(url, headers=HEADERS, content=json.dumps(body))
        init.raise_for_status()
        headers = {
            **HEADERS,
            "mcp-session-id": init.headers["mcp-session-id"],
            "mcp-protocol-version": PROTOCOL,
        }
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await http.post(url, headers=headers, content=json.dumps(note))
        return cls(http, url, headers)

    async def request(
        self, method: str, params: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any] | None, float]:
        """One request; (the answer or None, seconds it took as seen from here)."""
        self._id += 1
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": self._id, "method": method}
        if params is not None:
            body["params"] = params
        content = json.dumps(body)
        started = time.perf_counter()
        response = await self.http.post(self.url, headers=self.headers, content=content)
        took = time.perf_counter() - started
        return _message(response), took

    async def call(
        self, tool: str, arguments: dict[str, Any]
    ) -> tuple[dict[str, Any] | None, float]:
        """tools/call."""
        return await self.request("tools/call", {"name": tool, "arguments": arguments})


# -- measurements -----------------------------------------------------------------------


@dataclass
class FastSamples:
    """Latencies of the fast path, in seconds."""

    sequential: list[float] = field(default_factory=list)
    concurrent: list[float] = field(default_factory=list)
    errors: int = 0


async def _measure_fast(session: Session, seconds: float, args: argparse.Namespace) -> FastSamples:
    samples = FastSamples()

    async def one(into: list[float]) -> None:
        message, took = await session.call("fast__echo", {"text": "ping"})
        if message is None or "result" not in message:
            samples.errors += 1
        else:
            into.append(took)

    stop = trio.current_time() + seconds
    count = 0
    while trio.current_time() < stop:
        count += 1
        if args.burst > 1 and count % args.burst_every == 0:
            async with trio.open_nursery() as nursery:
                for _ in range(args.burst):
                    nursery.start_soon(one, samples.concurrent)
        else:
            await one(samples.sequential)
        await trio.sleep(args.fast_interval)
    return samples


@dataclass
class SlowTally:
    """What the sessions calling through the throttled path saw."""

    # call, outcome, seconds, whether it was its session's first call (per_client:
    # that one opens the client's backend session before its clock starts).
    outcomes: list[tuple[str, str, float, bool]] = field(default_factory=list)
    other_messages: Counter[str] = field(default_factory=Counter)
    pending: int = 0


def _classify(message: dict[str, Any] | None) -> str:
    if message is None:
        return "other: no answer"
    if "result" in message:
        return "answered"
    error = message.get("error", {})
    if error.get("code") == TIMEOUT_CODE:
        return "timed out"
    reason = (error.get("data") or {}).get("reason", "")
    return f"other: {error.get('code')} {reason}".rstrip()


async def _slow_client(
    http: httpx.AsyncClient,
    url: str,
    index: int,
    stop: float,
    tally: SlowTally,
    schedule: list[tuple[str, str, dict[str, Any]]],
) -> None:
    await trio.sleep(index * 0.25)  # staggered, as real clients are
    session = await Session.open(http, url, f"slow-{index}")
    step = index  # each client starts at another point of the schedule
    first = True
    while trio.current_time() < stop:
        label, tool, arguments = schedule[step % len(schedule)]
        step += 1
        tally.pending += 1
        try:
            message, took = await session.call(f"slow__{tool}", arguments)
            kind = _classify(message)
            if kind.startswith("other") and message is not None:
                tally.other_messages[str(message.get("error", {}).get("message"))] += 1
        except httpx.HTTPError as exc:
            took, kind = math.nan, f"other: {type(exc).__name__}"
        tally.pending -= 1
        tally.outcomes.append((label, kind, took, first))
        first = False
        if kind.startswith("other"):
            await trio.sleep(0.5)  # a fast failure must not turn this into a busy loop


@dataclass
class Snapshot:
    """The gateway's figures at one instant."""

    at: float
    cpu: float
    metrics: dict[str, float]


async def _snapshot(http: httpx.AsyncClient, base: str, pid: int) -> Snapshot:
    text = (await http.get(base + "/metrics")).text
    return Snapshot(time.monotonic(), _cpu_seconds(pid), _parse_metrics(text))


def _lag_buckets(before: Snapshot, after: Snapshot) -> list[tuple[str, int]]:
    """Samples gained per lag bucket (non-cumulative) between two snapshots."""
    cumulative: list[tuple[float, float]] = []
    for key, value in after.metrics.items():
        if key.startswith(LAG + "_bucket{"):
            le = key.split('le="')[1].split('"')[0]
            cumulative.append((float(le), value - before.metrics.get(key, 0.0)))
    cumulative.sort()
    out: list[tuple[str, int]] = []
    below = 0.0
    for le, count in cumulative:
        label = "+Inf" if math.isinf(le) else f"<={le * 1000:g}ms"
        out.append((label, round(count - below)))
        below = count
    return out


def _delta(before: Snapshot, after: Snapshot, key: str) -> float:
    return after.metrics.get(key, 0.0) - before.metrics.get(key, 0.0)


def _pct(samples: list[float], p: float) -> float:
    """Nearest-rank percentile, in milliseconds (nan when there are no samples)."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)] * 1000


@dataclass
class Phase:
    """One phase's figures."""

    fast: FastSamples
    before: Snapshot
    after: Snapshot

    @property
    def cpu_seconds(self) -> float:
        """Gateway CPU over the phase, seconds."""
        return self.after.cpu - self.before.cpu

    @property
    def cpu_percent(self) -> float:
        """Gateway CPU over the phase, % of one core."""
        wall = self.after.at - self.before.at
        return 100 * (self.after.cpu - self.before.cpu) / wall if wall > 0 else math.nan


@dataclass
class Result:
    """One transport's run."""

    transport: str
    up_after: float
    baseline: Phase
    slow: Phase
    drained: Snapshot  # once the slow calls still in flight at the phase's end are done
    tally: SlowTally
    proxy: ThrottlingProxy
    unfinished: int

    @property
    def p99_delta_ms(self) -> float:
        """Fast sequential p99 under slow traffic minus baseline."""
        return _pct(self.slow.fast.sequential, 0.99) - _pct(self.baseline.fast.sequential, 0.99)


# -- one transport ----------------------------------------------------------------------


def _config(port: int, transport: str, proxy_url: str, args: argparse.Namespace) -> dict[str, Any]:
    _, tag, _, _ = TRANSPORTS[transport]
    slow = {
        "name": "slow",
        "transport": tag,
        "url": proxy_url,
        "session": args.session,
        "required": False,
        "timeouts": {"connect": 15, "initialize": 30, "request": args.request_timeout},
        "health": {"eject_after_timeouts": args.eject_after},
        "restart": {"initial_delay": 0.5, "max_delay": 5},
    }
    return {
        "server": {"host": "127.0.0.1", "port": port},
        "logging": {"level": "warning", "format": "json"},
        "shutdown": {"drain_timeout": 2},
        "backends": [bench_backend("fast"), slow],
    }


async def _wait_slow_up(http: httpx.AsyncClient, base: str, fast: Session) -> None:
    up = 'mcp_gateway_backend_state{backend="slow",state="up"}'
    while True:
        metrics = _parse_metrics((await http.get(base + "/metrics")).text)
        if metrics.get(up) == 1.0:
            message, _ = await fast.request("tools/list")
            tools = (message or {}).get("result", {}).get("tools", [])
            if any(tool.get("name") == "slow__echo" for tool in tools):
                return
        await trio.sleep(0.1)


async def _run_transport(transport: str, args: argparse.Namespace, tmp: Path) -> Result:
    argv_tail, _, path, _ = TRANSPORTS[transport]
    server = _start_http_alpha(argv_tail, tmp / f"http_alpha_{transport}.log")
    try:
        proxy = ThrottlingProxy(server.port, args.rate, args.chunk, args.delay)
        async with trio.open_nursery() as proxy_nursery:
            listeners = await proxy_nursery.start(
                partial(trio.serve_tcp, proxy.handle, 0, host="127.0.0.1")
            )
            proxy_port = listeners[0].socket.getsockname()[1]
            result = await _with_gateway(
                transport, proxy, f"http://127.0.0.1:{proxy_port}{path}", args, tmp
            )
            proxy_nursery.cancel_scope.cancel()
        return result
    finally:
        server.stop()


async def _with_gateway(
    transport: str, proxy: ThrottlingProxy, proxy_url: str, args: argparse.Namespace, tmp: Path
) -> Result:
    port = free_port()
    config_path = tmp / f"gateway_{transport}.yaml"
    config_path.write_text(json.dumps(_config(port, transport, proxy_url, args)))
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "-c", str(config_path)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    url = base + "/mcp"
    try:
        async with (
            httpx.AsyncClient(timeout=30) as fast_http,
            httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=200)) as slow_http,
        ):
            with trio.fail_after(60):
                while True:
                    try:
                        if (await fast_http.get(base + "/readyz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    if proc.poll() is not None:
                        raise RuntimeError(f"gateway exited with code {proc.returncode}")
                    await trio.sleep(0.05)
                fast = await Session.open(fast_http, url, "fast-path")
                await _wait_slow_up(fast_http, base, fast)
            up_after = time.monotonic() - started
            proxy.throttling = True
            for _ in range(200):  # warm-up, not measured
                await fast.call("fast__echo", {"text": "warm"})
            await trio.sleep(1.0)

            before = await _snapshot(fast_http, base, proc.pid)
            samples = await _measure_fast(fast, args.baseline, args)
            baseline = Phase(samples, before, await _snapshot(fast_http, base, proc.pid))

            schedule: list[tuple[str, str, dict[str, Any]]] = [
                (f"echo {args.echo_bytes} B", "echo", {"text": "x" * args.echo_bytes}),
                (f"sleep {args.short_sleep:g} s", "sleep", {"seconds": args.short_sleep}),
                (f"sleep {args.long_sleep:g} s", "sleep", {"seconds": args.long_sleep}),
            ]
            tally = SlowTally()
            stop = trio.current_time() + args.slow
            async with trio.open_nursery() as load:
                for index in range(args.slow_clients):
                    load.start_soon(_slow_client, slow_http, url, index, stop, tally, schedule)
                await trio.sleep(args.slow_warmup)
                before = await _snapshot(fast_http, base, proc.pid)
                samples = await _measure_fast(fast, stop - trio.current_time(), args)
                slow = Phase(samples, before, await _snapshot(fast_http, base, proc.pid))
                # Calls still in flight may finish (they are bounded by the request
                # timeout); whatever is left after that is counted as unfinished.
                load.cancel_scope.deadline = (
                    trio.current_time() + args.request_timeout * 1.5 + 30.0 * _per_client(args)
                )
            unfinished = tally.pending
            drained = await _snapshot(fast_http, base, proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return Result(transport, up_after, baseline, slow, drained, tally, proxy, unfinished)


def _per_client(args: argparse.Namespace) -> int:
    return 1 if args.session == "per_client" else 0


# -- report -----------------------------------------------------------------------------


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}"


def _report(result: Result, args: argparse.Namespace) -> None:
    _, _, _, label = TRANSPORTS[result.transport]
    proxy = result.proxy
    print()
    print(
        f"== slow = {result.transport} ({label}) behind the proxy: {args.rate:g} B/s, "
        f"{args.chunk}-byte chunks, +{args.delay:g} s per chunk; session {args.session}; "
        f"timeouts.request {args.request_timeout:g} s =="
    )
    print(f"slow backend up and listed (unthrottled) {result.up_after:.1f} s after start")
    base, slow = result.baseline, result.slow
    rows = [
        ("fast seq calls", len(base.fast.sequential), len(slow.fast.sequential), None),
        (
            "fast seq p50 ms",
            _pct(base.fast.sequential, 0.5),
            _pct(slow.fast.sequential, 0.5),
            True,
        ),
        (
            "fast seq p99 ms",
            _pct(base.fast.sequential, 0.99),
            _pct(slow.fast.sequential, 0.99),
            True,
        ),
        (
            "fast seq max ms",
            _pct(base.fast.sequential, 1.0),
            _pct(slow.fast.sequential, 1.0),
            True,
        ),
        (
            f"fast burst x{args.burst} calls",
            len(base.fast.concurrent),
            len(slow.fast.concurrent),
            None,
        ),
        (
            f"fast burst x{args.burst} p50 ms",
            _pct(base.fast.concurrent, 0.5),
            _pct(slow.fast.concurrent, 0.5),
            True,
        ),
        (
            f"fast burst x{args.burst} p99 ms",
            _pct(base.fast.concurrent, 0.99),
            _pct(slow.fast.concurrent, 0.99),
            True,
        ),
        ("fast errors", base.fast.errors, slow.fast.errors, None),
        ("gateway CPU s", base.cpu_seconds, slow.cpu_seconds, True),
        ("gateway CPU % of a core", base.cpu_percent, slow.cpu_percent, True),
        (
            "loop lag samples",
            _delta(base.before, base.after, LAG + "_count"),
            _delta(slow.before, slow.after, LAG + "_count"),
            None,
        ),
        (
            "loop lag sum ms",
            1000 * _delta(base.before, base.after, LAG + "_sum"),
            1000 * _delta(slow.before, slow.after, LAG + "_sum"),
            True,
        ),
    ]
    print(f"{'':28} {'baseline':>12} {'slow traffic':>14} {'delta':>10}")
    for name, a, b, is_float in rows:
        if is_float:
            print(
                f"{name:28} {_ms(float(a)):>12} {_ms(float(b)):>14} {_ms(float(b) - float(a)):>10}"
            )
        else:
            print(f"{name:28} {a:>12.0f} {b:>14.0f} {b - a:>10.0f}")
    for phase_name, phase in (("baseline", base), ("slow traffic", slow)):
        buckets = _lag_buckets(phase.before, phase.after)
        shown = " ".join(f"{le}:{n}" for le, n in buckets if n)
        print(f"loop lag buckets gained, {phase_name}: {shown or 'none'}")
    timeouts_metric = 'mcp_gateway_request_timeouts_total{backend="slow"}'
    print(
        f"gateway request timeouts on slow (metric) from the slow phase's start to the end "
        f"of its calls: {_delta(slow.before, result.drained, timeouts_metric):.0f}"
    )

    tally = result.tally
    print(f"slow calls by {args.slow_clients} sessions through the throttled path:")
    kinds = Counter((call, kind) for call, kind, _, _ in tally.outcomes)
    print(f"  {'call':16} {'outcome':34} {'n':>4} {'min s':>7} {'median s':>9} {'max s':>7}")
    for (tool, kind), count in sorted(kinds.items()):
        times = [s for c, k, s, _ in tally.outcomes if (c, k) == (tool, kind) and not math.isnan(s)]
        if times:
            spread = f"{min(times):>7.2f} {statistics.median(times):>9.2f} {max(times):>7.2f}"
        else:
            spread = f"{'-':>7} {'-':>9} {'-':>7}"
        print(f"  {tool:16} {kind:34} {count:>4} {spread}")
    print(f"  unfinished when the load stopped: {result.unfinished}")
    for text, count in tally.other_messages.items():
        print(f"  other error x{count}: {text}")
    per_client = args.session == "per_client"
    if per_client:
        firsts = ", ".join(f"{k} {s:.2f} s" for _, k, s, first in tally.outcomes if first)
        print(f"  first calls (open the backend session; not in the check below): {firsts}")
    timed = [
        s for _, k, s, first in tally.outcomes if k == "timed out" and not (per_client and first)
    ]
    low, high = 0.9 * args.request_timeout, 1.1 * args.request_timeout
    within = sum(1 for s in timed if low <= s <= high)
    print(
        f"  timeouts within timeouts.request +-10 % ({low:g}-{high:g} s): {within}/{len(timed)}"
        + (f"; earliest {min(timed):.2f} s, latest {max(timed):.2f} s" if timed else "")
    )
    print(
        f"proxy: {proxy.connections} connections, {proxy.throttled_bytes} bytes in "
        f"{proxy.throttled_chunks} throttled chunks"
    )


async def _main(args: argparse.Namespace) -> int:
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        results = [await _run_transport(t, args, Path(tmp)) for t in args.transports]
    load_after = os.getloadavg()
    print(
        f"slow_network (B13): baseline {args.baseline:g} s, slow phase {args.slow:g} s, "
        f"{args.slow_clients} slow sessions, fast calls every {args.fast_interval * 1000:g} ms "
        f"(every {args.burst_every}th a burst of {args.burst})"
    )
    for result in results:
        _report(result, args)
    print()
    print(
        "load average (1/5/15 min) at start "
        + "/".join(f"{x:.2f}" for x in load_before)
        + ", at end "
        + "/".join(f"{x:.2f}" for x in load_after)
        + f"; {os.cpu_count()} CPUs"
    )
    for result in results:
        print(f"{result.transport}: p99 delta = {result.p99_delta_ms:.2f} ms")
    worst = max(results, key=lambda r: r.p99_delta_ms)
    print(
        f"B13: p99 delta = {worst.p99_delta_ms:.2f} ms (target < 10 ms)"
        + (f" [worst: {worst.transport}]" if len(results) > 1 else "")
    )
    return 0 if worst.p99_delta_ms < 10 else 1


def main() -> None:
    """Parse flags and run."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--transports",
        type=lambda text: [t for t in text.split(",") if t],
        default=["sse", "http"],
        help="comma-separated: sse, http (default both)",
    )
    parser.add_argument("--baseline", type=float, default=12.0, help="baseline phase, s")
    parser.add_argument("--slow", type=float, default=24.0, help="slow-traffic phase, s")
    parser.add_argument("--slow-warmup", type=float, default=2.0, help="slow load before measuring")
    parser.add_argument("--rate", type=float, default=1024.0, help="proxy bytes/s downstream")
    parser.add_argument("--chunk", type=int, default=256, help="proxy chunk size, bytes")
    parser.add_argument("--delay", type=float, default=2.0, help="proxy delay per chunk, s")
    parser.add_argument("--request-timeout", type=float, default=10.0, help="timeouts.request")
    parser.add_argument("--session", choices=["shared", "per_client"], default="shared")
    parser.add_argument("--eject-after", type=int, default=0, help="health.eject_after_timeouts")
    parser.add_argument("--slow-clients", type=int, default=6)
    parser.add_argument("--echo-bytes", type=int, default=64)
    parser.add_argument("--short-sleep", type=float, default=1.0)
    parser.add_argument("--long-sleep", type=float, default=15.0)
    parser.add_argument("--fast-interval", type=float, default=0.01, help="pause between calls")
    parser.add_argument("--burst", type=int, default=4, help="concurrent calls in a burst")
    parser.add_argument("--burst-every", type=int, default=25, help="every Nth step is a burst")
    args = parser.parse_args()
    unknown = [t for t in args.transports if t not in TRANSPORTS]
    if unknown:
        parser.error(f"unknown transport(s): {', '.join(unknown)}")
    raise SystemExit(trio.run(_main, args))


if __name__ == "__main__":
    main()
