"""Fuzz of the frontend's JSON-RPC handling through the real ASGI app, in-process.

The gateway is built once (``open_gateway``, no socket) in front of an
in-memory backend that answers every method, so requests the fuzzer makes
valid reach a backend and come back. Hypothesis runs in a worker thread
(``trio.to_thread``) and hands each example to the trio loop with
``trio.from_thread.run``: one gateway, hundreds of examples, a few seconds.

Every example is a short sequence of HTTP requests built from arbitrary
bytes, arbitrary JSON, mutated valid requests and batches, with arbitrary
ids, methods, params and headers. Properties (robustness A4-A28 as a whole):

* the app always completes a response, never 500, with a status in the
  expected set;
* every body it sends is UTF-8 JSON, and every JSON-RPC message in it is a
  valid response, error, request or notification; a request with a usable id
  gets an answer with that id;
* no error-level log and no traceback;
* a control session opened before the fuzzing still answers ping after it.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from gateway.backends.state import BackendState
from gateway.config import BackendConfig, parse
from gateway.errors import TransportError
from gateway.runtime.app import Gateway, open_gateway
from tests.fakes import MemoryMessageChannel, memory_channel_pair
from tests.harness import unspawned_backend, wait_for_states
from tests.robustness.support import ACCEPT_BOTH, AsgiResponse, asgi_call, sse_messages, utf8

EXPECTED_STATUSES: Final = frozenset({200, 202, 400, 403, 404, 405, 406, 409, 413, 415})
BODY_LIMIT: Final = 16 * 1024
PER_REQUEST_DEADLINE: Final = 5.0
VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
INT64: Final = 2**63


# -- an in-memory backend that answers anything --------------------------------------------


class AnsweringBackend:
    """A ``ChannelOpener`` whose backend answers every request, decoding leniently.

    Whatever the gateway forwards (even bytes that are not UTF-8) is read with
    replacement characters, so the fuzz is about the frontend and never
    stalls on a backend; what reaches backends is checked by the A28 tests.
    """

    def __call__(self, cfg: BackendConfig, /) -> Any:
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[MemoryMessageChannel]:
        gateway_end, server_end = memory_channel_pair(0, math.inf)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._serve, server_end)
            try:
                yield gateway_end
            finally:
                gateway_end.close()
                nursery.cancel_scope.cancel()

    async def _serve(self, channel: MemoryMessageChannel) -> None:
        while True:
            try:
                data = await channel.receive()
            except TransportError:
                return
            try:
                message = json.loads(data.decode("utf-8", "replace"))
            except ValueError:
                continue
            if (
                isinstance(message, dict)
                and isinstance(message.get("method"), str)
                and "id" in message
            ):
                reply = {"jsonrpc": "2.0", "id": message["id"], **_answer(message)}
                channel.send_nowait(json.dumps(reply).encode())


def _answer(message: dict[str, Any]) -> dict[str, Any]:
    method = message["method"]
    raw_params = message.get("params")
    params: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
    results: dict[str, Any] = {
        "initialize": {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {
                "tools": {},
                "prompts": {},
                "resources": {"subscribe": True},
                "logging": {},
                "completions": {},
            },
            "serverInfo": {"name": "mem", "version": "0"},
        },
        "ping": {},
        "tools/list": {
            "tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("echo", "two")]
        },
        "prompts/list": {"prompts": [{"name": "greet"}]},
        "resources/list": {"resources": [{"uri": "mem://a", "name": "a"}]},
        "resources/templates/list": {
            "resourceTemplates": [{"uriTemplate": "mem://{x}", "name": "t"}]
        },
        "tools/call": {"content": [{"type": "text", "text": json.dumps(params)}]},
        "prompts/get": {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}]},
        "resources/read": {"contents": [{"uri": "mem://a", "text": "a"}]},
        "completion/complete": {"completion": {"values": ["a"]}},
        "logging/setLevel": {},
        "resources/subscribe": {},
        "resources/unsubscribe": {},
    }
    if method in results:
        return {"result": results[method]}
    return {"error": {"code": -32601, "message": f"method not found: {method}"}}


# -- strategies ------------------------------------------------------------------------------

METHODS: Final = (
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "logging/setLevel",
    "completion/complete",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/roots/list_changed",
    "notifications/progress",
    "sampling/createMessage",
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**63 - 2, max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
ids = (
    scalars
    | st.lists(scalars, max_size=2)
    | st.dictionaries(st.text(max_size=3), scalars, max_size=2)
)
methods = st.sampled_from(METHODS) | st.text(max_size=20)
names = st.sampled_from(["mem__echo", "mem__two", "echo", "mem__nope", "mem__greet", ""]) | st.text(
    max_size=10
)
uris = st.sampled_from(["mem+mem://a", "mem://a", "mem+mem://zz", "file:///etc/passwd"]) | st.text(
    max_size=10
)
structured_params = st.fixed_dictionaries(
    {},
    optional={
        "name": names | json_values,
        "arguments": json_values,
        "cursor": st.text(max_size=40) | json_values,
        "uri": uris | json_values,
        "level": st.sampled_from(["debug", "info", "error", "nope"]) | json_values,
        "protocolVersion": st.sampled_from([*VERSIONS, "1.0.0", "2099-01-01"]) | json_values,
        "capabilities": json_values,
        "clientInfo": json_values,
        "requestId": ids,
        "ref": json_values,
        "argument": json_values,
        "_meta": st.fixed_dictionaries({}, optional={"progressToken": ids}) | json_values,
    },
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0"] * 9 + ["1.0"]) | json_values,
        "id": ids,
        "method": methods | json_values,
        "params": structured_params | json_values,
        "result": json_values,
        "error": st.fixed_dictionaries({"code": st.integers(), "message": st.text()}) | json_values,
    },
)
well_formed = st.builds(
    lambda msg_id, method, params: {
        "jsonrpc": "2.0",
        "id": msg_id,
        "method": method,
        "params": params,
    },
    st.integers(min_value=-(2**31), max_value=2**31) | st.text(max_size=8),
    st.sampled_from(METHODS),
    structured_params,
)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A valid request's bytes with a few bytes flipped, inserted or cut."""
    data = bytearray(json.dumps(draw(well_formed)).encode())
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        if not data:
            break
        at = draw(st.integers(min_value=0, max_value=len(data) - 1))
        action = draw(st.sampled_from(["flip", "insert", "cut", "truncate"]))
        if action == "flip":
            data[at] = draw(st.integers(min_value=0, max_value=255))
        elif action == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif action == "cut":
            del data[at]
        else:
            del data[at:]
    return bytes(data)


