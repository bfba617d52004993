"""2026-07-28 (modern) requests on the same ``/mcp`` endpoint, in raw HTTP.

A real gateway in front of the toolbox demo and the ``headers`` test peer
(``tests/servers/headers.py``), spoken to with ``httpx``: every status, header
and JSON-RPC error is checked as a modern host sees it. "S/" is the spec's
``docs/specification/2026-07-28/``; the rules are in ``docs/eras.md``.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any, Final

import httpx
import pytest
import trio
from structlog.testing import capture_logs

from tests.frontend.test_streamable_http import (
    TOOLBOX,
    error_of,
    http_client,
    initialize,
    mcp_headers,
    post,
    request,
)
from tests.harness import Running, gateway_config, sdk_backend, start_gateway, stdio_backend
from tests.interaction.test_beside_a_call import WAIT, Recorder, forwarded_call
from tests.servers.paths import python_server_command
from tests.servers.recorder import recorded

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path


pytestmark = pytest.mark.usefixtures("engine")

MODERN: Final = "2026-07-28"
HEADERS: Final = sdk_backend("headers")
CAPS: Final[dict[str, Any]] = {}


def envelope(**extra: Any) -> dict[str, Any]:
    """A request ``_meta`` of 2026-07-28; ``extra`` adds or overrides keys."""
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": CAPS,
        "io.modelcontextprotocol/clientInfo": {"name": "modern-test", "version": "0"},
    }
    meta.update(extra)
    return meta


def modern(
    msg_id: int, method: str, params: dict[str, Any] | None = None, **meta: Any
) -> dict[str, Any]:
    """A modern request: ``params`` plus the envelope."""
    return request(msg_id, method, {**(params or {}), "_meta": envelope(**meta)})


def modern_headers(
    message: dict[str, Any], *, name: str | None = None, **extra: str
) -> dict[str, str]:
    """The headers a conforming modern client sends for ``message``."""
    headers = mcp_headers(**{"MCP_Protocol_Version": MODERN, "Mcp_Method": message["method"]})
    params = message.get("params", {})
    derived = name or params.get("name") or params.get("uri")
    if derived is not None and message["method"] in ("tools/call", "prompts/get", "resources/read"):
        headers["Mcp-Name"] = derived
    headers.update(extra)
    return headers


async def send(
    client: httpx.AsyncClient, message: dict[str, Any], **headers: str
) -> httpx.Response:
    """POST a modern request with the headers it needs (``headers`` override)."""
    return await post(client, message, headers=modern_headers(message, **headers))


def sse_messages(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an SSE response body, in order."""
    return [
        json.loads(line[len("data: ") :])
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]


@pytest.fixture(name="running")
async def _running(nursery: trio.Nursery) -> Running:
    return await start_gateway(nursery, gateway_config([TOOLBOX, HEADERS]))


@pytest.fixture(name="client")
async def _client(running: Running) -> AsyncIterator[httpx.AsyncClient]:
    async with http_client(running) as client:
        yield client


# -- discover and results --------------------------------------------------------


async def test_discover_answers_from_the_merged_view_without_a_session(
    client: httpx.AsyncClient,
) -> None:
    """S/server/discover.mdx: versions of both eras, capabilities, hints, serverInfo."""
    response = await send(client, modern(1, "server/discover"))
    assert response.status_code == 200, response.text
    assert "mcp-session-id" not in response.headers
    result = response.json()["result"]
    assert result["resultType"] == "complete"
    assert result["supportedVersions"][0] == MODERN
    assert "2025-11-25" in result["supportedVersions"]
    assert result["ttlMs"] == 0 and result["cacheScope"] == "private"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-gateway"
    caps = result["capabilities"]
    assert set(caps) >= {"tools", "prompts", "resources"}
    assert caps["tools"]["listChanged"] is True  # served by subscriptions/listen


