"""A backend as a child process speaking newline-delimited JSON on stdio.

The child runs in its own process group (``start_new_session``) so that the
gateway can signal everything it spawned, grandchildren included (``npx``
starts ``node``, shells start tools). Shutdown follows the spec: close
stdin and wait; then SIGTERM to the group; then SIGKILL. stderr is drained
continuously into the log, a line at a time and truncated, so a chatty child
can never fill the pipe and stall its own stdout (robustness D3). Its last
few lines are kept, bounded, so that a child that exits says why in the
backend's last error (``status``, the console), with a hint when it is a
module of one of this package's extras that is missing.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections import deque
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING, Final

import structlog
import trio
from trio.lowlevel import FdStream

from gateway import COMMAND
from gateway.errors import ConnectError, TransportBroken, TransportClosed, TransportError
from gateway.transports import fd_io
from gateway.transports.base import mapped
from gateway.transports.framing import DEFAULT_MAX_LINE_BYTES, LineFramer
from gateway.transports.pipe_size import PipeSizer

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence

# How long each shutdown step waits before the next, harsher one.
STOP_GRACE: Final = 2.0
# Reads from the child's pipes; large enough that a 1 MiB message is a few
# dozen reads, small enough not to matter per backend.
READ_CHUNK_BYTES: Final = 256 * 1024
# stderr is for humans: keep a log line readable and bounded.
STDERR_LINE_LIMIT: Final = 2000
STDERR_BUFFER_LIMIT: Final = 64 * 1024
# The last stderr lines a child's exit is explained with, each cut to a
# length that keeps the reason one readable line in `status`.
STDERR_TAIL_LINES: Final = 3
STDERR_TAIL_LINE_LIMIT: Final = 160
# A Python child that cannot import a module of one of our extras: the
# demo servers need `mcp` (the `demo` extra), which a bare install lacks.
_MISSING_MODULE: Final = re.compile(r"No module named '(?P<module>[\w]+)")
EXTRA_OF_MODULE: Final = {"mcp": "demo"}

logger = structlog.get_logger("gateway.transports.stdio")

_SEND_ERRORS: Final[dict[type[BaseException], type[TransportError]]] = {
    trio.ClosedResourceError: TransportClosed,
    trio.BrokenResourceError: TransportBroken,
    OSError: TransportBroken,
}
"""How a failed write to the child's stdin maps to the gateway's transport errors."""
_RECEIVE_ERRORS: Final[dict[type[BaseException], type[TransportError]]] = {
    trio.ClosedResourceError: TransportClosed,
    # trio's pipes raise this for every OSError but EBADF (EIO, say).
    trio.BrokenResourceError: TransportBroken,
    OSError: TransportBroken,
}
"""How a failed read of the child's stdout maps (EOF is not an error: it is b"")."""


class StderrTail:
    """The last lines a child wrote to stderr, bounded, and whether its stderr has ended.

    Attributes:
        lines: at most ``STDERR_TAIL_LINES`` lines, each cut to
            ``STDERR_TAIL_LINE_LIMIT`` characters.
        ended: set when the drain has read the child's stderr to its end.
    """

    def __init__(self) -> None:
        self.lines: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self.ended = trio.Event()

    def add(self, line: str) -> None:
        """Keep ``line`` as the latest (the oldest kept one goes)."""
        if len(line) > STDERR_TAIL_LINE_LIMIT:
            line = line[: STDERR_TAIL_LINE_LIMIT - 1] + "…"
        self.lines.append(line)

    def explain(self) -> str:
        """The tail as a suffix of an exit's description; "" when the child wrote nothing.

        The last line first (a traceback's last line is the error), then a
        hint for a missing module of an extra, then the lines before it.
        """
        if not self.lines:
            return ""
        *before, last = (line.strip() for line in self.lines)
        text = f": {last}"
        found = _MISSING_MODULE.search(last)
        extra = EXTRA_OF_MODULE.get(found.group("module")) if found else None
        if extra is not None:
            text += f" (install the {extra} extra: pip install '{COMMAND}[{extra}]')"
        if before:
            text += "; before it: " + " | ".join(before)
        return text


