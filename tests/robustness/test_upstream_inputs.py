"""Robustness rows A26, A28, A34, A37, A40, B8 and B14: what hosts send, and hosts that go away.

Most tests run the real gateway in-process in front of the misbehaving stdio
backend and talk raw HTTP to it. B8 also drives the ASGI app in-process so
that ``send`` can fail the way the ASGI spec allows after a disconnect, and
B14 runs the app in virtual time (``autojump_clock``) to watch ten idle
minutes of a GET stream in milliseconds.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import struct
from pathlib import Path
from typing import Any, Final

import msgspec
import pytest
import trio
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from gateway.backends.state import BackendState
from gateway.config import parse
from gateway.frontend.engine.selection import KEEP_ALIVE_TIMEOUT
from gateway.frontend.http_util import KEEPALIVE_INTERVAL
from gateway.runtime.app import open_gateway
from tests.fakes import FakeConnector, FakeMcpServer
from tests.harness import (
    Running,
    gateway_config,
    initialize_message,
    start_gateway,
    unspawned_backend,
    wait_for_states,
)
from tests.robustness.support import (
    ACCEPT_BOTH,
    LATEST,
    AsgiResponse,
    asgi_call,
    messages_of,
    misbehaving,
    open_host,
    sse_messages,
    utf8,
    wait_until,
)
from tests.transports.fake_http import FakeHttpBackend, Recorded, json_reply, result_of, serve_fake

pytestmark = pytest.mark.usefixtures("engine")

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
HOST_SECRET: Final = "host-secret-7d1f"
COOKIE_SECRET: Final = "cookie-secret-9a2e"


def received_lines(log: Path) -> list[bytes]:
    """The raw lines the misbehaving backend received on stdin."""
    return log.read_bytes().splitlines() if log.exists() else []


def received_messages(log: Path) -> list[dict[str, Any]]:
    """The messages the misbehaving backend received (lines that decode)."""
    messages = []
    for line in received_lines(log):
        try:
            messages.append(json.loads(line))
        except ValueError:
            continue
    return messages


# -- A28: bytes and values that break decoders ------------------------------------------------

BIG: Final = "1" * 10_000
A28_BODIES: Final[dict[str, tuple[bytes, set[int | None]]]] = {
    "invalid-utf8-in-method": (b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}', {PARSE_ERROR}),
    "lone-surrogate-method": (b'{"jsonrpc":"2.0","id":1,"method":"\\ud800"}', {PARSE_ERROR}),
    "duplicate-keys": (
        b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping","method":"ping"}',
        {None, INVALID_REQUEST},
    ),
    "nan": (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}', {PARSE_ERROR}),
    "infinity": (
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":-Infinity}}',
        {PARSE_ERROR},
    ),
    "10000-digit-id": (
        f'{{"jsonrpc":"2.0","id":{BIG},"method":"ping"}}'.encode(),
        {INVALID_REQUEST},
    ),
    "10000-digit-argument": (
        (
            '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":'
            f'{{"name":"m__echo","arguments":{{"text":"x","n":{BIG}}}}}}}'
        ).encode(),
        {None, PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS},
    ),
    "1e400-argument": (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
        b'"params":{"name":"m__echo","arguments":{"text":"x","n":1e400}}}',
        {None, PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS},
    ),
    "unicode-id-unknown-method": (
        '{"jsonrpc":"2.0","id":"\\u0000\u2028\U0001f600","method":"\u00e9/\\u0007"}'.encode(),
        {METHOD_NOT_FOUND},
    ),
}


@pytest.fixture(name="plain")
async def _plain(nursery: trio.Nursery, tmp_path: Path) -> Running:
    """A gateway in front of one misbehaving backend ("m") that logs what it receives."""
    entry = misbehaving("m", "--received-log", str(tmp_path / "received"))
    return await start_gateway(nursery, gateway_config([entry]))


@pytest.mark.parametrize("case", list(A28_BODIES))
async def test_undecodable_and_extreme_json_is_an_error_or_sanitized_never_a_crash(
    plain: Running, case: str
) -> None:
    """A28: invalid UTF-8, lone surrogates, duplicate keys, NaN, 10 000-digit numbers: the
    answer is a JSON-RPC error of the expected kind (or a sanitized success), in valid UTF-8
    JSON, never a 500; the gateway keeps answering."""
    body, codes = A28_BODIES[case]
    async with open_host(plain) as host:
        with trio.fail_after(5):
            response = await host.post(body)
        assert response.status_code in (200, 400), response.text
        [answer] = messages_of(response)
        error = answer.get("error")
        code = error["code"] if isinstance(error, dict) else None
        assert code in codes, answer
        assert answer["jsonrpc"] == "2.0"
        if case == "unicode-id-unknown-method":
            assert answer["id"] == "\u0000\u2028\U0001f600"
        assert (await host.ping()).answer["result"] == {}


async def test_invalid_utf8_inside_tool_arguments_is_refused_and_not_forwarded(
    plain: Running, tmp_path: Path
) -> None:
    """A28: invalid UTF-8 inside the arguments of a tools/call is refused with a JSON-RPC
    error (the body is not JSON: RFC 8259 §8.1); not one byte of it reaches the backend."""
    body = (
        b'{"jsonrpc":"2.0","id":5,"method":"tools/call",'
        b'"params":{"name":"m__echo","arguments":{"text":"\xc3\x28\xff"}}}'
    )
    async with open_host(plain) as host:
        with trio.fail_after(5):
            response = await host.post(body)
        [answer] = messages_of(response)
        assert answer.get("error", {}).get("code") in (PARSE_ERROR, INVALID_PARAMS), answer
        assert (await host.call("m__echo", {"text": "after"})).text == "after"
    for line in received_lines(tmp_path / "received"):
        utf8(line)


def assert_a_parse_error_no_backend_saw(response: Any, tmp_path: Path, marker: bytes) -> None:
    """The host got 400 -32700, and no line the backend received holds ``marker``."""
    forwarded = [line for line in received_lines(tmp_path / "received") if marker in line]
    assert forwarded == [], f"the backend received {forwarded!r}"
    assert response.status_code == 400, response.status_code
    [answer] = messages_of(response)
    assert answer["error"]["code"] == PARSE_ERROR


async def test_invalid_utf8_in_a_hosts_answer_to_a_backend_request_is_not_forwarded(
    plain: Running, tmp_path: Path
) -> None:
    """A28: a host answering a backend's sampling request with invalid UTF-8 inside the
    result gets 400 -32700, and not one byte of it reaches the backend."""
    call = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": "m__ask", "arguments": {"method": "sampling/createMessage"}},
    }
    async with open_host(plain, capabilities={"sampling": {}}) as host:
        with trio.fail_after(10):
            async with host.client.stream(
                "POST", host.path, content=json.dumps(call).encode(), headers=host.headers()
            ) as stream:
                assert stream.headers["content-type"].startswith("text/event-stream")
                buffer = b""
                asked: dict[str, Any] | None = None
                async for chunk in stream.aiter_bytes():
                    buffer += chunk
                    events = sse_messages(buffer.rpartition(b"\n\n")[0] + b"\n\n")
                    asked = next((m for m in events if m.get("method")), None)
                    if asked is not None:
                        break
                assert asked is not None and asked["method"] == "sampling/createMessage"
                bad_answer = (
                    b'{"jsonrpc":"2.0","id":' + json.dumps(asked["id"]).encode() + b',"result":'
                    b'{"role":"assistant","content":{"type":"text","text":"\xc3\x28\xff"},'
                    b'"model":"m"}}'
                )
                response = await host.post(bad_answer)
                # The backend answering a later message has read (and logged)
                # everything the gateway wrote to it before: a barrier, not a delay.
                assert (await host.call("m__echo", {"text": "barrier"})).text == "barrier"
    assert_a_parse_error_no_backend_saw(response, tmp_path, b"assistant")


async def test_invalid_utf8_in_a_roots_list_changed_notification_is_not_forwarded(
    plain: Running, tmp_path: Path
) -> None:
    """A28: notifications/roots/list_changed whose params hold invalid UTF-8 is refused with
    400 -32700; the backends are not sent one byte of it."""
    body = (
        b'{"jsonrpc":"2.0","method":"notifications/roots/list_changed",'
        b'"params":{"_meta":{"note":"\xc3\x28\xff"}}}'
    )
    async with open_host(plain) as host:
        response = await host.post(body)
        assert (await host.call("m__echo", {"text": "after"})).text == "after"
    assert_a_parse_error_no_backend_saw(response, tmp_path, b"list_changed")


# -- A34: cancelling initialize -----------------------------------------------------------


async def test_cancelling_the_initialize_request_is_ignored_and_nothing_is_forwarded(
    plain: Running, tmp_path: Path
) -> None:
    """A34: notifications/cancelled naming the initialize request's id → 202, ignored: the
    session works and no backend hears of it."""
    async with open_host(plain) as host:
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 0, "reason": "changed my mind"},
        }
        response = await host.post(cancel)
        assert response.status_code == 202
        assert response.content == b""
        assert (await host.call("m__echo", {"text": "alive"})).text == "alive"
    methods = [m.get("method") for m in received_messages(tmp_path / "received")]
    assert "notifications/cancelled" not in methods


# -- A37: resuming another session's stream -------------------------------------------------


async def test_last_event_id_of_another_session_replays_nothing_of_that_session(
    plain: Running,
) -> None:
    """A37: a GET carrying the Last-Event-ID of another session's stream gets only its own
    session's messages; the other session's events are never replayed to it."""
    async with open_host(plain) as owner, open_host(plain) as stranger:
        owner_session = plain.gateway.clients.get(owner.session_id)
        assert owner_session is not None
        secret = (
            b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"owner only"}}'
        )
        for _ in range(3):
            owner_session.notify_nowait(secret)
        gone = trio.Event()
        streams: dict[str, AsgiResponse] = {}
        owner_chunks: list[tuple[float, bytes]] = []

        async def stream(name: str, session_id: str, version: str) -> None:
            headers = [
                (b"host", b"127.0.0.1"),
                (b"accept", b"text/event-stream"),
                (b"mcp-session-id", session_id.encode()),
                (b"mcp-protocol-version", version.encode()),
                (b"last-event-id", b"1"),
            ]
            chunks = owner_chunks if name == "owner" else None
            streams[name] = await asgi_call(
                plain.gateway.app, "GET", "/mcp", headers, disconnect=gone, chunks=chunks
            )

        def replayed_to_owner() -> int:
            return b"".join(chunk for _, chunk in owner_chunks).count(b"owner only")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(stream, "stranger", stranger.session_id, stranger.version)
            nursery.start_soon(stream, "owner", owner.session_id, owner.version)
            with trio.fail_after(5):  # the owner's replay is in: both GETs have been served
                await wait_until(lambda: replayed_to_owner() >= 2)
            gone.set()
    assert streams["owner"].body.count(b"owner only") == 2  # events 2 and 3 replayed to it
    assert streams["stranger"].status in (200, 400, 404)
    assert b"owner only" not in streams["stranger"].body


# -- A40: inbound credentials stay at the gateway ----------------------------------------------

HOST_CREDENTIALS: Final = {
    "Authorization": f"Bearer {HOST_SECRET}",
    "Cookie": f"sid={COOKIE_SECRET}",
    "Proxy-Authorization": f"Basic {HOST_SECRET}",
}


async def test_a_stdio_backend_never_sees_the_hosts_authorization_or_cookie(
    plain: Running, tmp_path: Path
) -> None:
    """A40: with auth disabled, the host's Authorization and Cookie headers reach no stdio
    backend, in any message it receives."""
    async with open_host(plain) as host:
        response = await host.post(
            {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {"name": "m__whoami", "arguments": {}},
            },
            **HOST_CREDENTIALS,
        )
        [answer] = messages_of(response)
        assert "result" in answer, answer
    everything = b"\n".join(received_lines(tmp_path / "received"))
    assert HOST_SECRET.encode() not in everything
    assert COOKIE_SECRET.encode() not in everything


async def test_an_http_backend_gets_only_its_configured_credentials(nursery: trio.Nursery) -> None:
    """A40: with auth disabled, an HTTP backend receives the headers configured for it and
    never the host's Authorization, Cookie or Proxy-Authorization."""

    async def tools_list(request: Recorded) -> Any:
        tools = [{"name": "whoami", "inputSchema": {"type": "object"}}]
        return json_reply(result_of(request, {"tools": tools}))

    async def tools_call(request: Recorded) -> Any:
        text = json.dumps(request.headers)
        return json_reply(result_of(request, {"content": [{"type": "text", "text": text}]}))

    fake = FakeHttpBackend()
    fake.methods["tools/list"] = tools_list
    fake.methods["tools/call"] = tools_call
    async with serve_fake(fake) as (_, url):
        entry = {
            "name": "web",
            "transport": "http",
            "url": url + "/mcp",
            "headers": {"Authorization": "Bearer configured-token", "X-Api-Key": "configured"},
        }
        running = await start_gateway(nursery, gateway_config([entry]))
        async with open_host(running) as host:
            response = await host.post(
                {
                    "jsonrpc": "2.0",
                    "id": 8,
                    "method": "tools/call",
                    "params": {"name": "web__whoami", "arguments": {}},
                },
                **HOST_CREDENTIALS,
            )
            [answer] = messages_of(response)
            assert "result" in answer, answer
    assert fake.requests
    for request in fake.requests:
        assert request.header("authorization") == "Bearer configured-token"
        assert request.header("x-api-key") == "configured"
        assert request.header("cookie") is None
        assert request.header("proxy-authorization") is None
        values = " ".join(value for _, value in request.headers)
        assert HOST_SECRET not in values
        assert COOKIE_SECRET not in values


