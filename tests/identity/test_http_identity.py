"""Issue 16 seen from a real HTTP client: session binding, resource metadata, scopes, reload."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Final

import httpx
import jwt
import pytest
import trio
from structlog.testing import capture_logs

from gateway.runtime.app import reload_config
from tests.harness import Running, gateway_config, initialize_message, start_gateway, stdio_backend

HEADERS: Final = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
}
TOKEN_A: Final = "token-of-alice-0123456789"
TOKEN_B: Final = "token-of-bob-0123456789"
SECRET: Final = "jwt-shared-secret-0123456789abcdef0123"
AUDIENCE: Final = "http://gw.test/mcp"


def _initialize() -> bytes:
    return json.dumps(initialize_message()).encode()


def _request(method: str, msg_id: int = 2) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": {}}).encode()


def _auth_section(tokens: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    section: dict[str, Any] = {
        "tokens": {"alice": TOKEN_A, "bob": TOKEN_B} if tokens is None else tokens,
        "jwt": {"secret": SECRET},  # audience: server.public_url
        "resource_metadata": {
            "authorization_servers": ["https://idp.test/realms/r"],
            "scopes_supported": ["mcp:tools", "mcp:admin"],
        },
    }
    section.update(extra)
    return section


async def _secured(nursery: trio.Nursery, **auth: Any) -> Running:
    config = gateway_config([], auth=_auth_section(**auth), server={"public_url": AUDIENCE})
    return await start_gateway(nursery, config)


def _as(token: str, session: str | None = None) -> dict[str, str]:
    headers = {**HEADERS, "authorization": f"Bearer {token}"}
    if session is not None:
        headers["mcp-session-id"] = session
    return headers


async def _open_session(http: httpx.AsyncClient, url: str, token: str) -> str:
    response = await http.post(url, headers=_as(token), content=_initialize())
    assert response.status_code == 200, response.text
    return response.headers["mcp-session-id"]


async def test_another_principal_cannot_use_or_delete_a_session(nursery: trio.Nursery) -> None:
    """A44: Issue 16 item 5: token B gets 404 on A's session (POST, GET, DELETE), audited
    without the token; A keeps its session."""
    running = await _secured(nursery)
    async with httpx.AsyncClient() as http:
        session = await _open_session(http, running.url, TOKEN_A)
        with capture_logs() as logs:
            listed = await http.post(
                running.url, headers=_as(TOKEN_B, session), content=_request("tools/list")
            )
            stream = await http.get(
                running.url,
                headers={**_as(TOKEN_B, session), "accept": "text/event-stream"},
            )
            deleted = await http.delete(running.url, headers=_as(TOKEN_B, session))
        unknown = await http.post(
            running.url, headers=_as(TOKEN_B, "no-such-session"), content=_request("tools/list")
        )
        assert [listed.status_code, stream.status_code, deleted.status_code] == [404, 404, 404]
        assert listed.json() == unknown.json()  # indistinguishable from an unknown id
        mismatches = [e for e in logs if e["event"] == "auth.session.mismatch"]
        assert [e["method"] for e in mismatches] == ["POST", "GET", "DELETE"]
        assert all(e["principal"] == "token:bob" for e in mismatches)
        assert all(e["owner"] == "token:alice" for e in mismatches)
        assert TOKEN_B not in repr(logs) and TOKEN_A not in repr(logs)
        still = await http.post(
            running.url, headers=_as(TOKEN_A, session), content=_request("tools/list")
        )
        assert still.status_code == 200
        assert (await http.delete(running.url, headers=_as(TOKEN_A, session))).status_code == 200


async def test_protected_resource_metadata_at_both_well_known_paths(
    nursery: trio.Nursery,
) -> None:
    """Issue 16 item 2 (RFC 9728 section 3): bare and path-suffixed metadata."""
    running = await _secured(nursery)
    async with httpx.AsyncClient() as http:
        for suffix in ("", "/mcp"):
            response = await http.get(
                running.base_url + "/.well-known/oauth-protected-resource" + suffix
            )
            assert response.status_code == 200
            assert response.json() == {
                "resource": AUDIENCE,
                "authorization_servers": ["https://idp.test/realms/r"],
                "scopes_supported": ["mcp:tools", "mcp:admin"],
                "bearer_methods_supported": ["header"],
            }
        missing = await http.get(running.base_url + "/.well-known/oauth-protected-resource/x")
        assert missing.status_code == 404


async def test_a_401_names_the_metadata_and_scopes_and_says_invalid_token_only_for_a_token(
    nursery: trio.Nursery,
) -> None:
    """Issue 16 item 2 (RFC 9728 section 5.1, RFC 6750 section 3.1)."""
    running = await _secured(nursery)
    metadata = "http://gw.test/.well-known/oauth-protected-resource/mcp"
    async with httpx.AsyncClient() as http:
        bare = await http.post(running.url, headers=HEADERS, content=_initialize())
        wrong = await http.post(running.url, headers=_as("nope"), content=_initialize())
    assert bare.status_code == wrong.status_code == 401
    bare_challenge = bare.headers["www-authenticate"]
    assert f'resource_metadata="{metadata}"' in bare_challenge
    assert 'scope="mcp:tools mcp:admin"' in bare_challenge
    assert "error=" not in bare_challenge
    assert 'error="invalid_token"' in wrong.headers["www-authenticate"]


async def test_a_valid_token_without_the_required_scope_gets_403_naming_it(
    nursery: trio.Nursery,
) -> None:
    """A43: Issue 16 item 2: insufficient_scope (the spec's step-up flow)."""
    running = await _secured(nursery, required_scopes=["mcp:tools"])

    def token(scope: str) -> str:
        claims = {"sub": "ada", "aud": AUDIENCE, "exp": time.time() + 3600, "scope": scope}
        return jwt.encode(claims, SECRET, algorithm="HS256")

    async with httpx.AsyncClient() as http:
        lacking = await http.post(running.url, headers=_as(token("read")), content=_initialize())
        granted = await http.post(
            running.url, headers=_as(token("read mcp:tools")), content=_initialize()
        )
    assert lacking.status_code == 403
    challenge = lacking.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge
    assert 'scope="mcp:tools"' in challenge
    assert granted.status_code == 200


async def test_a_token_removed_by_reload_is_refused_at_once_also_on_its_open_session(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """A48: Issue 16 item 7: after reload the removed token gets 401 on its open session, the
    session and its GET stream are gone, the kept token works, and config.reload.applied
    names auth."""
    running = await _secured(nursery)
    async with httpx.AsyncClient() as http:
        session_a = await _open_session(http, running.url, TOKEN_A)
        session_b = await _open_session(http, running.url, TOKEN_B)
        stream_open, stream_ended = trio.Event(), trio.Event()

        async def stream_of_a() -> None:
            headers = {**_as(TOKEN_A, session_a), "accept": "text/event-stream"}
            async with http.stream("GET", running.url, headers=headers) as stream:
                assert stream.status_code == 200
                async for _ in stream.aiter_bytes():
                    stream_open.set()  # ": stream open" came first
            stream_ended.set()

        nursery.start_soon(stream_of_a)
        with trio.fail_after(10):
            await stream_open.wait()
        path = tmp_path / "gateway.yaml"
        path.write_text(
            json.dumps(
                {
                    "server": {"host": "127.0.0.1", "port": 0, "public_url": AUDIENCE},
                    "auth": _auth_section(tokens={"bob": TOKEN_B}),
                    "backends": [],
                }
            )
        )
        with capture_logs() as logs:
            assert await reload_config(running.gateway, str(path)) is True
        applied = [e for e in logs if e["event"] == "config.reload.applied" and "changed" in e]
        assert applied[0]["changed"] == ["auth"]
        refused = await http.post(
            running.url, headers=_as(TOKEN_A, session_a), content=_request("tools/list")
        )
        assert refused.status_code == 401
        assert running.gateway.clients.get(session_a) is None
        with trio.fail_after(10):
            await stream_ended.wait()  # its GET stream ended with the session
        kept = await http.post(
            running.url, headers=_as(TOKEN_B, session_b), content=_request("tools/list")
        )
        assert kept.status_code == 200


async def test_a_reload_that_changes_the_port_says_so_and_applies_the_rest(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 16 item 7: bind settings need a restart; the line says which; limits apply."""
    running = await _secured(nursery)
    path = tmp_path / "gateway.yaml"
    path.write_text(
        json.dumps(
            {
                "server": {"host": "127.0.0.1", "port": 1, "public_url": AUDIENCE},
                "auth": _auth_section(),
                "limits": {"token_rate": 1, "token_burst": 1},
                "backends": [],
            }
        )
    )
    with capture_logs() as logs:
        assert await reload_config(running.gateway, str(path)) is True
    needs = [e for e in logs if e["event"] == "config.reload.needs_restart"]
    assert needs[0]["settings"] == ["server.port"]
    applied = [e for e in logs if e["event"] == "config.reload.applied" and "changed" in e]
    assert applied[0]["changed"] == ["limits"]
    async with httpx.AsyncClient() as http:
        first = await http.post(running.url, headers=_as(TOKEN_A), content=_initialize())
        second = await http.post(running.url, headers=_as(TOKEN_A), content=_initialize())
    assert (first.status_code, second.status_code) == (200, 429)


async def test_a_cursor_served_to_one_principal_is_invalid_for_another(
    nursery: trio.Nursery,
) -> None:
    """A45: Issue 16 item 5: B cannot continue A's list walk with A's cursor (-32602)."""
    toolbox = stdio_backend("toolbox", [sys.executable, "-m", "mcp_gateway_demo.toolbox"])
    config = gateway_config(
        [toolbox],
        auth=_auth_section(),
        server={"public_url": AUDIENCE},
        pagination={"page_size": 1},
    )
    running = await start_gateway(nursery, config)
    async with httpx.AsyncClient() as http:
        session_a = await _open_session(http, running.url, TOKEN_A)
        session_b = await _open_session(http, running.url, TOKEN_B)
        first = await http.post(
            running.url, headers=_as(TOKEN_A, session_a), content=_request("tools/list")
        )
        cursor = first.json()["result"]["nextCursor"]

        def page(cursor: str) -> bytes:
            return json.dumps(
                {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"cursor": cursor}}
            ).encode()

        mine = await http.post(running.url, headers=_as(TOKEN_A, session_a), content=page(cursor))
        theirs = await http.post(running.url, headers=_as(TOKEN_B, session_b), content=page(cursor))
    assert "result" in mine.json()
    assert theirs.json()["error"]["code"] == -32602


def test_the_log_level_a_reload_sets_applies_to_loggers_already_in_use() -> None:
    """Issue 16 item 7: logging.level reloads (cached loggers consult one threshold)."""
    import structlog

    from gateway.telemetry.logs import _level_gate, set_log_level

    try:
        set_log_level("warning")
        with pytest.raises(structlog.DropEvent):
            _level_gate(None, "info", {"event": "x"})
        assert _level_gate(None, "error", {"event": "x"}) == {"event": "x"}
        set_log_level("debug")
        assert _level_gate(None, "debug", {"event": "x"}) == {"event": "x"}
    finally:
        set_log_level("info")


async def test_a_reload_lists_what_needs_a_restart_and_applies_what_it_can(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 16 item 7: each section in config.reload.applied, restart-only ones refused."""
    running = await _secured(nursery)
    document: dict[str, Any] = {
        "server": {
            "host": "127.0.0.1",
            "port": 0,
            "public_url": AUDIENCE,
            "path": "/other",
            "allowed_origins": ["https://app.example"],
            "max_sessions": 7,
        },
        "auth": _auth_section(),
        "logging": {"format": "json"},
        "notifications": {"debounce": 1.5},
        "pagination": {"page_size": 5, "cursor_secret": "rotated"},
        "mrtr": {"state_secret": "rotated-too", "max_held_calls": 3},
        "backends": [],
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(json.dumps(document))
    with capture_logs() as logs:
        assert await reload_config(running.gateway, str(path)) is True
    needs = [e for e in logs if e["event"] == "config.reload.needs_restart"]
    assert needs[0]["settings"] == ["server.path", "logging.format"]
    applied = [e for e in logs if e["event"] == "config.reload.applied" and "changed" in e]
    assert applied[0]["changed"] == [
        "server.allowed_origins/allowed_hosts",
        "server.max_sessions",
        "notifications",
        "pagination",
        "mrtr",
    ]
    live = running.gateway.live
    assert live is not None
    assert running.gateway.clients.max_sessions == 7
    assert live.held.max_held == 3
    assert len(live.held.sealer.keys) == 2  # the previous key verifies for a while
    async with httpx.AsyncClient() as http:
        allowed = await http.post(
            running.url,
            headers={**_as(TOKEN_A), "origin": "https://app.example"},
            content=_initialize(),
        )
        assert allowed.status_code == 200
        still_on_mcp = await http.post(running.url, headers=_as(TOKEN_A), content=_initialize())
        assert still_on_mcp.status_code == 200