class StdioChannel:
    """The MessageChannel of one child process."""

    def __init__(
        self, process: trio.Process, max_line_bytes: int, tail: StderrTail | None = None
    ) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self._process = process
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._framer = LineFramer(max_line_bytes)
        # trio's processes read through FdStream; anything else (a test's
        # stand-in) has no pipe to resize, and -1 makes every resize a no-op.
        stdout_fd = process.stdout.fileno() if isinstance(process.stdout, FdStream) else -1
        self._sizer = PipeSizer(stdout_fd, READ_CHUNK_BYTES)
        self._lines: deque[bytes] = deque()
        # None for a stand-in without stderr (tests): no last words to wait for.
        self._tail = tail
        self._send_lock = trio.Lock()
        self._closed = False
        # A real child's pipes: ask the kernel first (fd_io); a stand-in's
        # streams (tests) are used as they are.
        stdin, stdout = self._stdin, self._stdout
        self._direct: tuple[FdStream, FdStream] | None = (
            (stdin, stdout)
            if isinstance(stdin, FdStream) and isinstance(stdout, FdStream)
            else None
        )

    @property
    def pid(self) -> int:
        """The child's pid, which is also its process group id."""
        return self._process.pid

    async def send(self, message: bytes) -> None:
        """Write one message and its newline; concurrent senders take turns.

        A sender takes its turn (the lock) only when it needs one: on a
        child's pipe with no other sender mid-line, a line the kernel takes
        at once is written without it (nothing yields between the check and
        the write), and one it takes in part holds the turn for the rest.
        """
        if self._closed:
            raise TransportClosed("stdio channel closed")
        data = message + b"\n"
        lock = self._send_lock
        direct = self._direct
        try:
            try:
                if direct is not None and not lock.locked():
                    await trio.lowlevel.checkpoint_if_cancelled()
                    # fileno() at the moment of use: -1 once closed, never a reused number.
                    fd = direct[0].fileno()
                    sent = fd_io.write_now(fd, data)
                    if sent < len(data):
                        lock.acquire_nowait()  # free: nothing yielded since it was checked
                        try:
                            await fd_io.write_rest(fd, data, sent)
                        finally:
                            lock.release()
                    return
                try:
                    lock.acquire_nowait()  # a stand-in's stream (tests) has no fast path
                except trio.WouldBlock:
                    await lock.acquire()
                try:
                    if direct is not None:
                        await fd_io.write_all(direct[0].fileno(), data)
                    else:
                        await self._stdin.send_all(data)
                finally:
                    lock.release()
            except Exception as exc:
                error = mapped(exc, _SEND_ERRORS)
                if error is exc:
                    raise
                raise error from exc
        except TransportBroken as exc:
            if self._tail is None:  # a stand-in (tests): no child to ask
                raise
            # A child that died before reading (EPIPE): say how it ended.
            raise TransportBroken(await self._exit_description() or str(exc)) from exc

    async def receive(self) -> bytes:
        """The next non-blank line from the child's stdout."""
        while not self._lines:
            if self._closed:
                raise TransportClosed("stdio channel closed")
            try:
                direct = self._direct
                if direct is not None:
                    chunk = await fd_io.read_some(direct[1].fileno(), self._sizer.read_bytes)
                else:
                    chunk = bytes(await self._stdout.receive_some(self._sizer.read_bytes))
            except Exception as exc:
                error = mapped(exc, _RECEIVE_ERRORS)
                if error is exc:
                    raise
                raise error from exc
            if not chunk:
                raise TransportBroken(await self._exit_description() or "process closed its stdout")
            self._lines.extend(self._framer.feed(chunk))
            self._sizer.after_read(self._framer.pending)
        return self._lines.popleft()

    async def _exit_description(self) -> str | None:
        """How the child ended, with its last stderr lines; None while it runs on."""
        # EOF usually means the process is exiting: give it a moment so the
        # message can say how it ended, which is what an operator wants.
        with trio.move_on_after(0.5):
            await self._process.wait()
        code = self._process.returncode
        if code is None:
            return None
        said = ""
        if self._tail is not None:
            # Its last words may still be in the stderr pipe (a grandchild
            # may hold it open: the wait is bounded).
            with trio.move_on_after(0.5):
                await self._tail.ended.wait()
            said = self._tail.explain()
        if code < 0:
            return f"process killed by signal {-code}{said}"
        return f"process exited with code {code}{said}"

    async def aclose(self) -> None:
        """Mark closed; the owning ``open_stdio`` ends the process."""
        self._closed = True


