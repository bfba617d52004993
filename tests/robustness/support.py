"""Helpers for the robustness suite: the misbehaving backend, a raw MCP host, processes, ASGI.

* ``misbehaving(name, *flags)`` is a backend entry for ``tests/servers/misbehaving.py``.
* ``open_host(running)`` is an initialized client session spoken in raw HTTP
  (httpx), so a test sees every status, header and SSE event as a host would.
* ``alive``/``group_members`` look at processes through ``/proc``.
* ``asgi_call`` drives an ASGI app in-process, with no socket, and checks that
  the app follows the ASGI message order.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx
import trio

from gateway.frontend.http_util import Message, Receive, Scope, Send
from tests.harness import Running, stdio_backend
from tests.servers.paths import SERVERS_DIR

MISBEHAVING: Final = SERVERS_DIR / "misbehaving.py"
LATEST: Final = "2025-11-25"
ACCEPT_BOTH: Final = "application/json, text/event-stream"
MIB: Final = 1024 * 1024


def misbehaving(name: str, *flags: str, **extra: Any) -> dict[str, Any]:
    """A stdio backend entry running the misbehaving server with these flags."""
    return stdio_backend(name, [sys.executable, str(MISBEHAVING), *flags], **extra)


# -- a host speaking raw HTTP --------------------------------------------------


def sse_messages(body: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC messages carried by the ``data:`` lines of an SSE body."""
    messages = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = [line[5:].lstrip(b" ") for line in block.split(b"\n") if line.startswith(b"data:")]
        if data:
            messages.append(json.loads(b"\n".join(data)))
    return messages


def utf8(body: bytes) -> str:
    """The body as text; a body that is not UTF-8 fails the test (RFC 8259 §8.1)."""
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AssertionError(
            f"the gateway sent a body that is not UTF-8 ({exc}): {body!r}"
        ) from None


def messages_of(response: httpx.Response) -> list[dict[str, Any]]:
    """Every JSON-RPC message in a response, whether JSON or an event stream."""
    utf8(response.content)
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return sse_messages(response.content)
    if not response.content:
        return []
    body = json.loads(response.content)
    return body if isinstance(body, list) else [body]


@dataclass
class Reply:
    """What one POST brought back: every message, and the answer to the request."""

    status: int
    messages: list[dict[str, Any]]
    answer: dict[str, Any]

    @property
    def error(self) -> dict[str, Any] | None:
        """The answer's ``error`` member, if it is an error."""
        error = self.answer.get("error")
        return error if isinstance(error, dict) else None

    @property
    def text(self) -> str:
        """The text of a tools/call result's first content block (asserting success)."""
        assert self.error is None, self.answer
        result = self.answer["result"]
        assert result.get("isError") is not True, result
        return str(result["content"][0]["text"])


@dataclass
class Host:
    """An initialized client session on the gateway, spoken to in raw HTTP."""

    client: httpx.AsyncClient
    path: str
    session_id: str
    version: str
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def headers(self, **overrides: str) -> dict[str, str]:
        """The headers of a well-behaved POST on this session."""
        headers = {
            "Accept": ACCEPT_BOTH,
            "Content-Type": "application/json",
            "Mcp-Session-Id": self.session_id,
            "MCP-Protocol-Version": self.version,
        }
        headers.update(overrides)
        return headers

    async def post(self, message: object, **headers: str) -> httpx.Response:
        """POST one message (``bytes`` go as they are)."""
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        return await self.client.post(self.path, content=body, headers=self.headers(**headers))

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Reply:
        """Send a request; return every message that came back and the answer."""
        msg_id = next(self.ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        response = await self.post(message)
        messages = messages_of(response)
        answers = [m for m in messages if m.get("id") == msg_id and "method" not in m]
        assert len(answers) == 1, (response.status_code, messages)
        return Reply(response.status_code, messages, answers[0])

    async def call(
        self, tool: str, arguments: dict[str, Any] | None = None, **params: Any
    ) -> Reply:
        """``tools/call`` of a public tool name."""
        return await self.request(
            "tools/call", {"name": tool, "arguments": arguments or {}, **params}
        )

    async def ping(self) -> Reply:
        """``ping``, answered by the gateway itself."""
        return await self.request("ping")


def http_client(running: Running, timeout: float = 10.0) -> httpx.AsyncClient:
    """An HTTP client for ``running``; proxies from the environment are ignored."""
    return httpx.AsyncClient(base_url=running.base_url, trust_env=False, timeout=timeout)


async def initialize(
    client: httpx.AsyncClient,
    path: str = "/mcp",
    *,
    capabilities: dict[str, Any] | None = None,
    version: str = LATEST,
) -> Host:
    """Open a client session (initialize + initialized) on an existing HTTP client."""
    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": capabilities or {},
            "clientInfo": {"name": "robustness", "version": "0"},
        },
    }
    response = await client.post(
        path,
        content=json.dumps(body).encode(),
        headers={"Accept": ACCEPT_BOTH, "Content-Type": "application/json"},
    )
    assert response.status_code == 200, response.text
    host = Host(
        client,
        path,
        response.headers["mcp-session-id"],
        response.json()["result"]["protocolVersion"],
    )
    initialized = await host.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert initialized.status_code == 202, initialized.text
    return host


