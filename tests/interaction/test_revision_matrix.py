"""Issue 6: every host revision against every backend revision.

Each leg negotiates on its own. Hosts here are raw HTTP clients that ask for
one revision each; backends are the bundled toolbox demo pinned to one
revision each (``DEMO_PROTOCOL_VERSION``). For every pair: list, call,
structured results (kept or folded into text by the host's revision), fields
the host's revision does not define (left out), the host's own
``notifications/initialized``, and a ping round trip.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import httpx
import pytest
import trio

from gateway.protocol.versions import SUPPORTED_VERSIONS
from tests.harness import Running, gateway_config, initialize_message, start_gateway, stdio_backend
from tests.servers.paths import SERVERS_DIR

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def _backend(version: str) -> dict[str, Any]:
    name = "v" + version.replace("-", "")
    return stdio_backend(
        name,
        [sys.executable, "-m", "mcp_gateway_demo.toolbox"],
        env={"DEMO_PROTOCOL_VERSION": version},
    )


@pytest.fixture(name="running")
async def _running(nursery: trio.Nursery) -> Running:
    return await start_gateway(nursery, gateway_config([_backend(v) for v in SUPPORTED_VERSIONS]))


class _Host:
    def __init__(self, http: httpx.AsyncClient, url: str, version: str) -> None:
        self.http, self.url, self.version = http, url, version
        self.headers = dict(ACCEPT)
        self.next_id = 0

    async def post(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            body["params"] = params
        response = await self.http.post(self.url, headers=self.headers, content=json.dumps(body))
        assert response.status_code == 200, response.text
        message = response.json()
        assert "error" not in message, message
        return message["result"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("host_version", SUPPORTED_VERSIONS)
async def test_a_host_on_each_revision_uses_backends_on_every_revision(
    running: Running, host_version: str
) -> None:
    """Spec (issue 6): list and call work for every (host, backend) revision pair."""
    gateway_versions = {
        b.name: b.info.protocol_version
        for b in running.gateway.pool.backends.values()
        if b.info is not None
    }
    assert sorted(gateway_versions.values()) == sorted(SUPPORTED_VERSIONS)
    async with httpx.AsyncClient() as http:
        init = await http.post(
            running.url,
            headers=ACCEPT,
            content=json.dumps(initialize_message("m", msg_id=0, revision=host_version)),
        )
        assert init.json()["result"]["protocolVersion"] == host_version
        host = _Host(http, running.url, host_version)
        host.headers["mcp-session-id"] = init.headers["mcp-session-id"]
        if host_version >= "2025-06-18":
            host.headers["mcp-protocol-version"] = host_version
        assert (
            await http.post(
                running.url,
                headers=host.headers,
                content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
            )
        ).status_code == 202
        tools = (await host.post("tools/list"))["tools"]
        for backend in gateway_versions:
            names = {t["name"] for t in tools}
            assert f"{backend}__add" in names
            result = await host.post(
                "tools/call", {"name": f"{backend}__stats", "arguments": {"numbers": [1, 2, 3]}}
            )
            text = [b["text"] for b in result["content"] if b["type"] == "text"]
            assert text and '"mean"' in text[0].replace(" ", "")
            if host_version < "2025-06-18":
                assert "structuredContent" not in result
            else:
                assert result["structuredContent"]["count"] == 3
        for tool in tools:
            if host_version < "2025-06-18":
                assert "outputSchema" not in tool and "title" not in tool
            if host_version < "2025-03-26":
                assert "annotations" not in tool
        assert await host.post("ping") == {}


def _short(version: str) -> str:
    return version.replace("-", "")


@pytest.fixture(name="chatty")
async def _chatty(nursery: trio.Nursery) -> Running:
    """Per revision: the notes demo (sends list_changed) and a progress sender."""
    backends = []
    for version in SUPPORTED_VERSIONS:
        backends.append(
            stdio_backend(
                f"notes{_short(version)}",
                [sys.executable, "-m", "mcp_gateway_demo.notes"],
                env={"DEMO_PROTOCOL_VERSION": version},
            )
        )
        backends.append(
            stdio_backend(
                f"prog{_short(version)}",
                [
                    sys.executable,
                    str(SERVERS_DIR / "misbehaving.py"),
                    "--protocol-version",
                    version,
                ],
            )
        )
    return await start_gateway(nursery, gateway_config(backends, notifications={"debounce": 0.02}))


def _sse_messages(body: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize("host_version", SUPPORTED_VERSIONS)
async def test_progress_and_notifications_cross_every_revision_pair(
    chatty: Running, host_version: str
) -> None:
    """Spec (issue 6): progress and a list_changed notification work for every pair."""
    async with httpx.AsyncClient(timeout=10) as http:
        init = await http.post(
            chatty.url,
            headers=ACCEPT,
            content=json.dumps(initialize_message("m", msg_id=0, revision=host_version)),
        )
        headers = {**ACCEPT, "mcp-session-id": init.headers["mcp-session-id"]}
        if host_version >= "2025-06-18":
            headers["mcp-protocol-version"] = host_version
        note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        assert (await http.post(chatty.url, headers=headers, content=note)).status_code == 202
        for version in SUPPORTED_VERSIONS:
            call = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {
                    "name": f"prog{_short(version)}__progress_back",
                    "arguments": {},
                    "_meta": {"progressToken": f"tok-{version}"},
                },
            }
            response = await http.post(chatty.url, headers=headers, content=json.dumps(call))
            assert response.headers["content-type"].startswith("text/event-stream")
            messages = _sse_messages(response.text)
            progress = [
                m["params"] for m in messages if m.get("method") == "notifications/progress"
            ]
            assert [p["progress"] for p in progress] == [5, 6], (version, progress)
            assert {p["progressToken"] for p in progress} == {f"tok-{version}"}
            assert messages[-1]["id"] == 1 and "result" in messages[-1]
        stream_headers = {**headers, "accept": "text/event-stream"}
        with trio.fail_after(10):
            async with http.stream("GET", chatty.url, headers=stream_headers) as stream:
                lines = stream.aiter_lines()
                for version in SUPPORTED_VERSIONS:
                    add = {
                        "jsonrpc": "2.0",
                        "id": 2,
                        "method": "tools/call",
                        "params": {
                            "name": f"notes{_short(version)}__add_note",
                            "arguments": {"title": f"from {host_version}", "text": "x"},
                        },
                    }
                    assert (
                        await http.post(chatty.url, headers=headers, content=json.dumps(add))
                    ).status_code == 200
                    async for line in lines:
                        if line.startswith("data: "):
                            event = json.loads(line[6:])
                            if event["method"] == "notifications/resources/list_changed":
                                break
