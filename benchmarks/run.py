"""Issue 10: the gateway's performance, each figure next to the same figure direct.

Every figure through the gateway is measured in the same run as the same
figure against the same backend reached directly, and reported as a ratio
against the issue's target. Sections:

- ``calls``: tools/call on a fast echo backend (``bench_server.py``) and an
  official-SDK one (``sdk_server.py``, FastMCP) at concurrency 1, 8, 64:
  calls/s, p50, p99 and the gateway process's own CPU per call. Direct: the
  same server over stdio, requests pipelined with the same number in flight.
  The same load then goes through each installed peer (``benchmarks/peers``:
  FastMCP's proxy, mcp-proxy), one table with a column per peer, and py-spy
  records a flame graph of one more c=8 run (``calls-c8-flame.svg``).
- ``lists``: the full tools/list walk of 10x50, 50x20 and 50x200 tools, at
  the default page size and in one page, against one server listing the
  same number of tools directly.
- ``startup``: spawn to /readyz 200 with 10 and 50 stdio backends, against
  spawning the same backends and initializing each, in parallel.
- ``sessions``: memory per idle client session and time to open one.
- ``fanout``: a backend's list_changed to the last of 1,000 GET streams.
- ``payload``: 1 MiB and 10 MiB tool results, time and the gateway's extra
  peak memory.

The load generator is lean (``lean.py``: raw HTTP/1.1 and raw pipes, no SDK)
and reports its own CPU share; a figure whose client was above 80 % of a
core is flagged, since the client may then have been the limit.

Run everything (5 min 49 s on 2 shared cores, 2026-12-03)::

    .venv/bin/python -m benchmarks.run
    .venv/bin/python -m benchmarks.run --quick          # smoke, under 2 minutes
    .venv/bin/python -m benchmarks.run --only calls,payload

Results go to ``benchmarks/results/latest.json``; with ``--only``, the other
sections already in that file are kept.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from benchmarks import crowd, lean
from benchmarks.common import (
    BENCH_SERVER,
    RESULTS,
    ROOT,
    baseline_tree,
    bench_backend,
    progress,
    running_gateway,
)
from benchmarks.common import (
    machine as describe_machine,
)
from benchmarks.lean import HttpConnection, PipeClient
from benchmarks.peers import PEERS, compare, py_spy
from gateway.config.schema import ServerConfig

SDK_SERVER = [sys.executable, str(ROOT / "benchmarks" / "sdk_server.py")]
ECHO_ARGS = {"text": "hello"}
MIB = 1 << 20

# CPU used by other processes during a measured window above which the
# figure is flagged as noisy (in cores; this machine may be shared).
NOISE_CORES = 0.25

# The py-spy flame graph of the calls section (issue 17): the fast backend at
# this concurrency on the first engine, a file committed next to the table.
FLAME_CONCURRENCY = 8
FLAME_FILE = "calls-c8-flame.svg"

SECTIONS = ("calls", "lists", "startup", "sessions", "fanout", "payload")

# The engine the gateway ships with: the calls targets are its (issue 17).
DEFAULT_ENGINE: Final = ServerConfig().engine


def call_targets(backend: str, concurrency: int, default_engine: bool) -> frozenset[str]:
    """Which call rows carry a verdict, as issue 17 sets them.

    Gateway CPU is judged against the fast backend (its own cost is not
    in it); the rate against the official-SDK backend, at every
    concurrency, and its p50 at c=1 only. A fast backend's direct rate
    (pipelined, 20 µs a call) is no bar a proxy's rate can be held to,
    and the other engine is a cross-check: their figures are reported
    without a verdict.
    """
    if not default_engine:
        return frozenset()
    if backend == "bench":
        return frozenset({"cpu"})
    return frozenset({"rate", "p50"} if concurrency == 1 else {"rate"})


# -- reporting -----------------------------------------------------------------


def _verdict(ok: bool | None, note: str = "") -> str:
    if ok is None:
        return "-"
    word = "PASS" if ok else "MISS"
    return f"{word} {note}".rstrip()


def _row(
    metric: str,
    gateway: float | None,
    direct: float | None,
    unit: str,
    *,
    ratio: float | None = None,
    target: str = "",
    ok: bool | None = None,
    note: str = "",
) -> dict[str, Any]:
    return {
        "metric": metric,
        "gateway": gateway,
        "direct": direct,
        "unit": unit,
        "ratio": ratio,
        "target": target,
        "pass": ok,
        "verdict": _verdict(ok, note),
    }


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit in ("calls/s", "µs", "KiB", "MiB/s"):
        return f"{value:,.0f} {unit}"
    if unit == "x":
        return f"{value:.2f}x"
    return f"{value:,.2f} {unit}"


def print_table(title: str, rows: Sequence[dict[str, Any]], notes: Sequence[str] = ()) -> None:
    """One section as a fixed-width table."""
    headers = ("metric", "gateway", "direct", "ratio", "target", "verdict")
    cells = [
        (
            r["metric"],
            _fmt(r["gateway"], r["unit"]),
            _fmt(r["direct"], r["unit"]),
            "-" if r["ratio"] is None else f"{r['ratio']:.2f}",
            r["target"] or "-",
            r["verdict"],
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    print(f"\n== {title}")
    print(line.format(*headers))
    print(line.format(*("-" * w for w in widths)))
    for c in cells:
        print(line.format(*c))
    for note in notes:
        print(f"   note: {note}")


def _client_note(what: str, share: float) -> str | None:
    if share > lean.CLIENT_CPU_WARNING:
        return (
            f"WARNING: the load generator used {share:.0%} of a core during {what}; "
            "the client may have been the limit there"
        )
    return None


# -- calls ---------------------------------------------------------------------


def _sdk_backend(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "transport": "stdio",
        "command": SDK_SERVER[0],
        "args": SDK_SERVER[1:],
        "required": True,
        "stop_grace": 0.5,
    }


def section_calls(args: argparse.Namespace) -> dict[str, Any]:
    """Throughput, latency and gateway CPU of tools/call at each concurrency, per engine.

    Every engine in ``--engines`` gets its own gateway process in the same
    run; the direct figures are measured once per backend and concurrency
    and every engine's row is a ratio to them.
    """
    servers = [("bench", BENCH_SERVER, bench_backend("bench"))]
    if not args.no_sdk:
        servers.append(("sdk", SDK_SERVER, _sdk_backend("sdk")))
    top = max(args.concurrency)
    rows: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    notes: list[str] = []
    directs: dict[tuple[str, int], tuple[lean.LoadResult, float]] = {}
    for build in args.engines:
        engine, _, rev = build.partition("@")
        tree = baseline_tree(rev) if rev else contextlib.nullcontext(None)
        with (
            tree as folder,
            running_gateway([cfg for _, _, cfg in servers], engine, folder) as (url, proc, _),
        ):
            conn = HttpConnection(url)
            sessions = [conn.open_session() for _ in range(top)]
            for name, argv, _cfg in servers:
                tool = f"{name}__echo"
                echoed = conn.call(
                    sessions[0], "tools/call", {"name": tool, "arguments": ECHO_ARGS}
                )
                assert echoed["content"][0]["text"] == "hello", echoed
                for concurrency in args.concurrency:
                    if (name, concurrency) not in directs:
                        directs[name, concurrency] = lean.stdio_load(
                            argv,
                            concurrency,
                            "tools/call",
                            {"name": "echo", "arguments": ECHO_ARGS},
                            warmup=args.warmup,
                            duration=args.duration,
                        )
                    direct, backend_cpu = directs[name, concurrency]
                    gateway = lean.http_load(
                        url,
                        sessions[:concurrency],
                        "tools/call",
                        {"name": tool, "arguments": ECHO_ARGS},
                        warmup=args.warmup,
                        duration=args.duration,
                        watch_pid=proc.pid,
                    )
                    label = f"{name} c={concurrency} [{build}]"
                    judged = call_targets(name, concurrency, build == DEFAULT_ENGINE)
                    _call_rows(
                        label, gateway, direct, backend_cpu, rows, runs, notes, targets=judged
                    )
                    runs[-1].update(backend=name, engine=build, concurrency=concurrency)
                if name == "bench" and build == args.engines[0] and args.flame:
                    _flame_graph(args, url, sessions[:FLAME_CONCURRENCY], tool, proc.pid, notes)
            conn.close()
    peers = _measure_peers(args, servers, directs, rows, runs, notes)
    notes.append(
        "direct = the same server over stdio, requests pipelined with <concurrency> in flight; "
        "gateway = one HTTP connection and MCP session per in-flight request; [engine] is "
        "server.engine; every engine's ratios are to the same direct figures"
    )
    tables = [compare.peer_table(runs, args.engines[0], peers)] if args.peers else []
    return {"rows": rows, "runs": runs, "notes": notes, "tables": tables}


def _flame_graph(
    args: argparse.Namespace,
    url: str,
    sessions: Sequence[str],
    tool: str,
    pid: int,
    notes: list[str],
) -> None:
    """Record the gateway with py-spy during one more c=8 load on the fast backend.

    A run of its own, after the measured ones, so the sampler's cost is in
    no figure. The SVG is committed next to the README's table
    (``benchmarks/results/calls-c8-flame.svg``) and regenerated by every
    full run.
    """
    spy = py_spy()
    if spy is None:
        notes.append("flame graph: py-spy not installed (python -m benchmarks.peers); none made")
        return
    output = RESULTS / FLAME_FILE
    output.parent.mkdir(parents=True, exist_ok=True)
    seconds = max(1, round(args.duration))
    command = [str(spy), "record", "--pid", str(pid), "--duration", str(seconds)]
    command += ["--rate", "250", "--nonblocking", "--output", str(output)]
    recorder = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    load = lean.http_load(
        url,
        sessions,
        "tools/call",
        {"name": tool, "arguments": ECHO_ARGS},
        warmup=0.2,
        duration=seconds + 1.0,
        watch_pid=pid,
    )
    try:
        _, err = recorder.communicate(timeout=seconds + 60)
    except subprocess.TimeoutExpired:
        recorder.kill()
        _, err = recorder.communicate()
    if recorder.returncode != 0:
        reason = err.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
        notes.append(f"flame graph: py-spy failed ({reason[0]}); none made")
        return
    cpu = load.summary()["target_cpu_us_per_call"]
    notes.append(
        f"flame graph of the gateway at c={len(sessions)}, fast backend: "
        f"{output.relative_to(ROOT)} ({cpu:.0f} µs of gateway CPU a call while sampled)"
    )
    progress(f"flame graph written: {output.relative_to(ROOT)}")


def _measure_peers(
    args: argparse.Namespace,
    servers: Sequence[tuple[str, list[str], dict[str, Any]]],
    directs: dict[tuple[str, int], tuple[lean.LoadResult, float]],
    rows: list[dict[str, Any]],
    runs: list[dict[str, Any]],
    notes: list[str],
) -> list[str]:
    """The same load through each peer (``--peers``), ratios to the same direct figures."""

    def record(peer: str, backend: str, concurrency: int, result: lean.LoadResult) -> None:
        direct, backend_cpu = directs[backend, concurrency]
        label = f"{backend} c={concurrency} [peer:{peer}]"
        _call_rows(
            label, result, direct, backend_cpu, rows, runs, notes, targets=frozenset(), peer=True
        )
        runs[-1].update(backend=backend, engine=f"peer:{peer}", concurrency=concurrency)

    if not args.peers:
        return []
    pairs = [(name, argv) for name, argv, _cfg in servers]
    return compare.measure_peers(args, pairs, record, notes)


def _call_rows(
    label: str,
    gateway: lean.LoadResult,
    direct: lean.LoadResult,
    backend_cpu: float,
    rows: list[dict[str, Any]],
    runs: list[dict[str, Any]],
    notes: list[str],
    *,
    targets: frozenset[str],
    peer: bool = False,
) -> None:
    """The rows, run record and notes of one gateway (or peer) load against its direct figures.

    Only the rows named in ``targets`` (:func:`call_targets`) carry a
    verdict; every figure is reported either way. A peer gets none: the
    gateway's targets are not a peer's.
    """
    g, d = gateway.summary(), direct.summary()
    d["backend_cpu_us_per_call"] = backend_cpu / direct.calls * 1e6
    runs.append({"gateway": g, "direct": d})
    throughput = g["calls_per_s"] / d["calls_per_s"]
    rows.append(
        _row(
            f"{label} calls/s",
            g["calls_per_s"],
            d["calls_per_s"],
            "calls/s",
            ratio=throughput,
            target=">= 0.85x direct",
            ok=throughput >= 0.85,
            note=f"({throughput:.3f}x)",
        )
    )
    extra = g["p50_ms"] - d["p50_ms"]
    rows.append(
        _row(
            f"{label} p50",
            g["p50_ms"],
            d["p50_ms"],
            "ms",
            ratio=g["p50_ms"] / d["p50_ms"],
            target="<= direct + 0.3 ms",
            ok=extra <= 0.3,
            note=f"(+{extra:.2f} ms)",
        )
    )
    rows.append(
        _row(f"{label} p99", g["p99_ms"], d["p99_ms"], "ms", ratio=g["p99_ms"] / d["p99_ms"])
    )
    cpu = g["target_cpu_us_per_call"]
    rows.append(
        _row(
            f"{label} gateway CPU/call",
            cpu,
            None,
            "µs",
            target="<= 300 µs",
            ok=cpu <= 300,
            note=f"({cpu / 300:.1f}x the budget)",
        )
    )
    for kind, row in zip(("rate", "p50", "p99", "cpu"), rows[-4:], strict=True):
        if kind not in targets:
            row.update(target="", verdict="-")
            row["pass"] = None
    measured = (("peer", gateway),) if peer else (("gateway", gateway), ("direct", direct))
    for what, result in measured:
        warning = _client_note(f"{label} {what}", result.client_cpu_share)
        if warning:
            notes.append(warning)
        if result.other_cores > NOISE_CORES:
            notes.append(
                f"NOISE: other processes used {result.other_cores:.2f} cores during {label} {what}"
            )
    if g["errors"] or d["errors"]:
        notes.append(f"{label}: errors gateway={g['errors']} direct={d['errors']}")
    progress(
        f"calls {label}: {g['calls_per_s']:.0f} vs {d['calls_per_s']:.0f}/s, "
        f"gateway {cpu:.0f} µs/call, other load {gateway.other_cores:.2f}"
        f"/{direct.other_cores:.2f} cores"
    )


# -- lists ---------------------------------------------------------------------


def _walk(conn: HttpConnection, session: str) -> tuple[int, int]:
    cursor = None
    items = pages = 0
    while True:
        result = conn.call(session, "tools/list", {"cursor": cursor} if cursor else None)
        items += len(result["tools"])
        pages += 1
        cursor = result.get("nextCursor")
        if cursor is None:
            return items, pages


def _timed(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    fn()  # warm-up
    samples = []
    value = None
    for _ in range(repeats):
        started = time.perf_counter()
        value = fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), value


def _reload(proc: subprocess.Popen[bytes], **sections: Any) -> None:
    """Rewrite the running gateway's config file and SIGHUP it."""
    path = Path(proc.args[-1])  # type: ignore[index]
    config = json.loads(path.read_text())
    config.update(sections)
    path.write_text(json.dumps(config))
    proc.send_signal(signal.SIGHUP)


