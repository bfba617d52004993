"""Issue 15 benchmark: the tool search index at 1,000 and 10,000 tools.

The real peers' tools (tests/catalog/relevance/tools.json: server-everything,
server-filesystem, alpha, beta, notes, toolbox) are replicated under many
backend prefixes, each copy's description varied with words drawn from the
whole set, until the catalog holds N tools. For each N it prints:

* index build time and memory (SQLite pages, Python heap, RSS growth);
* ``search`` latency p50/p99 over the relevance set's requests (limit 8);
* one backend's incremental update (``sync_index``) vs a full rebuild;
* a search-mode ``tools/list`` (the two gateway tools) vs the full list, in
  bytes and as a ratio.

and, once, recall@1/@5 on the relevance set with and without the synonym
groups. Pure in-process work: no gateway, no children.

Run: ``.venv/bin/python -m benchmarks.search``.
"""

from __future__ import annotations

import _sqlite3
import ctypes
import gc
import json
import platform
import random
import statistics
import time
import tracemalloc
from pathlib import Path
from typing import Any

import msgspec

from benchmarks.common import write_results
from gateway.catalog.naming import NamingRules
from gateway.catalog.search import ToolIndex, index_snapshot, sync_index
from gateway.catalog.search_text import words
from gateway.catalog.search_tools import search_mode_tools
from gateway.catalog.snapshot import BackendListing, Kind, Snapshot, build_snapshot
from tests.catalog.test_search_relevance import load_requests, load_tools_snapshot, recall

ROOT = Path(__file__).resolve().parent.parent
TOOLS_JSON = ROOT / "tests" / "catalog" / "relevance" / "tools.json"
SIZES = (1_000, 10_000)
SEARCH_ROUNDS = 12  # x 175 requests = 2,100 timed searches per size
UPDATE_ROUNDS = 5
RULES = NamingRules()
_encoder = msgspec.json.Encoder()


def _base_tools() -> list[dict[str, Any]]:
    document = json.loads(TOOLS_JSON.read_text(encoding="utf-8"))
    separator = document["separator"]
    # One synthetic backend carries all six peers' tools, so "echo" of four
    # peers becomes everything_echo, alpha_echo, ...
    return [{**item, "name": item["name"].replace(separator, "_", 1)} for item in document["tools"]]


def _vocabulary(tools: list[dict[str, Any]]) -> list[str]:
    found: set[str] = set()
    for tool in tools:
        found.update(words(str(tool.get("description", ""))))
    return sorted(found)


def _listing(
    replica: int, base: list[dict[str, Any]], vocabulary: list[str], salt: str = ""
) -> BackendListing:
    rng = random.Random(f"{replica}{salt}")
    tools = []
    for tool in base:
        extra = " ".join(rng.sample(vocabulary, 6))
        tools.append({**tool, "description": f"{tool.get('description', '')} ({extra})"})
    prefix = f"svc{replica:04d}"
    return BackendListing(prefix, prefix, tools=tuple(tools))


def synthetic_listings(total: int) -> list[BackendListing]:
    """Backends of the real tool set, replicated until ``total`` tools."""
    base = _base_tools()
    vocabulary = _vocabulary(base)
    listings = []
    left = total
    replica = 0
    while left > 0:
        listing = _listing(replica, base[:left], vocabulary)
        listings.append(listing)
        left -= len(listing.tools)
        replica += 1
    return listings


def _sqlite_heap_bytes() -> int:
    """SQLite's own allocations in this process (sqlite3_memory_used), which tracemalloc misses."""
    used = ctypes.CDLL(_sqlite3.__file__).sqlite3_memory_used
    used.restype = ctypes.c_int64
    return int(used())


def _db_bytes(index: ToolIndex) -> int:
    db = index._db  # benchmark-only peek at the private connection
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    size = db.execute("PRAGMA page_size").fetchone()[0]
    return int(pages) * int(size)


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(total: int, queries: list[str]) -> dict[str, Any]:
    """Every figure for one catalog size."""
    listings = synthetic_listings(total)
    snapshot = build_snapshot(listings, RULES)
    assert len(snapshot.view(Kind.TOOLS)) == total
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = index_snapshot(snapshot)
    heap = tracemalloc.get_traced_memory()[0] - before  # what the index keeps, Python side
    tracemalloc.stop()
    kept.close()
    gc.collect()
    sqlite_before = _sqlite_heap_bytes()
    started = time.perf_counter()
    index = index_snapshot(snapshot)
    build_s = time.perf_counter() - started
    sqlite_heap = _sqlite_heap_bytes() - sqlite_before
    latencies, cpu = [], []
    for _ in range(SEARCH_ROUNDS):
        for query in queries:
            c0 = time.thread_time()
            t0 = time.perf_counter()
            index.search(query, 8)
            latencies.append(time.perf_counter() - t0)
            cpu.append(time.thread_time() - c0)
    at_1, at_5 = _replica_recall(index)
    update_s, rebuild_s = _update_vs_rebuild(index, snapshot, listings)
    full_list = b'{"tools":[' + b",".join(e.encoded for e in snapshot.view(Kind.TOOLS))
    full_list += b"]}"
    search_list = _encoder.encode({"tools": search_mode_tools(RULES.separator)})
    figures = {
        "tools": total,
        "backends": len(listings),
        "build_ms": build_s * 1000,
        "db_bytes": _db_bytes(index),
        "python_heap_bytes": heap,
        "sqlite_heap_bytes": sqlite_heap,
        "search_p50_ms": statistics.median(latencies) * 1000,
        "search_p99_ms": _percentile(latencies, 0.99) * 1000,
        # CPU time of the searching thread: what a search costs when the
        # shared machine's other processes do not preempt it.
        "search_cpu_p50_ms": statistics.median(cpu) * 1000,
        "search_cpu_p99_ms": _percentile(cpu, 0.99) * 1000,
        "searches": len(latencies),
        "replica_recall@1": at_1,
        "replica_recall@5": at_5,
        "update_one_backend_ms": update_s * 1000,
        "full_rebuild_ms": rebuild_s * 1000,
        "update_vs_rebuild": update_s / rebuild_s,
        "full_list_bytes": len(full_list),
        "search_list_bytes": len(search_list),
        "search_vs_full": len(search_list) / len(full_list),
    }
    index.close()
    return figures


