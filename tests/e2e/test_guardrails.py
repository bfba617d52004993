"""Guardrails on real peers, in both host eras (issue 29).

Behind one gateway: the reference server (``everything``) and the SDK test
server alpha behind the recorder, so what the gateway really sent it can be
read. The handshake-era host is the official ``mcp`` client; the 2026-07-28
host posts the envelope by hand. The external policy service is the
reference implementation under ``deploy/policy-service`` on loopback; a dead
port stands for a service that is down, and a tiny fake for the faults the
reference service never makes (slow, garbage).
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any, Final

import httpx
import pytest
import trio
from mcp.shared.exceptions import McpError
from mcp.types import CallToolResult, TextContent

from gateway.config import GatewayConfig, parse
from gateway.runtime.app import reload_config
from tests.frontend.test_modern_http import modern, modern_headers, sse_messages
from tests.guardrails.test_external import _service_url as _service_url  # the reference service
from tests.harness import (
    Running,
    everything_backend,
    open_client,
    start_gateway,
    stdio_backend,
)
from tests.interaction.test_beside_a_call import Recorder
from tests.redis_server import free_port
from tests.servers.paths import everything_command, python_server_command
from tests.servers.recorder import recorded

pytestmark = [
    pytest.mark.node,
    pytest.mark.skipif(everything_command() is None, reason="npm ci --prefix tests/node"),
]

# detect-secrets' AWS detector finds the key id; the widening takes its secret too.
AWS_PAIR: Final = "id AKIAIOSFODNN7EXAMPLE secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
WAIT: Final = 15.0  # real processes on 2 shared cores
SLOW_TIMEOUT: Final = 0.5


async def _fake_policy(stream: trio.SocketStream, answer: bytes | None) -> None:
    """Read one request; answer ``answer`` as a 200, or never answer (None: slow)."""
    data = b""
    with trio.move_on_after(WAIT):
        while b"\r\n\r\n" not in data:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            data += chunk
        if answer is None:
            await trio.sleep(WAIT)
            return
        head = f"HTTP/1.1 200 OK\r\ncontent-length: {len(answer)}\r\nconnection: close\r\n\r\n"
        await stream.send_all(head.encode() + answer)
    await stream.aclose()


async def fake_policy_service(nursery: trio.Nursery, answer: bytes | None) -> str:
    """A policy service on loopback that answers ``answer`` (None: too slow); its URL."""

    async def handler(stream: trio.SocketStream) -> None:
        await _fake_policy(stream, answer)

    listeners = await nursery.start(partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
    port = listeners[0].socket.getsockname()[1]
    return f"http://127.0.0.1:{port}/decide"


def external(url: str, fail: str, **extra: Any) -> dict[str, Any]:
    """An external filter on requests and results."""
    return {"type": "external", "url": url, "fail": fail, "at": ["requests", "results"], **extra}


def guarded_config(log: Path, profiles: list[dict[str, Any]]) -> GatewayConfig:
    """Alpha (recorded, with an arguments filter), everything, secrets redacted everywhere."""
    alpha = stdio_backend(
        "alpha",
        recorded(log, python_server_command("alpha")),
        filters=[{"type": "arguments", "name": "no-sql", "deny": ["(?i)drop\\s+table"]}],
    )
    document = {
        "server": {"host": "127.0.0.1", "port": 0},
        "backends": [alpha, everything_backend()],
        "filters": [{"type": "secrets", "name": "secrets", "at": ["results"]}],
        "profiles": [{"name": "default"}, *profiles],
    }
    return parse(json.dumps(document), env={})


@pytest.fixture(name="urls")
async def _urls(nursery: trio.Nursery, service_url: str) -> dict[str, str]:
    return {
        "reference": service_url,
        "down": f"http://127.0.0.1:{free_port()}/decide",
        "slow": await fake_policy_service(nursery, None),
        "garbage": await fake_policy_service(nursery, b"<html>not a decision</html>"),
    }


@pytest.fixture(name="setup")
async def _setup(
    nursery: trio.Nursery, tmp_path: Path, urls: dict[str, str]
) -> tuple[Running, Recorder]:
    bearer = {"authorization": "Bearer t0ken"}
    profiles = [
        {"name": "reference", "filters": [external(urls["reference"], "closed", headers=bearer)]},
        {"name": "down-open", "filters": [external(urls["down"], "open", name="dlp")]},
        {"name": "down-closed", "filters": [external(urls["down"], "closed", name="dlp")]},
        {
            "name": "slow",
            "filters": [external(urls["slow"], "closed", name="dlp", timeout=SLOW_TIMEOUT)],
        },
        {"name": "garbage-open", "filters": [external(urls["garbage"], "open", name="dlp")]},
        {"name": "garbage-closed", "filters": [external(urls["garbage"], "closed", name="dlp")]},
    ]
    log = tmp_path / "alpha.log"
    running = await start_gateway(nursery, guarded_config(log, profiles))
    return running, Recorder(log)


async def modern_post(
    running: Running, method: str, params: dict[str, Any], profile: str = ""
) -> dict[str, Any]:
    """One 2026-07-28 request to the main path or a profile's; its JSON-RPC response."""
    message = modern(1, method, params)
    path = running.gateway.config.server.path + (f"/{profile}" if profile else "")
    async with httpx.AsyncClient(base_url=running.base_url, trust_env=False, timeout=WAIT) as http:
        response = await http.post(path, json=message, headers=modern_headers(message))
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        answer: dict[str, Any] = sse_messages(response)[-1]
        return answer
    answer = response.json()
    return answer


