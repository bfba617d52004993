"""The console over HTTP, without a browser: a real gateway (h11 engine) in-process.

Credentials (401/403), CSRF and Origin refusals (403 with a message that
says which), the tool form's call, closing a session (its host then gets
404), and no secret and no full session id in any page.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import httpx
import trio
from prometheus_client import CollectorRegistry

from gateway.backends.state import BackendState
from gateway.config import parse
from gateway.console.handler import LOGIN_BURST
from gateway.runtime.app import serve
from tests import harness
from tests.console.test_redact import CANARIES, secret_document

ADMIN = CANARIES["admin.tokens"]
TOOLBOX = {
    "name": "toolbox",
    "transport": "stdio",
    "command": sys.executable,
    "args": ["-m", "mcp_gateway_demo.toolbox"],
    "stop_grace": 0.3,
}
PAGES = (
    "/admin/",
    "/admin/catalog",
    "/admin/sessions",
    "/admin/errors",
    "/admin/config",
    "/admin/store",
)
INIT = harness.initialize_message("console-test")
MCP_HEADERS = {
    **harness.MCP_POST_HEADERS,
    "authorization": f"Bearer {CANARIES['auth.bearer_tokens']}",
}


@asynccontextmanager
async def running(
    document: dict[str, Any] | None = None, engine: str = "h11"
) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    """A gateway with a canary in every secret field, toolbox up; a client on it."""
    doc = document or secret_document([TOOLBOX])
    doc["server"]["engine"] = engine
    config = parse(json.dumps(doc), env={})
    async with trio.open_nursery() as nursery:
        gateway, binds = await nursery.start(partial(serve, config, registry=CollectorRegistry()))
        await harness.wait_for_states(gateway, {"toolbox": BackendState.UP})
        async with httpx.AsyncClient(base_url=binds[0], timeout=30) as client:
            yield gateway, client
        nursery.cancel_scope.cancel()


def admin() -> dict[str, str]:
    return {"authorization": f"Bearer {ADMIN}"}


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([A-Za-z0-9_.-]+)"', html)
    assert found is not None, "no csrf field in the page"
    return found.group(1)


async def open_session(client: httpx.AsyncClient) -> str:
    response = await client.post("/mcp", json=INIT, headers=MCP_HEADERS)
    assert response.status_code == 200, response.text
    session_id = response.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    headers = {**MCP_HEADERS, "mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}
    assert (await client.post("/mcp", json=note, headers=headers)).status_code == 202
    return session_id


async def test_credentials_are_required() -> None:
    async with running() as (_, client):
        for path in (*PAGES, "/admin/tool?name=toolbox__echo", "/admin/events"):
            response = await client.get(path)
            assert response.status_code == 401, path
            assert response.headers["www-authenticate"].startswith("Bearer")
        # A browser asking for a page is sent to the login form instead.
        browser = await client.get("/admin/", headers={"accept": "text/html"})
        assert browser.status_code == 303 and browser.headers["location"] == "/admin/login"
        # A client's bearer token is a credential, but not an admin's.
        wrong = await client.get(
            "/admin/", headers={"authorization": f"Bearer {CANARIES['auth.bearer_tokens']}"}
        )
        assert wrong.status_code == 403 and "not an admin token" in wrong.text
        assert (
            await client.get("/admin/", headers={"authorization": "Basic eDp5"})
        ).status_code == 401
        post = await client.post("/admin/sessions/close", data={"session": "x"})
        assert post.status_code == 401
        # Either admin list works: admin.tokens and auth.admin_tokens.
        for token in (ADMIN, CANARIES["auth.admin_tokens"]):
            ok = await client.get("/admin/", headers={"authorization": f"Bearer {token}"})
            assert ok.status_code == 200 and "toolbox" in ok.text
        # Static files are the same for everyone.
        css = await client.get("/admin/static/console.css")
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
        assert (await client.get("/admin/static/nope.css")).status_code == 404


async def test_login_cookie_flow() -> None:
    async with running() as (_, client):
        form = await client.get("/admin/login")
        assert form.status_code == 200 and 'name="token"' in form.text
        refused = await client.post("/admin/login", data={"token": "guess"})
        assert refused.status_code == 401 and "not an admin token" in refused.text
        assert "mcp_gateway_console" not in refused.headers.get("set-cookie", "")
        assert "mcp_gateway_console" not in refused.headers.get("set-cookie", "")
        login = await client.post("/admin/login", data={"token": ADMIN})
        assert login.status_code == 303 and login.headers["location"] == "/admin/"
        cookie = login.headers["set-cookie"]
        for attribute in ("HttpOnly", "SameSite=Strict", "Path=/admin", "Max-Age="):
            assert attribute in cookie
        assert "Secure" not in cookie  # no TLS here
        assert ADMIN not in cookie
        page = await client.get("/admin/catalog")  # the client keeps the cookie
        assert page.status_code == 200 and "toolbox__echo" in page.text
        logout = await client.post("/admin/logout", data={"csrf": csrf_of(page.text)})
        assert logout.status_code == 303 and "Max-Age=0" in logout.headers["set-cookie"]
        assert (await client.get("/admin/catalog")).status_code == 401
        await client.post("/admin/login", data={"token": ADMIN})
        # A cookie signed by another gateway (or altered) is no credential.
        client.cookies.clear()
        client.cookies.set("mcp_gateway_console", "9999999999.abc.def")
        assert (await client.get("/admin/catalog")).status_code == 401


async def test_login_attempts_are_throttled_per_address() -> None:
    async with running() as (_, client):
        for _ in range(int(LOGIN_BURST) - 1):
            assert (await client.post("/admin/login", data={"token": "guess"})).status_code == 401
        # The burst is spent, for a right token too: guessing gains nothing by speed.
        ok = await client.post("/admin/login", data={"token": ADMIN})
        assert ok.status_code == 303
        throttled = await client.post("/admin/login", data={"token": ADMIN})
        assert throttled.status_code == 429 and "Too many attempts" in throttled.text
        # Pages for a logged-in browser are not throttled.
        assert (await client.get("/admin/")).status_code == 200


async def test_csrf_and_origin_are_checked_on_every_action() -> None:
    async with running() as (_, client):
        page = await client.get("/admin/tool?name=toolbox__echo", headers=admin())
        token = csrf_of(page.text)
        form = {"name": "toolbox__echo", "arg.text": "hi"}
        for path in ("/admin/tool/call", "/admin/sessions/close", "/admin/reload", "/admin/logout"):
            missing = await client.post(path, data=form, headers=admin())
            assert missing.status_code == 403, path
            assert "CSRF check failed" in missing.text
            wrong = await client.post(path, data={**form, "csrf": "0" * 64}, headers=admin())
            assert wrong.status_code == 403 and "CSRF check failed" in wrong.text
        # Another login's token is no good either (it is bound to the credential).
        other = await client.post(
            "/admin/tool/call",
            data={**form, "csrf": token},
            headers={"authorization": f"Bearer {CANARIES['auth.admin_tokens']}"},
        )
        assert other.status_code == 403
        foreign = await client.post(
            "/admin/tool/call",
            data={**form, "csrf": token},
            headers={**admin(), "origin": "https://evil.example"},
        )
        assert foreign.status_code == 403 and "cross-origin" in foreign.text
        assert (await client.put("/admin/", headers=admin())).status_code == 405
        assert (await client.get("/admin/nope", headers=admin())).status_code == 404


async def test_tool_form_calls_through_the_router_and_is_audited() -> None:
    async with running() as (gateway, client):
        page = await client.get("/admin/tool?name=toolbox__echo", headers=admin())
        assert page.status_code == 200
        assert 'name="arg.text"' in page.text and "inputSchema" not in page.text
        token = csrf_of(page.text)
        called = await client.post(
            "/admin/tool/call",
            data={"csrf": token, "name": "toolbox__echo", "arg.text": "hello <console>"},
            headers=admin(),
        )
        assert called.status_code == 200
        assert 'id="call-result"' in called.text
        assert "hello &lt;console&gt;" in called.text  # escaped, never raw HTML
        bad = await client.post(
            "/admin/tool/call", data={"csrf": token, "name": "toolbox__add"}, headers=admin()
        )
        assert bad.status_code == 400 and "is required" in bad.text
        unknown = await client.get("/admin/tool?name=toolbox__nope", headers=admin())
        assert unknown.status_code == 404
        # The call went through the router: the window counted it for toolbox.
        figures = gateway.app.console.parts.activity.window.stats("toolbox", trio.current_time())
        assert figures is not None and figures.calls >= 1


async def test_close_a_session_then_its_host_gets_404() -> None:
    async with running() as (gateway, client):
        session_id = await open_session(client)
        short = session_id[:8]
        page = await client.get("/admin/sessions", headers=admin())
        assert short in page.text and session_id not in page.text
        closed = await client.post(
            "/admin/sessions/close",
            data={"csrf": csrf_of(page.text), "session": short},
            headers=admin(),
        )
        assert closed.status_code == 303
        assert closed.headers["location"] == f"/admin/sessions?closed={short}"
        assert gateway.clients.get(session_id) is None
        shown = await client.get(closed.headers["location"], headers=admin())
        assert f"Session {short}… closed." in shown.text
        # The notice reflects nothing but a short id from the URL.
        forged = await client.get("/admin/sessions?closed=<b>go+to+evil", headers=admin())
        assert "evil" not in forged.text and 'class="notice"' not in forged.text
        headers = {
            **MCP_HEADERS,
            "mcp-session-id": session_id,
            "mcp-protocol-version": "2025-11-25",
        }
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        assert (await client.post("/mcp", json=ping, headers=headers)).status_code == 404
        again = await client.post(
            "/admin/sessions/close",
            data={"csrf": csrf_of(page.text), "session": short},
            headers=admin(),
        )
        assert again.status_code == 409 and "no open session" in again.text


async def test_a_failed_call_shows_on_the_errors_page() -> None:
    async with running() as (_, client):
        session_id = await open_session(client)
        headers = {
            **MCP_HEADERS,
            "mcp-session-id": session_id,
            "mcp-protocol-version": "2025-11-25",
        }
        call = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "toolbox__no_such_tool", "arguments": {}},
        }
        answer = await client.post("/mcp", json=call, headers=headers)
        assert "error" in answer.json()
        page = await client.get("/admin/errors", headers=admin())
        assert "toolbox__no_such_tool" in page.text
        filtered = await client.get("/admin/errors?q=nothing-matches", headers=admin())
        assert "toolbox__no_such_tool" not in filtered.text
        # Refusals before routing are failed requests too: an unknown session, no token.
        gone = {**headers, "mcp-session-id": "not-a-session"}
        assert (await client.post("/mcp", json=call, headers=gone)).status_code == 404
        unauthenticated = {k: v for k, v in headers.items() if k != "authorization"}
        assert (await client.post("/mcp", json=call, headers=unauthenticated)).status_code == 401
        page = await client.get("/admin/errors?q=rejected", headers=admin())
        assert page.text.count("HTTP POST /mcp") == 2
        assert "404: " in page.text and "401: " in page.text
        assert "not-a-session" not in page.text  # a session id, even a wrong one, is not shown


async def test_no_page_leaks_a_secret_or_a_full_session_id() -> None:
    async with running() as (_, client):
        session_id = await open_session(client)
        bodies = []
        for path in (
            *PAGES,
            "/admin/catalog?q=echo",
            "/admin/tool?name=toolbox__echo",
            "/admin/login",
        ):
            response = await client.get(path, headers=admin())
            assert response.status_code == 200, path
            bodies.append((path, response.text))
        for path, body in bodies:
            for place, canary in CANARIES.items():
                assert canary not in body, f"{place} leaks on {path}"
            assert session_id not in body, path
        config_page = dict(bodies)["/admin/config"]
        assert "•••redacted•••" in config_page and "API_KEY" in config_page


async def test_events_stream_figures() -> None:
    async with running() as (_, client):
        async with client.stream("GET", "/admin/events", headers=admin()) as response:
            assert response.status_code == 200
            assert response.headers["content-type"] == "text/event-stream"
            lines = response.aiter_lines()
            assert await anext(lines) == "event: figures"
            data = await anext(lines)
        figures = json.loads(data.removeprefix("data: "))
        assert figures["backends"]["toolbox"]["state"] == "up"
        assert set(figures["backends"]["toolbox"]) == {
            "state",
            "in_flight",
            "calls",
            "p50_ms",
            "p99_ms",
            "error_rate",
        }


async def test_events_end_when_the_gateway_stops() -> None:
    """A console tab left open does not hold a drain up: its stream ends at once."""
    async with running() as (gateway, client):
        async with client.stream("GET", "/admin/events", headers=admin()) as response:
            lines = response.aiter_lines()
            assert await anext(lines) == "event: figures"
            gateway.stopping.set()
            with trio.fail_after(5):  # the next event would come after 2 s, then forever
                rest = [line async for line in lines]
        assert all(not line or line.startswith(("data:", "event:")) for line in rest)


async def test_loopback_without_tokens_is_open_to_this_machine_only() -> None:
    document = {
        "server": {"host": "127.0.0.1", "port": 0},
        "admin": {"enabled": True},
        "backends": [TOOLBOX],
    }
    async with running(document) as (_, client):
        page = await client.get("/admin/")
        assert page.status_code == 200 and "toolbox" in page.text
        # A DNS-rebinding page reaches us under another Host name: refused.
        rebound = await client.get("/admin/", headers={"host": "evil.example:8000"})
        assert rebound.status_code == 403
        # Still CSRF on actions.
        assert (await client.post("/admin/reload", data={})).status_code == 403


async def test_pages_and_events_on_hypercorn() -> None:
    """The console is plain ASGI: the cross-check engine serves it alike."""
    async with running(engine="hypercorn") as (_, client):
        for path in PAGES:
            assert (await client.get(path, headers=admin())).status_code == 200, path
        async with client.stream("GET", "/admin/events", headers=admin()) as response:
            lines = response.aiter_lines()
            assert await anext(lines) == "event: figures"


async def test_a_policy_role_admin_is_a_console_credential() -> None:
    document = {
        "server": {"host": "0.0.0.0", "port": 0},
        "admin": {"enabled": True},
        "auth": {"tokens": {"ops": "ops-token-1", "dev": "dev-token-2"}},
        "policy": [
            {"tokens": ["ops"], "profiles": ["*"], "role": "admin"},
            {"tokens": ["dev"], "profiles": ["*"]},
        ],
        "backends": [TOOLBOX],
    }
    async with running(document) as (_, client):
        ops = await client.get("/admin/", headers={"authorization": "Bearer ops-token-1"})
        assert ops.status_code == 200 and "toolbox" in ops.text
        dev = await client.get("/admin/", headers={"authorization": "Bearer dev-token-2"})
        assert dev.status_code == 403
        assert (await client.get("/admin/")).status_code == 401  # not open: a role exists
        assert (await client.post("/admin/login", data={"token": "dev-token-2"})).status_code == 401
        login = await client.post("/admin/login", data={"token": "ops-token-1"})
        assert login.status_code == 303
        assert (await client.get("/admin/sessions")).status_code == 200


async def test_catalog_shows_profile_membership_and_ranks_tools_first() -> None:
    document = {
        "server": {"host": "127.0.0.1", "port": 0},
        "admin": {"enabled": True, "tokens": [ADMIN]},
        "profiles": [
            {"name": "coding", "tools": {"include": ["toolbox__echo"]}},
            {"name": "finder", "mode": "search"},
        ],
        "backends": [TOOLBOX],
    }
    async with running(document) as (gateway, client):
        from gateway.console.page_data import catalog_rows

        router, snapshot = gateway.router, gateway.pool.snapshot
        rows = {(r.kind, r.public): r for r in catalog_rows(router, snapshot)}
        assert rows["tool", "toolbox__echo"].profiles == ("default", "coding", "finder")
        assert rows["tool", "toolbox__add"].profiles == ("default", "finder")
        assert rows["prompt", "toolbox__code_review"].profiles == ("default", "coding", "finder")
        assert rows["resource", "toolbox+toolbox://about"].original == "toolbox://about"
        # Ranked by the tool search: words of the description find the tool.
        ranked = catalog_rows(router, snapshot, "send the text back unchanged")
        assert ranked[0].public == "toolbox__echo"
        # Substring matches of every kind follow; no row twice.
        about = catalog_rows(router, snapshot, "ABOUT")
        assert [(r.kind, r.public) for r in about] == [("resource", "toolbox+toolbox://about")]
        found = catalog_rows(router, snapshot, "toolbox")
        assert len(found) == len({(r.kind, r.public) for r in found}) == len(rows)
        page = await client.get("/admin/catalog", headers=admin())
        # echo, the prompt and the resource: the profile filters tools only
        assert page.text.count('<span class="tag">coding</span>') == 3
        assert (
            await client.get("/admin/catalog?q=zzzz-nothing", headers=admin())
        ).status_code == 200


def test_every_kind_of_the_catalog_has_a_console_label() -> None:
    """Gateway choice: the catalog page names each kind, skills (SEP-2640) included."""
    from gateway.catalog.snapshot import Kind
    from gateway.console.page_data import KIND_LABELS

    assert set(KIND_LABELS) == set(Kind)
    assert KIND_LABELS[Kind.SKILLS] == "skill"
