"""Issue 15 benchmark: what a profile costs, at 1,000 and 10,000 tools.

The catalog is ``benchmarks.search``'s: the real peers' tools replicated under
many backend prefixes. For each size and each profile below it prints the
items the profile shows, the Python heap its view takes (tracemalloc, the
view alone: the shared snapshot is built before measuring), the time to
compute the view (what each snapshot swap costs per profile), and the bytes
and estimated tokens of its ``tools/list``, against the full list.

Profiles: ``tenth`` (one backend in ten), ``half`` (half the tools, by a name
glob), ``search`` (every tool, in search mode) and ``search-pinned`` (search
mode with five pinned tools).

Then, through a real gateway (``trio-mcp-gateway serve`` in a child, over HTTP
with one client session): a search-mode profile over one backend that lists
the same N tools; ``gateway__search_tools`` latency p50/p99 over the
relevance set's requests, next to a plain ``tools/call`` of ``echo`` and
the same call through ``gateway__call_tool``, in the same run.

Run: ``.venv/bin/python -m benchmarks.profiles`` (``--no-http`` skips the
gateway part).
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from benchmarks.common import LeanClient, bench_backend, running_gateway, write_results
from benchmarks.search import RULES, synthetic_listings
from gateway.catalog.profiles import SEARCH, Globs, Profile, ProfileViews, restrict
from gateway.catalog.snapshot import Kind, build_snapshot
from gateway.router.profile_setup import budget
from tests.catalog.test_search_relevance import load_requests

SIZES = (1_000, 10_000)
TIMING_ROUNDS = 20


def _profiles(backends: list[str], pinned: tuple[str, ...]) -> list[Profile]:
    return [
        Profile("tenth", backends=Globs(include=tuple(b for b in backends[::10]))),
        Profile("half", tools=Globs(include=("*[aeiou]",))),
        Profile("search", mode=SEARCH),
        Profile("search-pinned", mode=SEARCH, pinned=pinned),
    ]


def measure(total: int) -> list[dict[str, Any]]:
    """Figures for every profile at one catalog size."""
    listings = synthetic_listings(total)
    snapshot = build_snapshot(listings, RULES)
    keys = snapshot.view(Kind.TOOLS).keys()
    profiles = _profiles([lst.backend for lst in listings], keys[:5])
    views = ProfileViews(profiles)
    full = budget(views, "default", snapshot)
    rows = [
        {
            "tools": total,
            "profile": "default (full)",
            "items": full.items[Kind.TOOLS],
            "view_bytes": 0,
            "view_ms": 0.0,
            "list_bytes": full.tools_list_bytes,
            "list_tokens": full.tools_list_tokens,
            "ratio": 1.0,
        }
    ]
    for profile in profiles:
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot()
            view = restrict(snapshot, profile)
            after = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
        grown = sum(d.size_diff for d in after.compare_to(before, "filename"))
        times = []
        for _ in range(TIMING_ROUNDS):
            started = time.perf_counter()
            restrict(snapshot, profile)
            times.append((time.perf_counter() - started) * 1000)
        figures = budget(views, profile.name, snapshot)
        rows.append(
            {
                "tools": total,
                "profile": profile.name,
                "items": len(view.view(Kind.TOOLS)),
                "view_bytes": grown,
                "view_ms": statistics.median(times),
                "list_bytes": figures.tools_list_bytes,
                "list_tokens": figures.tools_list_tokens,
                "ratio": figures.tools_list_bytes / full.tools_list_bytes,
            }
        )
    return rows


HTTP_ROUNDS = 3  # x the relevance set's requests, per size


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def measure_http(total: int) -> dict[str, Any]:
    """search_tools vs tools/call through a real gateway, one session, same run."""
    tools = [
        {**tool, "name": f"{listing.backend}_{tool['name']}"}
        for listing in synthetic_listings(total - 1)
        for tool in listing.tools
    ]
    queries = [r.query for r in load_requests()]
    with tempfile.TemporaryDirectory() as tmp:
        tools_file = Path(tmp) / "tools.json"
        tools_file.write_text(json.dumps(tools))
        backend = bench_backend("bench", BENCH_TOOLS_FILE=str(tools_file))
        profiles = [{"name": "find", "mode": "search"}]
        with running_gateway([backend], profiles=profiles) as (url, _, _):
            client = LeanClient(url + "/find")
            timings: dict[str, list[float]] = {"search": [], "call": [], "via_call_tool": []}
            echo = {"name": "bench__echo", "arguments": {"text": "x"}}
            for _ in range(HTTP_ROUNDS):
                for query in queries:
                    for key, params in (
                        (
                            "search",
                            {"name": "gateway__search_tools", "arguments": {"query": query}},
                        ),
                        ("call", echo),
                        ("via_call_tool", {"name": "gateway__call_tool", "arguments": echo}),
                    ):
                        started = time.perf_counter()
                        result = client.call("tools/call", params)
                        timings[key].append((time.perf_counter() - started) * 1000)
                        assert result.get("isError") is not True, result
    row: dict[str, Any] = {"tools": total}
    for key, samples in timings.items():
        row[f"{key}_p50_ms"], row[f"{key}_p99_ms"] = _percentiles(samples)
    return row


def main() -> None:
    """Measure, print the table, write benchmarks/results/profiles.json."""
    rows = [row for total in SIZES for row in measure(total)]
    header = (
        f"{'tools':>6} {'profile':<16} {'items':>6} {'view KiB':>9} {'B/item':>7} "
        f"{'view ms':>8} {'list bytes':>11} {'~tokens':>8} {'vs full':>8}"
    )
    print(header)
    for r in rows:
        per_item = r["view_bytes"] / r["items"] if r["items"] and r["view_bytes"] else 0
        print(
            f"{r['tools']:>6} {r['profile']:<16} {r['items']:>6} {r['view_bytes'] / 1024:>9.1f} "
            f"{per_item:>7.1f} {r['view_ms']:>8.2f} {r['list_bytes']:>11} "
            f"{r['list_tokens']:>8} {r['ratio']:>8.4f}"
        )
    http = [] if "--no-http" in sys.argv else [measure_http(total) for total in SIZES]
    if http:
        print()
        print(
            f"{'tools':>6} {'search_tools p50/p99 ms':>24} {'tools/call p50/p99 ms':>22} "
            f"{'via call_tool p50/p99 ms':>25}"
        )
    for r in http:
        print(
            f"{r['tools']:>6} {r['search_p50_ms']:>12.2f} / {r['search_p99_ms']:<9.2f} "
            f"{r['call_p50_ms']:>10.2f} / {r['call_p99_ms']:<9.2f} "
            f"{r['via_call_tool_p50_ms']:>12.2f} / {r['via_call_tool_p99_ms']:<9.2f}"
        )
    path = write_results(
        "profiles",
        {
            "machine": platform.platform(),
            "python": platform.python_version(),
            "rows": rows,
            "http": http,
        },
    )
    print(f"written: {path}")


if __name__ == "__main__":
    main()