def texts(result: dict[str, Any]) -> str:
    """The text blocks of a raw tools/call result, joined."""
    return "\n".join(b.get("text", "") for b in result.get("content", []))


async def legacy_call(
    running: Running, tool: str, arguments: dict[str, Any], profile: str = ""
) -> CallToolResult | McpError:
    """One tools/call from the official client; the result or the McpError."""
    url = running.url + (f"/{profile}" if profile else "")
    async with open_client(url) as client:
        try:
            return await client.call_tool(tool, arguments)
        except McpError as exc:
            return exc


# --- results: a secret is redacted before the host sees it -------------------


async def test_a_secret_in_a_result_is_redacted_for_a_handshake_era_host(
    setup: tuple[Running, Recorder],
) -> None:
    """Issue 29: the reference server echoes a key pair; the official client sees neither half."""
    running, _ = setup
    result = await legacy_call(running, "everything__echo", {"message": AWS_PAIR})
    assert not isinstance(result, McpError)
    text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
    assert "[redacted: AWS Access Key]" in text
    assert "AKIAIOSFODNN7EXAMPLE" not in text and "wJalrXUtnFEMI" not in text
    assert result.isError is False


async def test_a_secret_in_a_result_is_redacted_for_a_2026_07_28_host(
    setup: tuple[Running, Recorder],
) -> None:
    """Issue 29: the same redaction on the stateless path."""
    running, _ = setup
    params = {"name": "everything__echo", "arguments": {"message": AWS_PAIR}}
    result = (await modern_post(running, "tools/call", params))["result"]
    assert "[redacted: AWS Access Key]" in texts(result)
    assert "AKIAIOSFODNN7EXAMPLE" not in json.dumps(result)
    assert "wJalrXUtnFEMI" not in json.dumps(result)


# --- requests: a denied argument never reaches the backend -------------------


def _sent_echoes(recorder: Recorder) -> list[str]:
    return [
        m["params"]["arguments"].get("text", "")
        for m in recorder.sent()
        if m.get("method") == "tools/call"
    ]


async def test_a_denied_argument_never_reaches_the_backend_from_a_handshake_era_host(
    setup: tuple[Running, Recorder],
) -> None:
    """Issue 29: -32602 with data {filter, reason}; alpha is sent the next call, not this one."""
    running, recorder = setup
    refused = await legacy_call(running, "alpha__echo", {"text": "x; DROP TABLE users"})
    assert isinstance(refused, McpError)
    assert refused.error.code == -32602
    assert refused.error.data == {
        "filter": "no-sql",
        "reason": "argument 'text' matches a denied pattern",
    }
    fine = await legacy_call(running, "alpha__echo", {"text": "fine"})
    assert not isinstance(fine, McpError)
    assert _sent_echoes(recorder) == ["fine"]


async def test_a_denied_argument_never_reaches_the_backend_from_a_2026_07_28_host(
    setup: tuple[Running, Recorder],
) -> None:
    """Issue 29: the same refusal on the stateless path, before the held call starts."""
    running, recorder = setup
    params = {"name": "alpha__echo", "arguments": {"text": "drop  table t"}}
    error = (await modern_post(running, "tools/call", params))["error"]
    assert error["code"] == -32602
    assert error["data"]["filter"] == "no-sql"
    ok = await modern_post(
        running, "tools/call", {"name": "alpha__echo", "arguments": {"text": "ok"}}
    )
    assert "result" in ok, ok
    assert _sent_echoes(recorder) == ["ok"]


# --- the external policy service ---------------------------------------------


