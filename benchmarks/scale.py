"""Issue 17's scale rows: each figure at three sizes, and how its cost grows.

Rows (full sizes; ``--quick`` divides them for a smoke run):

- ``sessions``: memory per idle client session at 2,500 / 5,000 / 10,000
  sessions: the gateway's RSS before and after opening them, divided. The
  sessions hold no connection (each is opened with initialize +
  initialized over one keep-alive connection, as ``run.py``'s sessions
  section does), so the figure is the session's own state.
- ``fanout``: a backend's ``tools/list_changed`` to the last of 2,500 /
  5,000 / 10,000 GET streams, one per session, from the backend's own
  emission (bench_server stamps it with CLOCK_MONOTONIC) to the event's
  arrival on the last stream; the median of ``--fanout-trials`` changes.
  The same gateways give the sessions row: each size is a fresh gateway
  whose sessions are opened, measured idle, then given their streams.
- ``startup``: ``trio-mcp-gateway serve`` spawn to ``/readyz`` 200 with 50 /
  100 / 200 stdio backends, against spawning the same backends and
  initializing each in parallel, in the same run (``crowd.direct_start``).
- ``catalog``: ``catalog_scale.measure`` at 10,000 / 30,000 / 100,000
  tools (in-process; memory per tool, the merged list walk, the first
  build, the rebuild after one backend changes, the gateway's follow-up of
  that change).

Every row gets the growth of its per-unit cost (figure ÷ size) relative to
the smallest size and a verdict from ``benchmarks.growth``. The rule: the exponent
``k = log(total_last / total_first) / log(size_last / size_first)`` of the
total; ``linear`` when ``|k - 1| <= 0.2``, ``sub-linear`` below,
``super-linear`` above (for a 4x span: the per-unit cost at the largest size
within 0.76-1.32x the smallest's). A row whose total should not grow with
the size (one backend's rebuild against the catalog) passes when ``k <=
0.2`` ("flat"). The target is checked at the largest size.

Everything talks to 127.0.0.1 only, every wait is bounded, and the process
stops by itself. Run (303 s on 2 shared cores, 2026-12-03; ``--quick`` 30 s)::

    .venv/bin/python -m benchmarks.scale
    .venv/bin/python -m benchmarks.scale --quick
    .venv/bin/python -m benchmarks.scale --only fanout,startup

Results go to ``benchmarks/results/scale.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks import catalog_scale, crowd, scale_fanout
from benchmarks.common import (
    bench_backend,
    machine,
    progress,
    running_gateway,
    write_results,
)
from benchmarks.growth import FLAT_EXPONENT, LINEAR_TOLERANCE, format_table, row

ROWS = ("catalog", "sessions", "fanout", "startup")
FULL = {"sessions": (2_500, 5_000, 10_000), "startup": (50, 100, 200)}
QUICK = {"sessions": (250, 500, 1_000), "startup": (5, 10, 20)}


# -- rows ----------------------------------------------------------------------


def rows_catalog(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The catalog at three sizes, measured by ``catalog_scale.measure``."""
    sizes = catalog_scale.QUICK_SIZES if args.quick else catalog_scale.SIZES
    runs = []
    for size in sizes:
        runs.append(
            catalog_scale.measure(
                size, catalog_scale.QUICK_CHANGES if args.quick else catalog_scale.CHANGES
            )
        )
        progress(f"catalog {size}: {runs[-1]['bytes_per_tool']:.0f} B/tool")
    tools = [r["tools"] for r in runs]
    memory = [r["bytes_per_tool"] * r["tools"] / 1024 for r in runs]
    largest = tools[-1]
    return [
        row("catalog memory", "KiB", tools, memory, per="tool"),
        row(
            "merged tools/list walk",
            "ms",
            tools,
            [r["walk_seconds"] * 1e3 for r in runs],
            per="tool",
        ),
        row("first build", "ms", tools, [r["first_build_seconds"] * 1e3 for r in runs], per="tool"),
        row(
            "rebuild after one backend changes",
            "ms",
            tools,
            [r["rebuild_one_backend_seconds"] * 1e3 for r in runs],
            per="tool",
            target=f"flat in the catalog (k <= {FLAT_EXPONENT})",
            ok=lambda g: g.flat,
            extra={"backend_tools": catalog_scale.TOOLS_PER_BACKEND},
        ),
        row(
            "the gateway's follow-up of that change",
            "ms",
            tools,
            [r["follow_up_seconds"] * 1e3 for r in runs],
            per="tool",
            extra={"note": "default profile, no search mode: views' refresh and gauges"},
        ),
        row(
            "whole rebuild (the baseline)",
            "ms",
            tools,
            [r["whole_rebuild_seconds"] * 1e3 for r in runs],
            per="tool",
            extra={"note": f"what one change cost before the incremental merge, at {largest}"},
        ),
    ]