def section_lists(args: argparse.Namespace) -> dict[str, Any]:
    """Full tools/list walk of a merged catalog vs one server listing as many."""
    rows: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    for backends, tools in args.list_shapes:
        total = backends * tools
        server = PipeClient(BENCH_SERVER, {"BENCH_TOOLS": str(total)})
        try:
            direct, listed = _timed(
                lambda s=server: s.call("tools/list")["tools"], args.list_repeats
            )
            assert len(listed) == total
        finally:
            server.close()
        configs = [bench_backend(f"b{b:02d}", tools) for b in range(backends)]
        with running_gateway(configs) as (url, proc, _ready):
            conn = HttpConnection(url)
            session = conn.open_session()
            walk, (items, pages) = _timed(lambda c=conn, s=session: _walk(c, s), args.list_repeats)
            assert items == total, items
            _reload(proc, pagination={"page_size": 0})
            deadline = time.monotonic() + 10
            while _walk(conn, session)[1] != 1:
                if time.monotonic() > deadline:
                    raise RuntimeError("page_size reload did not apply")
                time.sleep(0.05)
            one, (items_one, _) = _timed(lambda c=conn, s=session: _walk(c, s), args.list_repeats)
            assert items_one == total
            conn.close()
        shape = f"{backends}x{tools}={total}"
        for label, seconds, page_count in (
            (f"{pages} pages of 100", walk, pages),
            ("one page", one, 1),
        ):
            ratio = seconds / direct
            rows.append(
                _row(
                    f"{shape} tools, {label}",
                    seconds * 1000,
                    direct * 1000,
                    "ms",
                    ratio=ratio,
                    target="<= 2x direct",
                    ok=ratio <= 2,
                    note=f"({ratio:.2f}x)",
                )
            )
            runs.append(
                {
                    "backends": backends,
                    "tools_per_backend": tools,
                    "pages": page_count,
                    "gateway_ms": seconds * 1000,
                    "direct_ms": direct * 1000,
                }
            )
        progress(f"lists {shape}: {walk * 1000:.1f} / {one * 1000:.1f} vs {direct * 1000:.1f} ms")
    notes = [
        "direct = one stdio server listing all N tools in one response; both sides decode the JSON",
        "default page size is 100 (pagination.page_size); 'one page' is page_size 0, "
        "applied by config reload",
    ]
    return {"rows": rows, "runs": runs, "notes": notes}