@asynccontextmanager
async def open_host(running: Running, **kwargs: Any) -> AsyncIterator[Host]:
    """A fresh HTTP client with one initialized session on ``running``."""
    async with http_client(running) as client:
        yield await initialize(client, running.gateway.config.server.path, **kwargs)


# -- processes -----------------------------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) is in parentheses and may contain spaces.
    return text[text.rindex(")") + 2 :].split()


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie awaiting its reaper is not)."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def zombie(pid: int) -> bool:
    """Whether ``pid`` has exited and nobody has reaped it yet."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] == "Z"


def group_members(pgid: int) -> list[int]:
    """Every process (zombies included) whose process group is ``pgid``."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None and int(fields[2]) == pgid:
                members.append(int(entry))
    return members


async def wait_until(predicate: Callable[[], bool]) -> None:
    """Poll ``predicate`` until it holds; callers bound the wait with ``trio.fail_after``.

    Polling, because what tests wait for here (``/proc``, files a child
    writes, counters) has no event to wait on.
    """
    while not predicate():  # noqa: ASYNC110 - nothing to wait on (see docstring)
        await trio.sleep(0.01)


async def read_pid(path: Path) -> int:
    """The pid a child wrote to ``path``, once the file exists (callers bound the wait)."""
    file = trio.Path(path)
    while not await file.exists():  # noqa: ASYNC110 - a file appearing has no event
        await trio.sleep(0.01)
    return int((await file.read_text()).split()[-1])


def rss_bytes() -> int:
    """This process's resident set size right now."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


@asynccontextmanager
async def peak_rss_growth() -> AsyncIterator[Callable[[], int]]:
    """Sample RSS every millisecond for the block; yields a function giving the peak growth."""
    baseline = peak = rss_bytes()

    async def sample() -> None:
        nonlocal peak
        while True:
            peak = max(peak, rss_bytes())
            await trio.sleep(0.001)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sample)
        yield lambda: max(peak, rss_bytes()) - baseline
        nursery.cancel_scope.cancel()


# -- ASGI, in-process ----------------------------------------------------------

App = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass
class AsgiResponse:
    """What an ASGI app sent for one request."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes
    complete: bool
    chunks: list[tuple[float, bytes]]

    def header(self, name: bytes) -> bytes | None:
        """The first value of a response header."""
        return next((value for key, value in self.headers if key.lower() == name), None)


def http_scope(
    method: str, path: str, headers: list[tuple[bytes, bytes]], query: bytes = b""
) -> Scope:
    """An ASGI HTTP scope as hypercorn would build it for a loopback request."""
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode("utf-8", "surrogateescape"),
        "query_string": query,
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


class AsgiProtocolError(AssertionError):
    """The app broke the ASGI message order."""


async def asgi_call(
    app: App,
    method: str,
    path: str,
    headers: list[tuple[bytes, bytes]],
    body: bytes = b"",
    *,
    query: bytes = b"",
    disconnect: trio.Event | None = None,
    send_fails_after_disconnect: bool = False,
    chunks: list[tuple[float, bytes]] | None = None,
) -> AsgiResponse:
    """Run one request through ``app`` in-process and return what it sent.

    ``receive`` hands out the body, then blocks until ``disconnect`` is set
    (or the response is complete) and reports ``http.disconnect``. With
    ``send_fails_after_disconnect``, ``send`` raises ``OSError`` once the
    client has gone, as the ASGI spec lets a server do. Body chunks go to
    ``chunks`` when given, so a test can wait for what it expects to arrive
    before it disconnects.
    """
    gone = disconnect if disconnect is not None else trio.Event()
    finished = trio.Event()
    body_sent = False
    start: Message | None = None
    chunks = [] if chunks is None else chunks
    complete = False

    async def receive() -> Message:
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        async with trio.open_nursery() as nursery:

            async def wait(event: trio.Event) -> None:
                await event.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(wait, gone)
            nursery.start_soon(wait, finished)
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal start, complete
        if send_fails_after_disconnect and gone.is_set():
            raise OSError("client disconnected")
        if complete:
            raise AsgiProtocolError(f"message after the response was complete: {message}")
        if message["type"] == "http.response.start":
            if start is not None:
                raise AsgiProtocolError("response started twice")
            if not isinstance(message.get("status"), int):
                raise AsgiProtocolError(f"status is not an int: {message!r}")
            for key, value in message.get("headers", []):
                if not isinstance(key, bytes) or not isinstance(value, bytes):
                    raise AsgiProtocolError(f"header not bytes: {key!r}: {value!r}")
            start = message
        elif message["type"] == "http.response.body":
            if start is None:
                raise AsgiProtocolError("body before http.response.start")
            chunks.append((trio.current_time(), bytes(message.get("body", b""))))
            if not message.get("more_body", False):
                complete = True
                finished.set()
        else:
            raise AsgiProtocolError(f"unexpected message type {message['type']!r}")

    await app(http_scope(method, path, headers, query), receive, send)
    finished.set()
    if start is None:
        if send_fails_after_disconnect and gone.is_set():
            # The app tried to answer and the (simulated) server refused: the
            # host is gone, so there is no response to check.
            return AsgiResponse(status=0, headers=[], body=b"", complete=False, chunks=chunks)
        raise AsgiProtocolError("the app returned without starting a response")
    return AsgiResponse(
        status=start["status"],
        headers=list(start.get("headers", [])),
        body=b"".join(chunk for _, chunk in chunks),
        complete=complete,
        chunks=chunks,
    )
