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
        [--backend bench|sdk] [--seconds 3] [--rounds 2] [--profile] [--listing DIR]
    .venv/bin/python -m benchmarks.task_steps --instructions [--baseline REV]
        [--backend bench|sdk] [--rounds 2] [--calls 1000]

With ``--profile`` the gateway also runs under cProfile and the function
calls (Python and builtin) a tool call makes are counted: the closest to
instructions retired a call that a machine without a usable performance
counter (``perf stat`` reports ``instructions`` as not supported in this
virtual machine) can measure; the profiler's own timers are subtracted
(counted over an idle window). With ``--baseline`` each figure is also
printed as this tree ÷ the baseline, judged against issue 31's 0.7.

With ``--instructions`` the figure is instead the instructions the gateway
retires a c=1 ``tools/call``, counted by valgrind (cachegrind, no cache
simulation; only the gateway runs under it, not its backend: valgrind
follows no children). Each build's gateway is started twice under it and
stopped with SIGTERM, having answered ``WARM`` calls in one run and
``WARM + --calls`` in the other; the difference over ``--calls`` leaves out
the start, the imports, the warm-up and the stop. The gateway's timers do
work by the second, and a second under valgrind is long: the shorter run
therefore idles, after its warm-up, for as long as the other's counted
calls took, so both runs' timers ran equally long and cancel. String
hashing is seeded (``PYTHONHASHSEED=0``), as ``benchmarks.cache`` does.
Builds alternate by round; the ratio is judged against 0.7.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pstats
import shutil
import signal
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import (
    CACHEGRIND,
    ROOT,
    bench_backend,
    cachegrind_total,
    compared_builds,
    running_gateway,
)
from benchmarks.lean import HttpConnection, http_load
from benchmarks.run import ECHO_ARGS, _sdk_backend

SITE = ROOT / "benchmarks" / "task_steps_site"
# Issue 31: the gateway's work a call (task steps, or instructions; here
# function calls stand for those) at most this share of the baseline's.
TARGET = 0.7
# Seconds of no load over which the gateway's own background calls are counted.
IDLE_WINDOW = 2.0
#: ``--instructions``: the calls a gateway answers before the counted ones.
WARM = 200


def _counts(path: Path) -> tuple[int, int]:
    steps, batches = path.read_text(encoding="ascii").split()
    return int(steps), int(batches)


def _profiled_calls(proc_pid: int, path: Path) -> dict[str, int]:
    """Function calls so far in the gateway, by function (cProfile's primitive counts)."""
    path.unlink(missing_ok=True)
    os.kill(proc_pid, signal.SIGUSR1)
    deadline = time.monotonic() + 10.0
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    stats: dict[Any, Any] = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    return {f"{file}:{line}({name})": row[0] for (file, line, name), row in stats.items()}


