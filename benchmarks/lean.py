"""Lean load generation: raw HTTP/1.1 over sockets and raw JSON lines over pipes.

No SDK and no HTTP library on the measured path, so the client costs a few
tens of microseconds per call and the figures are the gateway's, not the
client's. Every run records the client's own CPU share, so a table can say
when the client, not the system under test, was the limit.

- :class:`HttpConnection`: a blocking keep-alive connection for sequential
  requests (sessions, list walks, payloads).
- :func:`http_load` and :func:`stdio_load`: closed-loop load at a given
  concurrency over asyncio protocols. HTTP: one connection (and one MCP
  session) per in-flight request, as that many hosts would. stdio:
  requests pipelined on one pipe with that many in flight, matched by id,
  which is what "the same backend, directly" is for a stdio server.
- ``/proc`` readers: CPU time and memory of another process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import msgspec

PROTOCOL_VERSION = "2025-11-25"
CLIENT_CPU_WARNING = 0.8  # share of one core above which the client may be the limit

_json = msgspec.json.Decoder()
_encode = msgspec.json.Encoder().encode
_CLK_TCK = os.sysconf("SC_CLK_TCK")


# -- /proc -------------------------------------------------------------------


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of one process (not its children), in seconds."""
    with open(f"/proc/{pid}/stat", "rb") as handle:
        stat = handle.read()
    fields = stat[stat.rindex(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def children_of(pid: int) -> list[int]:
    """Direct children of a process (from /proc/PID/task/*/children)."""
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found.extend(int(x) for x in handle.read().split())
    except OSError:
        pass
    return found


def system_cpu_seconds() -> tuple[float, float]:
    """(busy, steal) CPU seconds of the whole machine, all CPUs, from /proc/stat."""
    with open("/proc/stat") as handle:
        values = [int(x) for x in handle.readline().split()[1:]]
    idle = values[3] + values[4]
    steal = values[7] if len(values) > 7 else 0
    busy = sum(values[:8]) - idle - steal
    return busy / _CLK_TCK, steal / _CLK_TCK


def process_memory_kib(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM and friends from /proc/<pid>/status, in KiB."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("Vm"):
                name, _, value = line.partition(":")
                out[name] = int(value.split()[0])
    return out


def reset_peak_rss(pid: int) -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False when not allowed."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        return False
    return True


# -- HTTP --------------------------------------------------------------------


@dataclass
class HttpResponse:
    """One parsed response."""

    status: int
    headers: dict[str, str]
    body: bytes


def _parse_response(buf: bytearray) -> tuple[HttpResponse, int] | None:
    """A complete response at the start of ``buf`` and its length, or None."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    start = end + 4
    length = headers.get("content-length")
    if length is not None:
        stop = start + int(length)
        if len(buf) < stop:
            return None
        return HttpResponse(status, headers, bytes(buf[start:stop])), stop
    if headers.get("transfer-encoding", "").lower() == "chunked":
        chunks = []
        pos = start
        while True:
            line_end = buf.find(b"\r\n", pos)
            if line_end < 0:
                return None
            size = int(bytes(buf[pos:line_end]).split(b";", 1)[0], 16)
            if size == 0:
                if buf[line_end + 2 : line_end + 4] == b"\r\n":
                    stop = line_end + 4
                else:
                    trailers_end = buf.find(b"\r\n\r\n", line_end)
                    if trailers_end < 0:
                        return None
                    stop = trailers_end + 4
                return HttpResponse(status, headers, b"".join(chunks)), stop
            data_start = line_end + 2
            if len(buf) < data_start + size + 2:
                return None
            chunks.append(bytes(buf[data_start : data_start + size]))
            pos = data_start + size + 2
    return HttpResponse(status, headers, b""), start


def _request_bytes(
    host: str, path: str, headers: dict[str, str], body: bytes, method: str
) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nhost: {host}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    if method == "POST":
        head += f"content-length: {len(body)}\r\n"
    return head.encode("latin-1") + b"\r\n" + body


def post_headers(session_id: str | None = None) -> dict[str, str]:
    """Headers of an MCP POST, with the session when there is one."""
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
    }
    if session_id is not None:
        headers["mcp-session-id"] = session_id
        headers["mcp-protocol-version"] = PROTOCOL_VERSION
    return headers


def initialize_body(msg_id: int = 0) -> bytes:
    """An initialize request as bytes."""
    return _encode(
        {
            "jsonrpc": "2.0",
            "id": msg_id,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        }
    )


INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'


def _json_body(response: HttpResponse) -> bytes:
    """The JSON-RPC message of a response, JSON or a one-message SSE stream.

    The gateway answers a plain call with ``application/json``; FastMCP's
    proxy (a peer in the benchmark) answers with an SSE stream holding the
    answer as its last ``data:`` line.
    """
    if not response.headers.get("content-type", "").startswith("text/event-stream"):
        return response.body
    data = [line[5:].strip() for line in response.body.splitlines() if line.startswith(b"data:")]
    if not data:
        raise RuntimeError(f"an SSE response without data: {response.body[:200]!r}")
    return data[-1]


class _ClosedIdle(ConnectionError):
    """The server closed the connection without answering."""


class HttpConnection:
    """One blocking HTTP/1.1 keep-alive connection to an MCP endpoint."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        assert parts.hostname is not None and parts.port is not None
        self.host = parts.netloc
        self.path = parts.path or "/"
        self._address = (parts.hostname, parts.port)
        self.sock: socket.socket | None = None
        self._buf = bytearray()
        self._ids = 0
        self.reconnects = 0

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(self._address)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buf.clear()
        return sock

    def request(
        self, body: bytes = b"", headers: dict[str, str] | None = None, method: str = "POST"
    ) -> HttpResponse:
        """Send one request and read its whole response.

        hypercorn ends a keep-alive connection after 1,000 requests
        (``connection: close``); the next request then opens a new one.
        """
        data = _request_bytes(self.host, self.path, headers or {}, body, method)
        for attempt in (1, 2):
            if self.sock is None:
                self.sock = self._connect()
            try:
                self.sock.sendall(data)
                return self._read_response()
            except (ConnectionResetError, BrokenPipeError, _ClosedIdle):
                # The server closed an idle keep-alive connection before it
                # read this request (keep_alive_timeout): safe to resend.
                self.sock.close()
                self.sock = None
                self.reconnects += 1
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _read_response(self) -> HttpResponse:
        assert self.sock is not None
        while True:
            parsed = _parse_response(self._buf)
            if parsed is not None:
                response, used = parsed
                del self._buf[:used]
                if response.headers.get("connection", "").lower() == "close":
                    self.sock.close()
                    self.sock = None
                    self.reconnects += 1
                return response
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                if not self._buf:
                    raise _ClosedIdle
                raise ConnectionError("server closed the connection mid-response")
            self._buf += chunk

    def open_session(self) -> str:
        """initialize + notifications/initialized; returns the session id."""
        response = self.request(initialize_body(), post_headers())
        assert response.status == 200, response
        session = response.headers["mcp-session-id"]
        done = self.request(INITIALIZED, post_headers(session))
        assert done.status == 202, done
        return session

    def call(self, session: str, method: str, params: dict[str, Any] | None = None) -> Any:
        """One JSON-RPC request on a session; returns the decoded result."""
        self._ids += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._ids, "method": method}
        if params is not None:
            message["params"] = params
        response = self.request(_encode(message), post_headers(session))
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {response.body[:200]!r}")
        decoded = _json.decode(_json_body(response))
        if "error" in decoded:
            raise RuntimeError(decoded["error"])
        return decoded["result"]

    def close(self) -> None:
        """Close the socket."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None


# -- stdio -------------------------------------------------------------------


class PipeClient:
    """Sequential JSON-RPC over a child's stdin/stdout (the direct baseline)."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
        )
        self._ids = 0
        self.call("initialize", _json.decode(initialize_body())["params"])
        self.send(INITIALIZED)

    def send(self, line: bytes) -> None:
        """Write one message."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """One request; returns the decoded result (notifications are skipped)."""
        assert self.proc.stdout is not None
        self._ids += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._ids, "method": method}
        if params is not None:
            message["params"] = params
        self.send(_encode(message))
        while True:
            decoded = _json.decode(self.proc.stdout.readline())
            if decoded.get("id") == self._ids:
                break
        if "error" in decoded:
            raise RuntimeError(decoded["error"])
        return decoded["result"]

    def close(self) -> None:
        """Close stdin and reap."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# -- closed-loop load ----------------------------------------------------------


@dataclass
class LoadResult:
    """What one measured window saw."""

    concurrency: int
    calls: int
    seconds: float
    errors: int
    latencies: list[float] = field(repr=False)
    client_cpu_seconds: float
    target_cpu_seconds: float | None  # the watched process (the gateway), if any
    children_cpu_seconds: float = 0.0  # the watched process's children (its backends)
    other_cores: float = 0.0  # CPU used by everything else on the machine, in cores
    steal_cores: float = 0.0  # CPU the hypervisor took, in cores

    @property
    def calls_per_second(self) -> float:
        """Completed calls per second of the window."""
        return self.calls / self.seconds

    def percentile(self, q: float) -> float:
        """A latency percentile in seconds (q in 0..100)."""
        ordered = sorted(self.latencies)
        if not ordered:
            return float("nan")
        index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))
        return ordered[index]

    @property
    def client_cpu_share(self) -> float:
        """The load generator's CPU time over the window, as a share of one core."""
        return self.client_cpu_seconds / self.seconds

    @property
    def target_cpu_per_call(self) -> float | None:
        """The watched process's CPU seconds per completed call."""
        if self.target_cpu_seconds is None or not self.calls:
            return None
        return self.target_cpu_seconds / self.calls

    def summary(self) -> dict[str, Any]:
        """JSON-ready figures."""
        return {
            "concurrency": self.concurrency,
            "calls": self.calls,
            "seconds": self.seconds,
            "errors": self.errors,
            "calls_per_s": self.calls_per_second,
            "p50_ms": self.percentile(50) * 1000,
            "p99_ms": self.percentile(99) * 1000,
            "mean_ms": statistics.fmean(self.latencies) * 1000 if self.latencies else None,
            "client_cpu_share": self.client_cpu_share,
            "target_cpu_us_per_call": (
                None if self.target_cpu_per_call is None else self.target_cpu_per_call * 1e6
            ),
            "children_cpu_us_per_call": (
                self.children_cpu_seconds / self.calls * 1e6 if self.calls else None
            ),
            "other_cores": self.other_cores,
            "steal_cores": self.steal_cores,
        }


