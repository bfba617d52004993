"""Start-path imports: what ``trio-mcp-gateway serve`` imports before it is ready, before and after.

Two builds of the gateway package run in the same session, alternating
round by round: the working tree and ``--baseline`` (a commit, extracted
with ``git archive`` into a temporary folder and put first on the path).
Each round starts ``python -m gateway serve`` over one stdio backend
(``bench_server.py``) twice per build:

- with ``-X importtime``, to sum the import time of every module loaded
  until ``/readyz`` answers 200 (and list the heaviest);
- without it, for the wall time from spawn to ready.

The figures are medians, and the comparison is a ratio of the same run.
Both builds share the venv, so a module the venv has but a production
install lacks (``rich`` via the dev tools, which structlog loads when it is
there) costs the same in both and is listed as such.

Usage::

    .venv/bin/python -m benchmarks.imports [--baseline REV] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.common import ROOT, baseline_tree, bench_backend, free_port, write_results

# The last commit before the start-path cuts of issue 17 (lazy PyJWT,
# cryptography, httpx and cli_hosts).
BEFORE_CUTS = "b5361c0"


def _config(folder: Path) -> tuple[Path, int]:
    port = free_port()
    config = {
        "server": {"host": "127.0.0.1", "port": port},
        "logging": {"level": "warning", "format": "json"},
        "backends": [bench_backend("bench")],
    }
    path = folder / f"imports-{port}.yaml"
    path.write_text(json.dumps(config))
    return path, port


def start_once(tree: Path, scratch: Path, importtime: bool) -> tuple[float, str]:
    """Spawn ``serve`` from ``tree``; returns (seconds to ready, stderr)."""
    config, port = _config(scratch)
    argv = [sys.executable, *(["-X", "importtime"] if importtime else [])]
    argv += ["-m", "gateway", "serve", "-c", str(config)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    err = scratch / f"stderr-{port}.txt"
    with err.open("wb") as handle:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=handle)
        try:
            deadline = time.monotonic() + 60
            with httpx.Client() as client:
                while True:
                    try:
                        if client.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise RuntimeError(f"gateway from {tree} did not become ready")
                    time.sleep(0.002)
            ready = time.perf_counter() - started
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    return ready, err.read_text(errors="replace")


def parse_importtime(stderr: str) -> dict[str, tuple[int, int]]:
    """module -> (self µs, cumulative µs) from ``-X importtime`` lines (first import only)."""
    out: dict[str, tuple[int, int]] = {}
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative, name = line[len("import time:") :].split("|", 2)
        out.setdefault(name.strip(), (int(self_us), int(cumulative)))
    return out


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Alternate the builds for ``args.rounds`` rounds; medians and ratios."""
    builds: dict[str, dict[str, list[Any]]] = {
        "before": {"import_us": [], "ready_s": [], "modules": []},
        "after": {"import_us": [], "ready_s": [], "modules": []},
    }
    last: dict[str, dict[str, tuple[int, int]]] = {}
    with baseline_tree(args.baseline) as before, tempfile.TemporaryDirectory() as scratch:
        trees = {"before": before, "after": ROOT}
        for round_ in range(args.rounds):
            order = ("before", "after") if round_ % 2 == 0 else ("after", "before")
            for build in order:
                ready, _ = start_once(trees[build], Path(scratch), importtime=False)
                _, stderr = start_once(trees[build], Path(scratch), importtime=True)
                modules = parse_importtime(stderr)
                builds[build]["ready_s"].append(ready)
                builds[build]["import_us"].append(sum(s for s, _ in modules.values()))
                builds[build]["modules"].append(len(modules))
                last[build] = modules
            print(f"   .. round {round_ + 1}/{args.rounds}", file=sys.stderr, flush=True)
    summary: dict[str, Any] = {"baseline": args.baseline, "rounds": args.rounds}
    for build, data in builds.items():
        summary[build] = {
            "import_ms": statistics.median(data["import_us"]) / 1000,
            "ready_ms": statistics.median(data["ready_s"]) * 1000,
            "modules": statistics.median(data["modules"]),
        }
    summary["import_ratio"] = summary["after"]["import_ms"] / summary["before"]["import_ms"]
    summary["ready_ratio"] = summary["after"]["ready_ms"] / summary["before"]["ready_ms"]
    gone = sorted(set(last["before"]) - set(last["after"]))
    summary["no_longer_imported"] = [m for m in gone if "." not in m]
    summary["heaviest_after"] = _heaviest(last["after"])
    summary["load_average"] = os.getloadavg()[0]
    return summary


def _heaviest(modules: dict[str, tuple[int, int]], count: int = 12) -> list[tuple[str, float]]:
    """Top-level packages by cumulative import time (ms), heaviest first."""
    tops = {name: cum for name, (_, cum) in modules.items() if "." not in name}
    ranked = sorted(tops.items(), key=lambda item: -item[1])[:count]
    return [(name, cum / 1000) for name, cum in ranked]


def main() -> None:
    """Measure and print; writes benchmarks/results/imports.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BEFORE_CUTS, help="commit to compare against")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, builds alternating (5)")
    args = parser.parse_args()
    summary = measure(args)
    before, after = summary["before"], summary["after"]
    print(f"start path, median of {args.rounds} (baseline {args.baseline}):")
    print(
        f"  imports until ready: {before['import_ms']:.0f} ms ({before['modules']:.0f} modules) "
        f"-> {after['import_ms']:.0f} ms ({after['modules']:.0f}): {summary['import_ratio']:.2f}x"
    )
    print(
        f"  spawn to ready:      {before['ready_ms']:.0f} ms -> {after['ready_ms']:.0f} ms: "
        f"{summary['ready_ratio']:.2f}x"
    )
    print(f"  no longer imported:  {', '.join(summary['no_longer_imported']) or '-'}")
    heaviest = ", ".join(f"{n} {ms:.0f}" for n, ms in summary["heaviest_after"])
    print(f"  heaviest now (cumulative ms): {heaviest}")
    print(f"  load average {summary['load_average']:.1f} (a shared machine moves absolutes)")
    print(f"written: {write_results('imports', summary).relative_to(ROOT)}")


if __name__ == "__main__":
    main()