def rows_sessions_fanout(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Idle sessions and list_changed fan-out (``benchmarks.scale_fanout``)."""
    return scale_fanout.rows(args, (QUICK if args.quick else FULL)["sessions"])


def rows_startup(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Spawn to ready with N stdio backends, against the same N started directly."""
    sizes = (QUICK if args.quick else FULL)["startup"]
    crowd.raise_fd_limit(max(sizes) * 4 + 1024)
    gateway_ms, direct_ms, samples = [], [], []
    for count in sizes:
        through, direct = [], []
        for _ in range(args.startup_repeats):
            direct.append(crowd.direct_start(count) * 1e3)
            configs = [bench_backend(f"b{b:03d}") for b in range(count)]
            with running_gateway(configs) as (_url, _proc, ready):
                through.append(ready * 1e3)
        gateway_ms.append(statistics.median(through))
        direct_ms.append(statistics.median(direct))
        samples.append({"backends": count, "gateway_ms": through, "direct_ms": direct})
        progress(f"startup {count}: {gateway_ms[-1]:.0f} vs {direct_ms[-1]:.0f} ms direct")
    ratios = [g / d for g, d in zip(gateway_ms, direct_ms, strict=True)]
    return [
        row(
            "stdio backends ready through the gateway",
            "ms",
            sizes,
            gateway_ms,
            per="backend",
            target="<= 1.3x direct",
            ok=lambda _g: ratios[-1] <= 1.3,
            extra={"ratio_to_direct": ratios, "samples": samples},
        ),
        row(
            "the same backends started directly in parallel", "ms", sizes, direct_ms, per="backend"
        ),
    ]


RUNNERS: dict[str, Callable[[argparse.Namespace], list[dict[str, Any]]]] = {
    "catalog": rows_catalog,
    "sessions": rows_sessions_fanout,
    "fanout": rows_sessions_fanout,
    "startup": rows_startup,
}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Flags; ``--quick`` divides the sizes for a smoke run."""
    p = argparse.ArgumentParser(description="Issue 17 scale rows: three sizes and the growth.")
    p.add_argument("--only", default=",".join(ROWS), help=f"comma list of {ROWS}")
    p.add_argument("--quick", action="store_true", help="a tenth of the sizes (about 1 minute)")
    p.add_argument("--fanout-trials", type=int, default=5, help="changes timed per size (5)")
    p.add_argument(
        "--fanout-debounce",
        type=float,
        default=0.001,
        help="notifications.debounce of the fan-out gateways (0.001, as run.py)",
    )
    p.add_argument(
        "--fanout-baseline",
        metavar="REV",
        help="also measure the fan-out and sessions rows with the gateway of this git "
        "revision, alternating with the working tree's at each size (a loaded machine "
        "moves both the same way)",
    )
    p.add_argument(
        "--profile-seconds",
        type=int,
        default=0,
        help=f"after the largest fan-out's measured changes, py-spy records the gateway "
        f"this long during more changes into benchmarks/results/{scale_fanout.PROFILE_FILE} "
        "(0: none)",
    )
    p.add_argument("--startup-repeats", type=int, help="starts per size (3; 1 with --quick)")
    args = p.parse_args(argv)
    if args.startup_repeats is None:
        args.startup_repeats = 1 if args.quick else 3
    args.only = [x.strip() for x in args.only.split(",") if x.strip()]
    unknown = set(args.only) - set(ROWS)
    if unknown:
        p.error(f"unknown row(s): {', '.join(sorted(unknown))}")
    if args.fanout_trials < 1 or args.startup_repeats < 1:
        p.error("--fanout-trials and --startup-repeats must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Measure the chosen rows, print them with their growth, write the JSON."""
    args = parse_args(argv)
    started = time.time()
    about = machine()
    print(
        f"mcp-gateway scale rows, {time.strftime('%Y-%m-%d %H:%M')}: {about['cpu_model']}, "
        f"{about['cpu_count']} CPUs, Python {about['python']}, {about['commit']}"
    )
    print(
        f"verdict: k = log(total ratio) / log(size ratio), first to last size; linear when "
        f"|k - 1| <= {LINEAR_TOLERANCE}, flat when k <= {FLAT_EXPONENT}"
    )
    rows: list[dict[str, Any]] = []
    done: set[Callable[[argparse.Namespace], list[dict[str, Any]]]] = set()
    load = []
    for name in ROWS:
        runner = RUNNERS[name]
        if name not in args.only or runner in done:
            continue
        done.add(runner)
        load.append(os.getloadavg()[0])
        rows.extend(runner(args))
    load.append(os.getloadavg()[0])
    print()
    for line in format_table(rows):
        print(line)
    missed = [r["name"] for r in rows if r["pass"] is False]
    passed = sum(1 for r in rows if r["pass"])
    seconds = time.time() - started
    print(f"\ntargets: {passed} pass, {len(missed)} miss; {seconds:.0f} s")
    result = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": about,
        "quick": args.quick,
        "seconds": seconds,
        "load_average": load,
        "rows": rows,
    }
    path = write_results("scale-quick" if args.quick else "scale", result)
    print(f"written: {path}")
    return result


if __name__ == "__main__":
    main()
