"""The access policy end to end over HTTP: static tokens, JWT groups, both eras, search, reload.

A real gateway in front of the official-SDK peers ``alpha`` and ``beta``,
with two static tokens and HS256 JWTs carrying a ``groups`` claim:

- ``ci`` (static) opens ``default`` and sees ``alpha__echo`` and ``alpha__add``;
- a JWT whose ``groups`` hold ``platform`` opens every profile and sees all;
- nobody sees ``*fail*`` (deny wins);
- ``ops`` (static) and a JWT without ``platform`` match no granting rule.

Each table row is asked as a legacy session (``initialize`` then a request
with ``Mcp-Session-Id``) and as a modern (2026-07-28) request.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Final

import httpx
import jwt
import pytest
import trio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from structlog.testing import capture_logs

from gateway.config import parse
from gateway.runtime.app import reload_config
from tests.frontend.test_modern_http import envelope, modern_headers
from tests.harness import (
    ENGINE,
    Running,
    initialize_message,
    sdk_backend,
    start_gateway,
    start_up_told,
)

SECRET: Final = "jwt-shared-secret-0123456789abcdef0123"
AUDIENCE: Final = "http://gw.test/mcp"
CI: Final = "token-of-ci-0123456789"
OPS: Final = "token-of-ops-0123456789"
HEADERS: Final = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
}
POLICY: Final[list[dict[str, Any]]] = [
    {
        "name": "ci",
        "tokens": ["ci"],
        "profiles": ["default"],
        "tools": {"allow": ["alpha__echo", "alpha__add"]},
    },
    {"name": "platform", "claims": {"groups": ["platform"]}, "profiles": ["*"]},
    {"name": "no-failures", "everyone": True, "tools": {"deny": ["*fail*"]}},
]
ALL_BUT_FAIL: Final = [
    "alpha__add",
    "alpha__echo",
    "alpha__embed",
    "alpha__pid",
    "alpha__progress",
    "alpha__sleep",
    "beta__echo",
    "beta__multiply",
]


def document(policy: list[dict[str, Any]] | None = POLICY) -> dict[str, Any]:
    """The gateway's config file as a mapping."""
    doc: dict[str, Any] = {
        "server": {"host": "127.0.0.1", "port": 0, "engine": ENGINE, "public_url": AUDIENCE},
        "auth": {"tokens": {"ci": CI, "ops": OPS}, "jwt": {"secret": SECRET}},
        "backends": [sdk_backend("alpha"), sdk_backend("beta")],
        "profiles": [
            {"name": "math", "backends": {"include": ["beta"]}},
            {"name": "find", "mode": "search"},
        ],
    }
    if policy is not None:
        doc["policy"] = policy
    return doc


def token(subject: str, groups: list[str]) -> str:
    """An HS256 access token for the gateway, with a ``groups`` claim."""
    now = int(time.time())
    # Minted once, at collection: valid for a day, since a whole suite on a
    # loaded machine can take longer than any short lifetime (CI saw 401s).
    claims = {"sub": subject, "aud": AUDIENCE, "iat": now, "exp": now + 86_400, "groups": groups}
    return jwt.encode(claims, SECRET, algorithm="HS256")


PLATFORM: Final = token("alice", ["platform", "dev"])
DEV: Final = token("bob", ["dev"])


@pytest.fixture(name="running")
async def _running(nursery: trio.Nursery) -> Running:
    running = await start_gateway(nursery, parse(json.dumps(document()), env={}))
    # A session that must hear nothing must not hear of the backends coming up.
    await start_up_told(running.gateway)
    return running


def _headers(bearer: str, **extra: str) -> dict[str, str]:
    return {**HEADERS, "authorization": f"Bearer {bearer}", **extra}


def _body(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC response, whether sent as JSON or as the last SSE event."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        events = [
            json.loads(line[len("data: ") :])
            for line in response.text.splitlines()
            if line.startswith("data: ")
        ]
        return [e for e in events if "id" in e][-1]
    return response.json()