def encode(value: Any, ensure_ascii: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ensure_ascii).encode("utf-8", "surrogatepass")


def mix(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """Draw from one of ``choices``, each picked in proportion to its weight."""
    table = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.sampled_from(table).flatmap(lambda strategy: strategy)


bodies = mix(
    (6, st.builds(encode, well_formed, st.booleans())),
    (2, st.builds(encode, st.lists(well_formed | messages, min_size=1, max_size=4), st.booleans())),
    (3, st.builds(encode, messages, st.booleans())),
    (2, mutated()),
    (1, st.binary(max_size=120)),
    (1, st.builds(encode, json_values, st.booleans())),
    (1, st.sampled_from([b"[" * 5000, b"{" * 5000, b" " * (BODY_LIMIT + 1), b"", b"null", b"[]"])),
)

SESSION_VALID_A: Final = "<session 2025-11-25>"
SESSION_VALID_B: Final = "<session 2025-03-26>"
header_text = st.binary(max_size=30) | st.text(max_size=30).map(
    lambda t: t.encode("utf-8", "surrogatepass")
)


@dataclass(frozen=True)
class FuzzRequest:
    """One HTTP request of an example; session placeholders are resolved at send time."""

    method: str
    body: bytes
    session: str | bytes | None
    version: bytes | None
    content_type: bytes | None
    accept: bytes | None
    origin: bytes | None
    host: bytes
    extra: tuple[tuple[bytes, bytes], ...] = field(default=())
    query: bytes = b""


def weighted(common: Any, rare: st.SearchStrategy[Any], rare_percent: int = 15) -> Any:
    """``common`` most of the time, a draw from ``rare`` about ``rare_percent`` % of it."""
    return mix((100 - rare_percent, st.just(common)), (rare_percent, rare))


requests = st.builds(
    FuzzRequest,
    method=weighted("POST", st.sampled_from(["GET", "DELETE", "PUT", "PATCH"]), 10),
    body=bodies,
    session=mix(
        (9, st.just(SESSION_VALID_A)),
        (9, st.just(SESSION_VALID_B)),
        (1, st.none()),
        (1, header_text),
    ),
    version=weighted(
        None, st.sampled_from([v.encode() for v in (*VERSIONS, "2000-01-01")]) | header_text
    ),
    content_type=weighted(
        b"application/json",
        st.sampled_from([b"application/json; charset=utf-8", b"text/plain"])
        | st.none()
        | header_text,
        8,
    ),
    accept=weighted(
        ACCEPT_BOTH.encode(),
        st.sampled_from([b"*/*", b"application/json"]) | st.none() | header_text,
        8,
    ),
    origin=weighted(
        None, st.sampled_from([b"http://localhost:3000", b"http://evil.example", b"null"]), 4
    ),
    host=weighted(
        b"127.0.0.1:8000", st.sampled_from([b"localhost", b"evil.example"]) | header_text, 4
    ),
    extra=weighted(
        (),
        st.lists(st.tuples(st.binary(max_size=10).map(bytes.lower), header_text), max_size=2).map(
            tuple
        ),
        10,
    ),
    query=weighted(b"", st.sampled_from([b"x=1", b"access_token=abc"]), 4),
)


# -- checks ----------------------------------------------------------------------------------


def usable_id(value: Any) -> bool:
    """An id the gateway must echo: a string or an integer msgspec can hold (not a bool)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return -INT64 <= value < 2 * INT64  # msgspec reads int64 and uint64
    return isinstance(value, str)


def check_message(message: Any) -> None:
    """A JSON-RPC 2.0 response, error, request or notification, well formed."""
    assert isinstance(message, dict), message
    assert message.get("jsonrpc") == "2.0", message
    if "method" in message:
        assert isinstance(message["method"], str), message
        if "id" in message:
            assert usable_id(message["id"]), message
        return
    assert ("result" in message) != ("error" in message), message
    assert "id" in message, message
    if "error" in message:
        # "id echoed if readable" (A9): null, a string or an integer, never another type.
        echoed = message["id"]
        assert echoed is None or isinstance(echoed, str) or type(echoed) is int, message
        error = message["error"]
        assert isinstance(error, dict), message
        assert isinstance(error.get("code"), int) and not isinstance(error["code"], bool), message
        assert isinstance(error.get("message"), str), message
        assert set(message) <= {"jsonrpc", "id", "error"}, message
    else:
        assert usable_id(message["id"]), message
        assert set(message) <= {"jsonrpc", "id", "result"}, message


def check_response(request: FuzzRequest, response: AsgiResponse) -> None:
    """The properties every response must have (module docstring)."""
    assert response.complete, response
    assert response.status in EXPECTED_STATUSES, (response.status, response.body)
    content_type = response.header(b"content-type") or b""
    text = utf8(response.body)
    if response.status == 202:
        assert response.body == b"", response.body
        return
    if content_type.startswith(b"text/event-stream"):
        found = sse_messages(response.body)
        assert found, response.body
    elif response.body:
        assert content_type.startswith(b"application/json"), content_type
        value = json.loads(text)
        found = value if isinstance(value, list) else [value]
    else:
        assert response.status != 200 or request.method == "DELETE", response
        return
    for message in found:
        check_message(message)
    try:
        sent = json.loads(request.body)
    except (ValueError, RecursionError):
        return
    if (
        response.status == 200
        and isinstance(sent, dict)
        and sent.get("jsonrpc") == "2.0"
        and isinstance(sent.get("method"), str)
        and usable_id(sent.get("id"))
        and "\\ud8" not in request.body.decode("latin-1").lower()
        and "\\udc" not in request.body.decode("latin-1").lower()
    ):
        answers = [m for m in found if "method" not in m]
        assert [m["id"] for m in answers] == [sent["id"]], (sent, found)


# -- the fuzz run ---------------------------------------------------------------------------


@dataclass
class Sessions:
    """The fuzz sessions (valid ids the fuzzer may use), re-opened when a DELETE ends one."""

    gateway: Gateway
    ids: dict[str, str] = field(default_factory=dict)

    async def resolve(self, placeholder: str) -> str:
        version = "2025-11-25" if placeholder == SESSION_VALID_A else "2025-03-26"
        session_id = self.ids.get(placeholder)
        if session_id is None or self.gateway.clients.get(session_id) is None:
            session_id = await initialize(self.gateway, version)
            self.ids[placeholder] = session_id
        return session_id


async def initialize(gateway: Gateway, version: str) -> str:
    """Open a client session in-process; return its id."""
    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "fuzz"}},
    }
    headers = [
        (b"host", b"127.0.0.1:8000"),
        (b"accept", ACCEPT_BOTH.encode()),
        (b"content-type", b"application/json"),
    ]
    response = await asgi_call(gateway.app, "POST", "/mcp", headers, json.dumps(body).encode())
    assert response.status == 200, response
    session_id = response.header(b"mcp-session-id")
    assert session_id is not None
    return session_id.decode()


async def send(gateway: Gateway, sessions: Sessions, request: FuzzRequest) -> None:
    """Send one fuzz request and check what came back."""
    headers: list[tuple[bytes, bytes]] = [(b"host", request.host)]
    session = request.session
    if isinstance(session, str):
        if request.method == "GET":
            return  # a GET on a live session is an open stream, not a response
        session = (await sessions.resolve(session)).encode()
    for name, value in (
        (b"mcp-session-id", session),
        (b"mcp-protocol-version", request.version),
        (b"content-type", request.content_type),
        (b"accept", request.accept),
        (b"origin", request.origin),
    ):
        if value is not None:
            headers.append((name, value))
    headers.extend(request.extra)
    with trio.fail_after(PER_REQUEST_DEADLINE):
        response = await asgi_call(
            gateway.app, request.method, "/mcp", headers, request.body, query=request.query
        )
    check_response(request, response)


async def test_no_request_breaks_the_frontend_or_another_session() -> None:
    """A4-A28 (fuzz): arbitrary bodies, ids, methods, params, batches and headers always get a
    well-formed answer with an expected status; nothing is logged as an error; a session
    opened before the fuzzing still answers ping afterwards."""
    config = parse(
        json.dumps(
            {
                "server": {"max_body_bytes": BODY_LIMIT},
                "pagination": {"page_size": 1},
                "backends": [unspawned_backend("mem")],
            }
        ),
        env={},
    )
    async with open_gateway(
        config, connect=AnsweringBackend(), registry=CollectorRegistry()
    ) as gateway:
        await wait_for_states(gateway, {"mem": BackendState.UP})
        control = await initialize(gateway, "2025-11-25")
        sessions = Sessions(gateway)

        @settings(
            max_examples=300,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(st.lists(requests, min_size=1, max_size=4))
        def fuzz(example: list[FuzzRequest]) -> None:
            for request in example:
                trio.from_thread.run(send, gateway, sessions, request)

        with capture_logs() as logs:
            await trio.to_thread.run_sync(fuzz)
        ping = await asgi_call(
            gateway.app,
            "POST",
            "/mcp",
            [
                (b"host", b"127.0.0.1:8000"),
                (b"accept", ACCEPT_BOTH.encode()),
                (b"content-type", b"application/json"),
                (b"mcp-session-id", control.encode()),
            ],
            b'{"jsonrpc":"2.0","id":"control","method":"ping"}',
        )
    assert ping.status == 200
    assert json.loads(ping.body) == {"jsonrpc": "2.0", "id": "control", "result": {}}
    bad = [
        e
        for e in logs
        if e.get("log_level") in ("error", "critical", "exception") or "exc_info" in e
    ]
    assert bad == []