# -- startup -------------------------------------------------------------------


def _gateway_start(count: int, tools: int = 1) -> float:
    configs = [bench_backend(f"b{b:02d}", tools) for b in range(count)]
    with running_gateway(configs) as (_url, _proc, ready):
        return ready


def section_startup(args: argparse.Namespace) -> dict[str, Any]:
    """Spawn to ready, through the gateway and directly."""
    rows: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    empty = statistics.median(_gateway_start(0) for _ in range(args.startup_repeats))
    rows.append(_row("gateway alone, 0 backends", empty * 1000, None, "ms"))
    for count in args.startup_backends:
        gateway_samples, direct_samples = [], []
        for _ in range(args.startup_repeats):
            direct_samples.append(crowd.direct_start(count))
            gateway_samples.append(_gateway_start(count))
        gateway, direct = statistics.median(gateway_samples), statistics.median(direct_samples)
        ratio = gateway / direct
        target = count >= 50
        rows.append(
            _row(
                f"{count} stdio backends ready",
                gateway * 1000,
                direct * 1000,
                "ms",
                ratio=ratio,
                target="<= 1.3x direct" if target else "",
                ok=ratio <= 1.3 if target else None,
                note=f"({ratio:.2f}x)",
            )
        )
        runs.append(
            {
                "backends": count,
                "gateway_ms": [s * 1000 for s in gateway_samples],
                "direct_ms": [s * 1000 for s in direct_samples],
            }
        )
        progress(f"startup {count}: {gateway * 1000:.0f} vs {direct * 1000:.0f} ms")
    if args.startup_big:
        count, tools = args.startup_big
        gateway_samples, direct_samples = [], []
        for _ in range(args.startup_repeats):
            direct_samples.append(crowd.direct_start(count, tools, list_tools=True))
            gateway_samples.append(_gateway_start(count, tools))
        gateway, direct = statistics.median(gateway_samples), statistics.median(direct_samples)
        rows.append(
            _row(
                f"{count} backends x {tools} tools ready (info)",
                gateway * 1000,
                direct * 1000,
                "ms",
                ratio=gateway / direct,
            )
        )
        runs.append(
            {
                "backends": count,
                "tools_per_backend": tools,
                "gateway_ms": [s * 1000 for s in gateway_samples],
                "direct_ms": [s * 1000 for s in direct_samples],
                "direct_includes_tools_list": True,
            }
        )
        progress(f"startup {count}x{tools}: {gateway * 1000:.0f} vs {direct * 1000:.0f} ms")
    notes = [
        "gateway = spawn of `trio-mcp-gateway serve` to /readyz 200 (all backends required), "
        "including the gateway's own interpreter start and imports (the '0 backends' row)",
        "direct = spawn the same N servers and complete initialize on each, in parallel "
        "(the 'x 200 tools' row: initialize then tools/list on each, as the gateway does)",
        f"median of {args.startup_repeats} runs each",
    ]
    return {"rows": rows, "runs": runs, "notes": notes, "gateway_alone_ms": empty * 1000}


