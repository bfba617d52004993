"""The gateway's Streamable HTTP endpoint, spoken to in raw HTTP.

Each test starts a real gateway in-process (``tests/harness.py``) in front of
the two bundled demo backends and talks to ``/mcp`` with ``httpx``, so every
status code, header and JSON-RPC error is checked exactly as a host sees it.
"A1" and friends are rows of docs/robustness.md; "spec" means the Streamable HTTP
transport rules in docs/spec-notes.md.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import httpx
import pytest
import trio
from structlog.testing import capture_logs

from tests.harness import Running, gateway_config, start_gateway, stdio_backend

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


pytestmark = pytest.mark.usefixtures("engine")

MCP: Final = "/mcp"
LATEST: Final = "2025-11-25"
ACCEPT_BOTH: Final = "application/json, text/event-stream"
SMALL_BODY_LIMIT: Final = 1024
TOOLBOX: Final = stdio_backend("toolbox", [sys.executable, "-m", "mcp_gateway_demo.toolbox"])
NOTES: Final = stdio_backend("notes", [sys.executable, "-m", "mcp_gateway_demo.notes"])
INITIALIZED: Final = {"jsonrpc": "2.0", "method": "notifications/initialized"}


# -- helpers ------------------------------------------------------------------


@dataclass(frozen=True)
class Session:
    """A client session opened on the gateway: its id and negotiated version."""

    id: str
    version: str


def mcp_headers(session: Session | None = None, **overrides: str) -> dict[str, str]:
    """The headers of a well-behaved POST, for ``session`` when given.

    ``overrides`` replace or add headers; ``_`` in a keyword becomes ``-``
    (``Content_Type="text/plain"``).
    """
    headers = {"Accept": ACCEPT_BOTH, "Content-Type": "application/json"}
    if session is not None:
        headers["Mcp-Session-Id"] = session.id
        headers["MCP-Protocol-Version"] = session.version
    headers.update({key.replace("_", "-"): value for key, value in overrides.items()})
    return headers


async def post(
    client: httpx.AsyncClient,
    message: object,
    session: Session | None = None,
    *,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """POST one JSON-RPC message to ``/mcp``; ``bytes`` are sent as they are."""
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    return await client.post(MCP, content=body, headers=headers or mcp_headers(session))


def request(msg_id: object, method: str, params: object = None) -> dict[str, Any]:
    """A JSON-RPC request object (``params`` left out when None)."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def initialize_request(version: str = LATEST, msg_id: int = 0) -> dict[str, Any]:
    """The ``initialize`` request a host sends first."""
    return request(
        msg_id,
        "initialize",
        {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw-http-test", "version": "0"},
        },
    )


def add_call(msg_id: int, a: int, b: int) -> dict[str, Any]:
    """A ``tools/call`` of the toolbox's ``add``."""
    return request(msg_id, "tools/call", {"name": "toolbox__add", "arguments": {"a": a, "b": b}})


async def initialize(client: httpx.AsyncClient, version: str = LATEST) -> Session:
    """Send ``initialize`` alone; return the session it opened."""
    response = await post(client, initialize_request(version))
    assert response.status_code == 200, response.text
    negotiated = response.json()["result"]["protocolVersion"]
    return Session(response.headers["mcp-session-id"], negotiated)


