"""Run the conformance suite's CLIENT scenarios through the gateway's backend leg.

    .venv/bin/python tests/conformance_client/run.py             # every scenario below
    .venv/bin/python tests/conformance_client/run.py --scenario tools_call
    .venv/bin/python tests/conformance_client/run.py --expect    # what make runs

For each scenario, ``conformance client --scenario <name> --command
"<python> driver.py"`` (suite 0.2.0-alpha.12 from tests/conformance_modern,
Node.js pinned in tests/conformance): the suite starts the scenario's server,
driver.py starts the gateway with that server as its only backend and makes
the calls through it as a host, and the suite judges the requests the
gateway sent (issue 14 Tests; issue 16 Tests for ``auth/client-credentials-*``;
issue 30 for ``sep-2640-client-*``).

A scenario passes when its checks have no FAILURE and no WARNING and the
driver exited 0 (or the scenario allows a client error). ``--expect`` judges
the run by ``expected.txt`` here: every scenario named there must pass; the
others are reported, not fatal. Results go to tests/conformance_client/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
NODE = ROOT / "tests" / "conformance" / "node_modules" / ".bin" / "node"
SUITE = (
    ROOT
    / "tests"
    / "conformance_modern"
    / "node_modules"
    / "@modelcontextprotocol"
    / "conformance"
    / "dist"
    / "index.js"
)
DRIVER = HERE / "driver.py"
RESULTS = HERE / "results"
EXPECTED = HERE / "expected.txt"

# The scenarios a non-interactive client must pass (issue 14), the
# client-credentials extension (issue 16) and the skills extension's host
# scenarios (SEP-2640, issue 30: the driver lists and loads skills through
# the gateway, so the files it verifies are the bytes the gateway passed on).
# Interactive OAuth (authorization code, CIMD, DCR) is a host's job, not the
# backend leg's.
SCENARIOS = (
    "initialize",
    "tools_call",
    "sse-retry",
    "request-metadata",
    "http-standard-headers",
    "http-custom-headers",
    "http-invalid-tool-headers",
    "json-schema-ref-no-deref",
    "json-schema-2020-12-preservation",
    "auth/client-credentials-basic",
    "auth/client-credentials-jwt",
    "sep-2640-client-no-prefetch",
    "sep-2640-client-verify-digest",
    "sep-2640-client-verify-size",
    "sep-2640-client-verify-frontmatter",
)
# One scenario: the suite's own client timeout is 30 s; this bounds the suite.
SCENARIO_TIMEOUT = 90.0


def run_scenario(name: str, out: Path) -> dict[str, Any]:
    """Run one scenario; return its checks' verdict."""
    checks_dir = out / "checks"
    command = f"{sys.executable} {DRIVER}"
    argv = [str(NODE), str(SUITE), "client", "--command", command, "--scenario", name]
    argv += ["-o", str(checks_dir)]
    env = {**os.environ, "PATH": f"{NODE.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    log = out / f"{name.replace('/', '__')}.log"
    try:
        proc = subprocess.run(
            argv,
            cwd=out,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=SCENARIO_TIMEOUT,
            check=False,
        )
        log.write_text(proc.stdout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        log.write_text(f"timed out after {SCENARIO_TIMEOUT}s\n")
        code = -1
    return verdict(name, checks_dir, code)


def verdict(name: str, checks_dir: Path, code: int) -> dict[str, Any]:
    """Read the newest checks.json the suite wrote for ``name``."""
    # The suite writes <dir>/<scenario>-<timestamp>/checks.json; an
    # ``auth/...`` name makes that a subdirectory.
    found = sorted(checks_dir.glob(f"{name}-*/checks.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        return {
            "passed": 0,
            "failed": 1,
            "warnings": 0,
            "suite_exit_code": code,
            "bad": ["no checks"],
        }
    checks = json.loads(found[-1].read_text())
    bad = [c["id"] for c in checks if c["status"] in ("FAILURE", "WARNING")]
    return {
        "passed": sum(c["status"] == "SUCCESS" for c in checks),
        "failed": sum(c["status"] == "FAILURE" for c in checks),
        "warnings": sum(c["status"] == "WARNING" for c in checks),
        "suite_exit_code": code,
        "bad": bad,
    }


def judge(results: dict[str, dict[str, Any]], expected_file: Path) -> bool:
    """Whether every scenario ``expected_file`` names ran and passed."""
    expected = [
        line.strip()
        for line in expected_file.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    bad = [n for n in expected if n not in results or not ok(results[n])]
    extra = sorted(n for n, r in results.items() if ok(r) and n not in expected)
    print(f"\n[expect] {len(expected) - len(bad)} of {len(expected)} expected scenarios pass")
    for name in bad:
        print(f"[expect] FAIL {name}")
    if extra:
        print("[expect] passing but not yet expected (add them): " + ", ".join(extra))
    return not bad


def ok(result: dict[str, Any]) -> bool:
    """A scenario passed: no failure, no warning, the suite exited 0."""
    return not result["bad"] and result["suite_exit_code"] == 0


def main(argv: list[str] | None = None) -> int:
    """Run the scenarios, print and save the summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scenario", action="append", help="run only this scenario (repeatable)")
    parser.add_argument("--expect", action="store_true", help="pass iff expected.txt all pass")
    args = parser.parse_args(argv)
    if not SUITE.is_file():
        sys.exit(f"missing {SUITE}; install with: npm ci --prefix tests/conformance_modern")
    if not NODE.is_file():
        sys.exit(f"missing {NODE}; install with: make conformance-deps")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = RESULTS / f"client-{stamp}"
    (out / "checks").mkdir(parents=True)
    print(f"[client scenarios] results in {out}", flush=True)
    results: dict[str, dict[str, Any]] = {}
    for name in args.scenario or SCENARIOS:
        result = results[name] = run_scenario(name, out)
        state = "PASS" if ok(result) else "FAIL"
        detail = f" ({', '.join(result['bad'])})" if result["bad"] else ""
        print(
            f"{state} {name}: {result['passed']} passed, {result['failed']} failed,"
            f" {result['warnings']} warnings{detail}",
            flush=True,
        )
    (out / "summary.json").write_text(json.dumps(results, indent=2))
    passed = sum(ok(r) for r in results.values())
    print(f"\n{passed} of {len(results)} client scenarios pass through the gateway")
    if args.expect:
        return 0 if judge(results, EXPECTED) else 1
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
