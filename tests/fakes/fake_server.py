"""A scriptable MCP server over an in-memory MessageChannel, and a connector for it.

``FakeConnector`` matches ``gateway.backends.backend.ChannelOpener``: pass it
as ``connect=`` to ``Backend``, ``open_pool`` or ``open_gateway`` and every
backend whose name has a ``FakeMcpServer`` talks to that fake instead of a
child process. A fake outlives its connections, so a backend that restarts
meets the same object again, with its script, counters and record intact.

Everything the fake receives is recorded with ``trio.current_time()``, so a
test under ``autojump_clock`` can say *when* the gateway sent what (for
example ``notifications/cancelled`` for the forwarded id, at exactly the
request timeout).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any, Final

import trio

from gateway.config import BackendConfig
from gateway.errors import ConnectError, TransportBroken, TransportClosed, TransportError

# The fake answers on an unbounded buffer (tests only): it never blocks on the
# gateway, so cues such as push_list_changed() and crash() stay synchronous and
# a gateway that reads slowly is still fed in order.
SERVER_TO_GATEWAY_BUFFER: Final = math.inf
# The gateway's sends meet the fake's reader, which never blocks (trio: "if in
# doubt, use 0").
GATEWAY_TO_SERVER_BUFFER: Final = 0
# What the fake answers initialize with when the client offers nothing usable.
DEFAULT_PROTOCOL_VERSION: Final = "2025-06-18"

METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602


class MemoryMessageChannel:
    """One end of an in-memory link; satisfies ``gateway.transports.base.MessageChannel``.

    Errors follow that Protocol: using an end we closed ourselves raises
    ``TransportClosed``; an end whose peer has gone raises ``TransportBroken``.
    """

    def __init__(
        self, send: trio.MemorySendChannel[bytes], receive: trio.MemoryReceiveChannel[bytes]
    ) -> None:
        self._send = send
        self._receive = receive

    async def send(self, message: bytes) -> None:
        """Send one message; waits while the peer's buffer is full."""
        try:
            await self._send.send(message)
        except trio.ClosedResourceError:
            raise TransportClosed("memory channel closed") from None
        except trio.BrokenResourceError:
            raise TransportBroken("peer closed the memory channel") from None

    def send_nowait(self, message: bytes) -> None:
        """Send without waiting (the fake's side, whose buffer is unbounded)."""
        try:
            self._send.send_nowait(message)
        except trio.ClosedResourceError:
            raise TransportClosed("memory channel closed") from None
        except trio.BrokenResourceError:
            raise TransportBroken("peer closed the memory channel") from None

    async def receive(self) -> bytes:
        """The next message from the peer."""
        try:
            return await self._receive.receive()
        except trio.ClosedResourceError:
            raise TransportClosed("memory channel closed") from None
        except trio.EndOfChannel:
            raise TransportBroken("peer closed the memory channel (EOF)") from None

    def close(self) -> None:
        """Close both directions at once, like a process that dies."""
        self._send.close()
        self._receive.close()

    async def aclose(self) -> None:
        """Close both directions; idempotent."""
        self.close()
        await trio.lowlevel.checkpoint()


def memory_channel_pair(
    a_to_b_buffer: float = 0, b_to_a_buffer: float = 0
) -> tuple[MemoryMessageChannel, MemoryMessageChannel]:
    """Two connected ends: what ``a`` sends, ``b`` receives, and the other way round."""
    a_send, b_receive = trio.open_memory_channel[bytes](a_to_b_buffer)
    b_send, a_receive = trio.open_memory_channel[bytes](b_to_a_buffer)
    return MemoryMessageChannel(a_send, a_receive), MemoryMessageChannel(b_send, b_receive)


# -- what a tool does when called --------------------------------------------


@dataclass(frozen=True, slots=True)
class Answer:
    """Answer at once with one text block."""

    text: str = "ok"


@dataclass(frozen=True, slots=True)
class AnswerAfter:
    """Answer after ``seconds``."""

    seconds: float
    text: str = "ok"


@dataclass(frozen=True, slots=True)
class Hang:
    """Read the request and never answer."""


@dataclass(frozen=True, slots=True)
class ProgressForever:
    """Send ``notifications/progress`` for the call's token every ``every`` seconds, forever."""

    every: float


@dataclass(frozen=True, slots=True)
class CrashMidCall:
    """Drop the whole connection ``after`` seconds into the call, without answering."""

    after: float = 0.0


