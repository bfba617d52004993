"""Start a network MCP server as a child process and wait until it listens.

Used by the transport tests that talk to real peers (official-SDK servers in
tests/servers and the Node reference server) over a real loopback socket.
Starting is synchronous, so a module-scoped fixture can share one server
between tests: each test opens its own MCP session on it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from tests.servers.paths import EVERYTHING_ENTRY, EVERYTHING_INSTALL_HINT, SERVERS_DIR

# A server that has not bound its port by then is not coming up.
READY_TIMEOUT = 30.0
# Between connection attempts while the server starts.
POLL_INTERVAL = 0.05
# How long a server may take to exit after SIGTERM before it is killed.
STOP_TIMEOUT = 5.0


@dataclass
class RunningServer:
    """A started server: its process and where it listens."""

    process: subprocess.Popen[bytes]
    port: int

    def url(self, path: str) -> str:
        """``http://127.0.0.1:{port}{path}``."""
        return f"http://127.0.0.1:{self.port}{path}"

    def stop(self) -> None:
        """SIGTERM, then SIGKILL; idempotent."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    """Block until ``127.0.0.1:port`` accepts connections (bounded)."""
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with code {process.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return
        except OSError as exc:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"nothing listens on port {port} after {READY_TIMEOUT} s"
                ) from exc
            time.sleep(POLL_INTERVAL)


@contextmanager
def run_server(
    argv: Sequence[str], port: int, *, env: Mapping[str, str] | None = None
) -> Iterator[RunningServer]:
    """Run ``argv`` for the block; yield once it listens on ``port``.

    The child's stdout is discarded (the Node server logs every request
    there); stderr stays attached so a failing test shows why.
    """
    process = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    server = RunningServer(process, port)
    try:
        wait_for_port(port, process)
        yield server
    finally:
        server.stop()


@contextmanager
def run_http_alpha(transport: str, mode: str = "sse") -> Iterator[RunningServer]:
    """tests/servers/http_alpha.py (official SDK, FastMCP) on a free port."""
    port = free_port()
    argv = [sys.executable, str(SERVERS_DIR / "http_alpha.py"), str(port), transport, mode]
    with run_server(argv, port) as server:
        yield server


@contextmanager
def run_everything(transport: str) -> Iterator[RunningServer]:
    """The Node reference server over ``streamableHttp`` or ``sse`` on a free port.

    It reads its port from the ``PORT`` environment variable.
    """
    if not EVERYTHING_ENTRY.is_file():
        raise RuntimeError(f"reference server not installed; run: {EVERYTHING_INSTALL_HINT}")
    port = free_port()
    argv = ["node", str(EVERYTHING_ENTRY), transport]
    with run_server(argv, port, env={"PORT": str(port)}) as server:
        yield server