# -- sessions ------------------------------------------------------------------


def section_sessions(args: argparse.Namespace) -> dict[str, Any]:
    """Memory per idle client session, and the time to open one."""
    count = args.sessions
    with running_gateway([bench_backend("bench")]) as (url, proc, _ready):
        conn = HttpConnection(url)
        for _ in range(50):  # warm caches and allocator arenas
            conn.open_session()
        time.sleep(0.3)
        before = lean.process_memory_kib(proc.pid)["VmRSS"]
        initialize, full = [], []
        for _ in range(count):
            started = time.perf_counter()
            response = conn.request(lean.initialize_body(), lean.post_headers())
            middle = time.perf_counter()
            session = response.headers["mcp-session-id"]
            done = conn.request(lean.INITIALIZED, lean.post_headers(session))
            ended = time.perf_counter()
            assert response.status == 200 and done.status == 202
            initialize.append(middle - started)
            full.append(ended - started)
        time.sleep(0.3)
        after = lean.process_memory_kib(proc.pid)["VmRSS"]
        conn.close()
    server = PipeClient(BENCH_SERVER)
    try:
        params = lean._json.decode(lean.initialize_body())["params"]
        direct_samples = []
        for _ in range(min(count, 1000)):
            started = time.perf_counter()
            server.call("initialize", params)
            direct_samples.append(time.perf_counter() - started)
    finally:
        server.close()
    per_session = (after - before) / count
    init_ms = statistics.median(initialize) * 1000
    full_ms = statistics.median(full) * 1000
    direct_ms = statistics.median(direct_samples) * 1000
    rows = [
        _row(
            f"memory per idle session ({count} sessions)",
            per_session,
            None,
            "KiB",
            target="<= 16 KiB",
            ok=per_session <= 16,
            note=f"({per_session:.1f} KiB)",
        ),
        _row(
            "open a session: initialize",
            init_ms,
            direct_ms,
            "ms",
            ratio=init_ms / direct_ms,
        ),
        _row(
            "open a session: initialize + initialized",
            full_ms,
            direct_ms,
            "ms",
            ratio=full_ms / direct_ms,
        ),
    ]
    notes = [
        f"gateway RSS {before} KiB -> {after} KiB over {count} sessions (VmRSS)",
        "direct = an initialize round trip to an already running stdio server "
        "(a stdio server has exactly one session; there is no closer equivalent)",
    ]
    progress(f"sessions: {per_session:.2f} KiB/session, open {full_ms:.2f} ms")
    return {
        "rows": rows,
        "notes": notes,
        "rss_before_kib": before,
        "rss_after_kib": after,
        "sessions": count,
    }


