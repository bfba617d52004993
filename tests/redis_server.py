"""A real ``redis-server`` on loopback for the store tests (Debian's package; make installs it)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class RedisServer:
    """One ``redis-server`` child in a temp dir, stoppable and restartable on the same port.

    Every write is on disk before it is acknowledged (``appendfsync always``),
    so a restart loses nothing; a benchmark passes ``everysec``, the server's
    own default and what a deployment usually runs.
    """

    def __init__(self, workdir: Path, appendfsync: str = "always", password: str = "") -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is missing: run `make redis` (make test installs it)")
        self.binary = binary
        self.workdir = workdir
        self.port = free_port()
        self.appendfsync = appendfsync
        self.password = password
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The server's URL."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server and wait until it accepts connections (bounded)."""
        self.process = subprocess.Popen(
            [
                self.binary,
                "--bind", "127.0.0.1",
                "--port", str(self.port),
                "--dir", str(self.workdir),
                "--save", "",
                "--appendonly", "yes",
                "--appendfsync", self.appendfsync,
                *(["--requirepass", self.password] if self.password else []),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                    conn.sendall(b"PING\r\n")
                    # A server with a password answers -NOAUTH: it is up too.
                    if conn.recv(16).startswith((b"+PONG", b"-NOAUTH")):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start within 10 s")

    def stop(self) -> None:
        """Stop the server (SIGTERM, then wait); the append-only file keeps what it held."""
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None

    def flush(self) -> None:
        """Empty every database (between tests)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as conn:
            conn.sendall(b"FLUSHALL\r\n")
            conn.recv(16)