class Legacy:
    """One legacy (handshake) session of one bearer on one profile path."""

    def __init__(self, http: httpx.AsyncClient, url: str, bearer: str) -> None:
        self.http, self.url, self.bearer = http, url, bearer
        self.session = ""
        self._ids = iter(range(2, 10_000))

    async def open(self) -> httpx.Response:
        """``initialize``; keeps the session id when there is one."""
        init = initialize_message("policy-test")
        response = await self.http.post(self.url, headers=_headers(self.bearer), json=init)
        self.session = response.headers.get("mcp-session-id", "")
        if self.session:
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            headers = _headers(self.bearer, **{"mcp-session-id": self.session})
            done = await self.http.post(self.url, headers=headers, json=initialized)
            assert done.status_code == 202
        return response

    async def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request on the session; the JSON-RPC response."""
        message = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        headers = _headers(self.bearer, **{"mcp-session-id": self.session})
        response = await self.http.post(self.url, headers=headers, json=message)
        assert response.status_code == 200, response.text
        return _body(response)


async def modern_ask(
    http: httpx.AsyncClient, url: str, bearer: str, method: str, params: dict[str, Any]
) -> httpx.Response:
    """One 2026-07-28 request: no session, the envelope in ``_meta``."""
    message = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": method,
        "params": {**params, "_meta": envelope()},
    }
    headers = {**_headers(bearer), **modern_headers(message)}
    return await http.post(url, headers=headers, json=message)


def _call(name: str) -> dict[str, Any]:
    args = {"text": "hi"} if name.endswith("echo") else {}
    if name.endswith("add"):
        args = {"a": 1, "b": 2}
    return {"name": name, "arguments": args}


# (bearer, tool) -> allowed, or denied exactly as an unknown tool.
CALLS: Final = [
    (CI, "alpha__echo", True),
    (CI, "alpha__add", True),
    (CI, "alpha__pid", False),
    (CI, "beta__echo", False),
    (CI, "alpha__fail", False),
    (PLATFORM, "alpha__pid", True),
    (PLATFORM, "beta__echo", True),
    (PLATFORM, "alpha__fail", False),
]


async def test_the_policy_table_over_http_on_both_eras(running: Running) -> None:
    """Gateway choice (issue 16 item 3).

    principal x tool x era: allowed answers; hidden is -32602 "Unknown tool", as unknown is.
    """
    async with httpx.AsyncClient(timeout=30) as http:
        sessions = {}
        for bearer in (CI, PLATFORM):
            legacy = Legacy(http, running.url, bearer)
            assert (await legacy.open()).status_code == 200
            sessions[bearer] = legacy
        for bearer, tool, allowed in CALLS:
            legacy_reply = await sessions[bearer].ask("tools/call", _call(tool))
            modern_reply = _body(
                await modern_ask(http, running.url, bearer, "tools/call", _call(tool))
            )
            for reply in (legacy_reply, modern_reply):
                if allowed:
                    assert "result" in reply, (tool, reply)
                else:
                    assert reply["error"]["code"] == -32602, (tool, reply)
                    assert reply["error"]["message"] == f"Unknown tool: {tool}"
        unknown = await sessions[CI].ask("tools/call", _call("alpha__nothing"))
        assert unknown["error"] == {"code": -32602, "message": "Unknown tool: alpha__nothing"}
        # Lists, on both eras.
        for bearer, names in ((CI, ["alpha__add", "alpha__echo"]), (PLATFORM, ALL_BUT_FAIL)):
            listed = await sessions[bearer].ask("tools/list", {})
            assert [t["name"] for t in listed["result"]["tools"]] == names
            modern = _body(await modern_ask(http, running.url, bearer, "tools/list", {}))
            assert [t["name"] for t in modern["result"]["tools"]] == names
            assert modern["result"]["cacheScope"] == "private"
        # Prompts and resources: ci's rule allows every prompt and resource of default.
        prompt = await sessions[CI].ask(
            "prompts/get", {"name": "alpha__greet", "arguments": {"name": "ci"}}
        )
        assert prompt["result"]["messages"]
        read = await sessions[CI].ask("resources/read", {"uri": "alpha+alpha://readme"})
        assert read["result"]["contents"]


@pytest.mark.parametrize(
    ("bearer", "path", "status"),
    [
        (CI, "", 200),
        (CI, "/math", 403),
        (PLATFORM, "/math", 200),
        (PLATFORM, "/find", 200),
        (OPS, "", 403),
        (DEV, "", 403),
    ],
)
async def test_opening_a_profile_the_policy_does_not_grant_is_403_on_both_eras(
    running: Running, bearer: str, path: str, status: int
) -> None:
    """Gateway choice (issue 16 item 3).

    403 with a JSON-RPC error body, for legacy initialize and for a modern request alike.
    """
    async with httpx.AsyncClient(timeout=30) as http:
        with capture_logs() as logs:
            legacy = await Legacy(http, running.url + path, bearer).open()
            modern = await modern_ask(http, running.url + path, bearer, "tools/list", {})
            metrics = (await http.get(running.base_url + "/metrics")).text
        assert legacy.status_code == status
        assert modern.status_code == status
        refused = 'mcp_gateway_rejected_requests_total{reason="policy"} 2.0'
        assert (refused in metrics) is (status == 403)
        if status == 403:
            for response in (legacy, modern):
                error = response.json()["error"]
                assert error["code"] == -32600
                profile = path.strip("/") or "default"
                assert error["message"] == (
                    "Forbidden: the access policy does not let this caller open "
                    f"the profile {profile!r}"
                )
            denied = [e for e in logs if e["event"] == "policy.denied"]
            assert len(denied) == 2
            assert denied[0]["profile"] == (path.strip("/") or "default")
            assert all(bearer not in json.dumps(e, default=str) for e in logs)


async def test_the_official_client_reaches_exactly_what_the_policy_grants(
    running: Running,
) -> None:
    """Gateway choice (issue 16 item 3).

    The SDK client with the ci token: exactly its two tools; a hidden one is an error.
    """
    async with (
        httpx.AsyncClient(headers={"Authorization": f"Bearer {CI}"}) as http,
        streamable_http_client(running.url, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = await session.list_tools()
        assert [t.name for t in tools.tools] == ["alpha__add", "alpha__echo"]
        result = await session.call_tool("alpha__echo", {"text": "hi"})
        assert not result.isError
        with pytest.raises(McpError, match="Unknown tool: alpha__pid"):
            await session.call_tool("alpha__pid", {})


async def test_search_mode_finds_and_calls_only_what_the_policy_grants(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice (issue 16 item 3).

    gateway__search_tools hides what the caller may not see; gateway__call_tool refuses it.
    """
    policy = [
        {"claims": {"groups": ["platform"]}, "profiles": ["find"]},
        {"claims": {"groups": ["dev"]}, "tools": {"deny": ["beta__*"]}},
    ]
    running = await start_gateway(nursery, parse(json.dumps(document(policy)), env={}))
    async with httpx.AsyncClient(timeout=30) as http:
        legacy = Legacy(http, running.url + "/find", PLATFORM)
        assert (await legacy.open()).status_code == 200
        found = await legacy.ask(
            "tools/call",
            {"name": "gateway__search_tools", "arguments": {"query": "echo text", "limit": 50}},
        )
        names = [t["name"] for t in found["result"]["structuredContent"]["tools"]]
        assert "alpha__echo" in names
        assert not [n for n in names if n.startswith("beta__")]
        with capture_logs() as logs:
            refused = await legacy.ask(
                "tools/call",
                {
                    "name": "gateway__call_tool",
                    "arguments": {"name": "beta__echo", "arguments": {"text": "x"}},
                },
            )
        assert refused["result"]["isError"] is True
        assert "Unknown tool: beta__echo" in refused["result"]["content"][0]["text"]
        denied = [e for e in logs if e["event"] == "policy.denied"]
        assert [(e["item"], e["via"]) for e in denied] == [("beta__echo", "gateway__call_tool")]
        allowed = await legacy.ask(
            "tools/call",
            {
                "name": "gateway__call_tool",
                "arguments": {"name": "alpha__echo", "arguments": {"text": "x"}},
            },
        )
        assert allowed["result"].get("isError") is not True


