"""The peers of the call benchmark: other Python MCP proxies over the same backends.

Each peer is installed, at a pinned version, into a venv of its own under
``benchmarks/.peers/`` (ignored by git): they pin their own ``mcp`` and
would not fit in the gateway's ``.venv``. ``python -m benchmarks.peers``
installs them (``make bench`` does it first); the call benchmark then runs
each installed peer in the same run as the gateway, with the same backends
and the same load, and a peer that is not installed is reported as such
rather than left out silently.

- ``fastmcp``: FastMCP's proxy (``create_proxy`` per backend, mounted under
  the backend's name), served by ``fastmcp_proxy.py`` on Streamable HTTP.
- ``mcp-proxy``: sparfenyuk's stdio-to-HTTP bridge, one ``--named-server``
  per backend (it proxies each server 1:1 at ``/servers/NAME/mcp``; it does
  not aggregate).

py-spy, which records the flame graph of the c=8 run, is a bench tool and
is installed by the same command into a venv of its own (``tools``).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import ROOT, free_port, stop_child
from benchmarks.lean import HttpConnection

PEERS_DIR = ROOT / "benchmarks" / ".peers"
# The pinned versions; `pip index versions NAME` showed each on 2026-12-03.
PINS: dict[str, tuple[str, ...]] = {
    "fastmcp": ("fastmcp==4.2.3",),
    "mcp-proxy": ("mcp-proxy==0.13.0",),
    "tools": ("py-spy==0.4.3",),
}
PEERS = ("fastmcp", "mcp-proxy")
FASTMCP_SCRIPT = Path(__file__).resolve().parent / "fastmcp_proxy.py"
READY_TIMEOUT = 60.0


def venv_bin(name: str) -> Path:
    """The bin directory of one peer's (or the tools') venv."""
    return PEERS_DIR / name / "bin"


def installed(name: str) -> bool:
    """True when ``name``'s venv holds its pinned packages (the marker is written last)."""
    marker = PEERS_DIR / name / ".installed"
    return marker.exists() and marker.read_text() == "\n".join(PINS[name])


def install(name: str) -> None:
    """Create ``name``'s venv and install its pins (no-op when already done)."""
    if installed(name):
        return
    home = PEERS_DIR / name
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(home)], check=True)
    pip = [str(venv_bin(name) / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, *PINS[name]], check=True)
    (home / ".installed").write_text("\n".join(PINS[name]))


def py_spy() -> Path | None:
    """The py-spy binary of the tools venv, if installed."""
    path = venv_bin("tools") / "py-spy"
    return path if installed("tools") and path.exists() else None


@dataclass
class PeerRun:
    """One running peer: where each backend's echo tool is reached."""

    name: str
    proc: subprocess.Popen[bytes]
    endpoints: dict[str, tuple[str, str]]  # backend -> (url, tool name)


def _command(name: str, port: int, backends: Sequence[tuple[str, Sequence[str]]]) -> list[str]:
    if name == "fastmcp":
        specs = [f"{backend}={json.dumps(list(argv))}" for backend, argv in backends]
        return [str(venv_bin(name) / "python"), str(FASTMCP_SCRIPT), str(port), *specs]
    if name == "mcp-proxy":
        command = [str(venv_bin(name) / "mcp-proxy"), "--host", "127.0.0.1", "--port", str(port)]
        command += ["--log-level", "WARNING"]
        for backend, argv in backends:
            command += ["--named-server", backend, shlex.join(argv)]
        return command
    raise ValueError(f"unknown peer {name!r}")


def _endpoints(
    name: str, port: int, backends: Sequence[tuple[str, Sequence[str]]]
) -> dict[str, tuple[str, str]]:
    base = f"http://127.0.0.1:{port}"
    if name == "fastmcp":
        return {backend: (f"{base}/mcp", f"{backend}_echo") for backend, _ in backends}
    return {backend: (f"{base}/servers/{backend}/mcp", "echo") for backend, _ in backends}


def _wait_ready(proc: subprocess.Popen[bytes], endpoints: dict[str, tuple[str, str]]) -> None:
    """Poll until every endpoint opens a session (bounded by READY_TIMEOUT)."""
    deadline = time.monotonic() + READY_TIMEOUT
    pending = [url for url, _ in endpoints.values()]
    while pending:
        if proc.poll() is not None:
            raise RuntimeError(f"the peer exited with {proc.returncode} before it was ready")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the peer was not ready after {READY_TIMEOUT:.0f} s")
        conn = HttpConnection(pending[0])
        try:
            conn.open_session()
            pending.pop(0)
        except (OSError, AssertionError, KeyError):
            time.sleep(0.1)
        finally:
            conn.close()


@contextmanager
def running_peer(name: str, backends: Sequence[tuple[str, Sequence[str]]]) -> Iterator[PeerRun]:
    """Run peer ``name`` over ``backends`` (name, argv) on a free loopback port."""
    port = free_port()
    endpoints = _endpoints(name, port, backends)
    proc = subprocess.Popen(
        _command(name, port, backends),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        _wait_ready(proc, endpoints)
        yield PeerRun(name, proc, endpoints)
    finally:
        stop_child(proc, 20)