# -- fan-out -------------------------------------------------------------------


def _direct_fanout(trials: int) -> float:
    """Emission to receipt of list_changed on one stdio client of the backend."""
    server = PipeClient(BENCH_SERVER, {"BENCH_CHANGE": "1"})
    samples = []
    try:
        assert server.proc.stdin is not None and server.proc.stdout is not None
        for msg_id in range(1000, 1000 + trials):
            server.send(
                b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"change"}}'
                % msg_id
            )
            line = server.proc.stdout.readline()
            received = time.clock_gettime(time.CLOCK_MONOTONIC)
            assert crowd.MARKER in line, line
            emitted = int(
                lean._json.decode(server.proc.stdout.readline())["result"]["content"][0]["text"]
            )
            samples.append(received - emitted / 1e9)
    finally:
        server.close()
    return statistics.median(samples)


def section_fanout(args: argparse.Namespace) -> dict[str, Any]:
    """A backend's list_changed to the last of N client sessions with a GET stream."""
    count = args.fanout_sessions
    backend = bench_backend("bench", BENCH_CHANGE="1")
    trials: list[dict[str, float]] = []
    notes: list[str] = []
    with running_gateway(
        [backend],
        notifications={"debounce": args.fanout_debounce},
    ) as (url, proc, _ready):
        conn = HttpConnection(url)
        control = conn.open_session()
        sessions = [conn.open_session() for _ in range(count)]
        idle_rss = lean.process_memory_kib(proc.pid)["VmRSS"]
        streams_rss = None
        for trial in range(args.fanout_trials):
            streams = crowd.open_streams(url, sessions)
            if streams_rss is None:
                time.sleep(0.2)
                streams_rss = lean.process_memory_kib(proc.pid)["VmRSS"]
            watch = crowd.Watch(streams)  # registered before the change: not timed
            sent = time.clock_gettime(time.CLOCK_MONOTONIC)
            result = conn.call(control, "tools/call", {"name": "bench__change"})
            emitted = int(result["content"][0]["text"]) / 1e9
            arrivals = watch.await_marker(timeout=10)
            watch.close()
            for sock in streams:
                sock.close()
            if len(arrivals) < count:
                notes.append(f"trial {trial}: only {len(arrivals)} of {count} sessions got it")
            if arrivals:
                trials.append(
                    {
                        "from_emit_ms": (max(arrivals) - emitted) * 1000,
                        "from_send_ms": (max(arrivals) - sent) * 1000,
                        "first_ms": (min(arrivals) - emitted) * 1000,
                        "spread_ms": (max(arrivals) - min(arrivals)) * 1000,
                        "received": len(arrivals),
                    }
                )
            time.sleep(0.5)  # the gateway notices the closed streams; windows pass
        conn.close()
    direct = _direct_fanout(max(args.fanout_trials, 5)) * 1000
    last = statistics.median(t["from_emit_ms"] for t in trials)
    spread = statistics.median(t["spread_ms"] for t in trials)
    rows = [
        _row(
            f"list_changed to last of {count} (raw)",
            last,
            direct,
            "ms",
            ratio=last / direct,
            target="<= 100 ms",
            ok=last <= 100,
            note=f"({last:.0f} ms)",
        ),
        _row("  first to last session (spread)", spread, None, "ms"),
        _row(
            "  from the tool call's send",
            statistics.median(t["from_send_ms"] for t in trials),
            None,
            "ms",
        ),
    ]
    if streams_rss is not None:
        rows.append(
            _row(
                "memory per session with an open GET stream",
                (streams_rss - idle_rss) / count,
                None,
                "KiB",
            )
        )
    notes += [
        "measured from the backend's own emission (CLOCK_MONOTONIC stamped by bench_server) "
        "to the arrival of the event on the last stream",
        f"notifications.debounce set to {args.fanout_debounce} s; the coalescer sends at the "
        "start of a window, and a backend's first list_changed after a quiet spell is "
        "re-listed at once, so neither debounce delays an isolated change",
        "direct = the same notification to the backend's one stdio client",
        f"median of {len(trials)} trials",
    ]
    progress(f"fanout: {last:.1f} ms to the last of {count} sessions")
    return {"rows": rows, "trials": trials, "notes": notes}