async def test_tools_list_carries_hints_and_drops_an_invalid_header_annotation(
    client: httpx.AsyncClient,
) -> None:
    """S/server/tools.mdx: a tool with a number-typed x-mcp-header is left out."""
    with capture_logs() as logs:
        response = await send(client, modern(2, "tools/list"))
    assert response.status_code == 200, response.text
    assert "mcp-session-id" not in response.headers
    result = response.json()["result"]
    names = {tool["name"] for tool in result["tools"]}
    assert "headers__lookup" in names and "toolbox__add" in names
    assert "headers__broken" not in names
    assert result["resultType"] == "complete"
    assert (result["ttlMs"], result["cacheScope"]) == (0, "private")
    assert any(e["event"] == "tool.dropped" and e["tool"] == "headers__broken" for e in logs)


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("prompts/list", {}),
        ("resources/list", {}),
        ("resources/templates/list", {}),
        ("resources/read", None),
    ],
)
async def test_every_list_and_read_carries_cache_hints(
    client: httpx.AsyncClient, method: str, params: dict[str, Any] | None
) -> None:
    """S/server/utilities/caching.mdx: ttlMs and cacheScope are required here."""
    if params is None:
        listed = (await send(client, modern(30, "resources/list"))).json()["result"]
        params = {"uri": listed["resources"][0]["uri"]}
    response = await send(client, modern(3, method, params))
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["resultType"] == "complete"
    assert isinstance(result["ttlMs"], int) and result["cacheScope"] in ("public", "private")


async def test_calls_prompts_and_completions_get_a_result_type_and_no_hints(
    client: httpx.AsyncClient,
) -> None:
    """S/basic/index.mdx: resultType on every result; hints only where cacheable."""
    call = modern(4, "tools/call", {"name": "toolbox__add", "arguments": {"a": 2, "b": 3}})
    result = (await send(client, call)).json()["result"]
    assert result["resultType"] == "complete" and "ttlMs" not in result
    assert result["content"][0]["text"] == "5"
    prompt = modern(
        5, "prompts/get", {"name": "toolbox__code_review", "arguments": {"code": "x = 1"}}
    )
    assert (await send(client, prompt)).json()["result"]["resultType"] == "complete"
    complete = modern(
        6,
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "toolbox__code_review"},
            "argument": {"name": "language", "value": "py"},
        },
    )
    response = await send(client, complete)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["resultType"] == "complete"


async def test_a_legacy_session_header_on_a_modern_request_is_ignored_and_not_echoed(
    client: httpx.AsyncClient,
) -> None:
    """streamable-http.mdx: a modern server never mints or echoes Mcp-Session-Id."""
    session = await initialize(client)
    response = await send(client, modern(7, "tools/list"), **{"Mcp-Session-Id": session.id})
    assert response.status_code == 200
    assert "mcp-session-id" not in response.headers


# -- envelope and header validation ----------------------------------------------