# -- A26: slowloris ---------------------------------------------------------------------------


async def test_headers_trickled_a_byte_at_a_time_are_cut_off_at_the_header_timeout(
    plain: Running,
) -> None:
    """A26: a request whose headers arrive a byte every 0.25 s never completes; the gateway
    closes the connection at its header timeout (hypercorn's keep-alive timeout, here
    KEEP_ALIVE_TIMEOUT), which is at most 10 s, without a response."""
    port = int(plain.base_url.rsplit(":", 1)[1])
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    trickle = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200
    started = trio.current_time()
    answer = None
    async with stream:
        with trio.fail_after(KEEP_ALIVE_TIMEOUT + 3):
            for byte in trickle:
                try:
                    await stream.send_all(bytes([byte]))
                except trio.BrokenResourceError:
                    break
                with trio.move_on_after(0.25):
                    answer = await stream.receive_some()
                    break
    closed_after = trio.current_time() - started
    assert answer == b"", answer
    assert closed_after <= min(KEEP_ALIVE_TIMEOUT + 1, 10), closed_after
    async with open_host(plain) as host:
        assert (await host.ping()).answer["result"] == {}


# -- A50-A52: the HTTP connection itself ------------------------------------------------------


async def _read_until_closed(stream: trio.SocketStream, limit: float = 5.0) -> bytes:
    data = b""
    with trio.fail_after(limit):
        while chunk := await stream.receive_some():
            data += chunk
    return data