class _Window:
    """Warm-up, then a measured window, then a drain; shared by all senders.

    Besides calls and latencies it samples CPU time: the load generator's
    own (``process_time``), the watched process's (the gateway, or the
    backend when direct) and its children's (the gateway's backends), and
    the whole machine's, so that CPU used by anything else in the window
    (other jobs on a shared machine) shows up as ``other_cores``.
    """

    def __init__(self, watch_pid: int | None) -> None:
        self.measuring = False
        self.running = True
        self.calls = 0
        self.errors = 0
        self.latencies: list[float] = []
        self.in_flight = 0
        self.drained = asyncio.get_running_loop().create_future()
        self._watch = watch_pid
        self._children: list[int] = []
        self._t0 = self._t1 = 0.0
        self._cpu: list[float] = []
        self._target: list[float | None] = []
        self._kids: list[float] = []
        self._system: list[tuple[float, float]] = []

    def _sample(self) -> None:
        self._cpu.append(time.process_time())
        self._target.append(None if self._watch is None else process_cpu_seconds(self._watch))
        kids = 0.0
        for pid in self._children:
            with contextlib.suppress(OSError):
                kids += process_cpu_seconds(pid)
        self._kids.append(kids)
        self._system.append(system_cpu_seconds())

    def start(self) -> None:
        if self._watch is not None:
            self._children = children_of(self._watch)
        self._sample()
        self._t0 = time.perf_counter()
        self.measuring = True

    def stop(self) -> None:
        self._t1 = time.perf_counter()
        self._sample()
        self.measuring = False
        self.running = False
        if self.in_flight == 0 and not self.drained.done():
            self.drained.set_result(None)

    def sent(self) -> None:
        self.in_flight += 1

    def done(self, started: float, ok: bool) -> bool:
        """Record one answer; True when the sender should send another."""
        now = time.perf_counter()
        self.in_flight -= 1
        if self.measuring and started >= self._t0:
            self.calls += 1
            self.latencies.append(now - started)
            if not ok:
                self.errors += 1
        if not self.running and self.in_flight == 0 and not self.drained.done():
            self.drained.set_result(None)
        return self.running

    def result(self, concurrency: int) -> LoadResult:
        target = None
        if self._target[0] is not None and self._target[1] is not None:
            target = self._target[1] - self._target[0]
        seconds = self._t1 - self._t0
        client = self._cpu[1] - self._cpu[0]
        kids = self._kids[1] - self._kids[0]
        busy = self._system[1][0] - self._system[0][0]
        steal = self._system[1][1] - self._system[0][1]
        other = busy - client - (target or 0.0) - kids
        return LoadResult(
            concurrency=concurrency,
            calls=self.calls,
            seconds=seconds,
            errors=self.errors,
            latencies=self.latencies,
            client_cpu_seconds=client,
            target_cpu_seconds=target,
            children_cpu_seconds=kids,
            other_cores=max(other, 0.0) / seconds,
            steal_cores=steal / seconds,
        )


