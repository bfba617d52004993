"""Issue 31's single caller: the gateway against the same SDK 2.x server called directly.

    .venv/bin/python -m benchmarks.single_caller [--rounds 3] [--concurrency 1 8 64]

The setup is the one issue 31 was measured with: the official SDK 2.x
server of ``benchmarks/sdk2_server.py`` (``MCPServer``, 50 tools), one
``tools/call`` of ``echo_00`` at a time per caller, called

- **through the gateway**, which runs the server as its stdio backend (the
  host speaks Streamable HTTP to the gateway, the gateway stdio to the
  server);
- **directly over Streamable HTTP, as the SDK serves it by default**
  (answers as one-message SSE streams): the baseline issue 31 names ("the
  same SDK server directly over Streamable HTTP"), and the one its target
  (>= 0.85x direct at c=1) is judged against;
- **directly over Streamable HTTP with the SDK's ``json_response``**: a
  faster direct server than the default, printed beside it;
- **directly over stdio**, requests pipelined with <concurrency> in flight,
  as ``benchmarks.run``'s call rows measure: the strictest baseline, with no
  HTTP on the direct side at all. Printed, not judged here (the call rows of
  ``benchmarks.run`` judge the SDK 1.x server against it).

Every HTTP window uses the same client (``benchmarks.lean``: one keep-alive
connection and MCP session per caller, a few µs of client CPU a call), and
the direct HTTP servers run with uvicorn's access log off. Each round runs
the four windows in an order rotated round by round, so a machine whose
load moves between windows moves them alike; a ratio is the median of the
rounds' ratios, each taken within one round.

Results go to ``benchmarks/results/single_caller.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import statistics
import subprocess
import time
from collections.abc import Iterator, Sequence
from typing import Any, Final

from benchmarks import lean
from benchmarks.common import (
    ROOT,
    free_port,
    machine,
    progress,
    running_gateway,
    stop_child,
    write_results,
)
from benchmarks.lean import HttpConnection
from benchmarks.run import _row, print_table

SDK2_PYTHON: Final = ROOT / ".venv-sdk2" / "bin" / "python"
SERVER: Final = [str(SDK2_PYTHON), str(ROOT / "benchmarks" / "sdk2_server.py")]
TOOL: Final = "echo_00"
ARGUMENTS: Final = {"text": "hello"}
#: Issue 31's target at c=1, against the server over Streamable HTTP as the SDK serves it.
TARGET: Final = 0.85
#: The windows of a round: the gateway and the three direct baselines.
GATEWAY: Final = "gateway"
DIRECTS: Final = {
    "http-sse": "Streamable HTTP, the SDK's default (SSE answers)",
    "http-json": "Streamable HTTP, json_response",
    "stdio": "stdio, pipelined",
}
#: The baseline issue 31 names; its target is judged against this one only.
JUDGED: Final = "http-sse"


def _backend() -> dict[str, Any]:
    return {
        "name": "sdk2",
        "transport": "stdio",
        "command": SERVER[0],
        "args": SERVER[1:],
        "required": True,
        "stop_grace": 0.5,
    }


@contextlib.contextmanager
def direct_http(json_response: bool) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The SDK 2.x server over Streamable HTTP on a free port; yields (url, process)."""
    port = free_port()
    argv = [*SERVER, "http", str(port), *(["json"] if json_response else [])]
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the SDK server did not listen: {argv}") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        stop_child(proc, 10)


def _sessions(url: str, tool: str, count: int) -> list[str]:
    """``count`` MCP sessions at ``url``, after one checked call of ``tool``."""
    conn = HttpConnection(url)
    sessions = [conn.open_session() for _ in range(count)]
    answer = conn.call(sessions[0], "tools/call", {"name": tool, "arguments": ARGUMENTS})
    assert answer["content"][0]["text"] == "hello", answer
    conn.close()
    return sessions


