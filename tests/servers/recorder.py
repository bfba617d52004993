"""A transparent stdio wrapper that records every line between a client and a server.

Run it as ``python recorder.py LOGFILE -- CMD ARGS...``: it starts CMD, relays
its own stdin to CMD's stdin and CMD's stdout to its own stdout, one line at a
time and unchanged, and appends each line to LOGFILE prefixed with its
direction: ``> `` for a line sent to CMD, ``< `` for a line CMD sent back.
CMD's stderr is inherited. Tests use it to see what the gateway really sent a
backend (the backend-side ids of calls, ``notifications/cancelled``).

It exits when CMD's stdout ends, with CMD's exit status. CMD stays in the
recorder's process group, so a signal to the group (the gateway's shutdown)
reaches both.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from contextlib import suppress
from pathlib import Path
from typing import IO, Any


def recorded(logfile: Path, argv: list[str]) -> list[str]:
    """The argv that runs ``argv`` behind the recorder, logging to ``logfile``."""
    return [sys.executable, str(Path(__file__).resolve()), str(logfile), "--", *argv]


def read_log(logfile: Path) -> list[tuple[str, dict[str, Any]]]:
    """The recorded messages so far, as (direction, message); ``>`` is towards the server."""
    if not logfile.exists():
        return []
    entries = []
    for line in logfile.read_text(encoding="utf-8").splitlines():
        direction, _, body = line.partition(" ")
        try:
            message = json.loads(body)
        except ValueError:
            continue  # a line still being written, or not JSON
        if isinstance(message, dict):
            entries.append((direction, message))
    return entries


class _Log:
    def __init__(self, path: str) -> None:
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the process
        self._lock = threading.Lock()

    def write(self, direction: str, line: bytes) -> None:
        text = line.decode("utf-8", "backslashreplace").rstrip("\r\n")
        with self._lock:
            self._file.write(f"{direction} {text}\n")
            self._file.flush()


def _relay(source: IO[bytes], sink: IO[bytes], log: _Log, direction: str) -> None:
    try:
        for line in iter(source.readline, b""):
            log.write(direction, line)
            sink.write(line)
            sink.flush()
    except (BrokenPipeError, ValueError, OSError):
        pass
    finally:
        with suppress(OSError):
            sink.close()


def main(args: list[str]) -> int:
    """Run the wrapped command; see the module docstring."""
    if len(args) < 3 or args[1] != "--":
        print("usage: recorder.py LOGFILE -- CMD [ARGS...]", file=sys.stderr)
        return 2
    log = _Log(args[0])
    child = subprocess.Popen(args[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None
    assert child.stdout is not None
    to_child = threading.Thread(
        target=_relay, args=(sys.stdin.buffer, child.stdin, log, ">"), daemon=True
    )
    to_child.start()
    _relay(child.stdout, sys.stdout.buffer, log, "<")
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
