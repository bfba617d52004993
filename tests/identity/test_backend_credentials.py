"""Issue 16 item 4 end to end: credentials to backends, never the caller's token.

A real authorization server (oidc-provider, tests/node/oidc_server.mjs)
issues the caller's token by client credentials, the gateway's own backend
token by client credentials, and exchanged tokens by RFC 8693 token exchange
(a grant registered in that script: oidc-provider has none built in). The
backend is an official-SDK 1.x Streamable HTTP server behind a middleware
that requires a bearer token and records every ``Authorization`` header it
receives (tests/servers/bearer_backend.py), so each test reads exactly what
reached the backend. The official SDK client is the host.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, Final

import httpx
import jwt
import trio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from mcp.types import TextContent
from structlog.testing import capture_logs

from gateway.backends.state import BackendState
from gateway.runtime.app import reload_config
from tests.frontend.test_modern_http import modern, send, sse_messages
from tests.harness import (
    ENGINE,
    Running,
    gateway_config,
    open_client,
    start_gateway,
    wait_for_states,
)
from tests.identity.test_oidc_provider import RESOURCE, _free_port, _oidc_provider, _token
from tests.servers.paths import SERVERS_DIR
from tests.subprocess_servers import RunningServer, run_server

BACKEND_SCRIPT: Final = SERVERS_DIR / "bearer_backend.py"


@contextmanager
def _bearer_backend(record: Path, transport: str = "streamable-http") -> Iterator[RunningServer]:
    port = _free_port()
    argv = [sys.executable, str(BACKEND_SCRIPT), str(port), str(record), transport]
    with run_server(argv, port) as server:
        yield server


def _received(record: Path) -> list[str]:
    """The bearer tokens the backend received, in order ("" for none)."""
    tokens = []
    for line in record.read_text().splitlines():
        value = json.loads(line)["authorization"] or ""
        tokens.append(value.removeprefix("Bearer "))
    return tokens


def _claims(token: str) -> dict[str, Any]:
    claims: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
    return claims


def _config(idp: str, backend: dict[str, Any]) -> Any:
    return gateway_config(
        [backend],
        server={"public_url": RESOURCE},
        auth={"jwt": {"jwks_url": f"{idp}/jwks", "issuer": idp}},
    )


@asynccontextmanager
async def _client(running: Running, token: str) -> AsyncIterator[ClientSession]:
    async with (
        httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        streamable_http_client(running.url, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def _echo(session: ClientSession, text: str) -> tuple[bool, str]:
    """(isError, text) of a call; a JSON-RPC error is (True, its message)."""
    try:
        result = await session.call_tool("bearer__echo", {"text": text})
    except McpError as exc:
        return True, exc.error.message
    content = result.content[0]
    assert isinstance(content, TextContent)
    return result.isError, content.text


@asynccontextmanager
async def _backend_and_provider(
    record: Path, transport: str = "streamable-http"
) -> AsyncIterator[tuple[int, str, str]]:
    """The bearer backend (recording into ``record``) and an identity provider whose tokens
    are for it: the provider's port and URL, and the backend's URL."""
    idp_port = _free_port()
    with _bearer_backend(record, transport) as backend:
        url = backend.url("/sse" if transport == "sse" else "/mcp")
        async with _oidc_provider(idp_port, RESOURCE, "RS256", url):
            yield idp_port, f"http://127.0.0.1:{idp_port}", url


def _client_credentials(
    url: str, idp: str, *, transport: str = "http", session: str | None = None, **auth: Any
) -> dict[str, Any]:
    """The bearer backend at ``url``, with a client_credentials grant from ``idp``'s endpoint."""
    entry: dict[str, Any] = {
        "name": "bearer",
        "transport": transport,
        "url": url,
        "auth": {
            "type": "client_credentials",
            "token_url": f"{idp}/token",
            "client_id": "gateway",
            "resource": url,
            **auth,
        },
    }
    if session is not None:
        entry["session"] = session
    return entry


def _token_requests(running: Running, grant: str, outcome: str) -> float:
    value = running.gateway.metrics.registry.get_sample_value(
        "mcp_gateway_backend_token_requests_total",
        {"backend": "bearer", "grant": grant, "outcome": outcome},
    )
    return value or 0.0