async def open_session(client: httpx.AsyncClient, version: str = LATEST) -> Session:
    """Initialize a session and send ``notifications/initialized``."""
    session = await initialize(client, version)
    response = await post(client, INITIALIZED, session)
    assert response.status_code == 202, response.text
    return session


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The ``error`` member of a single JSON-RPC error response."""
    body = response.json()
    assert isinstance(body, dict), body
    assert "result" not in body, body
    assert body["jsonrpc"] == "2.0"
    error = body["error"]
    assert isinstance(error, dict)
    return error


def http_client(running: Running) -> httpx.AsyncClient:
    """An HTTP client for ``running``; proxies from the environment are ignored."""
    return httpx.AsyncClient(base_url=running.base_url, trust_env=False, timeout=5.0)


async def start(nursery: trio.Nursery, **server: Any) -> Running:
    """A gateway in front of the toolbox demo; ``server`` overrides settings.

    One backend, not both demos: these tests are about the HTTP endpoint, and
    every gateway start spawns the SDK servers afresh (about 0.6 s of CPU
    each), which on 2 shared cores is most of this file's time.
    """
    return await start_gateway(nursery, gateway_config([TOOLBOX], server=server))


async def tool_names(client: httpx.AsyncClient, session: Session) -> list[str]:
    """The names tools/list returns on ``session`` (asserting it succeeds)."""
    response = await post(client, request(90, "tools/list"), session)
    assert response.status_code == 200, response.text
    return [tool["name"] for tool in response.json()["result"]["tools"]]


@pytest.fixture(name="running")
async def _running(nursery: trio.Nursery) -> Running:
    return await start(nursery)


@pytest.fixture(name="client")
async def _client(running: Running) -> AsyncIterator[httpx.AsyncClient]:
    async with http_client(running) as client:
        yield client


@pytest.fixture(name="session")
async def _session(client: httpx.AsyncClient) -> Session:
    return await open_session(client)


# -- initialize ----------------------------------------------------------------


async def test_initialize_answers_json_with_a_secure_session_id_and_the_version(
    client: httpx.AsyncClient,
) -> None:
    """Spec (sessions): the InitializeResult comes with an Mcp-Session-Id of visible
    ASCII, unguessable (>= 128 bits, so >= 22 base64 characters)."""
    response = await post(client, initialize_request(LATEST, msg_id=11))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["id"] == 11
    assert body["result"]["protocolVersion"] == LATEST
    session_id = response.headers["mcp-session-id"]
    assert len(session_id) >= 22
    assert all("\x21" <= ch <= "\x7e" for ch in session_id), session_id


async def test_every_initialize_opens_a_session_with_a_different_id(
    client: httpx.AsyncClient,
) -> None:
    """Spec (sessions): a session id is globally unique."""
    ids = {(await initialize(client)).id for _ in range(5)}
    assert len(ids) == 5


async def test_initialize_with_an_unknown_version_gets_the_latest_version(
    client: httpx.AsyncClient,
) -> None:
    """A20: a version the gateway does not know is answered with its newest, not an error."""
    response = await post(client, initialize_request("1.0.0"))
    assert response.status_code == 200
    assert response.json()["result"]["protocolVersion"] == LATEST


async def test_initialize_with_2024_11_05_keeps_that_version(client: httpx.AsyncClient) -> None:
    """Spec (versions): a server that supports the offered version answers with it."""
    response = await post(client, initialize_request("2024-11-05"))
    assert response.status_code == 200
    assert response.json()["result"]["protocolVersion"] == "2024-11-05"


async def test_a_second_initialize_on_a_session_is_invalid_request_and_the_session_survives(
    client: httpx.AsyncClient, session: Session
) -> None:
    """A21: initialize carrying an Mcp-Session-Id → 400 -32600 with the id echoed;
    the existing session keeps working."""
    response = await post(client, initialize_request(msg_id=5), session)
    assert response.status_code == 400
    assert "mcp-session-id" not in response.headers
    assert response.json()["id"] == 5
    assert error_of(response)["code"] == -32600
    assert "toolbox__add" in await tool_names(client, session)


# -- one-way messages ----------------------------------------------------------


async def test_notifications_initialized_is_accepted_with_202_and_no_body(
    client: httpx.AsyncClient,
) -> None:
    """Spec: a notification is answered 202 Accepted with no body."""
    session = await initialize(client)
    response = await post(client, INITIALIZED, session)
    assert response.status_code == 202
    assert response.content == b""


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": "never-sent", "result": {}},
        {"jsonrpc": "2.0", "id": 424242, "error": {"code": -1, "message": "no"}},
    ],
    ids=["result", "error"],
)
async def test_a_response_to_an_id_the_gateway_never_sent_is_accepted_and_dropped(
    client: httpx.AsyncClient, session: Session, message: dict[str, Any]
) -> None:
    """A35: a client response nobody asked for → 202, dropped; the session goes on."""
    response = await post(client, message, session)
    assert response.status_code == 202
    assert response.content == b""
    assert "toolbox__add" in await tool_names(client, session)


@pytest.mark.parametrize(
    "params",
    [{"requestId": 999}, {"requestId": {"not": "an id"}}, {"requestId": True}, {}, []],
    ids=["unknown-id", "object-id", "bool-id", "no-id", "array-params"],
)
async def test_cancelling_an_unknown_or_malformed_request_is_accepted_and_ignored(
    client: httpx.AsyncClient, session: Session, params: object
) -> None:
    """A33: notifications/cancelled for an unknown id or with malformed params → 202."""
    message = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
    response = await post(client, message, session)
    assert response.status_code == 202
    assert response.content == b""
    assert "toolbox__add" in await tool_names(client, session)


# -- Origin and Host -----------------------------------------------------------


async def test_a_foreign_origin_is_refused_with_403_and_no_session_is_created(
    running: Running, client: httpx.AsyncClient
) -> None:
    """A1: Origin http://evil.example → 403, nothing forwarded, no session opened."""
    headers = mcp_headers(Origin="http://evil.example")
    response = await post(client, initialize_request(), headers=headers)
    assert response.status_code == 403
    assert "mcp-session-id" not in response.headers
    if response.content:
        assert response.json()["id"] is None
    assert len(running.gateway.clients) == 0


