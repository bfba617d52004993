"""Issue 31: what the response cache buys, and what a miss costs.

    .venv/bin/python -m benchmarks.cache
    .venv/bin/python -m benchmarks.cache --quick      # smoke, about a minute

The backend is the official SDK (FastMCP, ``sdk_cache_server.py``): one
resource and one ``readOnlyHint`` tool. Rows, each from one run:

- ``cached resources/read`` and ``cached tools/call`` at c=8: calls/s
  through the gateway with ``backends[].cache`` / ``profiles[].cache`` on
  (every call after the first a hit), against the same server over stdio,
  pipelined with 8 in flight. Target: ≥ 5x direct. The gateway's CPU per
  hit is printed as a note.
- ``miss``: the same ``tools/call`` with the opt-in's ttl at 1 µs, so every
  call is a miss that is stored and dropped again, against the gateway with
  no ``cache:`` at all: the gateway's CPU per call (the figure the other
  processes on the machine bend least) and the rate. Target: CPU ≤ 1.05x.

Results go to ``benchmarks/results/cache.json``.

Two more modes, for work on the cache's cost:

    .venv/bin/python -m benchmarks.cache --baseline REV [--rounds 3]
    .venv/bin/python -m benchmarks.cache --profile [--baseline REV] [--listing DIR]

``--baseline`` runs every gateway window for this tree and for ``REV``'s
gateway package alternately, round by round, and prints the gateway's CPU a
call of each (a hit, a miss, no cache) with the ratios of both builds: on a
shared machine the load moves between two runs minutes apart, so a
before/after is only taken from builds alternated in one run. ``--profile``
runs the gateway under cProfile (as ``benchmarks.task_steps --profile``
does) and counts the function calls a hit, a miss and an uncached call
make: a figure the machine's load does not bend; ``--listing`` writes the
calls per call of each function, most first.

    .venv/bin/python -m benchmarks.cache --in-process [--baseline REV] [--rounds 5]

``--in-process`` leaves the HTTP front out: one ``tools/call`` at a time
through the router, the backend's call path and a session over an
in-memory channel to the fake MCP server of tests/fakes (as
``benchmarks.guardrails_cost`` does), with no cache, every call a miss, and
every call a hit; µs a call, median over rounds that alternate the cases
(and, with ``--baseline``, the builds, each in its own interpreter).
With ``--instructions`` the same calls run under valgrind (cachegrind),
which counts the instructions a call executes: the figure no other work
on the machine moves (``perf stat`` cannot count instructions in this
virtual machine), at about 50 times the run time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import lean
from benchmarks.common import (
    CACHEGRIND,
    ROOT,
    cachegrind_total,
    compared_builds,
    progress,
    running_gateway,
    write_results,
)
from benchmarks.common import machine as describe_machine
from benchmarks.lean import HttpConnection
from benchmarks.run import _row, print_table
from benchmarks.task_steps import IDLE_WINDOW, _counted, _profiled_calls

SERVER = [sys.executable, str(ROOT / "benchmarks" / "sdk_cache_server.py")]
CONCURRENCY = 8
READ = {"uri": "bench://note"}
LOOKUP = {"name": "lookup", "arguments": {"key": "k"}}
#: Targets (issue 31).
HIT_RATIO_TARGET = 5.0
MISS_CPU_TARGET = 1.05


def _backend(cache: dict[str, Any] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": "sdk",
        "transport": "stdio",
        "command": SERVER[0],
        "args": SERVER[1:],
        "required": True,
        "stop_grace": 0.5,
    }
    if cache is not None:
        entry["cache"] = cache
    return entry


def _gateway_load(
    sections: dict[str, Any],
    backend: dict[str, Any],
    method: str,
    params: dict[str, Any],
    args: argparse.Namespace,
    tree: Path | None = None,
) -> lean.LoadResult:
    """One closed-loop window through a gateway started with ``sections``.

    ``tree`` is another build's gateway package (``baseline_tree``).
    """
    with running_gateway([backend], tree=tree, **sections) as (url, proc, _):
        conn = HttpConnection(url)
        sessions = [conn.open_session() for _ in range(CONCURRENCY)]
        answer = conn.call(sessions[0], method, params)
        assert "contents" in answer or "content" in answer, answer
        result = lean.http_load(
            url,
            sessions,
            method,
            params,
            warmup=args.warmup,
            duration=args.duration,
            watch_pid=proc.pid,
        )
        conn.close()
    assert result.errors == 0, result
    return result


def _cpu_per_call_us(result: lean.LoadResult) -> float:
    assert result.target_cpu_seconds is not None
    return result.target_cpu_seconds / result.calls * 1e6


_CALL: dict[str, Any] = {**LOOKUP, "name": "sdk__lookup"}
_TOOLS_ON: dict[str, Any] = {
    "profiles": [{"name": "default", "cache": {"tools": ["sdk__lookup"], "ttl": 60}}]
}
_ALWAYS_MISSING: dict[str, Any] = {
    "profiles": [{"name": "default", "cache": {"tools": ["sdk__lookup"], "ttl": 1e-6}}]
}
#: The gateway's windows: (label, config sections, the backend's ``cache``
#: opt-in, method, params in public names).
_Case = tuple[str, dict[str, Any], dict[str, Any] | None, str, dict[str, Any]]
HIT_READ: _Case = (
    "hit: resources/read",
    {"cache": {}, **_TOOLS_ON},
    {"ttl": 60},
    "resources/read",
    {"uri": "sdk+bench://note"},
)
HIT_CALL: _Case = ("hit: tools/call", {"cache": {}, **_TOOLS_ON}, {"ttl": 60}, "tools/call", _CALL)
MISS: _Case = ("miss: tools/call", {"cache": {}, **_ALWAYS_MISSING}, None, "tools/call", _CALL)
NO_CACHE: _Case = ("no cache: tools/call", {}, None, "tools/call", _CALL)
CASES: tuple[_Case, ...] = (HIT_READ, HIT_CALL, MISS, NO_CACHE)


def _case_load(case: _Case, args: argparse.Namespace, tree: Path | None = None) -> lean.LoadResult:
    _, sections, opt_in, method, params = case
    return _gateway_load(sections, _backend(opt_in), method, params, args, tree)


def _profiled(case: _Case, seconds: float, tree: Path | None, listing: Path | None) -> float:
    """Function calls (Python and builtin) a call makes in the gateway, under cProfile.

    The gateway's own timers are counted over an idle window first and
    subtracted, as ``benchmarks.task_steps`` does.
    """
    _, sections, opt_in, method, params = case
    with tempfile.TemporaryDirectory() as folder:
        dumps = Path(folder) / "profile"
        with (
            _counted(Path(folder) / "steps", dumps),
            running_gateway([_backend(opt_in)], tree=tree, **sections) as (url, proc, _),
        ):
            conn = HttpConnection(url)
            sessions = [conn.open_session() for _ in range(CONCURRENCY)]
            lean.http_load(url, sessions, method, params, warmup=0.3, duration=1.0)
            idle_from = _profiled_calls(proc.pid, dumps)
            idle_started = time.monotonic()
            time.sleep(IDLE_WINDOW)
            idle_to = _profiled_calls(proc.pid, dumps)
            idle_seconds = time.monotonic() - idle_started
            before = _profiled_calls(proc.pid, dumps)
            load_started = time.monotonic()
            load = lean.http_load(url, sessions, method, params, warmup=0.0, duration=seconds)
            after = _profiled_calls(proc.pid, dumps)
            load_seconds = time.monotonic() - load_started
            conn.close()
    assert load.errors == 0, load
    per_function = {
        name: (
            count
            - before.get(name, 0)
            - (idle_to.get(name, 0) - idle_from.get(name, 0)) / idle_seconds * load_seconds
        )
        / load.calls
        for name, count in after.items()
    }
    if listing is not None:
        top = sorted(per_function.items(), key=lambda item: -item[1])
        listing.write_text("".join(f"{n:8.2f} {name}\n" for name, n in top), encoding="utf-8")
    return sum(per_function.values())


#: The in-process cases: (label, the profile's ``cache.ttl``; None: no ``cache:``).
IN_PROCESS: tuple[tuple[str, float | None], ...] = (
    ("no cache", None),
    ("miss", 1e-6),
    ("hit", 60.0),
)
#: ``--instructions``: the calls a child makes before the counted ones.
WARM = 200
VALGRIND = (*CACHEGRIND, "--cachegrind-out-file=/dev/null")
#: The fake's answer: the size of the SDK server's (content and structuredContent).
_TEXT = "value of k" * 8


async def _in_process(calls: int, rounds: int, only: str | None = None) -> dict[str, list[float]]:
    """Seconds a ``tools/call`` takes in process for each case (or ``only`` one), a round each."""
    import msgspec
    import trio

    from benchmarks.guardrails_cost import _run
    from gateway.catalog.cursor import CursorCodec
    from gateway.catalog.naming import NamingRules
    from gateway.config import parse
    from gateway.protocol.jsonrpc import Request
    from gateway.router import Router
    from gateway.router.response_cache import cache_for
    from tests.fakes.fake_server import Answer, FakeConnector, FakeMcpServer
    from tests.router.fakes import FakeClient

    params = msgspec.Raw(msgspec.json.encode({"name": "fake__echo", "arguments": {"key": "k"}}))
    cases = [(label, ttl) for label, ttl in IN_PROCESS if only in (None, label)]
    samples: dict[str, list[float]] = {label: [] for label, _ in cases}
    async with trio.open_nursery() as nursery:
        routers = {}
        for label, ttl in cases:
            document: dict[str, Any] = {
                "backends": [{"name": "fake", "transport": "stdio", "command": "unused"}]
            }
            if ttl is not None:
                opt_in = {"tools": ["fake__echo"], "ttl": ttl, "allow_unannotated": True}
                document["cache"] = {}
                document["profiles"] = [{"name": "default", "cache": opt_in}]
            config = parse(json.dumps(document), env={})
            server = FakeMcpServer("fake", tools={"echo": Answer(_TEXT)})
            pool = await nursery.start(
                _run, config, NamingRules("__", 64), FakeConnector({"fake": server})
            )
            router = Router(pool, CursorCodec("bench", clock=trio.current_time), 0)
            router.set_cache(cache_for(config.cache, config.backends, config.profiles))
            assert (router.cache is None) == (ttl is None)
            await nursery.start(router.run)
            client = FakeClient("bench-client", protocol_version=lean.PROTOCOL_VERSION)
            router.client_opened(client)
            reply = await router.handle_request(client, Request(0, "tools/call", params))
            assert b'"result"' in reply and b'isError":true' not in reply, reply
            routers[label] = (router, client)
        for round_ in range(rounds):
            shift = round_ % len(cases)
            for label, _ in cases[shift:] + cases[:shift]:
                router, client = routers[label]
                started = time.process_time()
                for ident in range(calls):
                    await router.handle_request(client, Request(ident, "tools/call", params))
                samples[label].append((time.process_time() - started) / calls)
        nursery.cancel_scope.cancel()
    return samples


def in_process(args: argparse.Namespace) -> None:
    """``--in-process``: µs a call in the router, per case (and build, alternated)."""
    if args.json:  # one build's samples, for the parent that alternates builds
        import trio

        from gateway.cli import collector
        from gateway.telemetry.logs import configure_logging

        collector.tune()  # the collector's policy of ``serve``
        with open(os.devnull, "w") as devnull:
            configure_logging("warning", "json", devnull)
            samples = trio.run(_in_process, args.calls, args.rounds, args.case)
        print(json.dumps(samples))
        return
    if args.instructions:
        instructions(args)
        return
    figures: dict[tuple[str, str], list[float]] = {}
    with contextlib.ExitStack() as stack:
        builds = compared_builds(stack, args.baseline)
        for _ in range(args.rounds):
            for name, tree in builds:
                argv = ["--in-process", "--json", "--rounds", "1", "--calls", str(args.calls)]
                out = subprocess.run(
                    [sys.executable, "-m", "benchmarks.cache", *argv],
                    cwd=tree or ROOT,
                    env=_child_env(tree),
                    capture_output=True,
                    check=True,
                    text=True,
                ).stdout
                for label, values in json.loads(out).items():
                    figures.setdefault((name, label), []).extend(v * 1e6 for v in values)
                shown = "  ".join(
                    f"{label} {figures[(name, label)][-1]:.1f}" for label, _ in IN_PROCESS
                )
                print(f"   .. {name}: µs a call: {shown}", flush=True)
    # The minimum as well as the median: on a shared machine the other work
    # only ever adds to a sample, so the least of many is the least disturbed.
    for stat, pick in (("median", statistics.median), ("least", min)):
        print(f"\nµs a tools/call in process, {stat} of {args.rounds} rounds:")
        for name, _ in _names(args.baseline):
            got = {label: pick(figures[(name, label)]) for label, _ in IN_PROCESS}
            cells = "  ".join(f"{label} {v:.2f}" for label, v in got.items())
            print(f"{name:>12}: {cells}  a miss's extra {got['miss'] - got['no cache']:.2f} µs")


def _child_env(tree: Path | None) -> dict[str, str]:
    """The environment of a child running ``tree``'s gateway (this tree's when None).

    The child runs in ``tree`` (``-m`` puts its folder first on the path, so
    its ``gateway`` wins) and finds the benchmarks and the fakes here.
    """
    search = [str(tree)] if tree is not None else []
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*search, str(ROOT)])}


def _instructions_of(tree: Path | None, case: str, calls: int) -> float:
    """Instructions one call of ``case`` executes, counted by valgrind (cachegrind).

    The child runs twice, with ``WARM`` calls and with ``WARM + calls``; the
    difference over ``calls`` leaves out the interpreter's start, the imports
    and the set-up. String hashing is seeded (``PYTHONHASHSEED``) so that a
    build counts the same on every run.
    """
    counts = []
    for n in (WARM, WARM + calls):
        argv = ["--in-process", "--json", "--rounds", "1", "--calls", str(n), "--case", case]
        done = subprocess.run(
            [*VALGRIND, sys.executable, "-m", "benchmarks.cache", *argv],
            cwd=tree or ROOT,
            env={**_child_env(tree), "PYTHONHASHSEED": "0"},
            capture_output=True,
            check=True,
            text=True,
        )
        counts.append(cachegrind_total(done.stderr))
    return (counts[1] - counts[0]) / calls


def instructions(args: argparse.Namespace) -> None:
    """``--in-process --instructions``: instructions a call, per case and build (valgrind)."""
    figures: dict[tuple[str, str], float] = {}
    with contextlib.ExitStack() as stack:
        for name, tree in compared_builds(stack, args.baseline):
            for label, _ in IN_PROCESS:
                figures[(name, label)] = _instructions_of(tree, label, args.calls)
                print(f"   .. {name}, {label}: {figures[(name, label)]:,.0f}", flush=True)
    print("\ninstructions a tools/call in process (valgrind):")
    for name, _ in _names(args.baseline):
        got = {label: figures[(name, label)] for label, _ in IN_PROCESS}
        cells = "  ".join(f"{label} {v:,.0f}" for label, v in got.items())
        ratio = got["miss"] / got["no cache"]
        print(f"{name:>12}: {cells}  miss ÷ no cache {ratio:.3f}")


def _names(baseline: str | None) -> list[tuple[str, None]]:
    return [("this tree", None), *([(baseline, None)] if baseline else [])]


def _alternated(
    args: argparse.Namespace, measure: Callable[[str, Path | None, _Case], float]
) -> dict[tuple[str, str], list[float]]:
    """``measure(name, tree, case)`` for every case of every build, builds alternated by round."""
    figures: dict[tuple[str, str], list[float]] = {}
    with contextlib.ExitStack() as stack:
        builds = compared_builds(stack, args.baseline)
        for _ in range(args.rounds):
            for name, tree in builds:
                for case in CASES:
                    figures.setdefault((name, case[0]), []).append(measure(name, tree, case))
    return figures


def profile(args: argparse.Namespace) -> None:
    """``--profile``: function calls a hit, a miss and an uncached call make, per build."""

    def calls_of(name: str, tree: Path | None, case: _Case) -> float:
        listing = None
        if args.listing is not None:
            args.listing.mkdir(parents=True, exist_ok=True)
            slug = case[0].replace(": ", "-").replace("/", "_").replace(" ", "_")
            listing = args.listing / f"{'tree' if tree is None else name}-{slug}.txt"
        calls = _profiled(case, args.duration, tree, listing)
        print(f"   .. {name}, {case[0]}: {calls:,.0f} function calls", flush=True)
        return calls

    _report(_alternated(args, calls_of), "function calls a call", "{:,.0f}", args.baseline)


def alternate(args: argparse.Namespace) -> None:
    """``--baseline``: the gateway's CPU a call, this tree and the baseline alternated."""

    def cpu_of(name: str, tree: Path | None, case: _Case) -> float:
        load = _case_load(case, args, tree)
        cpu = _cpu_per_call_us(load)
        print(
            f"   .. {name}, {case[0]}: {cpu:,.0f} µs CPU a call, "
            f"{load.calls_per_second:,.0f} calls/s "
            f"(other load {load.other_cores:.2f} cores)",
            flush=True,
        )
        return cpu

    _report(_alternated(args, cpu_of), "gateway CPU a call (µs)", "{:,.0f}", args.baseline)