async def test_the_reference_policy_service_denies_and_modifies_in_both_eras(
    setup: tuple[Running, Recorder],
) -> None:
    """Issue 29: a deny is -32602 naming the filter; a modify changes the result the host sees."""
    running, recorder = setup
    refused = await legacy_call(running, "alpha__echo", {"text": "forbidden"}, "reference")
    assert isinstance(refused, McpError)
    assert refused.error.code == -32602
    assert refused.error.data["reason"] == "mentions 'forbidden'"
    params = {"name": "alpha__echo", "arguments": {"text": "a secret-word"}}
    # The service's modify changes the arguments on their way to the backend.
    result = (await modern_post(running, "tools/call", params, "reference"))["result"]
    assert texts(result) == "alpha: a [redacted]"
    assert _sent_echoes(recorder) == ["a [redacted]"]


async def test_a_policy_service_that_is_down_fails_open_or_closed_as_configured(
    setup: tuple[Running, Recorder],
) -> None:
    """Issue 29: fail open lets the call pass; fail closed is -32603 policy_unavailable."""
    running, recorder = setup
    passed = await legacy_call(running, "alpha__echo", {"text": "open"}, "down-open")
    assert not isinstance(passed, McpError)
    refused = await legacy_call(running, "alpha__echo", {"text": "closed"}, "down-closed")
    assert isinstance(refused, McpError)
    assert refused.error.code == -32603
    assert refused.error.data == {"reason": "policy_unavailable", "filter": "dlp"}
    params = {"name": "alpha__echo", "arguments": {"text": "closed-modern"}}
    error = (await modern_post(running, "tools/call", params, "down-closed"))["error"]
    assert (error["code"], error["data"]["reason"]) == (-32603, "policy_unavailable")
    assert _sent_echoes(recorder) == ["open"]


async def test_a_slow_policy_service_times_out_and_fails_closed(
    setup: tuple[Running, Recorder],
) -> None:
    """Issue 29: no answer within ``timeout`` is the service being unavailable."""
    running, recorder = setup
    started = trio.current_time()
    params = {"name": "alpha__echo", "arguments": {"text": "slow"}}
    error = (await modern_post(running, "tools/call", params, "slow"))["error"]
    assert (error["code"], error["data"]["reason"]) == (-32603, "policy_unavailable")
    assert trio.current_time() - started >= SLOW_TIMEOUT
    assert _sent_echoes(recorder) == []


async def test_a_policy_service_answering_garbage_is_handled_by_its_fail_setting(
    setup: tuple[Running, Recorder],
) -> None:
    """Issue 29: an answer that is no decision counts as no answer (open passes, closed refuses)."""
    running, recorder = setup
    passed = await legacy_call(running, "alpha__echo", {"text": "garbage-open"}, "garbage-open")
    assert not isinstance(passed, McpError)
    refused = await legacy_call(running, "alpha__echo", {"text": "no"}, "garbage-closed")
    assert isinstance(refused, McpError)
    assert refused.error.data == {"reason": "policy_unavailable", "filter": "dlp"}
    assert _sent_echoes(recorder) == ["garbage-open"]


# --- a reload: filters come and go without a restart --------------------------


async def _echo_both_eras(running: Running) -> tuple[str, str]:
    """The reference server's echo of the key pair, as each era's host sees it."""
    legacy = await legacy_call(running, "everything__echo", {"message": AWS_PAIR})
    assert not isinstance(legacy, McpError)
    seen = "\n".join(b.text for b in legacy.content if isinstance(b, TextContent))
    params = {"name": "everything__echo", "arguments": {"message": AWS_PAIR}}
    return seen, texts((await modern_post(running, "tools/call", params))["result"])


async def test_filters_added_by_a_reload_apply_and_removed_by_one_stop(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """gateway choice (docs/security.md): a gateway started with no filter gains a secrets
    filter by a reload, in both eras, and is back to no chain after the next one."""
    document: dict[str, Any] = {
        "server": {"host": "127.0.0.1", "port": 0},
        "backends": [everything_backend()],
    }
    path = tmp_path / "gateway.json"
    path.write_text(json.dumps(document))
    running = await start_gateway(nursery, parse(json.dumps(document), env={}))
    router = running.gateway.router

    def no_chain() -> bool:
        return router.guardrails is None

    assert no_chain()
    assert all("AKIAIOSFODNN7EXAMPLE" in seen for seen in await _echo_both_eras(running))

    path.write_text(json.dumps({**document, "filters": [{"type": "secrets", "action": "redact"}]}))
    assert await reload_config(running.gateway, str(path)) is True
    assert not no_chain()
    for seen in await _echo_both_eras(running):
        assert "[redacted: AWS Access Key]" in seen and "AKIAIOSFODNN7EXAMPLE" not in seen

    path.write_text(json.dumps(document))
    assert await reload_config(running.gateway, str(path)) is True
    assert no_chain()  # the fast path is back: one `is None` per call
    assert all("AKIAIOSFODNN7EXAMPLE" in seen for seen in await _echo_both_eras(running))