# -- payload -------------------------------------------------------------------


def section_payload(args: argparse.Namespace) -> dict[str, Any]:
    """Large tool results: time through the gateway vs direct, and peak extra memory."""
    rows: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    notes: list[str] = []
    backend = bench_backend("bench", BENCH_PAYLOAD_BYTES=str(MIB))
    measured: dict[int, dict[str, Any]] = {}
    with running_gateway([backend]) as (url, proc, _ready):
        conn = HttpConnection(url)
        session = conn.open_session()
        can_reset = lean.reset_peak_rss(proc.pid)
        if not can_reset:
            notes.append("could not reset VmHWM (needs Linux >= 4.0 and permission)")
        for size in args.payload_sizes:
            params = {"name": "bench__payload", "arguments": {"bytes": size}}
            times, extras = [], []
            for _ in range(args.payload_repeats + 1):
                lean.reset_peak_rss(proc.pid)
                before = lean.process_memory_kib(proc.pid)["VmRSS"]
                started = time.perf_counter()
                result = conn.call(session, "tools/call", params)
                times.append(time.perf_counter() - started)
                peak = lean.process_memory_kib(proc.pid)["VmHWM"]
                extras.append((peak - before) * 1024)
                assert len(result["content"][0]["text"]) == size
            measured[size] = {"times": times[1:], "extra": extras}
        conn.close()
    server = PipeClient(BENCH_SERVER, {"BENCH_PAYLOAD_BYTES": str(MIB)})
    try:
        for size in args.payload_sizes:
            params = {"name": "payload", "arguments": {"bytes": size}}
            seconds, _ = _timed(lambda p=params: server.call("tools/call", p), args.payload_repeats)
            gateway = statistics.median(measured[size]["times"])
            extra = max(measured[size]["extra"])
            label = f"{size / MIB:g} MiB result"
            ratio = gateway / seconds
            rows.append(
                _row(
                    f"{label}: time",
                    gateway * 1000,
                    seconds * 1000,
                    "ms",
                    ratio=ratio,
                    target="<= 2x direct" if size >= 10 * MIB else "",
                    ok=ratio <= 2 if size >= 10 * MIB else None,
                    note=f"({ratio:.2f}x)",
                )
            )
            rows.append(
                _row(
                    f"{label}: gateway extra peak memory",
                    extra / MIB,
                    size / MIB,
                    "MiB",
                    ratio=extra / size,
                    target="<= 3x size" if size >= 10 * MIB else "",
                    ok=extra / size <= 3 if size >= 10 * MIB else None,
                    note=f"({extra / size:.2f}x)",
                )
            )
            runs.append(
                {
                    "bytes": size,
                    "gateway_ms": [t * 1000 for t in measured[size]["times"]],
                    "direct_ms": seconds * 1000,
                    "extra_peak_bytes": measured[size]["extra"],
                }
            )
            progress(f"payload {label}: {gateway * 1000:.1f} vs {seconds * 1000:.1f} ms")
    finally:
        server.close()
    notes += [
        "time: one call, HTTP response read and JSON decoded, vs the same over stdio; median",
        "extra memory: gateway VmHWM (reset before each call via /proc/PID/clear_refs) minus "
        "VmRSS before the call; the worst call, the first (cold) one included; the 'direct' "
        "column holds the payload size",
    ]
    return {"rows": rows, "runs": runs, "notes": notes}


