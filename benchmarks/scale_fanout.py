"""The sessions and fan-out rows of ``benchmarks.scale`` (issue 17).

One fresh gateway per size: it opens N sessions over one keep-alive
connection (the memory per idle session), gives each a GET stream (the
memory per stream), then the backend changes its list ``--fanout-trials``
times and each change's arrival on every stream is timed from the
backend's emission (``crowd.Watch``: the kernel's receive stamp).
``--fanout-baseline REV`` measures another build the same way,
alternating with the working tree's at each size.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import crowd, lean
from benchmarks.common import (
    RESULTS,
    ROOT,
    baseline_tree,
    bench_backend,
    progress,
    running_gateway,
)
from benchmarks.growth import row
from benchmarks.lean import HttpConnection
from benchmarks.peers import py_spy

# The py-spy flame graph of the largest fan-out (--profile-seconds), committed
# next to the table when a target is missed.
PROFILE_FILE = "scale-fanout-flame.svg"


def _change(conn: HttpConnection, control: str, watch: crowd.Watch) -> list[float]:
    """One list change of the backend; the event's arrival on each stream, from its emission."""
    time.sleep(0.5)  # the previous change's window passes
    crowd.drain(watch.streams)
    result = conn.call(control, "tools/call", {"name": "bench__change"})
    emitted = int(result["content"][0]["text"]) / 1e9
    return [arrival - emitted for arrival in watch.await_marker(timeout=30)]


def _profile_fanout(
    pid: int, conn: HttpConnection, control: str, watch: crowd.Watch, seconds: int
) -> str:
    """py-spy on the gateway during more changes, after the measured ones; returns a note.

    The changes recorded are not in any figure (the sampler costs the
    gateway CPU); the SVG shows where a fan-out's time goes.
    """
    spy = py_spy()
    if spy is None:
        return "profile: py-spy not installed (python -m benchmarks.peers); none made"
    RESULTS.mkdir(parents=True, exist_ok=True)
    output = RESULTS / PROFILE_FILE
    command = [str(spy), "record", "--pid", str(pid), "--duration", str(seconds)]
    command += ["--rate", "250", "--nonblocking", "--output", str(output)]
    recorder = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    recorded: list[float] = []
    time.sleep(0.5)  # py-spy attaches
    while recorder.poll() is None and len(recorded) < 50:
        recorded.append(max(_change(conn, control, watch), default=math.nan) * 1e3)
    try:
        _, err = recorder.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        recorder.kill()
        _, err = recorder.communicate()
    if recorder.returncode != 0:
        reason = err.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
        return f"profile: py-spy failed ({reason[0]}); none made"
    shown = ", ".join(f"{ms:.0f}" for ms in recorded)
    return (
        f"profile of the gateway during {len(recorded)} more changes to {len(watch.streams)} "
        "streams "
        f"(last stream at {shown} ms while sampled): {output.relative_to(ROOT)}"
    )


def _fanout_size(
    count: int,
    changes: int,
    debounce: float,
    profile_seconds: int = 0,
    tree: Path | None = None,
) -> dict[str, Any]:
    """A fresh gateway: ``count`` idle sessions, then a GET stream each, then changes.

    With ``profile_seconds``, py-spy then records the gateway during more
    changes (:func:`_profile_fanout`); with ``tree``, the gateway is that
    build (``common.baseline_tree``) rather than the working tree's.
    """
    backend = bench_backend("bench", BENCH_CHANGE="1")
    with running_gateway(
        [backend],
        tree=tree,
        server_options={"max_sessions": count + 200},
        notifications={"debounce": debounce},
    ) as (url, proc, _ready):
        conn = HttpConnection(url)
        control = conn.open_session()
        for _ in range(50):  # warm caches and allocator arenas, as run.py does
            conn.open_session()
        time.sleep(0.3)
        before = lean.process_memory_kib(proc.pid)["VmRSS"]
        started = time.perf_counter()
        sessions = [conn.open_session() for _ in range(count)]
        opening = time.perf_counter() - started
        time.sleep(0.3)
        idle = lean.process_memory_kib(proc.pid)["VmRSS"]
        streams = crowd.open_streams(url, sessions)
        watch = crowd.Watch(streams)
        time.sleep(0.3)
        streamed = lean.process_memory_kib(proc.pid)["VmRSS"]
        trials: list[dict[str, float]] = []
        missing: list[int] = []
        note = ""
        try:
            for _ in range(changes):
                arrivals = _change(conn, control, watch)
                if len(arrivals) < count:
                    missing.append(count - len(arrivals))
                if arrivals:
                    trials.append(
                        {
                            "last_ms": max(arrivals) * 1e3,
                            "first_ms": min(arrivals) * 1e3,
                            "received": len(arrivals),
                        }
                    )
            if profile_seconds:
                note = _profile_fanout(proc.pid, conn, control, watch, profile_seconds)
        finally:
            watch.close()
            for sock in streams:
                sock.close()
            conn.close()
    return {
        "count": count,
        "rss_before_kib": before,
        "rss_idle_kib": idle,
        "rss_streams_kib": streamed,
        "open_seconds": opening,
        "trials": trials,
        "missing": missing,
        "profile": note,
    }


