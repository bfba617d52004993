"""Issue 7: auth, rate limits and metrics, seen from a real HTTP client."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import ssl
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from tests.harness import Running, gateway_config, initialize_message, start_gateway, stdio_backend
from tests.transports.tls_certs import make_pki

pytestmark = pytest.mark.usefixtures("engine")

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
TOKEN = "s3cret-token-for-tests"
JWT_SECRET = "jwt-shared-secret"


def _toolbox() -> dict[str, Any]:
    return stdio_backend("toolbox", [sys.executable, "-m", "mcp_gateway_demo.toolbox"])


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwt(claims: dict[str, Any], secret: str = JWT_SECRET) -> str:
    head = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = _b64(json.dumps(claims).encode())
    sig = hmac.new(secret.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{_b64(sig)}"


def _initialize(msg_id: int = 1) -> bytes:
    return json.dumps(initialize_message(msg_id=msg_id)).encode()


async def _secured(nursery: trio.Nursery, **limits: float) -> Running:
    config = gateway_config(
        [_toolbox()],
        auth={
            "bearer_tokens": [TOKEN, ""],
            "jwt": {"secret": JWT_SECRET, "audience": "http://gw.test/mcp"},
            "resource_metadata": "http://gw.test/.well-known/oauth-protected-resource",
        },
        limits=limits,
    )
    return await start_gateway(nursery, config)


async def test_requests_without_a_valid_credential_get_401_with_a_challenge(
    nursery: trio.Nursery,
) -> None:
    """Spec (issue 7, A38): 401 + WWW-Authenticate naming resource_metadata."""
    running = await _secured(nursery)
    async with httpx.AsyncClient() as http:
        for auth in [None, "Bearer wrong", "Basic dXNlcjpwYXNz", f"Bearer {_jwt({'exp': 1})}"]:
            headers = dict(HEADERS)
            if auth is not None:
                headers["authorization"] = auth
            response = await http.post(running.url, headers=headers, content=_initialize())
            assert response.status_code == 401, auth
            challenge = response.headers["www-authenticate"]
            assert challenge.startswith("Bearer ")
            assert (
                'resource_metadata="http://gw.test/.well-known/oauth-protected-resource"'
                in challenge
            )
            assert "wrong" not in response.text
        assert len(running.gateway.clients) == 0


async def test_a_static_token_or_a_valid_jwt_is_let_in(nursery: trio.Nursery) -> None:
    """Spec (issue 7): static bearer tokens and HS256 JWTs with the right audience."""
    running = await _secured(nursery)
    good_jwt = _jwt({"sub": "ada", "aud": "http://gw.test/mcp", "exp": time.time() + 3600})
    wrong_aud = _jwt({"sub": "ada", "aud": "http://other/mcp", "exp": time.time() + 3600})
    forged = _jwt({"sub": "ada", "aud": "http://gw.test/mcp", "exp": time.time() + 3600}, "x")
    async with httpx.AsyncClient() as http:
        for token, status in [(TOKEN, 200), (good_jwt, 200), (wrong_aud, 401), (forged, 401)]:
            headers = {**HEADERS, "authorization": f"Bearer {token}"}
            response = await http.post(running.url, headers=headers, content=_initialize())
            assert response.status_code == status


async def test_a_token_in_the_url_is_refused(nursery: trio.Nursery) -> None:
    """Spec (robustness A39): ?access_token= is refused, never used."""
    running = await _secured(nursery)
    async with httpx.AsyncClient() as http:
        response = await http.post(
            running.url + f"?access_token={TOKEN}", headers=HEADERS, content=_initialize()
        )
    assert response.status_code == 400
    assert TOKEN not in response.text


async def test_a_session_over_its_rate_gets_429_with_retry_after(nursery: trio.Nursery) -> None:
    """Spec (issue 7): per-session token bucket; 429 and Retry-After past it."""
    running = await start_gateway(
        nursery,
        gateway_config([_toolbox()], limits={"session_rate": 0.5, "session_burst": 2}),
    )
    async with httpx.AsyncClient() as http:
        init = await http.post(running.url, headers=HEADERS, content=_initialize())
        headers = {**HEADERS, "mcp-session-id": init.headers["mcp-session-id"]}
        ping = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}).encode()
        statuses = [
            (await http.post(running.url, headers=headers, content=ping)).status_code
            for _ in range(3)
        ]
        assert statuses == [200, 200, 429]
        limited = await http.post(running.url, headers=headers, content=ping)
        assert limited.status_code == 429
        assert int(limited.headers["retry-after"]) >= 1


async def test_metrics_move_with_real_traffic_and_carry_bounded_labels(
    nursery: trio.Nursery,
) -> None:
    """Spec (issue 7): counters and histograms move with the right labels."""
    running = await start_gateway(nursery, gateway_config([_toolbox()]))
    async with httpx.AsyncClient() as http:
        init = await http.post(running.url, headers=HEADERS, content=_initialize())
        headers = {**HEADERS, "mcp-session-id": init.headers["mcp-session-id"]}
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "toolbox__add", "arguments": {"a": 1, "b": 2}},
        }
        assert (
            await http.post(running.url, headers=headers, content=json.dumps(call))
        ).status_code == 200
        await http.post(
            running.url, headers={**HEADERS, "origin": "http://evil.example"}, content=_initialize()
        )
        text = (await http.get(running.base_url + "/metrics")).text
    assert (
        'mcp_gateway_requests_total{backend="toolbox",method="tools/call",outcome="ok"} 1.0' in text
    )
    assert 'mcp_gateway_tool_calls_total{backend="toolbox",tool="add"} 1.0' in text
    assert (
        'mcp_gateway_request_duration_seconds_bucket{backend="toolbox",le="0.0005",method="tools/call"}'
        in text
    )
    assert 'mcp_gateway_rejected_requests_total{reason="origin"} 1.0' in text
    assert 'mcp_gateway_backend_state{backend="toolbox",state="up"} 1.0' in text
    assert 'mcp_gateway_backend_up{backend="toolbox"} 1.0' in text
    assert "mcp_gateway_client_sessions_opened_total 1.0" in text
    assert 'mcp_gateway_catalog_items{backend="toolbox",kind="tools"} 6.0' in text
    assert init.headers["mcp-session-id"] not in text


async def test_the_legacy_sse_endpoints_need_the_same_credentials(nursery: trio.Nursery) -> None:
    """Spec (issue 7): /sse and /messages are guarded like /mcp."""
    running = await _secured(nursery)
    async with httpx.AsyncClient() as http:
        stream = await http.get(running.base_url + "/sse", headers={"accept": "text/event-stream"})
        assert stream.status_code == 401
        assert "resource_metadata=" in stream.headers["www-authenticate"]
        post = await http.post(running.base_url + "/messages?session_id=x", content=_initialize())
        assert post.status_code == 401


async def test_each_routed_request_is_one_log_line_without_secrets(nursery: trio.Nursery) -> None:
    """Spec (issue 7): one line per routed request with session, method, backend,
    duration and outcome; the session id is shortened and tokens never appear."""
    from structlog.testing import capture_logs

    running = await start_gateway(
        nursery,
        gateway_config([_toolbox()], logging={"requests": True}, auth={"bearer_tokens": [TOKEN]}),
    )
    async with httpx.AsyncClient() as http:
        authorized = {**HEADERS, "authorization": f"Bearer {TOKEN}"}
        init = await http.post(running.url, headers=authorized, content=_initialize())
        session_id = init.headers["mcp-session-id"]
        headers = {**authorized, "mcp-session-id": session_id}
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "toolbox__add", "arguments": {"a": 1, "b": 2}},
        }
        with capture_logs() as logs:
            await http.post(running.url, headers=headers, content=json.dumps(call))
    routed = [entry for entry in logs if entry["event"] == "request.routed"]
    assert len(routed) == 1
    line = routed[0]
    assert line["log_level"] == "info"
    assert line["method"] == "tools/call"
    assert line["backend"] == "toolbox"
    assert line["outcome"] == "ok"
    assert line["client_session"] == session_id[:8]
    assert isinstance(line["duration_ms"], float)
    assert TOKEN not in repr(logs)
    assert session_id not in repr(logs)


async def test_tls_serves_https_and_refuses_plain_http(
    nursery: trio.Nursery, tmp_path: Path, engine: str
) -> None:
    """server.tls: the frontend speaks HTTPS with the configured certificate (h11 through
    trio.SSLStream, hypercorn natively); a host verifying against the CA initializes and
    calls, and plain HTTP on that port gets no answer."""
    pki = make_pki(tmp_path)
    config = gateway_config(
        [_toolbox()], server={"tls": {"cert_file": pki.server_cert, "key_file": pki.server_key}}
    )
    running = await start_gateway(nursery, config)
    assert running.base_url.startswith("https://127.0.0.1:"), running.base_url
    async with httpx.AsyncClient(verify=ssl.create_default_context(cafile=pki.ca_cert)) as c:
        health = await c.get(running.base_url + "/healthz")
        assert (health.status_code, health.json()) == (200, {"status": "ok"})
        answer = await c.post(running.url, content=_initialize(), headers=HEADERS)
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"]["protocolVersion"] == "2025-11-25"
        assert answer.headers["mcp-session-id"]
    plain = running.base_url.replace("https://", "http://")
    async with httpx.AsyncClient() as c:
        with pytest.raises(httpx.HTTPError):
            await c.get(plain + "/healthz", timeout=5)