@dataclass(frozen=True, slots=True)
class AskHost:
    """Send the gateway ``method`` (a request for the host) mid-call; answer with its reply.

    The tool's text is the JSON of the reply's ``result``, or ``error <code>``.
    """

    method: str = "elicitation/create"
    params: dict[str, Any] | None = None


ToolBehaviour = Answer | AnswerAfter | Hang | ProgressForever | CrashMidCall | AskHost


@dataclass(frozen=True, slots=True)
class Received:
    """One message the fake received, when, and on which connection (1-based)."""

    time: float
    connection: int
    message: dict[str, Any]

    @property
    def method(self) -> str | None:
        """The message's method (None for responses)."""
        method = self.message.get("method")
        return method if isinstance(method, str) else None

    @property
    def id(self) -> Any:
        """The message's id (None for notifications)."""
        return self.message.get("id")

    @property
    def params(self) -> dict[str, Any]:
        """The message's params, or an empty dict."""
        params = self.message.get("params")
        return params if isinstance(params, dict) else {}


@dataclass(eq=False)
class _Connection:
    number: int
    channel: MemoryMessageChannel
    modern: bool = False  # a DiscoverResult was sent on it

    def send(self, message: dict[str, Any]) -> None:
        # A peer that has gone is not the fake's problem: the gateway side
        # reports it.
        with suppress(TransportError):
            self.channel.send_nowait(json.dumps(message).encode())