async def test_origin_null_is_refused_with_403(running: Running, client: httpx.AsyncClient) -> None:
    """A2: Origin: null (sandboxed iframe, file://) → 403 unless allowlisted."""
    response = await post(client, initialize_request(), headers=mcp_headers(Origin="null"))
    assert response.status_code == 403
    assert len(running.gateway.clients) == 0


async def test_a_loopback_origin_is_accepted(client: httpx.AsyncClient) -> None:
    """Gateway choice (A1): on a loopback bind, loopback origins need no allowlist."""
    headers = mcp_headers(Origin="http://localhost:1234")
    response = await post(client, initialize_request(), headers=headers)
    assert response.status_code == 200
    assert response.json()["result"]["protocolVersion"] == LATEST


async def test_a_foreign_host_header_is_refused_with_403(
    running: Running, client: httpx.AsyncClient
) -> None:
    """A3: on a loopback bind, Host: evil.example.com (DNS rebinding) → 403."""
    headers = mcp_headers(Host="evil.example.com")
    response = await post(client, initialize_request(), headers=headers)
    assert response.status_code == 403
    assert len(running.gateway.clients) == 0


async def test_a_localhost_host_header_with_the_port_is_accepted(
    running: Running, client: httpx.AsyncClient
) -> None:
    """A3: Host: localhost:<port> is accepted on a loopback bind."""
    port = httpx.URL(running.base_url).port
    headers = mcp_headers(Host=f"localhost:{port}")
    response = await post(client, initialize_request(), headers=headers)
    assert response.status_code == 200
    assert "mcp-session-id" in response.headers


# -- malformed JSON-RPC --------------------------------------------------------


async def test_a_body_that_is_not_json_is_a_parse_error_without_id(
    client: httpx.AsyncClient, session: Session
) -> None:
    """A4: body `{"jsonrpc":` → 400, -32700, id null."""
    response = await post(client, b'{"jsonrpc":', session)
    assert response.status_code == 400
    assert response.json()["id"] is None
    assert error_of(response)["code"] == -32700


@pytest.mark.parametrize("body", [b"42", b"null", b'"ping"', b"true"])
async def test_a_json_scalar_body_is_invalid_request(
    client: httpx.AsyncClient, session: Session, body: bytes
) -> None:
    """A5: a JSON scalar, null or string body → 400, -32600."""
    response = await post(client, body, session)
    assert response.status_code == 400
    assert response.json()["id"] is None
    assert error_of(response)["code"] == -32600


async def test_an_empty_batch_is_invalid_request(
    client: httpx.AsyncClient, session: Session
) -> None:
    """A8: `[]` → 400, -32600."""
    response = await post(client, b"[]", session)
    assert response.status_code == 400
    assert error_of(response)["code"] == -32600


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "1.0", "id": 7, "method": "ping"},
        {"id": 7, "method": "ping"},
    ],
    ids=["jsonrpc-1.0", "jsonrpc-missing"],
)
async def test_a_wrong_jsonrpc_version_is_invalid_request_echoing_the_id(
    client: httpx.AsyncClient, session: Session, message: dict[str, Any]
) -> None:
    """A9: "jsonrpc" other than "2.0", or missing → 400, -32600, the readable id echoed."""
    response = await post(client, message, session)
    assert response.status_code == 400
    assert response.json()["id"] == 7
    assert error_of(response)["code"] == -32600


