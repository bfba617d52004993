"""Run the official MCP conformance suite through the gateway (issue 9).

    .venv/bin/python tests/conformance/run.py            # through the gateway
    .venv/bin/python tests/conformance/run.py --direct   # the backend alone, no gateway
    .venv/bin/python tests/conformance/run.py --scenario tools-call-sampling

Through the gateway (the default), it starts ``python -m gateway serve`` on a
free loopback port with three backends:

* ``conformance``: tests/servers/conformance_backend.py over stdio, mounted
  unprefixed (``prefix: ""``), so the suite finds the names it calls;
* ``alpha``: tests/servers/alpha.py (prefix ``alpha``);
* ``everything``: @modelcontextprotocol/server-everything from tests/node over
  stdio (prefix ``everything``);

waits for /readyz to report all three up, then runs
``conformance server --url http://127.0.0.1:PORT/mcp --suite all`` with the
Node.js pinned in tests/conformance (the suite needs Node 22 or newer).

``--direct`` runs the same suite against the conformance backend alone, over
its own Streamable HTTP (``conformance_backend.py --http PORT``): a baseline
that tells backend bugs from gateway bugs.

Everything the suite and the servers print goes to
tests/conformance/results/<run>/ (suite.log, gateway.log or backend.log, the
generated config, one checks.json per scenario, summary.json). The exit code
is 0 only when every scenario passed: no check with status FAILURE, and every
selected scenario ran. Checks with status WARNING are listed; ``--strict``
counts them as failures too.

Install first (from the repository root): ``make conformance-deps``, or
``npm ci --prefix tests/conformance`` and ``npm ci --prefix tests/node``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MODULES = HERE / "node_modules"
NODE = MODULES / ".bin" / "node"
SUITE = MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
RESULTS = HERE / "results"
BACKEND = ROOT / "tests" / "servers" / "conformance_backend.py"
ALPHA = ROOT / "tests" / "servers" / "alpha.py"
EVERYTHING = (
    ROOT / "tests" / "node" / "node_modules" / "@modelcontextprotocol" / "server-everything"
)
EVERYTHING_ENTRY = EVERYTHING / "dist" / "index.js"

INSTALL_HINT = (
    "make conformance-deps  (or: npm ci --prefix tests/conformance; npm ci --prefix tests/node)"
)
READY_TIMEOUT = 60.0
SUITE_TIMEOUT = 900.0
MIN_NODE_MAJOR = 22


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def check_installed(*, gateway: bool) -> None:
    missing = [p for p in (NODE, SUITE) if not p.exists()]
    if gateway and not EVERYTHING_ENTRY.is_file():
        missing.append(EVERYTHING_ENTRY)
    if missing:
        names = "\n  ".join(str(p.relative_to(ROOT)) for p in missing)
        sys.exit(f"missing:\n  {names}\ninstall with: {INSTALL_HINT}")
    version = subprocess.run(
        [str(NODE), "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    major = int(version.lstrip("v").split(".")[0])
    if major < MIN_NODE_MAJOR:
        sys.exit(f"{NODE} is {version}; the conformance suite needs Node {MIN_NODE_MAJOR}+")


def gateway_config(port: int, engine: str = "h11") -> dict[str, Any]:
    """Gateway config: the conformance backend unprefixed, plus alpha and everything.

    ``engine`` is ``server.engine``: the suite runs on each in ``make test``.
    """

    def stdio(name: str, prefix: str | None, argv: list[str]) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "name": name,
            "transport": "stdio",
            "command": argv[0],
            "args": argv[1:],
            "required": True,  # so /readyz is 200 only once all three are up
            "stop_grace": 0.5,
        }
        if prefix is not None:
            entry["prefix"] = prefix
        return entry

    return {
        "server": {"host": "127.0.0.1", "port": port, "path": "/mcp", "engine": engine},
        "logging": {"level": "info", "format": "json"},
        "backends": [
            stdio("conformance", "", [sys.executable, str(BACKEND)]),
            stdio("alpha", None, [sys.executable, str(ALPHA)]),
            # The project-local Node (22+) runs the reference server too.
            stdio("everything", None, [str(NODE), str(EVERYTHING_ENTRY), "stdio"]),
        ],
    }


@contextlib.contextmanager
def process(argv: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``argv`` in its own process group, output to ``log``; stop it on exit."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            yield proc
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


def wait_ready(
    proc: subprocess.Popen[bytes], url: str, log: Path, *, gateway: bool, backends: int = 3
) -> None:
    """Wait until ``url`` answers 200 (for the gateway: all ``backends`` up)."""
    deadline = time.monotonic() + READY_TIMEOUT
    last = "no answer"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"server exited with {proc.returncode} before it was ready; see {log}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                body = response.read().decode()
                if not gateway:
                    return
                states = json.loads(body).get("backends", {})
                if all(_state_name(s) == "up" for s in states.values()) and len(states) == backends:
                    return
                last = body
        except urllib.error.HTTPError as err:
            last = f"HTTP {err.code}: {err.read().decode(errors='replace')[:500]}"
            if not gateway and err.code < 500:
                return  # the SDK server answers GET /mcp without a session with 4xx: it is up
        except OSError as err:
            last = str(err)
        time.sleep(0.2)
    sys.exit(f"not ready after {READY_TIMEOUT:.0f}s ({url}): {last}\nsee {log}")


def _state_name(state: Any) -> str:
    return str(state.get("state") if isinstance(state, dict) else state)


def run_suite(url: str, out: Path, scenario: str | None, suite: str) -> int:
    """Run the conformance CLI, echoing and saving its output; return its exit code."""
    argv = [str(NODE), str(SUITE), "server", "--url", url, "-o", str(out / "checks")]
    argv += ["--scenario", scenario] if scenario else ["--suite", suite]
    env = {**os.environ, "PATH": f"{NODE.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    print("$", " ".join(argv), flush=True)
    with (out / "suite.log").open("w") as log:
        proc = subprocess.Popen(
            argv, cwd=out, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert proc.stdout is not None
        watchdog = threading.Timer(SUITE_TIMEOUT, proc.kill)
        watchdog.start()
        try:
            for line in proc.stdout:
                log.write(line)
        finally:
            watchdog.cancel()
        code = proc.wait()
        if code < 0:
            log.write(f"\n[run.py] suite killed (signal {-code}; limit {SUITE_TIMEOUT:.0f}s)\n")
        return code


def expected_scenarios(scenario: str | None, suite: str) -> list[str]:
    """The scenario names the run should produce results for."""
    if scenario:
        return [scenario]
    listing = subprocess.run(
        [str(NODE), str(SUITE), "list", "--server"], capture_output=True, text=True, check=True
    ).stdout
    names = [
        line.strip()[2:].split(" ")[0]
        for line in listing.splitlines()
        if line.strip().startswith("- ")
    ]
    if suite != "all":
        return []  # "active"/"pending" subsets are not listed by the CLI; do not check the set
    return names


def summarize(out: Path, expected: list[str], *, strict: bool) -> tuple[bool, dict[str, Any]]:
    """Read every checks.json; print one line per scenario and the details of what failed."""
    scenarios: dict[str, dict[str, Any]] = {}
    for path in sorted((out / "checks").glob("server-*/checks.json")):
        # server-<scenario>-<ISO timestamp with : and . replaced by ->
        name = path.parent.name.removeprefix("server-").rsplit("-", 6)[0]
        checks = json.loads(path.read_text())
        scenarios[name] = {
            "passed": sum(c["status"] == "SUCCESS" for c in checks),
            "failed": [c for c in checks if c["status"] == "FAILURE"],
            "warnings": [c for c in checks if c["status"] == "WARNING"],
            "checks_file": str(path.relative_to(out)),
        }
    missing = [name for name in expected if name not in scenarios]
    print("\n=== conformance scenarios ===")
    ok = not missing
    for name, result in scenarios.items():
        bad = result["failed"] or (strict and result["warnings"])
        ok = ok and not bad
        mark = "FAIL" if bad else "ok  "
        extra = f", {len(result['warnings'])} warning(s)" if result["warnings"] else ""
        print(f"{mark} {name}: {result['passed']} passed, {len(result['failed'])} failed{extra}")
    for name in missing:
        print(f"FAIL {name}: no results (the scenario did not run)")
    for name, result in scenarios.items():
        for check in result["failed"] + result["warnings"]:
            print(f"\n--- {name} / {check['id']} [{check['status']}]")
            print(f"    {check.get('description', '')}")
            if check.get("errorMessage"):
                print(f"    error: {check['errorMessage']}")
            if check.get("details") is not None:
                print("    details: " + json.dumps(check["details"])[:1500])
    total_failed = sum(len(r["failed"]) for r in scenarios.values())
    total_warn = sum(len(r["warnings"]) for r in scenarios.values())
    print(
        f"\n{len(scenarios)} scenarios, {total_failed} failed checks, {total_warn} warnings, "
        f"{len(missing)} missing: {'PASS' if ok else 'FAIL'}"
    )
    summary = {
        "ok": ok,
        "missing": missing,
        "scenarios": {
            name: {
                "passed": r["passed"],
                "failed": [c["id"] for c in r["failed"]],
                "warnings": [c["id"] for c in r["warnings"]],
                "checks_file": r["checks_file"],
            }
            for name, r in scenarios.items()
        },
    }
    return ok, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--direct", action="store_true", help="test the conformance backend alone (no gateway)"
    )
    parser.add_argument("--scenario", help="run one scenario instead of the suite")
    parser.add_argument("--suite", default="all", help="suite to run (default: all)")
    parser.add_argument("--strict", action="store_true", help="count warnings as failures")
    parser.add_argument(
        "--engine",
        choices=("h11", "hypercorn"),
        default="h11",
        help="the gateway's HTTP engine, server.engine (default: h11)",
    )
    args = parser.parse_args(argv)

    check_installed(gateway=not args.direct)
    mode = "direct" if args.direct else f"gateway-{args.engine}"
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = RESULTS / f"{mode}-{stamp}"
    (out / "checks").mkdir(parents=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"

    if args.direct:
        argv_server = [sys.executable, str(BACKEND), "--http", str(port)]
        log = out / "backend.log"
        ready_url = url
    else:
        config = out / "gateway.json"  # JSON is YAML
        config.write_text(json.dumps(gateway_config(port, args.engine), indent=2))
        argv_server = [sys.executable, "-m", "gateway", "serve", "-c", str(config)]
        log = out / "gateway.log"
        ready_url = f"http://127.0.0.1:{port}/readyz"

    print(f"[{mode}] results in {out.relative_to(ROOT)}", flush=True)
    with process(argv_server, log) as server:
        wait_ready(server, ready_url, log, gateway=not args.direct)
        code = run_suite(url, out, args.scenario, args.suite)
    expected = expected_scenarios(args.scenario, args.suite)
    ok, summary = summarize(out, expected, strict=args.strict)
    summary.update(mode=mode, url=url, suite_exit_code=code)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    ok = ok and code == 0
    print(f"[{mode}] suite exit code {code}; full output: {(out / 'suite.log').relative_to(ROOT)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
