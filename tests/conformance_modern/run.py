"""Run the conformance suite 0.2.x (MCP 2026-07-28) through the gateway (issue 14).

    .venv/bin/python tests/conformance_modern/run.py            # through the gateway
    .venv/bin/python tests/conformance_modern/run.py --direct   # the backend alone
    .venv/bin/python tests/conformance_modern/run.py --revision 2025-11-25
    .venv/bin/python tests/conformance_modern/run.py --expect   # what make test runs

The same servers, readiness checks and summary as ``tests/conformance/run.py``
(the 0.1.16 run, which stays as it is), plus a fourth backend that runs its
own tasks (``tests/servers/task_backend.py``, for ``tasks-mrtr-composition``);
otherwise only the suite differs:
``@modelcontextprotocol/conformance@0.2.0-alpha.12`` installed here, run with
``--requirements <revision>`` (exactly the scenarios that revision requires,
frozen at its release), default 2026-07-28. The Node.js is the one pinned in
tests/conformance. Results go to tests/conformance_modern/results/.

``--expect`` judges the run by ``expected-<revision>.txt`` here: every scenario
named there (those the gateway passes, a superset of those the conformance
backend passes directly) must pass; the others are reported, not fatal, until
the later steps of issue 14 (MRTR, tasks) make them pass and they are added.

Install first: ``npm ci --prefix tests/conformance_modern`` and
``make conformance-deps``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
SUITE = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
RESULTS = HERE / "results"


def _base() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "conformance_run", HERE.parent / "conformance" / "run.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


base = _base()


TASK_BACKEND = base.ROOT / "tests" / "servers" / "task_backend.py"
# The 0.1.16 run's three backends, and the one that runs its own tasks.
BACKENDS = 4


def gateway_config(port: int, engine: str) -> dict[str, Any]:
    """The 0.1.16 run's gateway config plus ``tasks``, unprefixed.

    ``tasks`` (``tests/servers/task_backend.py``) declares the 2025-11-25
    task capability, so the gateway hands it ``test_tool_with_task``
    (``tasks-mrtr-composition``: MRTR rounds, then the backend's task); the
    conformance backend's task tools stay gateway tasks.
    """
    config: dict[str, Any] = base.gateway_config(port, engine)
    config["backends"].append(
        {
            "name": "tasks",
            "transport": "stdio",
            "command": sys.executable,
            "args": [str(TASK_BACKEND)],
            "prefix": "",
            "required": True,
            "stop_grace": 0.5,
        }
    )
    return config


def run_suite(url: str, out: Path, scenario: str | None, revision: str) -> int:
    """Run the 0.2.x CLI with ``--requirements``; output saved like the 0.1.16 run."""
    argv = [str(base.NODE), str(SUITE), "server", "--url", url, "-o", str(out / "checks")]
    argv += (
        # --force: an extension scenario (tasks-*) named on its own is meant
        # to run, though it is not on the revision's timeline.
        ["--scenario", scenario, "--spec-version", revision, "--force"]
        if scenario
        else [
            "--requirements",
            revision,
        ]
    )
    env = {**os.environ, "PATH": f"{base.NODE.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    print("$", " ".join(argv), flush=True)
    with (out / "suite.log").open("w") as log:
        proc = subprocess.Popen(
            argv, cwd=out, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert proc.stdout is not None
        watchdog = threading.Timer(base.SUITE_TIMEOUT, proc.kill)
        watchdog.start()
        try:
            for line in proc.stdout:
                log.write(line)
        finally:
            watchdog.cancel()
        return proc.wait()


def main(argv: list[str] | None = None) -> int:
    """Start the server(s), run the suite, print and save the summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--direct", action="store_true", help="the conformance backend alone")
    parser.add_argument("--scenario", help="run one scenario instead of the requirements")
    parser.add_argument("--revision", default="2026-07-28", help="spec revision (2026-07-28)")
    parser.add_argument(
        "--expect", action="store_true", help="pass iff expected-<revision>.txt all pass"
    )
    parser.add_argument(
        "--engine",
        choices=("h11", "hypercorn"),
        default="h11",
        help="the gateway's HTTP engine, server.engine (default: h11)",
    )
    args = parser.parse_args(argv)
    if not SUITE.is_file():
        sys.exit(f"missing {SUITE}; install with: npm ci --prefix tests/conformance_modern")
    base.check_installed(gateway=not args.direct)
    mode = "direct" if args.direct else f"gateway-{args.engine}"
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = RESULTS / f"{mode}-{args.revision}-{stamp}"
    (out / "checks").mkdir(parents=True)
    port = base.free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    if args.direct:
        argv_server = [sys.executable, str(base.BACKEND), "--http", str(port)]
        log, ready_url = out / "backend.log", url
    else:
        config = out / "gateway.json"
        config.write_text(json.dumps(gateway_config(port, args.engine), indent=2))
        argv_server = [sys.executable, "-m", "gateway", "serve", "-c", str(config)]
        log, ready_url = out / "gateway.log", f"http://127.0.0.1:{port}/readyz"
    print(f"[{mode} {args.revision}] results in {out}", flush=True)
    with base.process(argv_server, log) as server:
        base.wait_ready(server, ready_url, log, gateway=not args.direct, backends=BACKENDS)
        code = run_suite(url, out, args.scenario, args.revision)
    ok, summary = base.summarize(out, [], strict=False)
    summary.update(mode=mode, url=url, revision=args.revision, suite_exit_code=code)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    if args.expect:
        return 0 if judge(summary, HERE / f"expected-{args.revision}.txt") else 1
    return 0 if ok and code == 0 else 1


def judge(summary: dict[str, Any], expected_file: Path) -> bool:
    """Whether every scenario ``expected_file`` names ran and passed."""
    expected = [
        line.strip()
        for line in expected_file.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    ran = summary["scenarios"]
    bad = [name for name in expected if name not in ran or ran[name]["failed"]]
    extra = sorted(n for n, r in ran.items() if not r["failed"] and n not in expected)
    print(f"\n[expect] {len(expected) - len(bad)} of {len(expected)} expected scenarios pass")
    for name in bad:
        print(f"[expect] FAIL {name}")
    if extra:
        print("[expect] passing but not yet expected (add them): " + ", ".join(extra))
    return not bad


if __name__ == "__main__":
    sys.exit(main())