def rows(args: argparse.Namespace, sizes: Sequence[int]) -> list[dict[str, Any]]:
    """Idle sessions and list_changed fan-out, from one fresh gateway per size."""
    crowd.raise_fd_limit(max(sizes) + 1024)
    runs = []
    before: list[dict[str, Any]] = []
    rev = args.fanout_baseline
    with baseline_tree(rev) if rev else contextlib.nullcontext(None) as tree:
        for count in sizes:
            if tree is not None:  # the baseline first, then this tree, at each size
                before.append(
                    _fanout_size(count, args.fanout_trials, args.fanout_debounce, 0, tree)
                )
                last = statistics.median(t["last_ms"] for t in before[-1]["trials"])
                progress(f"sessions/fanout {count} at {rev}: {last:.0f} ms to the last stream")
            spy = args.profile_seconds if count == sizes[-1] else 0
            runs.append(_fanout_size(count, args.fanout_trials, args.fanout_debounce, spy))
            if not runs[-1]["trials"]:
                raise RuntimeError(f"no stream of {count} got list_changed within 30 s of a change")
            last = statistics.median(t["last_ms"] for t in runs[-1]["trials"])
            progress(f"sessions/fanout {count}: {last:.0f} ms to the last stream")
    return _sessions_fanout_rows(sizes, runs) + (
        _baseline_rows(sizes, before, rev) if before else []
    )


def _figures(runs: list[dict[str, Any]]) -> tuple[list[float], ...]:
    """Per size: idle-session memory, stream memory, median last and first arrival."""
    return (
        [r["rss_idle_kib"] - r["rss_before_kib"] for r in runs],
        [r["rss_streams_kib"] - r["rss_idle_kib"] for r in runs],
        [statistics.median(t["last_ms"] for t in r["trials"]) for r in runs],
        [statistics.median(t["first_ms"] for t in r["trials"]) for r in runs],
    )


def _baseline_rows(
    sizes: Sequence[int], runs: list[dict[str, Any]], rev: str
) -> list[dict[str, Any]]:
    """The same figures for the baseline build, measured alternately with this tree's."""
    idle, streams, last, first = _figures(runs)
    return [
        row(f"memory of idle sessions ({rev})", "KiB", sizes, idle, per="session"),
        row(f"memory of their GET streams ({rev})", "KiB", sizes, streams, per="stream"),
        row(
            f"list_changed to the last stream ({rev})",
            "ms",
            sizes,
            last,
            per="stream",
            extra={"trials": [r["trials"] for r in runs]},
        ),
        row(f"list_changed to the first stream ({rev})", "ms", sizes, first, per="stream"),
    ]


def _sessions_fanout_rows(sizes: Sequence[int], runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The sessions and fan-out rows of this tree's runs."""
    idle, streams, last, first = _figures(runs)
    missing = sum(sum(r["missing"]) for r in runs)
    return [
        row(
            "memory of idle sessions",
            "KiB",
            sizes,
            idle,
            per="session",
            target="<= 16 KiB a session",
            ok=lambda g: g.per_unit[-1] <= 16,
        ),
        row(
            "opening them (initialize + initialized, one by one)",
            "s",
            sizes,
            [r["open_seconds"] for r in runs],
            per="session",
        ),
        row("memory of their GET streams", "KiB", sizes, streams, per="stream"),
        row(
            "list_changed to the last stream",
            "ms",
            sizes,
            last,
            per="stream",
            target="<= 1,000 ms",
            ok=lambda g: g.totals[-1] <= 1000,
            extra={
                "trials": [r["trials"] for r in runs],
                "streams_missed": missing,
                "note": runs[-1]["profile"],
            },
        ),
        row("list_changed to the first stream", "ms", sizes, first, per="stream"),
    ]
