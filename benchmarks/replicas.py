"""Replicas without affinity (issue 14, step 8): three gateways behind HAProxy.

Modern (2026-07-28) requests hold no session, so any replica may serve any of
them: cursors and sealed ``requestState`` verify on every replica that shares
the secrets. This run shows it with real parts:

- one official-SDK 2.x backend over Streamable HTTP (``tests/sdk2/replica_backend.py``),
  shared by every replica as a real HTTP backend is, offering an MRTR tool;
- the demo toolbox over stdio, one child per replica;
- three ``trio-mcp-gateway serve`` replicas sharing ``pagination.cursor_secret`` and
  ``mrtr.state_secret``, with a small page size so every walk crosses pages;
- HAProxy (the Debian package) in front, ``balance roundrobin`` per request,
  no stickiness of any kind;
- the official SDK 2.x client (``tests/sdk2/replica_client.py``) making the calls:
  adds with checkable answers, full cursor walks, MRTR rounds.

When half the operations are done, one replica is killed with SIGKILL. The
figures: operations ok / wrong / failed, and the failures' kinds. "Wrong" must
be 0; the failures must be only calls that were in flight on the killed
replica (at most ``--workers`` of them) plus what HAProxy sent it before its
health check noticed.

Run: ``.venv/bin/python -m benchmarks.replicas [--operations 1000]``.
Needs ``haproxy`` on PATH (``make haproxy``) and ``.venv-sdk2`` (``make sdk2-venv``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from benchmarks.common import ROOT, free_port

SDK2_PYTHON = ROOT / ".venv-sdk2" / "bin" / "python"
BACKEND_SCRIPT = ROOT / "tests" / "sdk2" / "replica_backend.py"
CLIENT_SCRIPT = ROOT / "tests" / "sdk2" / "replica_client.py"
READY_TIMEOUT = 120.0
# The shared secrets every replica must have for each other's cursors and states.
CURSOR_SECRET = "replica-run-cursor-secret"
STATE_SECRET = "replica-run-state-secret"
BACKEND_TOOLS = 20
PAGE_SIZE = 7
MODERN = "2026-07-28"


def _wait_ready(url: str, proc: subprocess.Popen[bytes], deadline: float) -> None:
    with httpx.Client() as client:
        while True:
            try:
                if client.get(url).status_code < 500:
                    return
            except httpx.TransportError:
                pass
            if proc.poll() is not None:
                raise RuntimeError(f"{url}: the process exited with {proc.returncode}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url}: not ready after {READY_TIMEOUT} s")
            time.sleep(0.05)


def _gateway_config(port: int, backend_url: str) -> dict[str, Any]:
    return {
        "server": {"host": "127.0.0.1", "port": port},
        "logging": {"level": "warning", "format": "json"},
        "pagination": {"page_size": PAGE_SIZE, "cursor_secret": CURSOR_SECRET},
        "mrtr": {"state_secret": STATE_SECRET},
        "shutdown": {"drain_timeout": 2},
        "backends": [
            {
                "name": "toolbox",
                "transport": "stdio",
                "command": "python",
                "args": ["-m", "mcp_gateway_demo.toolbox"],
                "required": True,
            },
            {"name": "remote", "transport": "http", "url": backend_url, "required": True},
        ],
    }


def _haproxy_config(port: int, replicas: list[int]) -> str:
    servers = "\n".join(
        f"    server gw{index} 127.0.0.1:{replica} check inter 250ms fall 1 rise 2"
        for index, replica in enumerate(replicas, 1)
    )
    # Per-request round robin, no stick table, no cookie: any replica serves
    # any request. A request whose connection to a dead replica is refused is
    # sent to another one (redispatch); one already sent is not retried.
    return f"""global
    maxconn 2000
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    retries 2
    option redispatch 1
    option http-server-close
frontend mcp
    bind 127.0.0.1:{port}
    default_backend gateways
