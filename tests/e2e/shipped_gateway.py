"""The gateway as ``make run`` starts it: ``serve -c config/gateway.yaml``, in a child.

Only the port differs (a free one instead of 8000), so the tests that use
this can run beside a gateway a developer has running.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import trio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

ROOT: Final = Path(__file__).resolve().parents[2]
SHIPPED_CONFIG: Final = ROOT / "config" / "gateway.yaml"
# Both demo backends connected: interpreter starts on a loaded 2-core machine.
READY_TIMEOUT: Final = 60.0
POLL_INTERVAL: Final = 0.1
STOP_TIMEOUT: Final = 30.0
DEMO_BACKENDS: Final = frozenset({"notes", "toolbox"})


@dataclass
class ShippedGateway:
    """A running ``serve -c config/gateway.yaml`` and its log (JSON lines)."""

    process: trio.Process
    port: int
    log: Path

    @property
    def url(self) -> str:
        """The MCP endpoint."""
        return f"http://127.0.0.1:{self.port}/mcp"

    def records(self) -> list[dict[str, Any]]:
        """Every log line so far, parsed (a line that is not JSON is kept as its text)."""
        found: list[dict[str, Any]] = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                record = {"event": "not-json", "level": "unknown", "line": line}
            found.append(record if isinstance(record, dict) else {"line": line})
        return found

    def connected(self) -> set[str]:
        """The backends whose first connection completed."""
        return {
            str(r.get("backend"))
            for r in self.records()
            if r.get("event") == "backend.connect.complete"
        }


def free_port() -> int:
    """A port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@asynccontextmanager
async def shipped_gateway(tmp_path: Path) -> AsyncIterator[ShippedGateway]:
    """Serve the shipped config on a free port until the block ends; yield once both
    demo backends are connected."""
    log = tmp_path / "gateway.log"
    port = free_port()
    argv = [sys.executable, "-m", "gateway", "serve", "-c", str(SHIPPED_CONFIG)]
    argv += ["--port", str(port)]
    with log.open("wb") as sink:
        process = await trio.lowlevel.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
        running = ShippedGateway(process, port, log)
        try:
            with trio.fail_after(READY_TIMEOUT):
                while running.connected() < DEMO_BACKENDS:
                    if process.returncode is not None:
                        raise RuntimeError(f"gateway exited: {log.read_text()[-2000:]}")
                    await trio.sleep(POLL_INTERVAL)
            yield running
        finally:
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    process.send_signal(signal.SIGTERM)
                    with trio.move_on_after(STOP_TIMEOUT):
                        await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