async def test_a_null_request_id_is_invalid_request(
    client: httpx.AsyncClient, session: Session
) -> None:
    """A10: MCP request ids must not be null → 400, -32600."""
    response = await post(client, request(None, "ping"), session)
    assert response.status_code == 400
    assert response.json()["id"] is None
    assert error_of(response)["code"] == -32600


@pytest.mark.parametrize(
    "bad_id", [{"a": 1}, [1], True, 1.5], ids=["object", "array", "bool", "float"]
)
async def test_a_request_id_that_is_not_a_string_or_integer_is_invalid_request(
    client: httpx.AsyncClient, session: Session, bad_id: object
) -> None:
    """A11: an object, array, bool or float id → 400, -32600, answered with id null."""
    response = await post(client, request(bad_id, "ping"), session)
    assert response.status_code == 400
    assert response.json()["id"] is None
    assert error_of(response)["code"] == -32600


async def test_an_unknown_method_is_method_not_found_naming_it(
    client: httpx.AsyncClient, session: Session
) -> None:
    """A14: an unknown method → 200 with -32601 naming the method."""
    response = await post(client, request(3, "foo/bar"), session)
    assert response.status_code == 200
    assert response.json()["id"] == 3
    error = error_of(response)
    assert error["code"] == -32601
    assert "foo/bar" in error["message"]


async def test_deeply_nested_brackets_are_a_parse_error_and_the_gateway_keeps_answering(
    client: httpx.AsyncClient, session: Session
) -> None:
    """A27: 100 000 nested `[` → 400 -32700; no RecursionError escapes; next request works."""
    response = await post(client, b"[" * 100_000, session)
    assert response.status_code == 400
    assert error_of(response)["code"] == -32700
    ping = await post(client, request(4, "ping"), session)
    assert ping.status_code == 200
    assert ping.json() == {"jsonrpc": "2.0", "id": 4, "result": {}}


# -- batches -------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
async def test_a_batch_on_a_session_after_2025_03_26_is_refused_whole(
    client: httpx.AsyncClient, version: str
) -> None:
    """A6: batches left the protocol after 2025-03-26 → 400 with one -32600 error;
    neither request is executed."""
    session = await open_session(client, version)
    response = await post(client, [add_call(1, 1, 2), add_call(2, 3, 4)], session)
    assert response.status_code == 400
    assert error_of(response)["code"] == -32600
    assert b'"result"' not in response.content


async def test_a_batch_on_a_2025_03_26_session_is_answered_in_order(
    client: httpx.AsyncClient,
) -> None:
    """A7 (spec, versions): 2025-03-26 has batches → 200 with a JSON array of both
    responses, in request order."""
    session = await open_session(client, "2025-03-26")
    assert session.version == "2025-03-26"
    response = await post(client, [add_call(1, 1, 2), add_call(2, 3, 4)], session)
    assert response.status_code == 200
    replies = response.json()
    assert isinstance(replies, list)
    assert [reply["id"] for reply in replies] == [1, 2]
    texts = [reply["result"]["content"][0]["text"] for reply in replies]
    assert [float(text) for text in texts] == [3, 7]


# -- sessions ------------------------------------------------------------------


async def test_a_request_without_a_session_id_is_400(
    client: httpx.AsyncClient, session: Session
) -> None:
    """A15 (spec, sessions): a non-initialize request without Mcp-Session-Id → 400."""
    headers = mcp_headers(MCP_Protocol_Version=session.version)
    response = await post(client, request(1, "tools/list"), headers=headers)
    assert response.status_code == 400


async def test_an_unknown_session_id_is_404(client: httpx.AsyncClient) -> None:
    """A16 (spec, sessions): an unknown session id → 404."""
    unknown = Session("0123456789abcdefghijklmnopqrstuvwxyzABCD", LATEST)
    response = await post(client, request(1, "tools/list"), unknown)
    assert response.status_code == 404