backend gateways
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
{servers}
"""


@contextlib.contextmanager
def _process(argv: list[str], **kwargs: Any) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _scrape_requests(port: int) -> int | None:
    """Modern requests this replica answered (its own metrics), or None if it is gone."""
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    except httpx.TransportError:
        return None
    total = 0.0
    for line in text.splitlines():
        if line.startswith("mcp_gateway_requests_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def _walk_tools(port: int) -> list[str]:
    """Every public tool name, by a modern walk of one replica directly."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/list",
    }
    names: list[str] = []
    cursor: str | None = None
    with httpx.Client(timeout=30) as client:
        while True:
            params: dict[str, Any] = {"_meta": meta}
            if cursor:
                params["cursor"] = cursor
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params}
            result = client.post(f"http://127.0.0.1:{port}/mcp", headers=headers, json=body).json()[
                "result"
            ]
            names.extend(tool["name"] for tool in result["tools"])
            cursor = result.get("nextCursor")
            if not cursor:
                return names


def run(operations: int, workers: int, replicas: int, kill: bool, seed: int) -> dict[str, Any]:
    """One whole run; returns the figures."""
    haproxy = shutil.which("haproxy")
    if haproxy is None:
        raise SystemExit("haproxy is not on PATH: `make haproxy` installs it")
    if not SDK2_PYTHON.exists():
        raise SystemExit(".venv-sdk2 is missing: `make sdk2-venv`")
    deadline = time.monotonic() + READY_TIMEOUT
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        backend_port = free_port()
        backend = stack.enter_context(
            _process([str(SDK2_PYTHON), str(BACKEND_SCRIPT), str(backend_port), str(BACKEND_TOOLS)])
        )
        backend_url = f"http://127.0.0.1:{backend_port}/mcp"
        # A GET on the MCP path answers (4xx) once the server listens.
        _wait_ready(backend_url, backend, deadline)
        ports = [free_port() for _ in range(replicas)]
        gateways = []
        for port in ports:
            path = tmp / f"gateway-{port}.yaml"
            path.write_text(json.dumps(_gateway_config(port, backend_url)))
            gateways.append(
                stack.enter_context(
                    _process([sys.executable, "-m", "gateway", "serve", "-c", str(path)], cwd=ROOT)
                )
            )
        for port, proc in zip(ports, gateways, strict=True):
            _wait_ready(f"http://127.0.0.1:{port}/readyz", proc, deadline)
        front = free_port()
        cfg = tmp / "haproxy.cfg"
        cfg.write_text(_haproxy_config(front, ports))
        balancer = stack.enter_context(_process([haproxy, "-f", str(cfg), "-db"]))
        _wait_ready(f"http://127.0.0.1:{front}/readyz", balancer, deadline)
        expected = _walk_tools(ports[0])
        client = subprocess.Popen(
            [
                str(SDK2_PYTHON),
                str(CLIENT_SCRIPT),
                f"http://127.0.0.1:{front}/mcp",
                "--operations",
                str(operations),
                "--workers",
                str(workers),
                "--expect-tools",
                ",".join(expected),
                "--seed",
                str(seed),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert client.stdout is not None
        killed_at: int | None = None
        before_kill: list[int | None] = []
        summary: dict[str, Any] = {}
        for raw in client.stdout:
            line = raw.decode().strip()
            if line.startswith("progress "):
                done = int(line.split()[1])
                if kill and killed_at is None and done >= operations // 2:
                    before_kill = [_scrape_requests(port) for port in ports]
                    gateways[-1].send_signal(signal.SIGKILL)
                    killed_at = done
            elif line.startswith("{"):
                summary = json.loads(line)
        stderr = client.communicate()[1].decode(errors="replace")
        if client.returncode != 0 or not summary:
            raise RuntimeError(f"the client failed ({client.returncode}): {stderr[-3000:]}")
        summary["replicas"] = replicas
        summary["killed_after_operations"] = killed_at
        summary["requests_per_replica_before_kill"] = before_kill
        summary["requests_per_replica_at_end"] = [_scrape_requests(port) for port in ports]
        return summary


def main() -> None:
    """Command line: print the figures as JSON and a verdict line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--operations", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--no-kill", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    figures = run(args.operations, args.workers, args.replicas, not args.no_kill, args.seed)
    print(json.dumps(figures, indent=2))
    outcomes = figures["outcomes"]
    print(
        f"operations={figures['operations']} ok={outcomes.get('ok', 0)} "
        f"wrong={outcomes.get('wrong', 0)} failed={outcomes.get('failed', 0)}"
    )


if __name__ == "__main__":
    main()