class _HttpSender(asyncio.Protocol):
    """One connection, one session, one request in flight at a time.

    hypercorn closes a keep-alive connection after ``keep_alive_max_requests``
    (1,000) requests with ``connection: close``; the sender then reconnects,
    and the next call's latency includes the new connection, as a host's
    would.
    """

    def __init__(
        self,
        window: _Window,
        request: Callable[[int], bytes],
        address: tuple[str, int],
    ) -> None:
        self._window = window
        self._request = request
        self._address = address
        self._buf = bytearray()
        self._next_id = 1
        self._started = 0.0
        self._closing = False
        self.reconnects = 0
        self.transport: asyncio.Transport | None = None

    async def connect(self) -> None:
        """Open (or reopen) the connection."""
        loop = asyncio.get_running_loop()
        await loop.create_connection(lambda: self, *self._address)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self._buf.clear()
        self._closing = False
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self) -> None:
        assert self.transport is not None
        payload = self._request(self._next_id)
        self._next_id += 1
        self._window.sent()
        self._started = time.perf_counter()
        self.transport.write(payload)

    def data_received(self, data: bytes) -> None:
        self._buf += data
        parsed = _parse_response(self._buf)
        if parsed is None:
            return
        response, used = parsed
        del self._buf[:used]
        ok = response.status == 200 and b'"result"' in response.body
        again = self._window.done(self._started, ok)
        if response.headers.get("connection", "").lower() == "close":
            self._closing = again
            assert self.transport is not None
            self.transport.close()
        elif again:
            self.send()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self._closing:
            self.reconnects += 1
            asyncio.get_running_loop().create_task(self._resume())
        elif self._window.running:
            self._window.errors += 1
            raise ConnectionError(f"the gateway closed a connection: {exc}")

    async def _resume(self) -> None:
        started = time.perf_counter()
        await self.connect()
        self.send()
        self._started = started  # the reconnect is part of this call