async def test_a_deleted_session_is_404_afterwards(
    client: httpx.AsyncClient, session: Session
) -> None:
    """A16 (spec, sessions): DELETE ends the session; every later use of it → 404."""
    deleted = await client.delete(MCP, headers=mcp_headers(session))
    assert deleted.status_code == 200
    response = await post(client, request(1, "tools/list"), session)
    assert response.status_code == 404
    again = await client.delete(MCP, headers=mcp_headers(session))
    assert again.status_code == 404


@pytest.mark.parametrize(
    "bad_id",
    [b"A" * 8192, "sessi\u00f3n-\u2603".encode(), b"has some spaces"],
    ids=["8KiB", "non-ascii", "spaces"],
)
async def test_a_malformed_session_id_is_refused_and_never_echoed(
    client: httpx.AsyncClient, session: Session, bad_id: bytes
) -> None:
    """A17: a session id of 8 KiB, non-ASCII or with spaces → 400 or 404, and the
    value is never reflected into the response or the logs."""
    raw_headers = [
        (name.encode(), value.encode())
        for name, value in mcp_headers(session).items()
        if name != "Mcp-Session-Id"
    ]
    raw_headers.append((b"Mcp-Session-Id", bad_id))
    body = json.dumps(request(1, "tools/list")).encode()
    with capture_logs() as logs:
        response = await client.post(MCP, content=body, headers=raw_headers)
    assert response.status_code in (400, 404)
    for _, value in response.headers.raw:
        assert bad_id not in value
    assert bad_id not in response.content
    text = bad_id.decode("latin-1")
    assert not [entry for entry in logs if text in str(entry)]


# -- MCP-Protocol-Version ------------------------------------------------------


@pytest.mark.parametrize("bad_version", ["invalid-protocol-version", "2000-01-01", "2099-01-01"])
async def test_an_unsupported_protocol_version_header_is_400(
    client: httpx.AsyncClient, bad_version: str
) -> None:
    """A18 (spec): an unsupported or invalid MCP-Protocol-Version → 400, both before and
    after notifications/initialized."""
    session = await initialize(client)
    headers = mcp_headers(session, MCP_Protocol_Version=bad_version)
    before = await post(client, request(1, "tools/list"), headers=headers)
    assert before.status_code == 400
    assert (await post(client, INITIALIZED, session)).status_code == 202
    after = await post(client, request(2, "tools/list"), headers=headers)
    assert after.status_code == 400


async def test_a_supported_protocol_version_other_than_the_negotiated_one_is_accepted(
    client: httpx.AsyncClient, session: Session
) -> None:
    """A19, gateway choice: only unsupported versions are 400. The spec makes the
    negotiated version a SHOULD, and the official conformance suite
    (server-sse-multiple-streams) sends 2025-03-26 on a 2025-11-25 session."""
    assert session.version == LATEST
    headers = mcp_headers(session, MCP_Protocol_Version="2025-06-18")
    response = await post(client, request(1, "tools/list"), headers=headers)
    assert response.status_code == 200


async def test_a_request_without_a_protocol_version_header_is_accepted(
    client: httpx.AsyncClient, session: Session
) -> None:
    """Spec: a missing MCP-Protocol-Version is not an error (the server knows the
    negotiated version, or assumes 2025-03-26)."""
    headers = mcp_headers(session)
    del headers["MCP-Protocol-Version"]
    response = await post(client, request(1, "tools/list"), headers=headers)
    assert response.status_code == 200
    assert "toolbox__add" in [tool["name"] for tool in response.json()["result"]["tools"]]


# -- media types and sizes -----------------------------------------------------


async def test_a_post_that_does_not_accept_event_streams_is_406(
    client: httpx.AsyncClient, session: Session
) -> None:
    """A22 (spec): a POST's Accept must list application/json and text/event-stream."""
    headers = mcp_headers(session, Accept="application/json")
    response = await post(client, request(1, "tools/list"), headers=headers)
    assert response.status_code == 406