def _port(running: Running) -> int:
    return int(running.base_url.rsplit(":", 1)[1])


async def test_an_oversized_header_block_is_refused_and_the_gateway_keeps_answering(
    plain: Running, engine: str
) -> None:
    """A50: a 100 KiB header block. The h11 engine answers 431 and closes; hypercorn
    (whose h11 limit applies only to a head still incomplete) serves it. Either way the
    gateway keeps answering everyone else."""
    stream = await trio.open_tcp_stream("127.0.0.1", _port(plain))
    async with stream:
        big = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 100_000
        with contextlib.suppress(trio.BrokenResourceError):
            await stream.send_all(big + b"\r\n\r\n")
        raw = await _read_until_closed(stream) if engine == "h11" else await stream.receive_some()
    status = raw.split(b" ", 2)[1] if raw.startswith(b"HTTP/1.1 ") else raw[:40]
    assert status == (b"431" if engine == "h11" else b"200"), raw[:200]
    async with open_host(plain) as host:
        assert (await host.ping()).answer["result"] == {}


async def test_pipelined_requests_are_answered_in_order(plain: Running) -> None:
    """A51: three requests in one write, the second a POST with a body: three answers,
    in order, on the one connection."""
    body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    post = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s"
    ) % (len(body), body)
    get = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    last = b"GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    stream = await trio.open_tcp_stream("127.0.0.1", _port(plain))
    async with stream:
        await stream.send_all(get + post + last)
        raw = await _read_until_closed(stream)
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", raw)
    # The ping has no session: 400. What matters is one answer per request, in order.
    assert statuses == [b"200", b"400", b"404"], raw[:400]


