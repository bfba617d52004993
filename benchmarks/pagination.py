"""Issue 3 benchmark: walking a 10,000-tool merged catalog page by page.

50 backends x 200 tools behind one gateway, at gateway page sizes 50 and
500. Prints the full tools/list walk time through the gateway's HTTP
endpoint, the time per page, and the catalog's memory, next to the
baseline of one server listing the same 10,000 tools directly over stdio,
measured in the same run.

Run: ``.venv/bin/python -m benchmarks.pagination`` (``make bench``).
"""

from __future__ import annotations

import platform
import time
import tracemalloc
from typing import Any

from benchmarks.common import (
    BENCH_SERVER,
    LeanClient,
    StdioClient,
    bench_backend,
    median_seconds,
    running_gateway,
    write_results,
)
from gateway.catalog.catalog import Catalog
from gateway.catalog.naming import NamingRules
from gateway.catalog.snapshot import BackendListing, Kind

BACKENDS = 50
TOOLS_PER_BACKEND = 200
REPEATS = 15


def _direct_list_seconds(total_tools: int) -> float:
    server = StdioClient(BENCH_SERVER, {"BENCH_TOOLS": str(total_tools)})
    try:
        samples = []
        for _ in range(REPEATS):
            started = time.perf_counter()
            tools = server.call("tools/list")["tools"]
            samples.append(time.perf_counter() - started)
            assert len(tools) == total_tools
        return median_seconds(samples)
    finally:
        server.close()


def _walk(client: LeanClient) -> tuple[int, int]:
    cursor = None
    items = pages = 0
    while True:
        result = client.call("tools/list", {"cursor": cursor} if cursor else None)
        items += len(result["tools"])
        pages += 1
        cursor = result.get("nextCursor")
        if cursor is None:
            return items, pages


def _catalog_bytes() -> int:
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    listings = [
        BackendListing(
            backend=f"b{b:02d}",
            prefix=f"b{b:02d}",
            tools=tuple(
                {
                    "name": f"tool_{i:04d}",
                    "description": f"Benchmark tool {i}.",
                    "inputSchema": schema,
                }
                for i in range(TOOLS_PER_BACKEND)
            ),
        )
        for b in range(BACKENDS)
    ]
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    catalog = Catalog(NamingRules())
    for listing in listings:
        catalog.publish(listing)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    assert len(catalog.snapshot.view(Kind.TOOLS)) == BACKENDS * TOOLS_PER_BACKEND
    return sum(stat.size_diff for stat in after.compare_to(before, "filename"))


def main() -> dict[str, Any]:
    """Run the benchmark, print a table, write JSON."""
    total = BACKENDS * TOOLS_PER_BACKEND
    direct = _direct_list_seconds(total)
    rows = []
    for page_size in (50, 500):
        backends = [bench_backend(f"b{b:02d}", TOOLS_PER_BACKEND) for b in range(BACKENDS)]
        with running_gateway(backends, pagination={"page_size": page_size}) as (url, _proc, _ready):
            client = LeanClient(url)
            _walk(client)  # warm-up
            samples = []
            for _ in range(REPEATS):
                started = time.perf_counter()
                items, pages = _walk(client)
                samples.append(time.perf_counter() - started)
                assert items == total, items
            walk = median_seconds(samples)
        rows.append(
            {
                "page_size": page_size,
                "pages": pages,
                "walk_ms": walk * 1000,
                "per_page_ms": walk * 1000 / pages,
                "direct_list_ms": direct * 1000,
                "ratio_to_direct": walk / direct,
            }
        )
    catalog_mib = _catalog_bytes() / 2**20
    print(f"\nPagination: {BACKENDS} backends x {TOOLS_PER_BACKEND} tools = {total} tools")
    print(f"direct: one stdio server lists {total} tools in one response: {direct * 1000:.1f} ms")
    print(f"{'page size':>9} {'pages':>6} {'walk ms':>9} {'ms/page':>8} {'walk/direct':>12}")
    for row in rows:
        print(
            f"{row['page_size']:>9} {row['pages']:>6} {row['walk_ms']:>9.1f} "
            f"{row['per_page_ms']:>8.2f} {row['ratio_to_direct']:>12.2f}"
        )
    print(
        f"catalog memory for {total} tools: {catalog_mib:.1f} MiB "
        f"({catalog_mib * 2**20 / total:.0f} bytes per tool)"
    )
    data = {
        "machine": platform.platform(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d"),
        "tools": total,
        "direct_list_ms": direct * 1000,
        "rows": rows,
        "catalog_mib": catalog_mib,
    }
    print(f"written: {write_results('pagination', data)}")
    return data


if __name__ == "__main__":
    main()
