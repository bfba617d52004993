"""Issue 17 scale row: the merged catalog at 10,000, 30,000 and 100,000 tools.

Backends of 100 tools each are published into one ``Catalog`` (the object a
gateway keeps), so the sizes are 100, 300 and 1,000 backends. For each size
it prints:

* memory per tool: the Python heap the catalog holds beyond the listings
  themselves (a backend keeps its listing anyway), from ``tracemalloc``;
* a merged ``tools/list`` walk: every page of 100 planned and rendered, as the
  router does, for the whole catalog;
* the rebuild after one backend changes (a new listing of its 100 tools), the
  median of many; the target is a cost proportional to that backend, so the
  figure should stay flat while the catalog grows tenfold;
* the gateway's follow-up of each of those changes, timed apart so the row
  above stays the catalog's: what ``app.catalog_changed`` computes with the
  default profile and no search mode, less its I/O (the profile views'
  refresh, the ``catalog_items`` counts, the profile budget gauges);
* the first build (every backend published once, one after the other, as
  backends come up);
* the baseline of the same run: a whole rebuild of the same catalog, which
  is what every change cost before the merge became incremental.

Each row ends with the growth from the smallest size, so "linear" and "flat"
can be read off rather than assumed. Pure in-process work: no gateway, no
children, no network.

Run: ``.venv/bin/python -m benchmarks.catalog_scale [--quick]``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc
from typing import Any

from benchmarks.common import write_results
from gateway.catalog.catalog import Catalog
from gateway.catalog.cursor import CursorPayload
from gateway.catalog.naming import NamingRules
from gateway.catalog.pages import plan_page, render_page
from gateway.catalog.profiles import ProfileViews
from gateway.catalog.snapshot import BackendListing, Kind, Snapshot
from gateway.router.profile_setup import budgets

TOOLS_PER_BACKEND = 100
PAGE_SIZE = 100
SIZES = (10_000, 30_000, 100_000)
QUICK_SIZES = (2_000, 6_000, 20_000)
# Changes timed per size, the figure being their median. 200 since a change
# costs about 0.5 ms: with 40, one loaded moment on a shared machine moved
# the median of the largest size by half and the growth verdict with it.
CHANGES = 200
QUICK_CHANGES = 10
RULES = NamingRules()


def _tool(backend: int, index: int, generation: int = 0) -> dict[str, Any]:
    return {
        "name": f"tool_{index:03d}",
        "description": f"Tool {index} of backend {backend}, generation {generation}: "
        "does one thing and says so in about a sentence.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}, "count": {"type": "integer"}},
            "required": ["text"],
        },
    }


def _listing(backend: int, generation: int = 0) -> BackendListing:
    name = f"svc{backend:04d}"
    tools = tuple(_tool(backend, i, generation) for i in range(TOOLS_PER_BACKEND))
    return BackendListing(name, name, tools=tools)


def _walk(catalog: Catalog) -> int:
    view = catalog.snapshot.view(Kind.TOOLS)
    position: CursorPayload | None = None
    pages = 0
    while True:
        plan = plan_page("tools", view, position, PAGE_SIZE)
        render_page("tools", [entry.encoded for entry in plan.entries], None)
        pages += 1
        if plan.next is None:
            return pages
        position = plan.next


def measure(total: int, rebuilds: int) -> dict[str, Any]:
    """One size: memory, walk, first build and one backend's rebuild."""
    backends = total // TOOLS_PER_BACKEND
    gc.collect()
    tracemalloc.start()
    listings = [_listing(b) for b in range(backends)]
    after_listings = tracemalloc.get_traced_memory()[0]
    catalog = Catalog(RULES)
    started = time.perf_counter()
    for listing in listings:
        catalog.publish(listing)
    first_build = time.perf_counter() - started
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - after_listings
    tracemalloc.stop()
    assert len(catalog.snapshot.view(Kind.TOOLS)) == total
    walks = []
    for _ in range(3):
        started = time.perf_counter()
        pages = _walk(catalog)
        walks.append(time.perf_counter() - started)
    times = []
    follow_ups = []
    views = ProfileViews()
    for generation in range(1, rebuilds + 1):
        changed = _listing(generation % backends, generation)
        old = catalog.snapshot
        started = time.perf_counter()
        kinds = catalog.publish(changed)
        times.append(time.perf_counter() - started)
        assert kinds == frozenset({Kind.TOOLS})
        started = time.perf_counter()
        _follow_up(views, old, catalog.snapshot)
        follow_ups.append(time.perf_counter() - started)
    # The baseline of the same run: a whole rebuild over the same catalog
    # (set_prefixes takes it, with every backend's encoded items kept), which
    # is what each change cost before the incremental merge.
    wholes = []
    for _ in range(5):
        started = time.perf_counter()
        catalog.set_prefixes({})
        wholes.append(time.perf_counter() - started)
    return {
        "tools": total,
        "whole_rebuild_seconds": statistics.median(wholes),
        "backends": backends,
        "bytes_per_tool": held / total,
        "walk_seconds": statistics.median(walks),
        "walk_pages": pages,
        "first_build_seconds": first_build,
        "rebuild_one_backend_seconds": statistics.median(times),
        "follow_up_seconds": statistics.median(follow_ups),
    }


def _follow_up(views: ProfileViews, old: Snapshot, new: Snapshot) -> None:
    """``app.catalog_changed``'s computing for the default profile, without its I/O."""
    assert views.refresh(old, new)
    for kind in Kind:
        new.view(kind).backend_counts()
    budgets(views, views.names, new)


def _growth(rows: list[dict[str, Any]], key: str) -> str:
    base = rows[0][key]
    return " / ".join(f"{row[key] / base:.2f}x" for row in rows)


def main() -> None:
    """Measure each size, print the table and the growth, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sizes 2k/6k/20k, fewer rebuilds")
    args = parser.parse_args()
    sizes = QUICK_SIZES if args.quick else SIZES
    rows = [measure(size, QUICK_CHANGES if args.quick else CHANGES) for size in sizes]
    print(
        f"{'tools':>8} {'B/tool':>8} {'walk ms':>9} {'first build s':>14} "
        f"{'one backend ms':>15} {'follow-up ms':>13} {'whole rebuild ms':>17} {'ratio':>7}"
    )
    for row in rows:
        one = row["rebuild_one_backend_seconds"]
        whole = row["whole_rebuild_seconds"]
        print(
            f"{row['tools']:>8} {row['bytes_per_tool']:>8.0f} {row['walk_seconds'] * 1e3:>9.1f} "
            f"{row['first_build_seconds']:>14.2f} {one * 1e3:>15.2f} "
            f"{row['follow_up_seconds'] * 1e3:>13.2f} {whole * 1e3:>17.2f} "
            f"{one / whole:>7.3f}"
        )
    size_growth = _growth(rows, "tools")
    print(f"growth of the catalog:          {size_growth}")
    print(f"growth of memory:               {_growth(rows, 'bytes_per_tool')} (per tool)")
    print(f"growth of the walk:             {_growth(rows, 'walk_seconds')}")
    print(f"growth of one backend's change: {_growth(rows, 'rebuild_one_backend_seconds')}")
    print(f"growth of the follow-up:        {_growth(rows, 'follow_up_seconds')}")
    print(f"growth of a whole rebuild:      {_growth(rows, 'whole_rebuild_seconds')}")
    path = write_results("catalog_scale", {"rows": rows, "quick": args.quick})
    print(f"written: {path}")


if __name__ == "__main__":
    main()
