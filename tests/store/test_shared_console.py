"""Console logins and CSRF tokens across replicas: made on one, honoured on every other."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

import httpx
import trio

from tests.harness import Running, gateway_config, start_gateway
from tests.redis_server import RedisServer

ADMIN: Final = "admin-token-0123456789abcdef"


async def _replica(nursery: trio.Nursery, store: dict[str, Any]) -> Running:
    config = gateway_config([], admin={"enabled": True, "tokens": [ADMIN]}, store=store)
    return await start_gateway(nursery, config)


async def _login(http: httpx.AsyncClient, running: Running) -> str:
    response = await http.post(running.base_url + "/admin/login", data={"token": ADMIN})
    assert response.status_code == 303, response.text
    found = re.match(r"mcp_gateway_console=([^;]+);", response.headers["set-cookie"])
    assert found is not None
    return found.group(1)


def _cookie(value: str) -> dict[str, str]:
    return {"cookie": f"mcp_gateway_console={value}"}


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([A-Za-z0-9_.-]+)"', html)
    assert found is not None, "no csrf field in the page"
    return found.group(1)


async def test_a_login_on_one_replica_works_on_the_other_and_logout_ends_it_on_both(
    nursery: trio.Nursery, redis_server: RedisServer
) -> None:
    """Issue 26: cookie and CSRF token from replica A are honoured by B; logout on B ends both."""
    shared = {"url": redis_server.url, "key_prefix": "console-two:"}
    first = await _replica(nursery, shared)
    second = await _replica(nursery, shared)
    async with httpx.AsyncClient() as http:
        cookie = await _login(http, first)
        page = await http.get(second.base_url + "/admin/catalog", headers=_cookie(cookie))
        assert page.status_code == 200
        on_first = await http.get(first.base_url + "/admin/config", headers=_cookie(cookie))
        assert _csrf(on_first.text) == _csrf(page.text)  # one key: one token per login
        logout = await http.post(
            second.base_url + "/admin/logout", data={"csrf": _csrf(on_first.text)},
            headers=_cookie(cookie),
        )  # fmt: skip
        assert logout.status_code == 303
        for running in (first, second):
            after = await http.get(running.base_url + "/admin/catalog", headers=_cookie(cookie))
            assert after.status_code == 401


async def test_gateways_on_separate_embedded_stores_do_not_honour_each_others_logins(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice: each embedded store holds its own key, so its logins are its own."""
    first = await _replica(nursery, {})
    second = await _replica(nursery, {})
    async with httpx.AsyncClient() as http:
        cookie = await _login(http, first)
        mine = await http.get(first.base_url + "/admin/catalog", headers=_cookie(cookie))
        theirs = await http.get(second.base_url + "/admin/catalog", headers=_cookie(cookie))
    assert (mine.status_code, theirs.status_code) == (200, 401)


async def test_a_login_cookie_cannot_be_checked_while_the_store_is_down_a_bearer_token_can(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Gateway choice (fail closed): a cookie is 503 with the reason; a bearer admin token works."""
    server = RedisServer(tmp_path)
    server.start()
    try:
        running = await _replica(nursery, {"url": server.url, "timeout": 0.5})
        async with httpx.AsyncClient() as http:
            cookie = await _login(http, running)
            server.stop()
            refused = await http.get(running.base_url + "/admin/", headers=_cookie(cookie))
            bearer = await http.get(
                running.base_url + "/admin/", headers={"authorization": f"Bearer {ADMIN}"}
            )
    finally:
        server.stop()
    assert refused.status_code == 503
    assert "state store does not answer" in refused.text and "bearer token" in refused.text
    assert bearer.status_code == 200