# -- driver --------------------------------------------------------------------

RUNNERS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "calls": section_calls,
    "lists": section_lists,
    "startup": section_startup,
    "sessions": section_sessions,
    "fanout": section_fanout,
    "payload": section_payload,
}
TITLES = {
    "calls": "Tool calls (echo backends)",
    "lists": "Merged tools/list walk",
    "startup": "Startup: spawn to ready",
    "sessions": "Client sessions",
    "fanout": "list_changed fan-out",
    "payload": "Large payloads",
}


def _sizes(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        part = part.strip().lower()
        scale = MIB if part.endswith("m") else 1024 if part.endswith("k") else 1
        out.append(int(float(part.rstrip("mk")) * scale))
    return out


def _shapes(text: str) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in part.split("x")) for part in text.split(",")]  # type: ignore[misc]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Flags; ``--quick`` changes the defaults of those not given."""
    p = argparse.ArgumentParser(description="Issue 10 benchmarks: gateway vs direct.")
    p.add_argument("--only", default=",".join(SECTIONS), help=f"comma list of {SECTIONS}")
    p.add_argument("--quick", action="store_true", help="short smoke run (< 2 minutes)")
    p.add_argument("--output", type=Path, default=RESULTS / "latest.json")
    p.add_argument("--duration", type=float, help="seconds measured per load run (5)")
    p.add_argument("--warmup", type=float, help="seconds of warm-up per load run (1)")
    p.add_argument("--concurrency", help="comma list (1,8,64)")
    p.add_argument("--no-sdk", action="store_true", help="skip the official-SDK backend")
    p.add_argument(
        "--engines",
        default="h11,hypercorn",
        help="comma list of server.engine values the calls section runs on (h11,hypercorn); "
        "ENGINE@REV runs the gateway package of commit REV (git archive) on ENGINE, in the "
        "same run, for a before/after",
    )
    p.add_argument(
        "--peers",
        default=",".join(PEERS),
        help=f"comma list of peers the calls section also measures ({','.join(PEERS)}); "
        "'none' for none",
    )
    p.add_argument(
        "--flame",
        action=argparse.BooleanOptionalAction,
        help="record the py-spy flame graph of the c=8 run (default: on, off with --quick, "
        "which would replace the committed SVG with a short run's)",
    )
    p.add_argument("--list-shapes", help="backends x tools, comma list (10x50,50x20,50x200)")
    p.add_argument("--list-repeats", type=int, help="walks per shape (15)")
    p.add_argument("--startup-backends", help="comma list (10,50)")
    p.add_argument("--startup-repeats", type=int, help="starts per count (3)")
    p.add_argument("--startup-big", help="an extra BxT row, e.g. 50x200; 'none' to skip")
    p.add_argument("--sessions", type=int, help="idle sessions opened (1000)")
    p.add_argument("--fanout-sessions", type=int, help="GET streams (1000)")
    p.add_argument("--fanout-trials", type=int, help="list changes timed (5)")
    p.add_argument(
        "--fanout-debounce",
        type=float,
        default=0.001,
        help="notifications.debounce for the fan-out gateway (0.001)",
    )
    p.add_argument("--payload-sizes", help="comma list, k/m suffixes (1m,10m)")
    p.add_argument("--payload-repeats", type=int, help="calls per size (7)")
    args = p.parse_args(argv)
    quick = args.quick
    defaults: dict[str, Any] = {
        "duration": 1.5 if quick else 5.0,
        "warmup": 0.3 if quick else 1.0,
        "concurrency": "1,8,64",
        "list_shapes": "10x50,50x20" if quick else "10x50,50x20,50x200",
        "list_repeats": 3 if quick else 15,
        "startup_backends": "10" if quick else "10,50",
        "startup_repeats": 1 if quick else 3,
        "startup_big": "none" if quick else "50x200",
        "sessions": 200 if quick else 1000,
        "fanout_sessions": 200 if quick else 1000,
        "fanout_trials": 2 if quick else 5,
        "payload_sizes": "1m,10m",
        "payload_repeats": 2 if quick else 7,
        "flame": not quick,
    }
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.concurrency = [int(x) for x in str(args.concurrency).split(",")]
    args.engines = [e.strip() for e in str(args.engines).split(",") if e.strip()]
    args.peers = [] if args.peers == "none" else [x.strip() for x in args.peers.split(",") if x]
    if set(args.peers) - set(PEERS):
        p.error(f"unknown peer(s): {', '.join(sorted(set(args.peers) - set(PEERS)))}")
    args.list_shapes = _shapes(args.list_shapes)
    args.startup_backends = [int(x) for x in str(args.startup_backends).split(",")]
    args.startup_big = None if args.startup_big == "none" else _shapes(args.startup_big)[0]
    args.payload_sizes = _sizes(args.payload_sizes)
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(args.only) - set(SECTIONS)
    if unknown:
        p.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the chosen sections, print their tables, write the JSON."""
    args = parse_args(argv)
    previous: dict[str, Any] = {}
    if args.output.exists() and set(args.only) != set(SECTIONS):
        try:
            previous = json.loads(args.output.read_text()).get("sections", {})
        except (OSError, ValueError):
            previous = {}
    started = time.time()
    machine = describe_machine()
    print(
        f"mcp-gateway benchmarks, {time.strftime('%Y-%m-%d %H:%M')}: {machine['cpu_model']}, "
        f"{machine['cpu_count']} CPUs, Python {machine['python']}, {machine['commit']}"
    )
    sections: dict[str, Any] = dict(previous)
    for name in SECTIONS:
        if name not in args.only:
            continue
        load_before = os.getloadavg()[0]
        section_started = time.perf_counter()
        data = RUNNERS[name](args)
        data["seconds"] = time.perf_counter() - section_started
        data["date"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        data["load_average"] = [load_before, os.getloadavg()[0]]
        data["quick"] = args.quick
        sections[name] = data
        print_table(TITLES[name], data["rows"], data.get("notes", ()))
        for table in data.get("tables", ()):
            compare.print_grid(table)
    missed = [
        f"{name}: {row['metric']}"
        for name, data in sections.items()
        for row in data["rows"]
        if row["pass"] is False
    ]
    missed += [
        f"{name}: ahead of every peer, {row['backend']} c={row['concurrency']}"
        for name, data in sections.items()
        for table in data.get("tables", ())
        for row in table["rows"]
        if row["pass"] is False
    ]
    passed = sum(1 for data in sections.values() for row in data["rows"] if row["pass"])
    passed += sum(
        1
        for data in sections.values()
        for table in data.get("tables", ())
        for row in table["rows"]
        if row["pass"]
    )
    print(f"\ntargets: {passed} pass, {len(missed)} miss; {time.time() - started:.0f} s")
    result = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": machine,
        "sections": sections,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2))
    shown = args.output.relative_to(ROOT) if args.output.is_relative_to(ROOT) else args.output
    print(f"written: {shown}")
    return result


if __name__ == "__main__":
    main()