async def test_a_post_whose_content_type_is_not_json_is_415(
    client: httpx.AsyncClient, session: Session
) -> None:
    """A23: Content-Type text/plain → 415."""
    headers = mcp_headers(session, Content_Type="text/plain")
    response = await post(client, request(1, "tools/list"), headers=headers)
    assert response.status_code == 415


async def test_a_content_length_over_the_body_limit_is_413(nursery: trio.Nursery) -> None:
    """A24: a body whose Content-Length passes server.max_body_bytes → 413."""
    running = await start(nursery, max_body_bytes=SMALL_BODY_LIMIT)
    async with http_client(running) as client:
        session = await open_session(client)
        padded = {**request(1, "tools/list"), "pad": "x" * SMALL_BODY_LIMIT}
        response = await post(client, padded, session)
        assert response.status_code == 413
        assert error_of(response)["code"] == -32600
        assert "toolbox__add" in await tool_names(client, session)


async def test_a_content_length_over_the_limit_is_refused_before_the_body_is_read(
    nursery: trio.Nursery,
) -> None:
    """A24: the 413 comes from the headers alone; the gateway waits for no body byte.

    Raw socket: httpx would send the whole body before reading the answer.
    """
    running = await start(nursery, max_body_bytes=SMALL_BODY_LIMIT)
    url = httpx.URL(running.base_url)
    assert url.port is not None
    head = (
        f"POST {MCP} HTTP/1.1\r\n"
        f"Host: {url.host}:{url.port}\r\n"
        f"Accept: {ACCEPT_BOTH}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {SMALL_BODY_LIMIT + 1}\r\n"
        "\r\n"
    ).encode()
    stream = await trio.open_tcp_stream(url.host, url.port)
    async with stream:
        await stream.send_all(head)  # and no body at all
        received = b""
        with trio.fail_after(5):
            while b"\r\n\r\n" not in received:
                chunk = await stream.receive_some()
                assert chunk, f"connection closed after {received!r}"
                received += chunk
    assert received.startswith(b"HTTP/1.1 413 ")


async def test_a_chunked_body_over_the_limit_is_413(nursery: trio.Nursery) -> None:
    """A25: a chunked body (no Content-Length) is cut off at the limit with 413."""
    running = await start(nursery, max_body_bytes=SMALL_BODY_LIMIT)

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"jsonrpc":"2.0","id":1,"method":"tools/list","pad":"'
        for _ in range(4):
            yield b"x" * 512
        yield b'"}'

    async with http_client(running) as client:
        session = await open_session(client)
        response = await client.post(MCP, content=chunks(), headers=mcp_headers(session))
        assert response.request.headers.get("transfer-encoding") == "chunked"
        assert "content-length" not in response.request.headers
        assert response.status_code == 413


# -- tools ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["toolbox__nope", "add", "nobody__add"])
async def test_calling_an_unknown_tool_is_invalid_params(
    client: httpx.AsyncClient, session: Session, name: str
) -> None:
    """A29: tools/call of an unknown tool or a name without prefix → -32602 Unknown tool."""
    response = await post(
        client, request(8, "tools/call", {"name": name, "arguments": {}}), session
    )
    assert response.status_code == 200
    assert response.json()["id"] == 8
    error = error_of(response)
    assert error["code"] == -32602
    assert "Unknown tool" in error["message"]
    assert name in error["message"]


@pytest.mark.parametrize("arguments", [[1, 2], "a=1&b=2"], ids=["array", "string"])
async def test_tool_arguments_that_are_not_an_object_are_invalid_params(
    client: httpx.AsyncClient, session: Session, arguments: object
) -> None:
    """A30: tools/call with `arguments` as an array or a string → -32602."""
    params = {"name": "toolbox__add", "arguments": arguments}
    response = await post(client, request(9, "tools/call", params), session)
    assert response.status_code == 200
    assert response.json()["id"] == 9
    assert error_of(response)["code"] == -32602


@pytest.mark.parametrize(
    "cursor", ["garbage!", "Zm9v.bm90LWEtdGFn", 42], ids=["garbage", "forged", "number"]
)
async def test_a_cursor_the_gateway_did_not_issue_is_invalid_params(
    client: httpx.AsyncClient, session: Session, cursor: object
) -> None:
    """A32 (spec, pagination): an invalid or tampered cursor → -32602."""
    response = await post(client, request(10, "tools/list", {"cursor": cursor}), session)
    assert response.status_code == 200
    assert response.json()["id"] == 10
    assert error_of(response)["code"] == -32602