async def test_envelope_and_standard_header_failures_have_their_codes_and_statuses(
    client: httpx.AsyncClient,
) -> None:
    """Order: envelope (-32602), headers (-32020), version (-32022); all 400."""
    bare = request(8, "tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}})
    response = await send(client, bare)
    assert (response.status_code, error_of(response)["code"]) == (400, -32602)

    message = modern(9, "tools/list")
    headers = modern_headers(message)
    del headers["MCP-Protocol-Version"]
    response = await post(client, message, headers=headers)
    assert (response.status_code, error_of(response)["code"]) == (400, -32020)

    response = await send(client, message, **{"MCP-Protocol-Version": "2025-11-25"})
    assert (response.status_code, error_of(response)["code"]) == (400, -32020)

    response = await send(client, message, **{"Mcp-Method": "prompts/list"})
    assert (response.status_code, error_of(response)["code"]) == (400, -32020)

    future = modern(10, "tools/list", **{"io.modelcontextprotocol/protocolVersion": "2099-01-01"})
    response = await send(client, future, **{"MCP-Protocol-Version": "2099-01-01"})
    error = error_of(response)
    assert (response.status_code, error["code"]) == (400, -32022)
    assert MODERN in error["data"]["supported"] and error["data"]["requested"] == "2099-01-01"
    assert "2025-11-25" in error["data"]["supported"]  # dual era: a client may fall back

    for broken in (request(20, "tools/list"), request(21, "tools/list", {"_meta": {}})):
        response = await send(client, broken)  # modern headers, no session, no envelope
        assert (response.status_code, error_of(response)["code"]) == (400, -32602)
        assert response.json()["id"] == broken["id"]

    noisy = modern(11, "tools/list", **{"io.modelcontextprotocol/logLevel": "chatty"})
    response = await send(client, noisy)
    assert (response.status_code, error_of(response)["code"]) == (400, -32602)


async def test_mcp_name_is_required_and_may_come_base64_encoded(
    client: httpx.AsyncClient,
) -> None:
    """streamable-http.mdx §Value Encoding: the =?base64?...?= form decodes to the name."""
    call = modern(12, "tools/call", {"name": "toolbox__echo", "arguments": {"text": "hi"}})
    headers = modern_headers(call)
    del headers["Mcp-Name"]
    response = await post(client, call, headers=headers)
    assert (response.status_code, error_of(response)["code"]) == (400, -32020)
    encoded = "=?base64?" + base64.b64encode(b"toolbox__echo").decode() + "?="
    response = await send(client, call, **{"Mcp-Name": encoded})
    assert response.status_code == 200, response.text
    response = await send(client, call, **{"Mcp-Name": "toolbox__add"})
    assert (response.status_code, error_of(response)["code"]) == (400, -32020)


async def test_mcp_param_headers_follow_the_public_tools_schema(
    client: httpx.AsyncClient,
) -> None:
    """x-mcp-header: each annotated argument needs its Mcp-Param-* header, matching."""
    args = {"region": "eu-west", "count": 3, "verbose": True}
    call = modern(13, "tools/call", {"name": "headers__lookup", "arguments": args})
    good = {"Mcp-Param-Region": "eu-west", "Mcp-Param-Count": "3", "Mcp-Param-Verbose": "true"}
    response = await send(client, call, **good)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["content"][0]["text"] == "eu-west:3:True"
    response = await send(client, call, **{**good, "Mcp-Param-Count": "3.0"})
    assert response.status_code == 200, response.text  # integers compare numerically
    for bad in ({"Mcp-Param-Region": "us-east"}, {"Mcp-Param-Verbose": "false"}):
        response = await send(client, call, **{**good, **bad})
        assert (response.status_code, error_of(response)["code"]) == (400, -32020)
    missing = {k: v for k, v in good.items() if k != "Mcp-Param-Region"}
    response = await send(client, call, **missing)
    assert (response.status_code, error_of(response)["code"]) == (400, -32020)


async def test_a_backend_needing_an_undeclared_capability_fails_the_call_with_32021(
    client: httpx.AsyncClient,
) -> None:
    """S/basic/index.mdx: a capability the request did not declare is -32021, HTTP 400."""
    call = modern(22, "tools/call", {"name": "headers__ask", "arguments": {}})
    response = await send(client, call)
    error = error_of(response)
    assert (response.status_code, error["code"]) == (400, -32021)
    assert error["data"]["requiredCapabilities"] == {"elicitation": {}}
    assert response.json()["id"] == 22
    # The gateway is not left holding anything: the next call works.
    add = modern(23, "tools/call", {"name": "toolbox__add", "arguments": {"a": 1, "b": 1}})
    assert (await send(client, add)).status_code == 200


# -- methods, GET and DELETE ----------------------------------------------------


@pytest.mark.parametrize(
    "method",
    [
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "initialize",
        "x/y",
    ],
)
async def test_removed_and_unknown_methods_are_404_with_method_not_found(
    client: httpx.AsyncClient, method: str
) -> None:
    """streamable-http.mdx: 404 plus -32601, the body telling it from a legacy 404."""
    response = await send(client, modern(14, method, {"level": "info"}))
    assert response.status_code == 404
    assert error_of(response)["code"] == -32601
    assert "mcp-session-id" not in response.headers


async def test_get_and_delete_from_a_modern_client_are_405_while_sessions_keep_them(
    client: httpx.AsyncClient,
) -> None:
    """streamable-http.mdx: a modern client has no GET stream and no session."""
    for verb in ("GET", "DELETE"):
        response = await client.request(
            verb, "/mcp", headers={"Accept": "text/event-stream", "MCP-Protocol-Version": MODERN}
        )
        assert response.status_code == 405, verb
    session = await initialize(client)
    response = await client.delete("/mcp", headers=mcp_headers(session))
    assert response.status_code == 200


async def test_a_modern_notification_is_accepted(client: httpx.AsyncClient) -> None:
    """A modern client's notification (no session) is 202, never a session error."""
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    response = await post(client, note, headers=mcp_headers(MCP_Protocol_Version=MODERN))
    assert response.status_code == 202


# -- logging, progress, cancellation -----------------------------------------------


async def test_log_messages_only_when_asked_and_at_the_level_asked(
    client: httpx.AsyncClient,
) -> None:
    """S/server/utilities/logging.mdx: no logLevel, no messages; else at or above it."""
    call = modern(15, "tools/call", {"name": "headers__chatty", "arguments": {}})
    response = await send(client, call)
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["result"]["content"][0]["text"] == "talked"

    call = modern(
        16,
        "tools/call",
        {"name": "headers__chatty", "arguments": {}},
        **{"io.modelcontextprotocol/logLevel": "info"},
    )
    response = await send(client, call)
    assert response.headers["content-type"].startswith("text/event-stream")
    assert "mcp-session-id" not in response.headers
    messages = sse_messages(response)
    logs = [m["params"] for m in messages if m.get("method") == "notifications/message"]
    assert [entry["level"] for entry in logs] == ["info", "warning"]
    assert messages[-1]["id"] == 16
    assert messages[-1]["result"]["resultType"] == "complete"


async def test_progress_comes_on_the_requests_stream_under_its_token(
    client: httpx.AsyncClient,
) -> None:
    """S/basic/patterns/progress.mdx: _meta.progressToken opts in."""
    call = modern(
        17,
        "tools/call",
        {"name": "headers__progress", "arguments": {"steps": 3}},
        progressToken="tok-1",
    )
    response = await send(client, call)
    messages = sse_messages(response)
    progress = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    assert [p["progress"] for p in progress] == [1, 2, 3]
    assert {p["progressToken"] for p in progress} == {"tok-1"}
    assert messages[-1]["result"]["content"][0]["text"] == "done"


async def test_closing_the_response_stream_cancels_the_call(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """S/basic/patterns/cancellation.mdx: on HTTP a client cancels by closing the stream;
    the backend gets notifications/cancelled for its own id."""
    log = tmp_path / "headers.log"
    argv = recorded(log, python_server_command("headers"))
    running = await start_gateway(nursery, gateway_config([stdio_backend("headers", argv)]))
    recorder = Recorder(log)
    call = modern(18, "tools/call", {"name": "headers__sleep", "arguments": {"seconds": 30}})
    async with http_client(running) as client:
        with trio.fail_after(WAIT):
            async with trio.open_nursery() as calls:
                calls.start_soon(send, client, call)
                forwarded = await recorder.wait_sent(forwarded_call("sleep", seconds=30))
                calls.cancel_scope.cancel()  # the host closes the response stream
            cancelled = await recorder.wait_cancelled(forwarded["id"])
        assert cancelled["params"]["requestId"] == forwarded["id"]
        response = await send(client, modern(19, "tools/list"))
        assert response.status_code == 200
