"""Start-up with official SDK 2.x stdio backends: through the gateway against direct.

Rows, for N backends of ``benchmarks/sdk2_server.py`` (50 tools each):

- ``gateway``: ``mcp-gateway serve`` spawn to ``/readyz`` 200, every backend
  ``required`` (so ready means every one probed, listened and listed);
- ``direct``: the same N spawned at once (each in a session of its own, as
  the gateway spawns them), each sent the gateway's own
  ``server/discover`` (2026-07-28 envelope), then ``tools/list`` once it has
  answered; the time until the last list is in;
- ``direct, k at a time``: the same, but at most ``k`` servers starting at
  once (the next spawned when one has answered its list). It answers
  whether start-up at a bounded concurrency would help on this machine: if
  it is not faster than all at once, bounding the gateway's spawns would
  not be either.

The three alternate within each repetition, so a loaded machine moves them
alike. The ratio gateway / direct is the figure of issue 31 (target <= 1.3).

``--loaded`` measures the same on a machine short of CPU: the gateway (and
so its backends, which inherit it) and the direct servers are pinned to one
core (``sched_setaffinity``), and a CPU hog (``yes`` to ``/dev/null``, in a
session of its own as any other program's would be) is pinned beside them
for the whole run. This process, which only drives them, is not pinned, and
polls ``/readyz`` every 50 ms instead of 5 (each poll is a request the
pinned gateway answers). That is where a fixed probe timeout collapsed
(issue 31): ten interpreters sharing half a core answered
``server/discover`` after it.

Run (needs ``.venv-sdk2``; about 25 s a repetition at N=10 on 2 cores)::

    .venv/bin/python -m benchmarks.startup_sdk2 --backends 10 --repeats 2 [--loaded]

Results go to ``benchmarks/results/startup_sdk2.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import selectors
import statistics
import subprocess
import time
from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any, Final

import httpx

from benchmarks.common import ROOT, machine, progress, running_gateway, write_results
from gateway.protocol.stateless import backend_leg

SDK2_PYTHON: Final = ROOT / ".venv-sdk2" / "bin" / "python"
SERVER: Final = [str(SDK2_PYTHON), str(ROOT / "benchmarks" / "sdk2_server.py")]
TOOLS: Final = 50
# Issue 31's target: ready through the gateway <= 1.3x the direct parallel start.
TARGET: Final = 1.3
# Bound on one direct start (seconds): the benchmark stops rather than hangs.
DIRECT_LIMIT: Final = 300.0


def _line(msg_id: int, method: str) -> bytes:
    """A 2026-07-28 request as the gateway sends it (the envelope in ``_meta``)."""
    body = {
        "jsonrpc": "2.0",
        "id": msg_id,
        "method": method,
        "params": backend_leg.discover_params(),
    }
    return json.dumps(body).encode() + b"\n"


def direct_start(count: int, at_once: int | None = None, cpus: set[int] | None = None) -> float:
    """Spawn ``count`` servers (at most ``at_once`` starting at a time); discover, then list.

    ``cpus``: the cores the servers may run on (all when None).

    Returns:
        Seconds from the first spawn to the last ``tools/list`` answer.
    """
    limit = count if at_once is None else at_once
    env = {**os.environ, "BENCH_TOOLS": str(TOOLS)}
    selector = selectors.DefaultSelector()
    procs: dict[int, subprocess.Popen[bytes]] = {}
    buffers: dict[int, bytes] = {}
    answers: dict[int, int] = {}
    started = time.perf_counter()
    spawned = done = 0

    def spawn() -> None:
        nonlocal spawned
        proc = subprocess.Popen(
            SERVER,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            # As the gateway starts its children: a session of their own. With
            # the kernel's autogroup scheduling on (the Debian default) each
            # session is a scheduling group of its own, so ten children in ten
            # sessions get ten shares of a busy machine, and ten in one get one.
            start_new_session=True,
            preexec_fn=None if cpus is None else partial(os.sched_setaffinity, 0, cpus),
        )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(_line(1, "server/discover"))
        proc.stdin.flush()
        fd = proc.stdout.fileno()
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
        procs[fd], buffers[fd], answers[fd] = proc, b"", 0
        spawned += 1

    try:
        while spawned < min(limit, count):
            spawn()
        while done < count:
            if time.perf_counter() - started > DIRECT_LIMIT:
                raise RuntimeError(f"direct start of {count} not done in {DIRECT_LIMIT:g} s")
            for key, _ in selector.select(timeout=5):
                fd = int(key.fd)  # type: ignore[call-overload]
                buffers[fd] += os.read(fd, 1 << 20)
                while b"\n" in buffers[fd]:
                    line, buffers[fd] = buffers[fd].split(b"\n", 1)
                    assert b'"result"' in line, line[:200]
                    answers[fd] += 1
                    stdin = procs[fd].stdin
                    assert stdin is not None
                    if answers[fd] == 1:
                        stdin.write(_line(2, "tools/list"))
                        stdin.flush()
                    elif answers[fd] == 2:
                        selector.unregister(fd)
                        done += 1
                        if spawned < count:
                            spawn()
        return time.perf_counter() - started
    finally:
        for proc in procs.values():
            assert proc.stdin is not None
            proc.stdin.close()
        for proc in procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextlib.contextmanager
def hog_on(core: int) -> Iterator[None]:
    """``yes`` spinning on ``core`` for the body of the block."""
    hog = subprocess.Popen(
        ["yes"],
        stdout=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=partial(os.sched_setaffinity, 0, {core}),
    )
    try:
        yield
    finally:
        hog.kill()
        hog.wait()


def backend(name: str) -> dict[str, Any]:
    """A config entry for one SDK 2.x bench server."""
    return {
        "name": name,
        "transport": "stdio",
        "command": SERVER[0],
        "args": SERVER[1:],
        "env": {"BENCH_TOOLS": str(TOOLS)},
        "required": True,
        "stop_grace": 0.5,
    }


def _eras(url: str) -> dict[str, int]:
    """At ready: how many backends are up in each era, and their restarts so far."""
    overview = httpx.get(url.removesuffix("/mcp") + "/readyz").json()["overview"]
    counts: dict[str, int] = {"restarts": 0}
    for row in overview["backends"]:
        counts[row["era"]] = counts.get(row["era"], 0) + 1
        counts["restarts"] += row["restarts"]
    return counts


def measure(count: int, repeats: int, at_once: int, cpus: set[int] | None = None) -> dict[str, Any]:
    """Alternate the three starts ``repeats`` times; medians, samples and ratios.

    ``cpus``: the cores every server and the gateway may run on (all when None).
    """
    gateway, direct, bounded = [], [], []
    eras: list[dict[str, int]] = []
    poll = 0.005 if cpus is None else 0.05
    for repeat in range(repeats):
        direct.append(direct_start(count, cpus=cpus))
        configs = [backend(f"s{n:02d}") for n in range(count)]
        with running_gateway(configs, cpus=cpus, ready_poll=poll) as (url, _proc, ready):
            gateway.append(ready)
            eras.append(_eras(url))
        bounded.append(direct_start(count, at_once, cpus=cpus))
        progress(
            f"repeat {repeat + 1}: gateway {gateway[-1]:.2f} s, direct {direct[-1]:.2f} s, "
            f"direct {at_once} at a time {bounded[-1]:.2f} s"
        )
    result = {
        "backends": count,
        "tools_per_backend": TOOLS,
        "at_once": at_once,
        "gateway_s": gateway,
        "direct_s": direct,
        "direct_bounded_s": bounded,
        "gateway_backends_at_ready": eras,
        "gateway_median_s": statistics.median(gateway),
        "direct_median_s": statistics.median(direct),
        "direct_bounded_median_s": statistics.median(bounded),
    }
    result["ratio_gateway_to_direct"] = result["gateway_median_s"] / result["direct_median_s"]
    result["ratio_bounded_to_all_at_once"] = (
        result["direct_bounded_median_s"] / result["direct_median_s"]
    )
    return result


def main(argv: Sequence[str] | None = None) -> None:
    """Measure, print a table, write ``benchmarks/results/startup_sdk2.json``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--at-once", type=int, default=os.cpu_count() or 2)
    parser.add_argument(
        "--loaded",
        action="store_true",
        help="everything pinned to one core, with a CPU hog (yes) pinned beside it",
    )
    parser.add_argument("--core", type=int, default=0, help="the core --loaded pins to")
    args = parser.parse_args(argv)
    if not SDK2_PYTHON.exists():
        raise SystemExit(".venv-sdk2 is missing: run `make sdk2-venv`")
    if args.loaded:
        with hog_on(args.core):
            result = measure(args.backends, args.repeats, 1, cpus={args.core})
    else:
        result = measure(args.backends, args.repeats, args.at_once)
    result["loaded"] = args.loaded
    mode = ", loaded (one core, a hog beside)" if args.loaded else ""
    print(f"{args.backends} SDK 2.x stdio backends x {TOOLS} tools, {args.repeats} repeats{mode}")
    print(f"  gateway ready          {result['gateway_median_s']:.2f} s  {result['gateway_s']}")
    print(f"  direct, all at once    {result['direct_median_s']:.2f} s  {result['direct_s']}")
    print(
        f"  direct, {result['at_once']} at a time    {result['direct_bounded_median_s']:.2f} s  "
        f"{result['direct_bounded_s']}"
    )
    print(f"  gateway at ready       {result['gateway_backends_at_ready']}")
    ratio = result["ratio_gateway_to_direct"]
    verdict = "pass" if ratio <= TARGET else "miss"
    print(f"  gateway / direct       {ratio:.2f} (target <= {TARGET}: {verdict})")
    print(f"  bounded / all at once  {result['ratio_bounded_to_all_at_once']:.2f}")
    name = "startup_sdk2_loaded" if args.loaded else "startup_sdk2"
    write_results(name, {"machine": machine(), **result})


if __name__ == "__main__":
    main()