async def test_a_reloaded_policy_applies_to_open_sessions_and_tells_them(
    running: Running, tmp_path: Path
) -> None:
    """Gateway choice (issue 16 item 3).

    SIGHUP's reload: ``policy`` in config.reload.applied; the open session's view changes
    at once and it hears tools/list_changed on its GET stream; a session whose view did not
    change hears nothing."""
    async with httpx.AsyncClient(timeout=30) as http:
        ci = Legacy(http, running.url, CI)
        assert (await ci.open()).status_code == 200
        platform = Legacy(http, running.url, PLATFORM)
        assert (await platform.open()).status_code == 200
        heard: dict[str, list[str]] = {CI: [], PLATFORM: []}
        streams_open = trio.Event()
        ci_told = trio.Event()
        opened = 0

        async def stream(legacy: Legacy) -> None:
            nonlocal opened
            headers = _headers(
                legacy.bearer, **{"mcp-session-id": legacy.session, "accept": "text/event-stream"}
            )
            async with http.stream("GET", running.url, headers=headers) as response:
                assert response.status_code == 200
                opened += 1
                if opened == 2:
                    streams_open.set()
                async for line in response.aiter_lines():
                    if line.startswith("data: "):
                        heard[legacy.bearer].append(json.loads(line[6:])["method"])
                        if legacy.bearer == CI:
                            ci_told.set()

        platform_session = running.gateway.clients.get(platform.session)
        assert platform_session is not None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stream, ci)
            nursery.start_soon(stream, platform)
            with trio.fail_after(10):
                await streams_open.wait()
            sent_before = platform_session.outbox.last_id
            path = tmp_path / "gateway.yaml"
            widened = [{"tokens": ["ci"], "profiles": ["default"]}, POLICY[1], POLICY[2]]
            path.write_text(json.dumps(document(widened)))
            with capture_logs() as logs:
                assert await reload_config(running.gateway, str(path)) is True
            applied = [e for e in logs if e["event"] == "config.reload.applied"]
            assert applied[0]["changed"] == ["policy"]
            listed = await ci.ask("tools/list", {})
            assert [t["name"] for t in listed["result"]["tools"]] == ALL_BUT_FAIL
            with trio.fail_after(10):
                await ci_told.wait()
            # One pass of the coalescer sends to every client it concerns at
            # once: by now the other session's outbox would hold it too.
            assert platform_session.outbox.last_id == sent_before
            nursery.cancel_scope.cancel()
        assert "notifications/tools/list_changed" in heard[CI]
        assert heard[PLATFORM] == []
        # And back: a policy of no rules denies everything, at once.
        path.write_text(json.dumps(document([])))
        assert await reload_config(running.gateway, str(path)) is True
        response = await http.post(
            running.url,
            headers=_headers(CI, **{"mcp-session-id": ci.session}),
            json={"jsonrpc": "2.0", "id": 99, "method": "tools/list", "params": {}},
        )
        assert response.status_code == 403