def _replica_recall(index: ToolIndex) -> tuple[float, float]:
    """Recall@1/@5 of the relevance set when any replica of a labelled tool counts."""
    requests = load_requests()
    hits = {1: 0, 5: 0}
    for request in requests:
        wanted = {name.replace(RULES.separator, "_", 1) for name in request.expect}
        found = [hit.name.split(RULES.separator, 1)[1] for hit in index.search(request.query, 5)]
        for k in hits:
            hits[k] += bool(wanted & set(found[:k]))
    return hits[1] / len(requests), hits[5] / len(requests)


def _update_vs_rebuild(
    index: ToolIndex, snapshot: Snapshot, listings: list[BackendListing]
) -> tuple[float, float]:
    """Median seconds: one backend's list changes (every one of its tools) vs indexing afresh."""
    base = _base_tools()
    vocabulary = _vocabulary(base)
    middle = len(listings) // 2
    updates, rebuilds = [], []
    current = snapshot
    for round_ in range(UPDATE_ROUNDS):
        changed = list(listings)
        changed[middle] = _listing(middle, base, vocabulary, salt=f"r{round_}")
        new = build_snapshot(changed, RULES)
        t0 = time.perf_counter()
        rewritten = sync_index(index, current, new)
        updates.append(time.perf_counter() - t0)
        assert rewritten == {changed[middle].backend}
        current = new
        t0 = time.perf_counter()
        fresh = index_snapshot(new)
        rebuilds.append(time.perf_counter() - t0)
        fresh.close()
    return statistics.median(updates), statistics.median(rebuilds)


def relevance() -> dict[str, float]:
    """Recall on the relevance set, with and without the synonym groups."""
    snapshot = load_tools_snapshot()
    requests = load_requests()
    figures: dict[str, float] = {"requests": len(requests)}
    for label, index in (
        ("", index_snapshot(snapshot)),
        ("plain_", index_snapshot(snapshot, synonyms={})),
    ):
        for k in (1, 5):
            figures[f"{label}recall@{k}"] = recall(index, requests, k)[0]
        index.close()
    return figures


def _print_table(rows: list[dict[str, Any]]) -> None:
    lines = [
        ("tools", "{:,}", "tools"),
        ("index build", "{:.0f} ms", "build_ms"),
        ("index memory: SQLite pages", "{:.1f} MB", "db_bytes"),
        ("index memory: SQLite heap", "{:.1f} MB", "sqlite_heap_bytes"),
        ("index memory: Python heap", "{:.1f} MB", "python_heap_bytes"),
        ("search p50 (wall)", "{:.3f} ms", "search_p50_ms"),
        ("search p99 (wall)", "{:.3f} ms", "search_p99_ms"),
        ("search CPU p50", "{:.3f} ms", "search_cpu_p50_ms"),
        ("search CPU p99", "{:.3f} ms", "search_cpu_p99_ms"),
        ("recall@1, any replica", "{:.3f}", "replica_recall@1"),
        ("recall@5, any replica", "{:.3f}", "replica_recall@5"),
        ("update one backend (46 tools)", "{:.1f} ms", "update_one_backend_ms"),
        ("full rebuild", "{:.0f} ms", "full_rebuild_ms"),
        ("update / rebuild", "1/{:.0f}", "update_vs_rebuild"),
        ("tools/list full", "{:,} B", "full_list_bytes"),
        ("tools/list search mode", "{:,} B", "search_list_bytes"),
        ("search mode / full", "1/{:.0f}", "search_vs_full"),
    ]
    print(f"{'':32}" + "".join(f"{row['tools']:>14,}" for row in rows))
    for label, fmt, key in lines[1:]:
        cells = []
        for row in rows:
            value = row[key]
            if key.endswith("_bytes") and "MB" in fmt:
                value = value / 1e6
            if fmt.startswith("1/"):
                value = 1 / value
            cells.append(f"{fmt.format(value):>14}")
        print(f"{label:32}" + "".join(cells))


def main() -> None:
    """Run every size, print the table and write benchmarks/results/search.json."""
    queries = [r.query for r in load_requests()]
    rows = [measure(total, queries) for total in SIZES]
    _print_table(rows)
    rel = relevance()
    print(
        f"\nrelevance set ({rel['requests']:.0f} requests, {len(_base_tools())} real tools): "
        f"recall@1 {rel['recall@1']:.3f}, recall@5 {rel['recall@5']:.3f}; "
        f"plain BM25 without synonyms: recall@1 {rel['plain_recall@1']:.3f}, "
        f"recall@5 {rel['plain_recall@5']:.3f}"
    )
    path = write_results(
        "search",
        {"machine": platform.platform(), "sizes": rows, "relevance": rel},
    )
    print(f"results -> {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