def measure(concurrency: int, rounds: int, warmup: float, duration: float) -> dict[str, Any]:
    """Alternate the four windows ``rounds`` times at ``concurrency``; every summary kept."""
    windows: dict[str, list[dict[str, Any]]] = {GATEWAY: [], **{kind: [] for kind in DIRECTS}}
    with (
        running_gateway([_backend()]) as (gateway_url, gateway_proc, _),
        direct_http(json_response=False) as (sse_url, sse_proc),
        direct_http(json_response=True) as (json_url, json_proc),
    ):
        http_targets = {
            GATEWAY: (gateway_url, gateway_proc.pid, f"sdk2__{TOOL}"),
            "http-sse": (sse_url, sse_proc.pid, TOOL),
            "http-json": (json_url, json_proc.pid, TOOL),
        }
        sessions = {
            kind: _sessions(url, tool, concurrency) for kind, (url, _, tool) in http_targets.items()
        }
        kinds = list(windows)
        for number in range(rounds):
            order = kinds[number % len(kinds) :] + kinds[: number % len(kinds)]
            for kind in order:
                if kind == "stdio":
                    result, _ = lean.stdio_load(
                        SERVER,
                        concurrency,
                        "tools/call",
                        {"name": TOOL, "arguments": ARGUMENTS},
                        warmup=warmup,
                        duration=duration,
                    )
                else:
                    url, pid, tool = http_targets[kind]
                    result = lean.http_load(
                        url,
                        sessions[kind],
                        "tools/call",
                        {"name": tool, "arguments": ARGUMENTS},
                        warmup=warmup,
                        duration=duration,
                        watch_pid=pid,
                    )
                assert result.errors == 0, (kind, result)
                windows[kind].append(result.summary())
                summary = windows[kind][-1]
                progress(
                    f"c={concurrency} round {number + 1} {kind}: "
                    f"{summary['calls_per_s']:,.0f} calls/s, p50 {summary['p50_ms']:.2f} ms, "
                    f"other load {summary['other_cores']:.2f} cores"
                )
    return windows


def rows_of(concurrency: int, windows: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per baseline: the gateway's rate over the direct one, median of the rounds."""
    gateway = windows[GATEWAY]
    rows = []
    for kind, label in DIRECTS.items():
        direct = windows[kind]
        ratios = [g["calls_per_s"] / d["calls_per_s"] for g, d in zip(gateway, direct, strict=True)]
        ratio = statistics.median(ratios)
        judged = kind == JUDGED and concurrency == 1
        rows.append(
            _row(
                f"c={concurrency} calls/s ÷ direct over {label}",
                statistics.median(g["calls_per_s"] for g in gateway),
                statistics.median(d["calls_per_s"] for d in direct),
                "calls/s",
                ratio=ratio,
                target=f">= {TARGET}x direct" if judged else "",
                ok=ratio >= TARGET if judged else None,
                note=f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)})",
            )
        )
    cpu = statistics.median(g["target_cpu_us_per_call"] for g in gateway)
    rows.append(_row(f"c={concurrency} gateway CPU/call", cpu, None, "µs"))
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    """Measure, print the table, write the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--quick", action="store_true", help="one short round (a smoke run)")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.warmup, args.duration = 1, 0.3, 1.0
    rows: list[dict[str, Any]] = []
    runs: dict[str, Any] = {}
    for concurrency in args.concurrency:
        windows = measure(concurrency, args.rounds, args.warmup, args.duration)
        runs[str(concurrency)] = windows
        rows.extend(rows_of(concurrency, windows))
    notes = [
        "each ratio is taken within one round (the four windows alternate, the order rotated "
        "each round) and the median of the rounds is shown; the target is judged against the "
        "baseline issue 31 names, the SDK's default Streamable HTTP",
    ]
    print_table("single caller: SDK 2.x server, through the gateway vs direct", rows, notes)
    write_results("single_caller", {"machine": machine(), "rows": rows, "runs": runs})


if __name__ == "__main__":
    main()