def _http_request_factory(
    url: str, session: str, method: str, params: bytes
) -> Callable[[int], bytes]:
    parts = urlsplit(url)
    head = (
        f"POST {parts.path} HTTP/1.1\r\nhost: {parts.netloc}\r\n"
        "accept: application/json, text/event-stream\r\ncontent-type: application/json\r\n"
        f"mcp-session-id: {session}\r\nmcp-protocol-version: {PROTOCOL_VERSION}\r\n"
        "content-length: "
    ).encode("latin-1")
    before = b'{"jsonrpc":"2.0","id":'
    after = b',"method":"' + method.encode() + b'","params":' + params + b"}"

    def build(msg_id: int) -> bytes:
        body = before + str(msg_id).encode() + after
        return head + str(len(body)).encode() + b"\r\n\r\n" + body

    return build


async def _run_window(
    window: _Window, start_senders: Callable[[], None], warmup: float, duration: float
) -> None:
    start_senders()
    await asyncio.sleep(warmup)
    window.start()
    await asyncio.sleep(duration)
    window.stop()
    await asyncio.wait_for(window.drained, timeout=120)


async def _http_load(
    url: str,
    sessions: Sequence[str],
    method: str,
    params: bytes,
    warmup: float,
    duration: float,
    watch_pid: int | None,
) -> LoadResult:
    window = _Window(watch_pid)
    parts = urlsplit(url)
    senders = []
    assert parts.hostname is not None and parts.port is not None
    for session in sessions:
        factory = _http_request_factory(url, session, method, params)
        sender = _HttpSender(window, factory, (parts.hostname, parts.port))
        await sender.connect()
        senders.append(sender)

    def start() -> None:
        for sender in senders:
            sender.send()

    try:
        await _run_window(window, start, warmup, duration)
    finally:
        for sender in senders:
            if sender.transport is not None:
                sender.transport.close()
    return window.result(len(sessions))


