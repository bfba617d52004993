"""The peers' side of the call benchmark: the same load through each peer, one table.

``section_calls`` (``benchmarks/run.py``) measures the direct figures and the
gateway on each engine; :func:`measure_peers` then runs the same load (the
same backends, tool, arguments, concurrencies, warm-up and window) through
each installed peer, and :func:`peer_table` lays every figure side by side:
a column per peer, each call rate as a ratio to direct and the gateway's as
a factor over that peer.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks import lean
from benchmarks.lean import HttpConnection
from benchmarks.peers import installed, running_peer

ECHO_ARGS = {"text": "hello"}


def measure_peers(
    args: argparse.Namespace,
    servers: Sequence[tuple[str, Sequence[str]]],
    record: Callable[[str, str, int, lean.LoadResult], None],
    notes: list[str],
) -> list[str]:
    """Run the call load through every peer in ``args.peers``; returns those measured.

    ``record(peer, backend, concurrency, result)`` files each load result
    next to the gateway's; a peer that is not installed, or fails to start,
    gets a note instead of a column.
    """
    measured = []
    top = max(args.concurrency)
    for peer in args.peers:
        if not installed(peer):
            notes.append(f"peer {peer}: not installed (python -m benchmarks.peers); no column")
            continue
        try:
            with running_peer(peer, servers) as run:
                for backend, _argv in servers:
                    url, tool = run.endpoints[backend]
                    conn = HttpConnection(url)
                    sessions = [conn.open_session() for _ in range(top)]
                    echoed = conn.call(
                        sessions[0], "tools/call", {"name": tool, "arguments": ECHO_ARGS}
                    )
                    assert echoed["content"][0]["text"] == "hello", echoed
                    for concurrency in args.concurrency:
                        result = lean.http_load(
                            url,
                            sessions[:concurrency],
                            "tools/call",
                            {"name": tool, "arguments": ECHO_ARGS},
                            warmup=args.warmup,
                            duration=args.duration,
                            watch_pid=run.proc.pid,
                        )
                        record(peer, backend, concurrency, result)
                    conn.close()
        except (RuntimeError, OSError) as exc:
            notes.append(f"peer {peer}: failed ({exc}); no column")
            continue
        measured.append(peer)
    return measured


def peer_table(runs: Sequence[dict[str, Any]], engine: str, peers: Sequence[str]) -> dict[str, Any]:
    """The side-by-side table: per backend and concurrency, direct, gateway, each peer.

    Each cell is calls/s with its ratio to direct; a peer's cell adds the
    gateway's factor over it (gateway calls/s / peer calls/s). The verdict
    column is the issue's target: the gateway ahead of every peer.
    """
    by_key: dict[tuple[str, int, str], dict[str, Any]] = {}
    for run in runs:
        by_key[run["backend"], run["concurrency"], run["engine"]] = run
    headers = ["backend, c", "direct", f"mcp-gateway [{engine}]", *peers, "ahead of every peer"]
    cells: list[list[str]] = []
    rows: list[dict[str, Any]] = []
    keys = sorted({(r["backend"], r["concurrency"]) for r in runs if r["engine"] == engine})
    for backend, concurrency in keys:
        ours = by_key[backend, concurrency, engine]
        direct = ours["direct"]["calls_per_s"]
        rate = ours["gateway"]["calls_per_s"]
        line = [
            f"{backend} c={concurrency}",
            f"{direct:,.0f}/s",
            f"{rate:,.0f}/s {_ratio(rate / direct)}",
        ]
        factors: dict[str, float] = {}
        for peer in peers:
            theirs = by_key.get((backend, concurrency, f"peer:{peer}"))
            if theirs is None:
                line.append("-")
                continue
            peer_rate = theirs["gateway"]["calls_per_s"]
            factor = rate / peer_rate if peer_rate else float("inf")
            factors[peer] = factor
            line.append(f"{peer_rate:,.0f}/s {_ratio(peer_rate / direct)} (us {factor:.2f}x)")
        ok = bool(factors) and min(factors.values()) > 1.0
        if factors:
            line.append(("PASS" if ok else "MISS") + f" (min {min(factors.values()):.2f}x)")
        else:
            line.append("-")
        cells.append(line)
        rows.append(
            {
                "backend": backend,
                "concurrency": concurrency,
                "gateway_over_peer": factors,
                "pass": ok if factors else None,
            }
        )
    return {
        "title": "Tool calls: mcp-gateway and its peers, same backends, same load, same run",
        "headers": headers,
        "cells": cells,
        "rows": rows,
    }


def _ratio(value: float) -> str:
    """A ratio to direct, with a third digit when it is small (the fast backend's)."""
    return f"{value:.3f}x" if value < 0.1 else f"{value:.2f}x"


def print_grid(table: dict[str, Any]) -> None:
    """Print one free-form table (headers and string cells)."""
    headers, cells = table["headers"], table["cells"]
    widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(headers)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    print(f"\n== {table['title']}")
    print(line.format(*headers))
    print(line.format(*("-" * w for w in widths)))
    for row in cells:
        print(line.format(*row))