async def test_a_host_that_half_closes_after_its_request_still_gets_the_answer(
    plain: Running,
) -> None:
    """A52: a host that shuts its sending side right after an initialize still reads the
    answer (and its session id), on both engines."""
    body = json.dumps(initialize_message("half", revision="2025-06-18")).encode()
    head = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n"
    ) % len(body)
    stream = await trio.open_tcp_stream("127.0.0.1", _port(plain))
    async with stream:
        await stream.send_all(head + body)
        await stream.send_eof()
        raw = b""
        with trio.fail_after(10):
            while b"\r\n\r\n" not in raw or not raw.rstrip().endswith(b"}"):
                chunk = await stream.receive_some()
                if not chunk:
                    break
                raw += chunk
    assert raw.startswith(b"HTTP/1.1 200"), raw[:200]
    assert b"mcp-session-id: " in raw.lower()
    assert b'"protocolVersion":"2025-06-18"' in raw


# -- B8: hosts that go away mid-call --------------------------------------------------------


def call_request(session: str, msg_id: int, tool: str, arguments: dict[str, Any]) -> bytes:
    """A raw HTTP/1.1 POST of a tools/call on ``session``."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": msg_id,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
    ).encode()
    head = (
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Accept: {ACCEPT_BOTH}\r\nContent-Type: application/json\r\n"
        f"Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: {LATEST}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def test_a_host_resetting_its_connection_mid_call_leaves_nothing_behind(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """B8 (revisions up to 2025-11-25): a TCP RST mid-call is not a cancel: the backend gets
    no notifications/cancelled and finishes the call; in-flight counts return to zero; no
    error-level log; another session is unaffected meanwhile."""
    log = tmp_path / "received"
    entry = misbehaving("m", "--received-log", str(log))
    with capture_logs() as logs:
        running = await start_gateway(nursery, gateway_config([entry]))
        gateway = running.gateway
        async with open_host(running) as host, open_host(running) as bystander:
            port = int(running.base_url.rsplit(":", 1)[1])
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            held = {"path": str(tmp_path / "release")}  # the call lasts until released
            await stream.send_all(call_request(host.session_id, 41, "m__wait_for", held))
            with trio.fail_after(5):
                await wait_until(lambda: gateway.calls_in_flight() == 1)
            stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            await stream.aclose()  # RST
            assert (await bystander.call("m__echo", {"text": "unaffected"})).text == "unaffected"
            (tmp_path / "release").touch()
            with trio.fail_after(3):
                await wait_until(
                    lambda: gateway.calls_in_flight() == 0 and gateway.endpoint.activity.active == 0
                )
            assert (await host.call("m__echo", {"text": "same session"})).text == "same session"
    methods = [m.get("method") for m in received_messages(log)]
    assert "notifications/cancelled" not in methods
    assert not [e for e in logs if e.get("log_level") in ("error", "critical")]
    assert not [e for e in logs if "exc_info" in e or "exception" in e]


async def test_a_send_failing_after_the_host_disconnected_is_not_an_unhandled_error(
    plain: Running,
) -> None:
    """B8: the ASGI spec lets a server raise OSError from send() once the client is gone;
    the endpoint finishes the call and returns normally (no traceback in the server log)."""
    async with open_host(plain) as host:
        headers = [(k.lower().encode(), v.encode()) for k, v in host.headers().items()]
        headers.append((b"host", b"127.0.0.1"))
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 42,
                "method": "tools/call",
                "params": {"name": "m__sleep", "arguments": {"seconds": 0.5}},
            }
        ).encode()
        gone = trio.Event()
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    lambda: asgi_call(
                        plain.gateway.app,
                        "POST",
                        "/mcp",
                        headers,
                        body,
                        disconnect=gone,
                        send_fails_after_disconnect=True,
                    )
                )
                with trio.fail_after(5):  # the call is in the backend when the host goes
                    await wait_until(lambda: plain.gateway.calls_in_flight() == 1)
                gone.set()
        assert plain.gateway.calls_in_flight() == 0
        assert (await host.call("m__echo", {"text": "fine"})).text == "fine"


# -- B14: idle streams ---------------------------------------------------------------------


async def test_an_idle_get_stream_gets_a_keep_alive_at_least_every_15_seconds_for_ten_minutes(
    autojump_clock: trio.abc.Clock,
) -> None:
    """B14 (gateway side, virtual time): an idle GET stream stays open for 10 minutes and
    carries an SSE comment at least every 15 s, so a proxy's 60 s idle timeout never fires."""
    config = parse(
        json.dumps({"backends": [unspawned_backend("fake")]}),
        env={},
    )
    connector = FakeConnector({"fake": FakeMcpServer("fake")})
    async with open_gateway(config, connect=connector, registry=CollectorRegistry()) as gateway:
        await wait_for_states(gateway, {"fake": BackendState.UP})
        base = [(b"host", b"127.0.0.1:8000"), (b"accept", ACCEPT_BOTH.encode())]
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": LATEST, "capabilities": {}, "clientInfo": {"name": "t"}},
        }
        opened = await asgi_call(
            gateway.app,
            "POST",
            "/mcp",
            [*base, (b"content-type", b"application/json")],
            msgspec.json.encode(init),
        )
        session = opened.header(b"mcp-session-id")
        assert session is not None
        get_headers = [
            (b"host", b"127.0.0.1:8000"),
            (b"accept", b"text/event-stream"),
            (b"mcp-session-id", session),
        ]
        gone = trio.Event()
        streams = []

        async def stream() -> None:
            streams.append(
                await asgi_call(gateway.app, "GET", "/mcp", get_headers, disconnect=gone)
            )

        opened_at = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stream)
            await trio.sleep(600)
            closed_at = trio.current_time()
            gone.set()
    [response] = streams
    assert response.status == 200
    times = [at for at, chunk in response.chunks if chunk]
    assert all(chunk.startswith(b":") for _, chunk in response.chunks if chunk)
    gaps = [b - a for a, b in zip([opened_at, *times], [*times, closed_at], strict=True)]
    assert max(gaps) <= KEEPALIVE_INTERVAL <= 15.0
    assert len(times) >= 600 / 15