def _report(
    figures: dict[tuple[str, str], list[float]], what: str, fmt: str, baseline: str | None
) -> None:
    """Medians per build and case, the miss ÷ no cache of each build, tree ÷ baseline."""
    med = {key: statistics.median(runs) for key, runs in figures.items()}
    builds = list(dict.fromkeys(name for name, _ in med))
    print(f"\n{what}, median of the rounds:")
    for build in builds:
        cells = "  ".join(f"{case[0]} {fmt.format(med[(build, case[0])])}" for case in CASES)
        ratio = med[(build, MISS[0])] / med[(build, NO_CACHE[0])]
        print(f"{build:>12}: {cells}  miss ÷ no cache {ratio:.3f}")
    if baseline:
        print(f"\nthis tree ÷ {baseline}:")
        for case in CASES:
            ratio = med[("this tree", case[0])] / med[(baseline, case[0])]
            print(f"  {case[0]}: {ratio:.3f}")


def main(argv: list[str] | None = None) -> None:
    """Measure and print the cache rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short windows (a smoke run)")
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument(
        "--baseline", help="a commit whose gateway package runs beside this tree's, alternated"
    )
    parser.add_argument("--rounds", type=int, default=1, help="with --baseline or --profile")
    parser.add_argument(
        "--profile", action="store_true", help="count function calls a call under cProfile"
    )
    parser.add_argument("--listing", type=Path, help="with --profile: a folder for the counts")
    parser.add_argument(
        "--in-process", action="store_true", help="the router's µs a call, without the HTTP front"
    )
    parser.add_argument("--calls", type=int, default=5000, help="with --in-process: calls a round")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="with --in-process: count instructions a call under valgrind instead of time",
    )
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.duration, args.warmup = 2.0, 0.5
    if args.in_process:
        in_process(args)
        return
    if args.profile:
        profile(args)
        return
    if args.baseline:
        alternate(args)
        return
    rows: list[dict[str, Any]] = []
    hits: list[str] = []
    for case, direct_params in ((HIT_READ, READ), (HIT_CALL, LOOKUP)):
        label, _, _, method, _ = case
        progress(f"{label}: direct")
        direct, _ = lean.stdio_load(
            SERVER,
            CONCURRENCY,
            method,
            direct_params,
            warmup=args.warmup,
            duration=args.duration,
        )
        progress(f"{label}: through the gateway")
        gateway = _case_load(case, args)
        ratio = gateway.calls_per_second / direct.calls_per_second
        hits.append(f"cached {method}: {_cpu_per_call_us(gateway):,.0f} µs of gateway CPU a hit")
        rows.append(
            _row(
                f"cached {method} c={CONCURRENCY}",
                gateway.calls_per_second,
                direct.calls_per_second,
                "calls/s",
                ratio=ratio,
                target=f">= {HIT_RATIO_TARGET:g}x direct",
                ok=ratio >= HIT_RATIO_TARGET,
            )
        )
    progress("miss: no cache")
    plain = _case_load(NO_CACHE, args)
    progress("miss: every call a miss")
    missed = _case_load(MISS, args)
    cpu_ratio = _cpu_per_call_us(missed) / _cpu_per_call_us(plain)
    rows.append(
        _row(
            f"miss: gateway CPU per tools/call c={CONCURRENCY} (vs no cache)",
            _cpu_per_call_us(missed),
            _cpu_per_call_us(plain),
            "µs",
            ratio=cpu_ratio,
            target=f"<= {MISS_CPU_TARGET:g}x",
            ok=cpu_ratio <= MISS_CPU_TARGET,
        )
    )
    rows.append(
        _row(
            f"miss: tools/call rate c={CONCURRENCY} (vs no cache)",
            missed.calls_per_second,
            plain.calls_per_second,
            "calls/s",
            ratio=missed.calls_per_second / plain.calls_per_second,
        )
    )
    notes = [
        "direct = the same server over stdio, pipelined with 8 in flight; gateway = one HTTP "
        "connection and MCP session per in-flight request",
        "the miss rows' 'direct' column is the gateway without a cache: section",
        *hits,
    ]
    print_table("cache", rows, notes)
    write_results("cache", {"machine": describe_machine(), "rows": rows, "notes": notes})


if __name__ == "__main__":
    main()