async def test_client_credentials_reach_the_backend_and_the_callers_token_never_does(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """One token for many calls; a 401 gets one retry with a new token; a second 401 is an
    error naming the backend (not the token) and the backend stays up."""
    record = tmp_path / "received.jsonl"
    secret = tmp_path / "client-secret"
    secret.write_text("gateway-secret\n")  # a Kubernetes mount ends with a newline
    async with _backend_and_provider(record) as (idp_port, idp, url):
        config = _config(
            idp,
            _client_credentials(
                url, idp, session="shared", client_secret_file=str(secret), scopes=["mcp:tools"]
            ),
        )
        running = await start_gateway(nursery, config)
        caller = await _token(idp_port, "mcp:tools")
        async with _client(running, caller) as session:
            assert await _echo(session, "one") == (False, "bearer: one")
            assert await _echo(session, "two") == (False, "bearer: two")
            seen = _received(record)
            assert caller not in seen
            assert len(set(seen)) == 1  # one token, cached, for every request
            claims = _claims(seen[0])
            assert (claims["aud"], claims["client_id"]) == (url, "gateway")
            assert _token_requests(running, "client_credentials", "ok") == 1

            # The backend revokes it: one 401, a new token, the call succeeds.
            revoked = record.with_name(record.name + ".revoked")
            revoked.write_text(seen[0] + "\n")
            before = len(seen)
            assert await _echo(session, "three") == (False, "bearer: three")
            after = _received(record)[before:]
            assert after[0] == seen[0] and after[1] != seen[0]  # the 401, then the retry
            assert _token_requests(running, "client_credentials", "ok") == 2

            # Every token refused: the retry's 401 goes to the caller, once.
            revoked.write_text("*\n")
            before = len(_received(record))
            failed, text = await _echo(session, "four")
            assert failed
            assert "backend 'bearer' refused the gateway's credential: HTTP 401" in text
            assert not any(token in text for token in _received(record) if token)
            assert len(_received(record)) - before == 2  # one retry, no more
            assert running.gateway.pool.backends["bearer"].state is BackendState.UP


async def test_token_endpoint_refusal_is_a_clear_error_and_a_fixed_secret_file_is_used(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """invalid_client from the token endpoint reaches the caller as such, counted in the metric;
    the backend is not restarted; the rotated secret file is read on the next token request."""
    record = tmp_path / "received.jsonl"
    secret = tmp_path / "client-secret"
    secret.write_text("gateway-secret")
    async with _backend_and_provider(record) as (idp_port, idp, url):
        config = _config(
            idp,
            _client_credentials(
                url,
                idp,
                session="shared",
                client_secret_file=str(secret),
                client_auth="client_secret_post",
            ),
        )
        running = await start_gateway(nursery, config)
        restarts = running.gateway.pool.backends["bearer"].restarts
        caller = await _token(idp_port, "mcp:tools")
        async with _client(running, caller) as session:
            first = _received(record)[0]
            secret.write_text("a-wrong-secret")
            record.with_name(record.name + ".revoked").write_text(first)
            try:
                await session.call_tool("bearer__echo", {"text": "x"})
            except McpError as exc:
                text, data = exc.error.message, exc.error.data
            else:  # pragma: no cover - the assertion below says why
                text, data = "", None
            assert data == {"reason": "credential_unavailable", "backend": "bearer"}
            assert "'bearer'" in text
            assert "credential unavailable: token endpoint answered 401 invalid_client" in text
            assert "a-wrong-secret" not in text
            assert _token_requests(running, "client_credentials", "refused") == 1
            backend_state = running.gateway.pool.backends["bearer"]
            assert backend_state.state is BackendState.UP
            assert backend_state.restarts == restarts

            secret.write_text("gateway-secret")  # the rotated mount, no reload needed
            assert await _echo(session, "y") == (False, "bearer: y")
            assert _token_requests(running, "client_credentials", "ok") == 2


async def test_token_exchange_gives_each_client_session_a_token_made_for_its_caller(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """The per-client session sends the exchanged token (its caller's subject, the gateway as
    actor, the backend as audience); the shared catalog session the gateway's own; the caller's
    token reaches no backend request."""
    record = tmp_path / "received.jsonl"
    async with _backend_and_provider(record) as (idp_port, idp, url):
        own = {
            "type": "client_credentials",
            "token_url": f"{idp}/token",
            "client_id": "gateway",
            "client_secret": "gateway-secret",
            "resource": url,
        }
        config = _config(
            idp,
            {
                "name": "bearer",
                "transport": "http",
                "url": url,
                "session": "per_client",
                "auth": {
                    "type": "token_exchange",
                    "token_url": f"{idp}/token",
                    "client_id": "gateway",
                    "client_secret": "gateway-secret",
                    "resource": url,
                    "catalog": own,
                },
            },
        )
        running = await start_gateway(nursery, config)
        catalog_tokens = set(_received(record))
        assert len(catalog_tokens) == 1
        (catalog_token,) = catalog_tokens
        assert "subject_sub" not in _claims(catalog_token)

        caller = await _token(idp_port, "mcp:tools")
        async with _client(running, caller) as session:
            assert await _echo(session, "a") == (False, "bearer: a")
            assert await _echo(session, "b") == (False, "bearer: b")
        # A 2026-07-28 request has no session: its own backend session
        # exchanges the same caller's token (cached for that principal).
        call = modern(7, "tools/call", {"name": "bearer__echo", "arguments": {"text": "c"}})
        async with httpx.AsyncClient(
            base_url=running.base_url, trust_env=False, timeout=5.0
        ) as http:
            response = await send(http, call, Authorization=f"Bearer {caller}")
        assert response.status_code == 200, response.text
        event_stream = response.headers["content-type"].startswith("text/event-stream")
        body = sse_messages(response)[-1] if event_stream else response.json()
        assert body["result"]["content"][0]["text"] == "bearer: c"
        seen = _received(record)
        assert caller not in seen
        assert "" not in seen  # every request carried a credential
        exchanged = set(seen) - catalog_tokens
        assert len(exchanged) == 1  # cached for the principal across calls and eras
        claims = _claims(exchanged.pop())
        assert claims["subject_sub"] == _claims(caller)["sub"]
        assert claims["act"] == {"sub": "gateway"}
        assert claims["aud"] == url
        assert _token_requests(running, "token_exchange", "ok") == 1


async def test_a_static_token_file_is_read_afresh_and_a_reload_moves_it(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Secrets from files: a rotated token file is sent from the next request on; a reload that
    points auth at another file restarts the backend with it and says what changed."""
    record = tmp_path / "received.jsonl"
    first, second = tmp_path / "token-1", tmp_path / "token-2"
    first.write_text("static-one\n")
    second.write_text("static-three\n")
    with _bearer_backend(record) as backend:
        entry = {
            "name": "bearer",
            "transport": "http",
            "url": backend.url("/mcp"),
            "auth": {"type": "static", "token_file": str(first)},
        }
        running = await start_gateway(nursery, gateway_config([entry]))
        async with open_client(running.url) as session:
            assert await _echo(session, "a") == (False, "bearer: a")
            assert _received(record)[-1] == "static-one"
            first.write_text("static-two\n")  # the mount rotates; no reload
            assert await _echo(session, "b") == (False, "bearer: b")
            assert _received(record)[-1] == "static-two"

        path = tmp_path / "gateway.yaml"
        moved = {**entry, "auth": {"type": "static", "token_file": str(second)}}
        path.write_text(
            json.dumps(
                {"server": {"host": "127.0.0.1", "port": 0, "engine": ENGINE}, "backends": [moved]}
            )
        )
        with capture_logs() as logs:
            assert await reload_config(running.gateway, str(path)) is True
        applied = [e for e in logs if e["event"] == "config.reload.applied" and "changed" in e]
        assert "backends" in applied[0]["changed"]
        await wait_for_states(running.gateway, {"bearer": BackendState.UP})
        async with open_client(running.url) as session:
            assert await _echo(session, "c") == (False, "bearer: c")
        assert _received(record)[-1] == "static-three"


async def test_a_legacy_sse_backend_gets_the_token_on_its_stream_and_posts_and_retries_a_401(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """The HTTP+SSE transport carries the same credential: GET stream and POSTs; a revoked
    token on a POST is retried once with a new one; every token refused is an error naming the
    backend."""
    record = tmp_path / "received.jsonl"
    async with _backend_and_provider(record, "sse") as (idp_port, idp, url):
        config = _config(
            idp, _client_credentials(url, idp, transport="sse", client_secret="gateway-secret")
        )
        running = await start_gateway(nursery, config)
        caller = await _token(idp_port, "mcp:tools")
        async with _client(running, caller) as session:
            assert await _echo(session, "one") == (False, "bearer: one")
            seen = _received(record)
            assert caller not in seen and "" not in seen
            assert len(set(seen)) == 1
            revoked = record.with_name(record.name + ".revoked")
            revoked.write_text(seen[0] + "\n")
            assert await _echo(session, "two") == (False, "bearer: two")
            assert _token_requests(running, "client_credentials", "ok") == 2
            revoked.write_text("*\n")
            failed, text = await _echo(session, "three")
            assert failed
            assert "backend 'bearer' refused the gateway's credential: HTTP 401" in text


async def test_a_token_endpoint_down_at_start_keeps_the_backend_down_with_the_reason(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """The shared session cannot initialize without its token: the backend is down, its reason
    names the credential (not the token), and it retries with backoff like any connect failure."""
    record = tmp_path / "received.jsonl"
    with _bearer_backend(record) as backend:
        entry = {
            "name": "bearer",
            "transport": "http",
            "url": backend.url("/mcp"),
            "auth": {
                "type": "client_credentials",
                "token_url": f"http://127.0.0.1:{_free_port()}/token",  # nothing listens
                "client_id": "gateway",
                "client_secret": "gateway-secret",
            },
        }
        running = await start_gateway(nursery, gateway_config([entry]), wait_up=[])
        await wait_for_states(running.gateway, {"bearer": BackendState.DOWN})
        down = running.gateway.pool.backends["bearer"]
        assert down.reason == "token endpoint unreachable (ConnectError)"
        assert "gateway-secret" not in down.reason
        assert not record.exists() or _received(record) == []  # nothing sent without a token