# -- GET streams ---------------------------------------------------------------


def get_headers(session: Session, accept: str = "text/event-stream") -> dict[str, str]:
    """Headers for a GET stream on ``session``."""
    return {"Accept": accept, "Mcp-Session-Id": session.id, "MCP-Protocol-Version": session.version}


async def test_a_get_that_does_not_accept_event_streams_is_406(
    client: httpx.AsyncClient, session: Session
) -> None:
    """A37 (spec): GET must accept text/event-stream → otherwise 406."""
    response = await client.get(MCP, headers=get_headers(session, accept="application/json"))
    assert response.status_code == 406


async def test_a_get_opens_an_event_stream_on_a_valid_session(
    client: httpx.AsyncClient, session: Session
) -> None:
    """Spec: GET with Accept text/event-stream opens the session's server-message stream."""
    async with client.stream("GET", MCP, headers=get_headers(session)) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        raw = response.aiter_raw()
        assert isinstance(raw, AsyncGenerator)  # so that it can be closed
        async with aclosing(raw) as chunks:
            with trio.fail_after(5):
                first = await anext(chunks)
    assert first.startswith(b":")  # an SSE comment, not a message


async def test_a_second_get_stream_on_the_same_session_is_409(
    client: httpx.AsyncClient, session: Session
) -> None:
    """Gateway choice: one GET stream per session; a concurrent second one → 409."""
    async with client.stream("GET", MCP, headers=get_headers(session)) as first:
        assert first.status_code == 200
        second = await client.get(MCP, headers=get_headers(session))
        assert second.status_code == 409


# -- operations paths ----------------------------------------------------------


async def test_healthz_answers_ok(client: httpx.AsyncClient) -> None:
    """Gateway choice: /healthz says the process answers."""
    response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readyz_is_ready_and_reports_each_backend_state(nursery: trio.Nursery) -> None:
    """Gateway choice: /readyz is 200 with ready true and every backend's state."""
    running = await start_gateway(nursery, gateway_config([TOOLBOX, NOTES]))
    async with http_client(running) as client:
        response = await client.get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["ready"] is True
    assert body["backends"] == {"notes": "up", "toolbox": "up"}


async def test_readyz_is_503_naming_a_required_backend_that_is_down(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice: a `required: true` backend that is not up makes /readyz 503."""
    broken = stdio_backend(
        "broken",
        [sys.executable, "-c", "import sys; sys.exit(3)"],
        required=True,
        restart={"initial_delay": 30, "max_delay": 60},
    )
    config = gateway_config([TOOLBOX, NOTES, broken])
    running = await start_gateway(nursery, config, wait_up=["toolbox", "notes"])
    async with http_client(running) as client:
        response = await client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["ready"] is False
    assert body["required_down"] == ["broken"]
    assert body["backends"]["toolbox"] == "up"
    assert body["backends"]["broken"] != "up"


async def test_metrics_are_exposed_with_backend_up(client: httpx.AsyncClient) -> None:
    """Gateway choice: /metrics is the Prometheus exposition, with backend_up per backend."""
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert 'mcp_gateway_backend_up{backend="toolbox"} 1.0' in response.text


async def test_an_unknown_path_is_404(client: httpx.AsyncClient) -> None:
    """Gateway choice: anything but /mcp and the operations paths → 404."""
    response = await client.get("/nope")
    assert response.status_code == 404


# -- several sessions ----------------------------------------------------------


async def test_deleting_one_session_leaves_another_working(client: httpx.AsyncClient) -> None:
    """A16/A21: sessions are independent; ending one does not touch another."""
    first = await open_session(client)
    second = await open_session(client)
    assert first.id != second.id
    deleted = await client.delete(MCP, headers=mcp_headers(first))
    assert deleted.status_code == 200
    assert (await post(client, request(1, "tools/list"), first)).status_code == 404
    call = await post(client, add_call(2, 20, 22), second)
    assert call.status_code == 200
    assert float(call.json()["result"]["content"][0]["text"]) == 42
