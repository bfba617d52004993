"""Many peers at once: GET streams held open, stdio servers started in parallel.

Shared by the one-size sections of ``run.py`` (``startup``, ``fanout``) and
the three-size rows of ``scale.py``, so both measure the same thing the
same way. A benchmark that holds thousands of sockets first raises its
own file-descriptor limit with :func:`raise_fd_limit` (the gateway child
inherits it).
"""

from __future__ import annotations

import os
import resource
import selectors
import socket
import struct
import subprocess
import time
from collections.abc import Sequence

from benchmarks import lean
from benchmarks.common import BENCH_SERVER

MARKER = b"tools/list_changed"


def raise_fd_limit(needed: int) -> int:
    """Raise this process's soft RLIMIT_NOFILE to at least ``needed``; returns it.

    Children spawned afterwards (the gateway) inherit the raised limit.
    Raises ``RuntimeError`` when the hard limit is below ``needed``: the
    run would fail halfway with EMFILE otherwise.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return soft
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise RuntimeError(
            f"{needed} file descriptors needed, the hard limit is {hard} (ulimit -Hn)"
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    return needed


def open_streams(url: str, sessions: Sequence[str], batch: int = 50) -> list[socket.socket]:
    """One GET stream per session, each confirmed by the gateway's first comment."""
    host_port = url.split("//", 1)[1].split("/", 1)[0]
    host, port = host_port.rsplit(":", 1)
    path = "/" + url.split("//", 1)[1].split("/", 1)[1]
    streams: list[socket.socket] = []
    for start in range(0, len(sessions), batch):
        group = []
        for session in sessions[start : start + batch]:
            sock = socket.create_connection((host, int(port)))
            sock.sendall(
                (
                    f"GET {path} HTTP/1.1\r\nhost: {host_port}\r\naccept: text/event-stream\r\n"
                    f"mcp-session-id: {session}\r\nmcp-protocol-version: {lean.PROTOCOL_VERSION}"
                    "\r\n\r\n"
                ).encode()
            )
            group.append(sock)
        for sock in group:
            sock.settimeout(10)
            seen = b""
            while b": stream open" not in seen:
                chunk = sock.recv(4096)
                if not chunk:
                    raise RuntimeError(f"GET stream refused: {seen[:200]!r}")
                seen += chunk
            if not seen.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"GET stream refused: {seen[:200]!r}")
            sock.setblocking(False)
        streams.extend(group)
    return streams


# SO_TIMESTAMPNS (Linux: 35, also its control-message type): the kernel
# stamps each received segment; Python exposes the constant from 3.12 on.
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_STAMP = struct.Struct("qq")  # struct timespec: seconds, nanoseconds


class Watch:
    """Held streams, registered with one epoll before any change is triggered.

    The arrival of an event is the time the kernel received the segment that
    completed it (``SO_TIMESTAMPNS``, read with ``recvmsg``), not the time
    this process got round to reading it: 10,000 sockets are read here in
    Python on the same cores as the gateway, and that reading must not count
    as the gateway's fan-out. Registration happens once, at construction,
    so it is never inside the timed window either (until 2026-12-03 the
    10,000 sockets were registered after the change was triggered).
    """

    def __init__(self, streams: Sequence[socket.socket]) -> None:
        self.streams = list(streams)
        self._epoll = selectors.EpollSelector()
        for index, sock in enumerate(self.streams):
            sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
            self._epoll.register(sock, selectors.EVENT_READ, index)

    def close(self) -> None:
        """Forget the epoll (the sockets stay open: their owner closes them)."""
        self._epoll.close()

    def await_marker(self, timeout: float) -> list[float]:
        """CLOCK_MONOTONIC kernel arrival time of the list_changed event on each stream."""
        # Kernel stamps are CLOCK_REALTIME; the offset is read now, so a
        # clock step during one trial (seconds long) is the only error.
        offset = time.clock_gettime(time.CLOCK_REALTIME) - time.clock_gettime(time.CLOCK_MONOTONIC)
        tails = [b""] * len(self.streams)
        arrived: dict[int, float] = {}
        ended: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(arrived) + len(ended) < len(self.streams) and time.monotonic() < deadline:
            for key, _ in self._epoll.select(timeout=0.5):
                index = key.data
                sock: socket.socket = key.fileobj  # type: ignore[assignment]
                try:
                    data, ancillary, _flags, _addr = sock.recvmsg(
                        65536, socket.CMSG_SPACE(_STAMP.size)
                    )
                except BlockingIOError:
                    continue
                if not data:
                    self._epoll.unregister(sock)
                    ended.add(index)
                    continue
                if index in arrived:
                    continue  # a keep-alive after the event: read and dropped
                tails[index] = tails[index][-64:] + data
                if MARKER in tails[index]:
                    arrived[index] = _kernel_time(ancillary, offset)
        return list(arrived.values())


def _kernel_time(ancillary: list[tuple[int, int, bytes]], offset: float) -> float:
    """The monotonic time of the kernel's receive stamp in ``ancillary``; now without one."""
    for level, kind, raw in ancillary:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS:
            seconds, nanos = _STAMP.unpack(raw[: _STAMP.size])
            return float(seconds + nanos / 1e9 - offset)
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def drain(streams: Sequence[socket.socket]) -> int:
    """Read and drop whatever is waiting on non-blocking ``streams``; returns the bytes.

    Held streams are reused across trials: anything a previous change left
    (a late duplicate event, a keep-alive comment) must not count as the
    next change's arrival.
    """
    dropped = 0
    for sock in streams:
        while True:
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                break
            if not data:
                break
            dropped += len(data)
    return dropped


def direct_start(count: int, tools: int = 1, list_tools: bool = False) -> float:
    """Spawn ``count`` bench servers and initialize each, all in parallel.

    With ``list_tools``, each is also asked for its tools/list once it has
    answered initialize (the gateway lists every backend before it is up).
    """
    init = lean.initialize_body(1) + b"\n"
    listing = b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n'
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            BENCH_SERVER,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "BENCH_TOOLS": str(tools)},
        )
        for _ in range(count)
    ]
    selector = selectors.DefaultSelector()
    buffers: dict[int, bytes] = {}
    stdins = {}
    for proc in procs:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(init)
        proc.stdin.flush()
        os.set_blocking(proc.stdout.fileno(), False)
        selector.register(proc.stdout.fileno(), selectors.EVENT_READ)
        buffers[proc.stdout.fileno()] = b""
        stdins[proc.stdout.fileno()] = proc.stdin
    wanted = 2 if list_tools else 1
    answers = dict.fromkeys(buffers, 0)
    while any(n < wanted for n in answers.values()):
        for key, _ in selector.select(timeout=60):
            fd = int(key.fd)  # type: ignore[call-overload]
            buffers[fd] += os.read(fd, 1 << 20)
            while b"\n" in buffers[fd]:
                line, buffers[fd] = buffers[fd].split(b"\n", 1)
                assert b'"result"' in line
                answers[fd] += 1
                if answers[fd] == 1 and list_tools:
                    stdins[fd].write(listing)
                    stdins[fd].flush()
            if answers[fd] >= wanted:
                selector.unregister(fd)
    elapsed = time.perf_counter() - started
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.close()
    for proc in procs:
        proc.wait(timeout=10)
    return elapsed