class FakeMcpServer:
    """A scriptable MCP server; each connect serves a fresh session against this object.

    Args:
        name: reported as ``serverInfo.name``.
        tools: tool name → what a call does; listed in this order. Mutable:
            change it and ``push_list_changed()`` to script a new listing.
        prompts: prompt names; the ``prompts`` capability is offered when any.
        initialize_delay: seconds before ``initialize`` is answered.
        die_after: when set, each connection is dropped this many seconds
            after it was opened (a flapping backend).
        answer_pings: whether ``ping`` is answered; flip it at any time.
        capabilities: more server capabilities to declare (say
            ``resources.subscribe``) than the fake serves: it answers every
            method it does not know with -32601.
        discover: how ``server/discover`` is answered: ``refuse`` (-32601,
            a handshake-era server), ``modern`` (a 2026-07-28 DiscoverResult),
            ``silent`` (never), ``envelope`` (-32022 naming 2026-07-28),
            ``envelope-once`` (that -32022 to the first probe only),
            ``modern-refusing`` (a good DiscoverResult, then -32022 to
            every other request).
        discover_delay: seconds before a DiscoverResult is sent (a server
            starting on a loaded machine). Like an SDK 2.x server, a
            connection whose discover was answered refuses ``initialize``
            with -32022.
        listen: how ``subscriptions/listen`` is answered: ``ack`` (the
            acknowledgement, then held open), ``refuse`` (-32601),
            ``silent`` (never).
    """

    def __init__(
        self,
        name: str = "fake",
        *,
        tools: Mapping[str, ToolBehaviour] | None = None,
        prompts: tuple[str, ...] = (),
        initialize_delay: float = 0.0,
        die_after: float | None = None,
        answer_pings: bool = True,
        discover: str = "refuse",
        discover_delay: float = 0.0,
        listen: str = "ack",
        capabilities: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.capabilities = dict(capabilities or {})
        self.discover = discover
        self.discover_delay = discover_delay
        self.listen = listen
        self.tools: dict[str, ToolBehaviour] = dict(
            tools if tools is not None else {"echo": Answer("echo")}
        )
        self.prompts = prompts
        self.initialize_delay = initialize_delay
        self.die_after = die_after
        self.answer_pings = answer_pings
        self.connects = 0
        self.received: list[Received] = []
        self._connection: _Connection | None = None
        # Replies to the fake's own requests (AskHost), by their id.
        self._replies: dict[str, tuple[trio.Event, list[dict[str, Any]]]] = {}
        self._asked = 0

    # -- what tests read ---------------------------------------------------

    @property
    def connected(self) -> bool:
        """Whether a gateway session is open right now."""
        return self._connection is not None

    def messages(self, method: str) -> list[Received]:
        """Every message received with this method, in order."""
        return [r for r in self.received if r.method == method]

    @property
    def tools_list_calls(self) -> int:
        """How many ``tools/list`` requests arrived, over all connections."""
        return len(self.messages("tools/list"))

    # -- cues --------------------------------------------------------------

    def push_list_changed(self) -> None:
        """Send ``notifications/tools/list_changed`` on the open connection."""
        self._current().send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})

    def crash(self) -> None:
        """Drop the open connection at once, answering nothing more."""
        self._current().channel.close()

    def _current(self) -> _Connection:
        if self._connection is None:
            raise RuntimeError(f"fake server {self.name!r} has no open connection")
        return self._connection

    # -- serving -----------------------------------------------------------

    async def serve(self, channel: MemoryMessageChannel) -> None:
        """Serve one connection until either side closes it."""
        self.connects += 1
        connection = _Connection(self.connects, channel)
        self._connection = connection
        try:
            async with trio.open_nursery() as nursery:
                if self.die_after is not None:
                    nursery.start_soon(self._drop_later, connection, self.die_after)
                while True:
                    try:
                        data = await channel.receive()
                    except TransportError:
                        break
                    message = json.loads(data)
                    record = Received(trio.current_time(), connection.number, message)
                    self.received.append(record)
                    if record.method is not None and "id" in message:
                        nursery.start_soon(self._answer, connection, record)
                    elif record.method is None and str(record.id) in self._replies:
                        done, box = self._replies[str(record.id)]
                        box.append(message)
                        done.set()
                nursery.cancel_scope.cancel()
        finally:
            channel.close()
            if self._connection is connection:
                self._connection = None

    @staticmethod
    async def _drop_later(connection: _Connection, seconds: float) -> None:
        await trio.sleep(seconds)
        connection.channel.close()

    async def _answer(self, connection: _Connection, request: Received) -> None:
        method = request.method
        if method == "initialize" and connection.modern:
            data = {"supported": ["2026-07-28"], "requested": "initialize"}
            connection.send(_error(request.id, -32022, "Unsupported protocol version", data))
            return
        if method == "initialize":
            await trio.sleep(self.initialize_delay)
            result: dict[str, Any] | None = self._initialize_result(request.params)
        elif self.discover == "modern-refusing" and method not in ("server/discover", "ping"):
            data = {"supported": ["2026-07-28"], "requested": "2026-07-28"}
            connection.send(_error(request.id, -32022, "Unsupported protocol version", data))
            return
        elif method == "server/discover" and self.discover != "refuse":
            if self.discover == "silent":
                return
            if self.discover in ("envelope", "envelope-once"):
                if self.discover == "envelope-once":
                    self.discover = "modern"  # the retry is answered
                data = {"supported": ["2026-07-28"], "requested": "2026-07-28"}
                connection.send(_error(request.id, -32022, "Unsupported protocol version", data))
                return
            await trio.sleep(self.discover_delay)
            connection.modern = True
            result = {
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {"listChanged": True}},
                "instructions": f"{self.name} speaks 2026-07-28",
                "resultType": "complete",
                "ttlMs": 0,
                "cacheScope": "private",
                "_meta": {
                    "io.modelcontextprotocol/serverInfo": {"name": self.name, "version": "2"}
                },
            }
        elif method == "subscriptions/listen" and self.listen != "refuse":
            if self.listen == "ack":
                tag = {"io.modelcontextprotocol/subscriptionId": request.id}
                notifications = request.params.get("notifications", {})
                connection.send(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/subscriptions/acknowledged",
                        "params": {"_meta": tag, "notifications": notifications},
                    }
                )
            return  # held open (or never answered) until the connection ends
        elif method == "ping":
            if not self.answer_pings:
                return
            result = {}
        elif method == "logging/setLevel" and "logging" in self.capabilities:
            result = {}
        elif method == "tools/list":
            result = {
                "tools": [{"name": name, "inputSchema": {"type": "object"}} for name in self.tools]
            }
        elif method == "prompts/list":
            result = {"prompts": [{"name": name} for name in self.prompts]}
        elif method == "tools/call":
            result = await self._call_tool(connection, request)
            if result is None:
                return
        else:
            connection.send(_error(request.id, METHOD_NOT_FOUND, f"method not found: {method}"))
            return
        connection.send({"jsonrpc": "2.0", "id": request.id, "result": result})

    def _initialize_result(self, params: dict[str, Any]) -> dict[str, Any]:
        version = params.get("protocolVersion")
        capabilities: dict[str, Any] = {"tools": {"listChanged": True}}
        if self.prompts:
            capabilities["prompts"] = {"listChanged": True}
        capabilities.update(self.capabilities)
        return {
            "protocolVersion": version if isinstance(version, str) else DEFAULT_PROTOCOL_VERSION,
            "capabilities": capabilities,
            "serverInfo": {"name": self.name, "version": "0.0.1"},
        }

    async def _call_tool(self, connection: _Connection, request: Received) -> dict[str, Any] | None:
        name = request.params.get("name")
        behaviour = self.tools.get(name) if isinstance(name, str) else None
        if behaviour is None:
            connection.send(_error(request.id, INVALID_PARAMS, f"unknown tool: {name!r}"))
            return None
        if isinstance(behaviour, Answer):
            return _text_result(behaviour.text)
        if isinstance(behaviour, AnswerAfter):
            await trio.sleep(behaviour.seconds)
            return _text_result(behaviour.text)
        if isinstance(behaviour, Hang):
            await trio.sleep_forever()
        if isinstance(behaviour, ProgressForever):
            meta = request.params.get("_meta")
            token = meta.get("progressToken") if isinstance(meta, dict) else None
            step = 0
            while True:
                await trio.sleep(behaviour.every)
                step += 1
                if token is not None:
                    connection.send(
                        {
                            "jsonrpc": "2.0",
                            "method": "notifications/progress",
                            "params": {"progressToken": token, "progress": step},
                        }
                    )
        if isinstance(behaviour, AskHost):
            return await self._ask_host(connection, behaviour)
        assert isinstance(behaviour, CrashMidCall)
        await trio.sleep(behaviour.after)
        connection.channel.close()
        return None

    async def _ask_host(self, connection: _Connection, behaviour: AskHost) -> dict[str, Any]:
        self._asked += 1
        ask_id = f"fake-ask-{self._asked}"
        done, box = self._replies[ask_id] = (trio.Event(), [])
        params = behaviour.params or {"message": "Name?", "requestedSchema": {"type": "object"}}
        connection.send(
            {"jsonrpc": "2.0", "id": ask_id, "method": behaviour.method, "params": params}
        )
        try:
            await done.wait()
        finally:
            del self._replies[ask_id]
        [reply] = box
        if "error" in reply:
            return _text_result(f"error {reply['error'].get('code')}")
        return _text_result(json.dumps(reply.get("result"), sort_keys=True))


