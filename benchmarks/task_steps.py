"""trio task steps and scheduler batches per tool call: a figure the machine's load cannot bend.

CPU time per call on a shared 2-core machine moved by a third between
identical runs (issue 17); what the gateway *does* per call does not. This
runs the gateway with a trio instrument (``benchmarks/task_steps_site``,
loaded through ``PYTHONPATH``) and reports, per call, how many task steps
ran and how many passes through the I/O wait (one ``epoll_wait`` each) the
scheduler made, for this tree and optionally a baseline commit, alternating
builds by round. Each step costs the scheduler a few µs of Python, each
batch a system call more, so fewer of both is less CPU a call on any
machine; the CPU figure is printed beside them, with the load it met.

Usage::

    .venv/bin/python -m benchmarks.task_steps [--baseline REV] [--concurrency 1,8]
        [--backend bench|sdk] [--seconds 3] [--rounds 2]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, baseline_tree, bench_backend, running_gateway
from benchmarks.lean import HttpConnection, http_load
from benchmarks.run import ECHO_ARGS, _sdk_backend

SITE = ROOT / "benchmarks" / "task_steps_site"


def _counts(path: Path) -> tuple[int, int]:
    steps, batches = path.read_text(encoding="ascii").split()
    return int(steps), int(batches)


@contextlib.contextmanager
def _counted(env_path: Path) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "GATEWAY_BENCH_STEPS")}
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SITE), saved["PYTHONPATH"]]))
    os.environ["GATEWAY_BENCH_STEPS"] = str(env_path)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def measure(backend: str, concurrency: int, seconds: float, tree: Path | None) -> dict[str, float]:
    """Steps, batches and CPU per call of one gateway build under a closed-loop load."""
    config = _sdk_backend("b") if backend == "sdk" else bench_backend("b")
    with tempfile.TemporaryDirectory() as folder:
        counts = Path(folder) / "steps"
        with _counted(counts), running_gateway([config], tree=tree) as (url, proc, _):
            conn = HttpConnection(url)
            sessions = [conn.open_session() for _ in range(concurrency)]
            params: dict[str, Any] = {"name": "b__echo", "arguments": ECHO_ARGS}
            http_load(url, sessions, "tools/call", params, warmup=0.3, duration=1.0)
            before = _counts(counts)
            load = http_load(
                url,
                sessions,
                "tools/call",
                params,
                warmup=0.0,
                duration=seconds,
                watch_pid=proc.pid,
            )
            time.sleep(0.2)  # the last calls' steps reach the file
            after = _counts(counts)
            conn.close()
    calls = load.calls
    summary = load.summary()
    return {
        "steps": (after[0] - before[0]) / calls,
        "batches": (after[1] - before[1]) / calls,
        "cpu_us": summary["target_cpu_us_per_call"],
        "other_cores": load.other_cores,
        "calls": calls,
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Print steps, batches and CPU per call for each build, concurrency and round."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--baseline", help="a commit whose gateway package runs beside this tree's")
    p.add_argument("--backend", choices=("bench", "sdk"), default="bench")
    p.add_argument("--concurrency", default="1,8")
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args(argv)
    levels = [int(c) for c in args.concurrency.split(",")]
    figures: dict[tuple[str, int], list[dict[str, float]]] = {}
    with contextlib.ExitStack() as stack:
        builds: list[tuple[str, Path | None]] = [("this tree", None)]
        if args.baseline:
            builds.append((args.baseline, stack.enter_context(baseline_tree(args.baseline))))
        for _ in range(args.rounds):
            for name, tree in builds:
                for concurrency in levels:
                    got = measure(args.backend, concurrency, args.seconds, tree)
                    figures.setdefault((name, concurrency), []).append(got)
                    print(
                        f"   .. {name} c={concurrency}: {got['steps']:.2f} steps, "
                        f"{got['batches']:.2f} batches, {got['cpu_us']:.0f} µs CPU a call "
                        f"({got['calls']:.0f} calls; other load {got['other_cores']:.2f} cores)",
                        flush=True,
                    )
    print(f"\nper call, {args.backend} backend, median of {args.rounds} rounds:")
    for (name, concurrency), runs in figures.items():
        med = {k: statistics.median(r[k] for r in runs) for k in ("steps", "batches", "cpu_us")}
        print(
            f"{name:>12} c={concurrency:<3} steps {med['steps']:.2f}  batches "
            f"{med['batches']:.2f}  CPU {med['cpu_us']:.0f} µs"
        )


if __name__ == "__main__":
    main()