def _signal_group(pid: int, signum: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


async def terminate(process: trio.Process, stdin_grace: float, term_grace: float) -> None:
    """End a child the way the spec asks: stdin close, SIGTERM, SIGKILL.

    The whole process group gets the signals, so nothing the child spawned
    outlives it. Runs shielded: shutdown must finish even while the owner is
    being cancelled.
    """
    with trio.CancelScope(shield=True):
        if process.stdin is not None:
            with trio.move_on_after(0.1):
                await process.stdin.aclose()
        with trio.move_on_after(stdin_grace):
            await process.wait()
        if process.returncode is None:
            _signal_group(process.pid, signal.SIGTERM)
            with trio.move_on_after(term_grace):
                await process.wait()
        # Whatever is left in the group (grandchildren, or a leader that
        # ignored SIGTERM) is killed; the leader is reaped either way.
        _signal_group(process.pid, signal.SIGKILL)
        await process.wait()


async def _drain_stderr(
    stream: trio.abc.ReceiveStream, log: structlog.typing.FilteringBoundLogger, tail: StderrTail
) -> None:
    def line_out(raw: bytes, **extra: bool) -> None:
        line = _printable(raw)
        log.info("backend.stderr", line=line, **extra)
        tail.add(line)

    buffer = bytearray()
    try:
        while True:
            try:
                chunk = await stream.receive_some(READ_CHUNK_BYTES)
            except (trio.ClosedResourceError, trio.BrokenResourceError, OSError):
                return
            if not chunk:
                if buffer.strip():
                    line_out(bytes(buffer))
                return
            buffer += chunk
            *lines, rest = buffer.split(b"\n")
            for line in lines:
                if line.strip():
                    line_out(bytes(line))
            buffer = bytearray(rest)
            if len(buffer) > STDERR_BUFFER_LIMIT:
                line_out(bytes(buffer), truncated=True)
                buffer.clear()
    finally:
        tail.ended.set()


def _printable(line: bytes) -> str:
    text = line.rstrip(b"\r").decode("utf-8", "backslashreplace")
    if len(text) > STDERR_LINE_LIMIT:
        return text[:STDERR_LINE_LIMIT] + f"... [{len(text) - STDERR_LINE_LIMIT} more chars]"
    return text


@asynccontextmanager
async def open_stdio(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    stop_grace: float = STOP_GRACE,
    backend: str = "",
) -> AsyncIterator[StdioChannel]:
    """Start a child and yield its channel; end the child on exit.

    Args:
        command: program and arguments.
        env: the child's complete environment (None: inherit ours).
        cwd: working directory for the child.
        max_line_bytes: the longest stdout line accepted (robustness D2).
        stop_grace: how long each shutdown step waits for the child to exit.
        backend: the backend's name, for logs.

    Raises:
        ConnectError: the program could not be started.
    """
    log = logger.bind(backend=backend)
    try:
        process = await trio.lowlevel.open_process(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
    except OSError as exc:
        raise ConnectError(f"cannot start {command[0]!r}: {exc.strerror or exc}") from exc
    log.debug("backend.process.started", pid=process.pid)
    try:
        async with trio.open_nursery() as nursery:
            assert process.stderr is not None
            tail = StderrTail()
            nursery.start_soon(_drain_stderr, process.stderr, log, tail)
            channel = StdioChannel(process, max_line_bytes, tail)
            try:
                yield channel
            finally:
                await channel.aclose()
                await terminate(process, stop_grace, stop_grace)  # noqa: ASYNC102 - shields itself, with a deadline
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:  # pragma: no cover - terminate() reaps; belt and braces
                _signal_group(process.pid, signal.SIGKILL)
                await process.wait()
            # Close our ends of the pipes now rather than at garbage
            # collection: a backend restarted all day must not leak fds
            # (measured by benchmarks/soak.py).
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream is not None:
                    with suppress(trio.ClosedResourceError, OSError):
                        await stream.aclose()
        log.debug("backend.process.ended", pid=process.pid, returncode=process.returncode)
