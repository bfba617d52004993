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

Run: ``.venv/bin/python -m benchmarks.profiles``.
"""

from __future__ import annotations

import platform
import statistics
import time
import tracemalloc
from typing import Any

from benchmarks.common import write_results
from benchmarks.search import RULES, synthetic_listings
from gateway.catalog.profiles import SEARCH, Globs, Profile, ProfileViews, restrict
from gateway.catalog.snapshot import Kind, build_snapshot
from gateway.router.profiles import budget

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
    keys = snapshot.view(Kind.TOOLS).keys
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
                "items": len(view.view(Kind.TOOLS).entries),
                "view_bytes": grown,
                "view_ms": statistics.median(times),
                "list_bytes": figures.tools_list_bytes,
                "list_tokens": figures.tools_list_tokens,
                "ratio": figures.tools_list_bytes / full.tools_list_bytes,
            }
        )
    return rows


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
    path = write_results(
        "profiles",
        {"machine": platform.platform(), "python": platform.python_version(), "rows": rows},
    )
    print(f"written: {path}")


if __name__ == "__main__":
    main()