@contextlib.contextmanager
def _counted(env_path: Path, profile_path: Path | None = None) -> Iterator[None]:
    keys = ("PYTHONPATH", "GATEWAY_BENCH_STEPS", "GATEWAY_BENCH_PROFILE")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SITE), saved["PYTHONPATH"]]))
    os.environ["GATEWAY_BENCH_STEPS"] = str(env_path)
    if profile_path is not None:
        os.environ["GATEWAY_BENCH_PROFILE"] = str(profile_path)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def measure(
    backend: str,
    concurrency: int,
    seconds: float,
    tree: Path | None,
    profile: bool = False,
    listing: Path | None = None,
) -> dict[str, float]:
    """Steps, batches and CPU per call of one gateway build under a closed-loop load.

    With ``profile`` the gateway runs under cProfile and ``calls`` is the
    number of function calls (Python and builtin) per tool call; its CPU
    figure is then the profiler's, not the gateway's. ``listing`` receives
    the calls per tool call of each function, most first.
    """
    config = _sdk_backend("b") if backend == "sdk" else bench_backend("b")
    with tempfile.TemporaryDirectory() as folder:
        counts = Path(folder) / "steps"
        dumps = Path(folder) / "profile" if profile else None
        with (
            _counted(counts, dumps),
            running_gateway([config], tree=tree) as (url, proc, _),
        ):
            conn = HttpConnection(url)
            sessions = [conn.open_session() for _ in range(concurrency)]
            params: dict[str, Any] = {"name": "b__echo", "arguments": ECHO_ARGS}
            http_load(url, sessions, "tools/call", params, warmup=0.3, duration=1.0)
            idle: dict[str, float] = {}
            if dumps is not None:
                # The gateway's own timers (loop lag, keep-alives) run whatever
                # the load: counted over an idle second, subtracted by the second.
                idle_from = _profiled_calls(proc.pid, dumps)
                idle_started = time.monotonic()
                time.sleep(IDLE_WINDOW)
                idle_to = _profiled_calls(proc.pid, dumps)
                idle_seconds = time.monotonic() - idle_started
                idle = {
                    name: (count - idle_from.get(name, 0)) / idle_seconds
                    for name, count in idle_to.items()
                }
            before = _counts(counts)
            calls_before = _profiled_calls(proc.pid, dumps) if dumps else {}
            load_started = time.monotonic()
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
            calls_after = _profiled_calls(proc.pid, dumps) if dumps else {}
            load_seconds = time.monotonic() - load_started
            conn.close()
    calls = load.calls
    summary = load.summary()
    if dumps is not None:
        per_function = {
            name: (count - calls_before.get(name, 0) - idle.get(name, 0.0) * load_seconds) / calls
            for name, count in calls_after.items()
        }
        if listing is not None:
            top = sorted(per_function.items(), key=lambda item: -item[1])
            listing.write_text("".join(f"{n:8.2f} {name}\n" for name, n in top), encoding="utf-8")
    return {
        "function_calls": sum(per_function.values()) if dumps is not None else 0.0,
        "steps": (after[0] - before[0]) / calls,
        "batches": (after[1] - before[1]) / calls,
        "cpu_us": summary["target_cpu_us_per_call"],
        "other_cores": load.other_cores,
        "calls": calls,
    }


def _instructions_run(
    config: dict[str, Any], tree: Path | None, calls: int, idle: float
) -> tuple[int, float]:
    """One gateway's life under cachegrind: ``WARM + calls`` calls, ``idle`` seconds, SIGTERM.

    Returns the instructions it retired from start to exit and the seconds
    its last ``calls`` calls took.
    """
    params: dict[str, Any] = {"name": "b__echo", "arguments": ECHO_ARGS}
    saved = os.environ.get("PYTHONHASHSEED")
    os.environ["PYTHONHASHSEED"] = "0"
    try:
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder) / "cachegrind.out"
            wrapper = (*CACHEGRIND, f"--cachegrind-out-file={out}")
            with running_gateway(
                [config],
                tree=tree,
                wrapper=wrapper,
                ready_poll=0.1,
                ready_timeout=600.0,
                stop_timeout=600.0,
            ) as (url, proc, _):
                conn = HttpConnection(url)
                session = conn.open_session()
                for _ in range(WARM):
                    conn.call(session, "tools/call", params)
                started = time.monotonic()
                for _ in range(calls):
                    conn.call(session, "tools/call", params)
                took = time.monotonic() - started
                time.sleep(idle)
                conn.close()
            if proc.returncode != 0:
                raise RuntimeError(f"the gateway under valgrind exited with {proc.returncode}")
            return cachegrind_total(out.read_text(encoding="utf-8")), took
    finally:
        if saved is None:
            os.environ.pop("PYTHONHASHSEED", None)
        else:
            os.environ["PYTHONHASHSEED"] = saved


def instructions_per_call(backend: str, tree: Path | None, calls: int) -> dict[str, float]:
    """Instructions the gateway retires a c=1 ``tools/call`` (valgrind), and the runs' seconds."""
    config = _sdk_backend("b") if backend == "sdk" else bench_backend("b")
    started = time.monotonic()
    more, took = _instructions_run(config, tree, calls, 0.0)
    fewer, _ = _instructions_run(config, tree, 0, took)
    return {
        "instructions": (more - fewer) / calls,
        "calls_seconds": took,
        "wall_seconds": time.monotonic() - started,
    }


