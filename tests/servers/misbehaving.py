"""Test peer "misbehaving": a scriptable stdio MCP server that breaks the rules on purpose.

Plain Python (stdlib + msgspec, no SDK), so every byte it writes is the test's
choice. It speaks newline-delimited JSON-RPC on stdin/stdout like any stdio
MCP server, and its misbehaviour is picked with command-line flags:

``--banner N``
    write N non-JSON lines on stdout before anything else (robustness D1).
``--junk-per-message``
    write one non-JSON line before every message (D1, B5).
``--stderr-flood MIB``
    a thread writes MIB mebibytes to stderr in 1 MiB lines, as fast as the
    pipe takes them (D3), then creates ``--flood-done-file PATH`` if given;
    ``--stderr-per-message MIB`` also writes that much to stderr from the
    main thread before every message, so an undrained stderr pipe would stall
    stdout too.
``--protocol-version V``
    answer ``initialize`` with protocolVersion V (D12); by default the
    client's version is echoed.
``--tools normal|weird|many|endless``
    what ``tools/list`` returns: the tools below; names that are duplicated,
    contain spaces or ``/``, or are 200 characters long (D10); ``--many-count``
    tools in one page (D11, default 100000); or pages of ``--page-size``
    tools whose ``nextCursor`` never ends (D11).
``--start-log PATH``
    append this process's pid to PATH at start (tests count spawns).
``--pid-file PATH``
    write this process's pid to PATH at start.
``--received-log PATH``
    append every line received on stdin to PATH (what the gateway sent).
``--ignore-sigterm``
    ignore SIGTERM and stdin EOF: only SIGKILL ends it.
``--grandchild-pid-file PATH``
    start a grandchild that ignores SIGTERM too, and write its pid to PATH.
``--exit-after SECONDS``
    exit that long after starting.

Tools (mode ``normal``; in the other modes every tool answers with its own
name, so a test can tell which original name a call reached):

* ``echo {text}``: answers ``text``.
* ``sleep {seconds}``: answers after that long, even if cancelled meanwhile
  (a late response, D7).
* ``hang``: never answers.
* ``wait_for {path}``: answers once the file ``path`` exists, so a test holds
  a call in the backend for exactly as long as it likes (a handshake, not a
  guess at how long a sleep must be).
* ``crash``: exits at once (``os._exit``) without answering (B1).
* ``huge {mib}``: writes a line of that many MiB with no newline, then waits
  (D2, B6).
* ``bad_utf8``: writes lines of invalid UTF-8 (raw and inside a JSON
  response), then answers normally (D4).
* ``stray_ids``: writes responses to ids the gateway never issued (among them
  the id the gateway will use next), then answers normally (D5).
* ``progress_back``: sends progress for the call's token going 5, 3, 5, 6,
  plus progress for an unknown token, answers, then sends progress 7 for the
  now finished token (D8).
* ``ask {method}``: sends that request (sampling, roots, elicitation) to the
  gateway, waits for the answer and returns it as JSON text (D9).
* ``whoami``: returns the exact request line it received (A40).
* ``stats``: returns the junk lines written so far, counting the one that
  precedes this very answer (D1, B5).

Run it as ``python tests/servers/misbehaving.py [FLAGS]``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import msgspec

MIB = 1024 * 1024
DEFAULT_VERSION = "2025-06-18"
KNOWN_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
# How long a server-to-client request waits for the gateway's answer.
ASK_TIMEOUT = 10.0

_encode = msgspec.json.encode
_decode = msgspec.json.decode


def _tool(name: str, description: str = "", **properties: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": description or name,
        "inputSchema": {"type": "object", "properties": properties},
    }


NORMAL_TOOLS = [
    _tool("echo", "Answers its text.", text={"type": "string"}),
    _tool("sleep", "Answers after `seconds`.", seconds={"type": "number"}),
    _tool("hang", "Never answers."),
    _tool("wait_for", "Answers once the file `path` exists.", path={"type": "string"}),
    _tool("crash", "Exits without answering."),
    _tool("huge", "Writes an endless line.", mib={"type": "number"}),
    _tool("bad_utf8", "Writes invalid UTF-8, then answers."),
    _tool("stray_ids", "Answers ids never issued, then this call."),
    _tool("progress_back", "Progress that goes backwards."),
    _tool("ask", "Asks the gateway something.", method={"type": "string"}),
    _tool("whoami", "Returns the request line it received."),
    _tool("stats", "Junk lines written so far."),
]
# D10: duplicates, characters hosts refuse, and a name far past 64 characters.
WEIRD_NAMES = ["echo", "echo", "has space", "a/b", "x" * 200, "dup", "dup", "ok_name"]


class Server:
    """The server's state; one instance per process."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.lock = threading.Lock()
        self.out = sys.stdout.buffer
        self.junk_written = 0
        self.junk_counter = itertools.count(1)
        self.waiters: dict[Any, tuple[threading.Event, list[Any]]] = {}
        self.ask_ids = itertools.count(1)
        self.received_log = open(args.received_log, "ab") if args.received_log else None  # noqa: SIM115
        self.last_request_line = b""

    # -- writing -----------------------------------------------------------

    def write_junk(self, text: str) -> None:
        with self.lock:
            self._write_unlocked(text.encode() + b"\n")
            self.junk_written += 1

    def _write_unlocked(self, data: bytes) -> None:
        self.out.write(data)
        self.out.flush()

    def write_raw(self, data: bytes) -> None:
        """Write bytes exactly as given (no junk, no newline added)."""
        with self.lock:
            self._write_unlocked(data)

    def send(self, message: dict[str, Any]) -> None:
        """Write one message, preceded by whatever misbehaviour is configured."""
        if self.args.stderr_per_message:
            line = b"m" * (MIB - 1) + b"\n"
            for _ in range(self.args.stderr_per_message):
                sys.stderr.buffer.write(line)
            sys.stderr.buffer.flush()
        with self.lock:
            if self.args.junk_per_message:
                self._write_unlocked(f"junk line {next(self.junk_counter)}: not JSON\n".encode())
                self.junk_written += 1
            self._write_unlocked(_encode(message) + b"\n")

    def result(self, msg_id: Any, result: Any) -> None:
        self.send({"jsonrpc": "2.0", "id": msg_id, "result": result})

    def error(self, msg_id: Any, code: int, message: str) -> None:
        self.send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})

    # -- reading -----------------------------------------------------------

    def serve(self) -> None:
        for _ in range(self.args.banner):
            self.write_junk("misbehaving server v0 starting... (a banner on stdout)")
        for line in iter(sys.stdin.buffer.readline, b""):
            if self.received_log is not None:
                self.received_log.write(line if line.endswith(b"\n") else line + b"\n")
                self.received_log.flush()
            try:
                message = _decode(line)
            except msgspec.DecodeError:
                continue
            if isinstance(message, dict):
                self.dispatch(message, line.rstrip(b"\n"))
        if self.args.ignore_sigterm:
            while True:  # stdin EOF is no reason to leave either
                time.sleep(3600)

    def dispatch(self, message: dict[str, Any], line: bytes) -> None:
        method = message.get("method")
        msg_id = message.get("id")
        if method is None:  # a response to one of our requests
            waiter = self.waiters.get(msg_id)
            if waiter is not None:
                waiter[1].append(message)
                waiter[0].set()
            return
        if "id" not in message:
            return  # notifications (initialized, cancelled) are ignored
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if method == "initialize":
            self.initialize(msg_id, params)
        elif method == "ping":
            self.result(msg_id, {})
        elif method == "tools/list":
            self.tools_list(msg_id, params)
        elif method == "tools/call":
            self.last_request_line = line
            self.tools_call(msg_id, params, line)
        else:
            self.error(msg_id, -32601, f"method not found: {method}")

    # -- methods -----------------------------------------------------------

    def initialize(self, msg_id: Any, params: dict[str, Any]) -> None:
        asked = params.get("protocolVersion")
        version = self.args.protocol_version or (
            asked if asked in KNOWN_VERSIONS else DEFAULT_VERSION
        )
        self.result(
            msg_id,
            {
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "misbehaving", "version": "0"},
            },
        )

    def tools_list(self, msg_id: Any, params: dict[str, Any]) -> None:
        mode = self.args.tools
        if mode == "weird":
            self.result(msg_id, {"tools": [_tool(name) for name in WEIRD_NAMES]})
        elif mode == "many":
            tools = [_tool(f"tool_{i}") for i in range(self.args.many_count)]
            self.result(msg_id, {"tools": tools})
        elif mode == "endless":
            cursor = params.get("cursor")
            page = int(cursor.removeprefix("page-")) if isinstance(cursor, str) else 0
            size = self.args.page_size
            tools = [_tool(f"p{page}_t{i}") for i in range(size)]
            self.result(msg_id, {"tools": tools, "nextCursor": f"page-{page + 1}"})
        else:
            self.result(msg_id, {"tools": NORMAL_TOOLS})

    def tools_call(self, msg_id: Any, params: dict[str, Any], line: bytes) -> None:
        name = params.get("name")
        arguments = params.get("arguments")
        arguments = arguments if isinstance(arguments, dict) else {}
        if self.args.tools != "normal":
            self.result(msg_id, _text(str(name)))
            return
        if name == "echo":
            self.result(msg_id, _text(str(arguments.get("text", ""))))
        elif name == "sleep":
            seconds = float(arguments.get("seconds", 1.0))
            threading.Timer(seconds, self.result, (msg_id, _text(f"slept {seconds}"))).start()
        elif name == "hang":
            pass
        elif name == "wait_for":
            path = str(arguments.get("path", ""))
            threading.Thread(target=self.wait_for, args=(msg_id, path), daemon=True).start()
        elif name == "crash":
            os._exit(3)
        elif name == "huge":
            self.huge(float(arguments.get("mib", 20)))
        elif name == "bad_utf8":
            self.write_raw(b"\xff\xfe\xfd not UTF-8 at all \xc3\x28\n")
            self.write_raw(
                b'{"jsonrpc":"2.0","id":' + _encode(msg_id) + b',"result":{"content":'
                b'[{"type":"text","text":"\xc3\x28 invalid"}]}}\n'
            )
            self.write_raw(b"\x00\x01\x02\x80\x81\n")
            self.result(msg_id, _text("clean answer"))
        elif name == "stray_ids":
            upcoming = msg_id + 1 if isinstance(msg_id, int) else "next"
            for stray in (10**9, "never-issued", -1, upcoming):
                self.result(stray, _text(f"stray answer for {stray!r}"))
            self.error(123456789, -32603, "stray error")
            self.result(msg_id, _text("the real answer"))
        elif name == "progress_back":
            self.progress_back(msg_id, params)
        elif name == "ask":
            threading.Thread(target=self.ask, args=(msg_id, arguments), daemon=True).start()
        elif name == "whoami":
            self.result(msg_id, _text(line.decode("utf-8", "backslashreplace")))
        elif name == "stats":
            # The answer itself is preceded by one more junk line when
            # --junk-per-message is on: count it, the gateway will.
            extra = 1 if self.args.junk_per_message else 0
            self.result(msg_id, _text(str(self.junk_written + extra)))
        else:
            self.error(msg_id, -32602, f"unknown tool: {name!r}")

    def wait_for(self, msg_id: Any, path: str) -> None:
        while not os.path.exists(path):
            time.sleep(0.01)  # a file appearing has no event to wait on
        self.result(msg_id, _text(f"released by {path}"))

    def huge(self, mib: float) -> None:
        chunk = b"x" * MIB
        with self.lock:
            for _ in range(int(mib)):
                self._write_unlocked(chunk)  # blocks once the gateway stops reading
        while True:
            time.sleep(3600)

    def progress_back(self, msg_id: Any, params: dict[str, Any]) -> None:
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None

        def progress(tok: Any, value: float) -> None:
            self.send(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": tok, "progress": value, "total": 10},
                }
            )

        if token is not None:
            for value in (5, 3, 5):
                progress(token, value)
            progress("token-nobody-issued", 1)
            progress(token, 6)
        self.result(msg_id, _text("progress done"))
        if token is not None:
            progress(token, 7)  # for a finished request

    def ask(self, msg_id: Any, arguments: dict[str, Any]) -> None:
        method = str(arguments.get("method", "sampling/createMessage"))
        ask_id = f"ask-{next(self.ask_ids)}"
        event = threading.Event()
        box: list[Any] = []
        self.waiters[ask_id] = (event, box)
        params: dict[str, Any] = {}
        if method == "sampling/createMessage":
            params = {
                "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                "maxTokens": 10,
            }
        elif method == "elicitation/create":
            params = {"message": "name?", "requestedSchema": {"type": "object", "properties": {}}}
        self.send({"jsonrpc": "2.0", "id": ask_id, "method": method, "params": params})
        answered = event.wait(ASK_TIMEOUT)
        self.waiters.pop(ask_id, None)
        reply = box[0] if answered else {"timeout": True}
        self.result(msg_id, _text(_encode(reply).decode()))


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def _flood_stderr(mib: int, done_file: str) -> None:
    line = b"e" * (MIB - 1) + b"\n"
    for _ in range(mib):
        sys.stderr.buffer.write(line)
    sys.stderr.buffer.flush()
    if done_file:
        _write_atomically(done_file, "done\n")