@pytest.mark.parametrize(("bearer", "status"), [(OPS, 403), (DEV, 403)])
async def test_the_legacy_sse_endpoint_serves_default_only_to_who_may_open_it(
    running: Running, bearer: str, status: int
) -> None:
    """Gateway choice (issue 16 item 3).

    /sse and /messages (2024-11-05) serve ``default``: 403 for a caller not granted it.
    """
    async with httpx.AsyncClient(timeout=30) as http:
        stream = await http.get(
            running.base_url + "/sse",
            headers={"authorization": f"Bearer {bearer}", "accept": "text/event-stream"},
        )
        posted = await http.post(
            running.base_url + "/messages?session_id=x",
            headers={"authorization": f"Bearer {bearer}", "content-type": "application/json"},
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        )
    assert (stream.status_code, posted.status_code) == (status, status)
    assert stream.json()["error"]["message"] == (
        "Forbidden: the access policy does not let this caller open the profile 'default'"
    )


async def test_the_legacy_sse_endpoint_opens_for_a_caller_granted_default(
    running: Running,
) -> None:
    """Gateway choice (issue 16 item 3).

    The ci token may open ``default``: its /sse stream starts (200, the endpoint event).
    """
    async with (
        httpx.AsyncClient(timeout=30) as http,
        http.stream(
            "GET",
            running.base_url + "/sse",
            headers={"authorization": f"Bearer {CI}", "accept": "text/event-stream"},
        ) as stream,
    ):
        assert stream.status_code == 200
        async for line in stream.aiter_lines():
            assert line == "event: endpoint"
            break