def instructions_main(args: argparse.Namespace) -> None:
    """``--instructions``: instructions a c=1 call per build and round, and the ratio."""
    if shutil.which(CACHEGRIND[0]) is None:
        print("valgrind is not installed: instructions a call not counted", flush=True)
        return
    figures: dict[str, list[float]] = {}
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        builds = compared_builds(stack, args.baseline)
        for round_ in range(args.rounds):
            for name, tree in builds:
                got = instructions_per_call(args.backend, tree, args.calls)
                figures.setdefault(name, []).append(got["instructions"])
                print(
                    f"   .. round {round_ + 1}, {name}: {got['instructions']:,.0f} instructions "
                    f"a call ({args.calls} calls in {got['calls_seconds']:.1f} s under valgrind; "
                    f"both runs {got['wall_seconds']:.0f} s)",
                    flush=True,
                )
    print(
        f"\ninstructions the gateway retires a c=1 tools/call (valgrind), {args.backend} "
        f"backend, {args.calls} calls after {WARM}, median of {args.rounds} rounds "
        f"({time.monotonic() - started:.0f} s in all):"
    )
    for name, runs in figures.items():
        shown = ", ".join(f"{v:,.0f}" for v in runs)
        print(f"{name:>12}: {statistics.median(runs):,.0f}  (rounds: {shown})")
    if args.baseline:
        ratio = statistics.median(figures["this tree"]) / statistics.median(figures[args.baseline])
        verdict = "pass" if ratio <= TARGET else "miss"
        print(f"\nthis tree ÷ {args.baseline}: {ratio:.3f} (target <= {TARGET:g})  {verdict}")


def main(argv: Sequence[str] | None = None) -> None:
    """Print steps, batches and CPU per call for each build, concurrency and round."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--baseline", help="a commit whose gateway package runs beside this tree's")
    p.add_argument("--backend", choices=("bench", "sdk"), default="bench")
    p.add_argument("--concurrency", default="1,8")
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument(
        "--profile",
        action="store_true",
        help="also count function calls per call under cProfile (then CPU is the profiler's)",
    )
    p.add_argument("--listing", type=Path, help="with --profile: a folder for per-function counts")
    p.add_argument(
        "--instructions",
        action="store_true",
        help="instead count instructions a c=1 call under valgrind (cachegrind)",
    )
    p.add_argument("--calls", type=int, default=1000, help="with --instructions: counted calls")
    args = p.parse_args(argv)
    if args.instructions:
        instructions_main(args)
        return
    levels = [int(c) for c in args.concurrency.split(",")]
    figures: dict[tuple[str, int], list[dict[str, float]]] = {}
    with contextlib.ExitStack() as stack:
        builds = compared_builds(stack, args.baseline)
        for _ in range(args.rounds):
            for name, tree in builds:
                for concurrency in levels:
                    listing = None
                    if args.listing is not None:
                        args.listing.mkdir(parents=True, exist_ok=True)
                        label = "tree" if tree is None else args.baseline
                        listing = args.listing / f"calls-{label}-c{concurrency}.txt"
                    got = measure(
                        args.backend, concurrency, args.seconds, tree, args.profile, listing
                    )
                    figures.setdefault((name, concurrency), []).append(got)
                    print(
                        f"   .. {name} c={concurrency}: {got['steps']:.2f} steps, "
                        f"{got['batches']:.2f} batches, {got['function_calls']:.0f} function "
                        f"calls, {got['cpu_us']:.0f} µs CPU a call "
                        f"({got['calls']:.0f} calls; other load {got['other_cores']:.2f} cores)",
                        flush=True,
                    )
    print(f"\nper call, {args.backend} backend, median of {args.rounds} rounds:")
    for (name, concurrency), runs in figures.items():
        keys = ("steps", "batches", "function_calls", "cpu_us")
        med = {k: statistics.median(r[k] for r in runs) for k in keys}
        print(
            f"{name:>12} c={concurrency:<3} steps {med['steps']:.2f}  batches "
            f"{med['batches']:.2f}  function calls {med['function_calls']:.0f}  "
            f"CPU {med['cpu_us']:.0f} µs"
        )
    if args.baseline:
        print(f"\nthis tree ÷ {args.baseline} (target <= {TARGET:g}: either figure meets it):")
        keys = ("steps", "function_calls") if args.profile else ("steps",)
        for concurrency in levels:
            here, there = figures[("this tree", concurrency)], figures[(args.baseline, concurrency)]
            ratios = {
                k: statistics.median(r[k] for r in here) / statistics.median(r[k] for r in there)
                for k in keys
            }
            verdict = "pass" if min(ratios.values()) <= TARGET else "miss"
            shown = "  ".join(f"{k.replace('_', ' ')} {v:.2f}" for k, v in ratios.items())
            print(f"  c={concurrency:<3} {shown}  {verdict}")


if __name__ == "__main__":
    main()