def _text_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def _error(msg_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": msg_id, "error": error}


class FakeConnector:
    """A ``ChannelOpener`` that connects each backend to the fake of the same name.

    Args:
        servers: backend name → fake server.

    Attributes:
        attempts: backend name → the virtual time of every connect attempt,
            failed ones included.
    """

    def __init__(self, servers: Mapping[str, FakeMcpServer] | None = None) -> None:
        self.servers: dict[str, FakeMcpServer] = dict(servers or {})
        self.attempts: defaultdict[str, list[float]] = defaultdict(list)
        self._failing: dict[str, int | None] = {}
        self._attempted = trio.Event()

    def fail_connects(self, name: str, times: int | None = None) -> None:
        """Make connects to ``name`` raise ``ConnectError``: ``times`` more, or all (None)."""
        self._failing[name] = times

    def allow_connects(self, name: str) -> None:
        """Let connects to ``name`` succeed again."""
        self._failing.pop(name, None)

    async def wait_for_attempts(self, name: str, count: int) -> None:
        """Return once ``name`` has seen ``count`` connect attempts (callers bound it)."""
        while len(self.attempts[name]) < count:
            await self._attempted.wait()

    def __call__(self, cfg: BackendConfig, /) -> AbstractAsyncContextManager[MemoryMessageChannel]:
        """Open the fake link for ``cfg.name`` (an async context manager)."""
        return self._open(cfg.name)

    def _should_fail(self, name: str) -> bool:
        if name not in self._failing:
            return False
        left = self._failing[name]
        if left is None:
            return True
        if left <= 1:
            del self._failing[name]
        else:
            self._failing[name] = left - 1
        return True

    @asynccontextmanager
    async def _open(self, name: str) -> AsyncIterator[MemoryMessageChannel]:
        await trio.lowlevel.checkpoint()
        self.attempts[name].append(trio.current_time())
        self._attempted.set()
        self._attempted = trio.Event()
        if self._should_fail(name):
            raise ConnectError(f"fake: cannot connect to {name!r}")
        server = self.servers.get(name)
        if server is None:
            raise ConnectError(f"fake: no server named {name!r}")
        gateway_end, server_end = memory_channel_pair(
            GATEWAY_TO_SERVER_BUFFER, SERVER_TO_GATEWAY_BUFFER
        )
        async with trio.open_nursery() as nursery:
            # Not start(): the channel holds what the gateway sends until serve runs.
            nursery.start_soon(server.serve, server_end)  # noqa: ASYNC113
            try:
                yield gateway_end
            finally:
                gateway_end.close()
                nursery.cancel_scope.cancel()
