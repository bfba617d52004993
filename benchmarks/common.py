"""Shared helpers for the benchmark scripts: start a gateway, speak lean HTTP."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from functools import partial
from io import BytesIO
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
BENCH_SERVER = [sys.executable, str(ROOT / "benchmarks" / "bench_server.py")]
#: valgrind counting instructions only (no cache simulation); the out file follows.
CACHEGRIND = ("valgrind", "--tool=cachegrind", "--cache-sim=no")
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def cachegrind_total(text: str) -> int:
    """The instructions cachegrind counted: its stderr's "I refs" or its out file's "summary"."""
    for line in reversed(text.splitlines()):
        if "I   refs:" in line or "I refs:" in line or line.startswith("summary:"):
            return int(line.rsplit(":", 1)[1].replace(",", "").split()[0])
    raise ValueError("no instruction count in cachegrind's output")


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bench_backend(name: str, tools: int = 1, **env: str) -> dict[str, Any]:
    """A config entry for one bench_server child."""
    return {
        "name": name,
        "transport": "stdio",
        "command": BENCH_SERVER[0],
        "args": BENCH_SERVER[1:],
        "env": {"BENCH_TOOLS": str(tools), **env},
        "required": True,
        "stop_grace": 0.5,
    }


def compared_builds(stack: ExitStack, baseline: str | None) -> list[tuple[str, Path | None]]:
    """This tree's build, named "this tree", and ``baseline``'s (:func:`baseline_tree`) if any."""
    builds: list[tuple[str, Path | None]] = [("this tree", None)]
    if baseline:
        builds.append((baseline, stack.enter_context(baseline_tree(baseline))))
    return builds


@contextmanager
def baseline_tree(rev: str) -> Iterator[Path]:
    """The gateway package of ``rev`` in a temporary folder."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", rev, "gateway"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    with tempfile.TemporaryDirectory(prefix="gateway-baseline-") as folder:
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(folder, filter="data")
        yield Path(folder)


@contextmanager
def running_gateway(
    backends: Sequence[dict[str, Any]],
    engine: str = "h11",
    tree: Path | None = None,
    server_options: dict[str, Any] | None = None,
    *,
    cpus: set[int] | None = None,
    ready_poll: float = 0.005,
    wrapper: Sequence[str] = (),
    ready_timeout: float = 120.0,
    stop_timeout: float = 20.0,
    **sections: Any,
) -> Iterator[tuple[str, subprocess.Popen[bytes], float]]:
    """Run ``trio-mcp-gateway serve`` in a child; yields (url, process, seconds to ready).

    ``engine`` is ``server.engine`` (h11, the default, or hypercorn);
    ``tree`` a folder holding another build of the ``gateway`` package
    (:func:`baseline_tree`), run instead of the working tree's;
    ``server_options`` more ``server`` keys (``max_sessions`` for a run
    past the default 10,000 sessions); ``cpus`` the cores the gateway (and
    so its backends, which inherit it) may run on; ``ready_poll`` the
    seconds between two ``/readyz`` polls; ``wrapper`` a command the
    gateway runs under (valgrind: :data:`CACHEGRIND`), given
    ``ready_timeout`` seconds to answer ``/readyz`` and ``stop_timeout`` to
    exit after SIGTERM before it is killed.
    """
    port = free_port()
    server = {**(server_options or {}), "host": "127.0.0.1", "port": port, "engine": engine}
    config = {"server": server, "backends": list(backends)}
    config["logging"] = {"level": "warning", "format": "json"}
    config.update(sections)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
        json.dump(config, handle)  # JSON is YAML
        path = handle.name
    started = time.perf_counter()
    env = None
    if tree is not None:  # the baseline's package first; whatever else was on the path after
        search = os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": search}
    proc = subprocess.Popen(
        [*wrapper, sys.executable, "-m", "gateway", "serve", "-c", path],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tree or ROOT,
        env=env,
        preexec_fn=None if cpus is None else partial(os.sched_setaffinity, 0, cpus),
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + ready_timeout
        with httpx.Client() as client:
            while True:
                try:
                    if client.get(base + "/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("gateway did not become ready")
                time.sleep(ready_poll)
        ready = time.perf_counter() - started
        yield base + "/mcp", proc, ready
    finally:
        stop_child(proc, stop_timeout)
        os.unlink(path)


def stop_child(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM, ``timeout`` seconds to exit, then SIGKILL; reaped either way."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class LeanClient:
    """A minimal Streamable HTTP client: JSON bodies, one session."""

    def __init__(self, url: str, client: httpx.Client | None = None) -> None:
        self.url = url
        self.http = client or httpx.Client(timeout=60)
        self.headers = dict(HEADERS)
        self._id = 0
        result = self.call(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
            raw_response=True,
        )
        self.headers["mcp-session-id"] = result.headers["mcp-session-id"]
        self.headers["mcp-protocol-version"] = "2025-11-25"
        self.http.post(
            url,
            headers=self.headers,
            content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
        )

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, raw_response: bool = False
    ) -> Any:
        """One request; returns the result (or the httpx response)."""
        self._id += 1
        body = {"jsonrpc": "2.0", "id": self._id, "method": method}
        if params is not None:
            body["params"] = params
        response = self.http.post(self.url, headers=self.headers, content=json.dumps(body))
        if raw_response:
            return response
        message = response.json()
        if "error" in message:
            raise RuntimeError(message["error"])
        return message["result"]


class StdioClient:
    """Talks to one stdio MCP server directly: the baseline of every figure."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )
        self._id = 0
        self.call(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        )

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """One request over the pipes; returns the result."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._id += 1
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": self._id, "method": method}
        if params is not None:
            body["params"] = params
        self.proc.stdin.write(json.dumps(body).encode() + b"\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())["result"]

    def close(self) -> None:
        """Close stdin and reap."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def median_seconds(samples: Sequence[float]) -> float:
    """The median of a list of timings."""
    return statistics.median(samples)


def write_results(name: str, data: dict[str, Any]) -> Path:
    """Write a JSON result file under benchmarks/results/."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2))
    return path


def progress(message: str) -> None:
    """A progress line on stderr, so the tables on stdout stay clean."""
    print(f"   .. {message}", file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    """What a result file records about where it was measured: CPU, Python, commit."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = bool(
        subprocess.run(
            ["git", "status", "--porcelain", "gateway"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    )
    return {
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "commit": commit + ("+dirty gateway/" if dirty else ""),
    }
