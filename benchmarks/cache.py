"""Issue 31: what the response cache buys, and what a miss costs.

    .venv/bin/python -m benchmarks.cache
    .venv/bin/python -m benchmarks.cache --quick      # smoke, about a minute

The backend is the official SDK (FastMCP, ``sdk_cache_server.py``): one
resource and one ``readOnlyHint`` tool. Rows, each from one run:

- ``cached resources/read`` and ``cached tools/call`` at c=8: calls/s
  through the gateway with ``backends[].cache`` / ``profiles[].cache`` on
  (every call after the first a hit), against the same server over stdio,
  pipelined with 8 in flight. Target: ≥ 5x direct. The gateway's CPU per
  hit is printed as a note.
- ``miss``: the same ``tools/call`` with the opt-in's ttl at 1 µs, so every
  call is a miss that is stored and dropped again, against the gateway with
  no ``cache:`` at all: the gateway's CPU per call (the figure the other
  processes on the machine bend least) and the rate. Target: CPU ≤ 1.05x.

Results go to ``benchmarks/results/cache.json``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from benchmarks import lean
from benchmarks.common import ROOT, progress, running_gateway, write_results
from benchmarks.common import machine as describe_machine
from benchmarks.lean import HttpConnection
from benchmarks.run import _row, print_table

SERVER = [sys.executable, str(ROOT / "benchmarks" / "sdk_cache_server.py")]
CONCURRENCY = 8
READ = {"uri": "bench://note"}
LOOKUP = {"name": "lookup", "arguments": {"key": "k"}}
#: Targets (issue 31).
HIT_RATIO_TARGET = 5.0
MISS_CPU_TARGET = 1.05


def _backend(cache: dict[str, Any] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": "sdk",
        "transport": "stdio",
        "command": SERVER[0],
        "args": SERVER[1:],
        "required": True,
        "stop_grace": 0.5,
    }
    if cache is not None:
        entry["cache"] = cache
    return entry


def _gateway_load(
    sections: dict[str, Any],
    backend: dict[str, Any],
    method: str,
    params: dict[str, Any],
    args: argparse.Namespace,
) -> lean.LoadResult:
    """One closed-loop window through a gateway started with ``sections``."""
    with running_gateway([backend], **sections) as (url, proc, _):
        conn = HttpConnection(url)
        sessions = [conn.open_session() for _ in range(CONCURRENCY)]
        answer = conn.call(sessions[0], method, params)
        assert "contents" in answer or "content" in answer, answer
        result = lean.http_load(
            url,
            sessions,
            method,
            params,
            warmup=args.warmup,
            duration=args.duration,
            watch_pid=proc.pid,
        )
        conn.close()
    assert result.errors == 0, result
    return result


def _cpu_per_call_us(result: lean.LoadResult) -> float:
    assert result.target_cpu_seconds is not None
    return result.target_cpu_seconds / result.calls * 1e6


def main(argv: list[str] | None = None) -> None:
    """Measure and print the cache rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short windows (a smoke run)")
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    args = parser.parse_args(argv)
    if args.quick:
        args.duration, args.warmup = 2.0, 0.5
    rows: list[dict[str, Any]] = []
    hits: list[str] = []
    tools_on = {"profiles": [{"name": "default", "cache": {"tools": ["sdk__lookup"], "ttl": 60}}]}
    cases = (
        ("cached resources/read", "resources/read", READ, {"uri": "sdk+bench://note"}),
        ("cached tools/call", "tools/call", LOOKUP, {**LOOKUP, "name": "sdk__lookup"}),
    )
    for label, method, direct_params, public_params in cases:
        progress(f"{label}: direct")
        direct, _ = lean.stdio_load(
            SERVER, CONCURRENCY, method, direct_params, warmup=args.warmup, duration=args.duration
        )
        progress(f"{label}: through the gateway")
        gateway = _gateway_load(
            {"cache": {}, **tools_on}, _backend({"ttl": 60}), method, public_params, args
        )
        ratio = gateway.calls_per_second / direct.calls_per_second
        hits.append(f"{label}: {_cpu_per_call_us(gateway):,.0f} µs of gateway CPU a hit")
        rows.append(
            _row(
                f"{label} c={CONCURRENCY}",
                gateway.calls_per_second,
                direct.calls_per_second,
                "calls/s",
                ratio=ratio,
                target=f">= {HIT_RATIO_TARGET:g}x direct",
                ok=ratio >= HIT_RATIO_TARGET,
            )
        )
    call = {**LOOKUP, "name": "sdk__lookup"}
    progress("miss: no cache")
    plain = _gateway_load({}, _backend(), "tools/call", call, args)
    progress("miss: every call a miss")
    always_missing = {
        "profiles": [{"name": "default", "cache": {"tools": ["sdk__lookup"], "ttl": 1e-6}}]
    }
    missed = _gateway_load({"cache": {}, **always_missing}, _backend(), "tools/call", call, args)
    cpu_ratio = _cpu_per_call_us(missed) / _cpu_per_call_us(plain)
    rows.append(
        _row(
            f"miss: gateway CPU per tools/call c={CONCURRENCY} (vs no cache)",
            _cpu_per_call_us(missed),
            _cpu_per_call_us(plain),
            "µs",
            ratio=cpu_ratio,
            target=f"<= {MISS_CPU_TARGET:g}x",
            ok=cpu_ratio <= MISS_CPU_TARGET,
        )
    )
    rows.append(
        _row(
            f"miss: tools/call rate c={CONCURRENCY} (vs no cache)",
            missed.calls_per_second,
            plain.calls_per_second,
            "calls/s",
            ratio=missed.calls_per_second / plain.calls_per_second,
        )
    )
    notes = [
        "direct = the same server over stdio, pipelined with 8 in flight; gateway = one HTTP "
        "connection and MCP session per in-flight request",
        "the miss rows' 'direct' column is the gateway without a cache: section",
        *hits,
    ]
    print_table("cache", rows, notes)
    write_results("cache", {"machine": describe_machine(), "rows": rows, "notes": notes})


if __name__ == "__main__":
    main()