def http_load(
    url: str,
    sessions: Sequence[str],
    method: str,
    params: dict[str, Any],
    *,
    warmup: float,
    duration: float,
    watch_pid: int | None = None,
) -> LoadResult:
    """Closed-loop load: one connection per session, each with one call in flight."""
    return asyncio.run(
        _http_load(url, sessions, method, _encode(params), warmup, duration, watch_pid)
    )


class _IdOnly(msgspec.Struct):
    id: int | None = None
    result: msgspec.Raw = msgspec.Raw(b"")


_id_decoder = msgspec.json.Decoder(_IdOnly)


class _StdioSender(asyncio.SubprocessProtocol):
    """Pipelined requests on one child's stdin; answers matched by id."""

    def __init__(self, window: _Window | None, request: Callable[[int], bytes]) -> None:
        self.window = window
        self._request = request
        self._buf = bytearray()
        self._next_id = 1
        self._started: dict[int, float] = {}
        self._waiters: dict[int, asyncio.Future[bytes]] = {}
        self.stdin: asyncio.WriteTransport | None = None
        self.exited: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        stdin = transport.get_pipe_transport(0)
        assert isinstance(stdin, asyncio.WriteTransport)
        self.stdin = stdin

    async def call_once(self, line: bytes, msg_id: int) -> bytes:
        """Send one message and wait for the answer with this id (set-up only)."""
        assert self.stdin is not None
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._waiters[msg_id] = future
        self.stdin.write(line + b"\n")
        return await future

    def send(self) -> None:
        assert self.stdin is not None and self.window is not None
        msg_id = self._next_id
        self._next_id += 1
        self.window.sent()
        self._started[msg_id] = time.perf_counter()
        self.stdin.write(self._request(msg_id))

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd != 1:
            return
        self._buf += data
        if b"\n" not in data:
            return
        *lines, rest = self._buf.split(b"\n")
        self._buf = bytearray(rest)
        for line in lines:
            if not line.strip():
                continue
            message = _id_decoder.decode(line)
            if message.id is None:
                continue  # a notification
            waiter = self._waiters.pop(message.id, None)
            if waiter is not None:
                waiter.set_result(bytes(line))
                continue
            started = self._started.pop(message.id, None)
            if started is None or self.window is None:
                continue
            if self.window.done(started, len(message.result) > 0):
                self.send()

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


async def _stdio_load(
    argv: Sequence[str],
    env: dict[str, str] | None,
    concurrency: int,
    method: str,
    params: bytes,
    warmup: float,
    duration: float,
) -> tuple[LoadResult, float]:
    loop = asyncio.get_running_loop()
    before = b'{"jsonrpc":"2.0","id":'
    after = b',"method":"' + method.encode() + b'","params":' + params + b"}\n"
    sender: _StdioSender
    transport, sender = await loop.subprocess_exec(
        lambda: _StdioSender(None, lambda i: before + str(i).encode() + after),
        *argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    try:
        await sender.call_once(initialize_body(0), 0)
        assert sender.stdin is not None
        sender.stdin.write(INITIALIZED + b"\n")
        window = _Window(transport.get_pid())
        sender.window = window

        def start() -> None:
            for _ in range(concurrency):
                sender.send()

        await _run_window(window, start, warmup, duration)
        result = window.result(concurrency)
        backend_cpu = result.target_cpu_seconds or 0.0
        result.target_cpu_seconds = None  # the watched process here is the backend
        return result, backend_cpu
    finally:
        assert sender.stdin is not None
        sender.stdin.close()
        try:
            await asyncio.wait_for(sender.exited, timeout=10)
        except TimeoutError:
            transport.kill()
        transport.close()


def stdio_load(
    argv: Sequence[str],
    concurrency: int,
    method: str,
    params: dict[str, Any],
    *,
    warmup: float,
    duration: float,
    env: dict[str, str] | None = None,
) -> tuple[LoadResult, float]:
    """Closed-loop pipelined load on a fresh child; returns (result, backend CPU seconds)."""
    return asyncio.run(
        _stdio_load(argv, env, concurrency, method, _encode(params), warmup, duration)
    )