def _start_grandchild(pid_file: str) -> None:
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"
    child = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _write_atomically(pid_file, f"{child.pid}\n")


def _write_atomically(path: str, text: str) -> None:
    partial = path + ".partial"
    with open(partial, "w") as file:
        file.write(text)
    os.replace(partial, path)


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="A stdio MCP server that misbehaves on request.")
    parser.add_argument("--banner", type=int, default=0)
    parser.add_argument("--junk-per-message", action="store_true")
    parser.add_argument("--stderr-flood", type=int, default=0, metavar="MIB")
    parser.add_argument("--flood-done-file", default="")
    parser.add_argument("--stderr-per-message", type=int, default=0, metavar="MIB")
    parser.add_argument("--protocol-version", default="")
    parser.add_argument("--tools", choices=("normal", "weird", "many", "endless"), default="normal")
    parser.add_argument("--many-count", type=int, default=100_000)
    parser.add_argument("--page-size", type=int, default=10)
    parser.add_argument("--start-log", default="")
    parser.add_argument("--pid-file", default="")
    parser.add_argument("--received-log", default="")
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--grandchild-pid-file", default="")
    parser.add_argument("--exit-after", type=float, default=0.0)
    return parser.parse_args(argv)


def main(argv: list[str]) -> None:
    """Run the server; see the module docstring for the flags."""
    args = _parse(argv)
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.start_log:
        with open(args.start_log, "a") as file:
            file.write(f"{os.getpid()}\n")
    if args.pid_file:
        _write_atomically(args.pid_file, f"{os.getpid()}\n")
    if args.grandchild_pid_file:
        _start_grandchild(args.grandchild_pid_file)
    if args.exit_after:
        threading.Timer(args.exit_after, os._exit, (0,)).start()
    if args.stderr_flood:
        threading.Thread(
            target=_flood_stderr, args=(args.stderr_flood, args.flood_done_file), daemon=True
        ).start()
    Server(args).serve()


if __name__ == "__main__":
    main(sys.argv[1:])
