"""``consent.bind_login``: who opens a sign-in link must first log in as the link's caller.

oidc-provider (tests/node/consent_server.mjs) is both the callers' OpenID
provider (the gateway's ``gateway-login`` client) and the backend's
authorization server. The hosts carry JWTs this test signs for that
issuer (the gateway reads this test's key from ``auth.jwt.jwks_file``), so
a caller's principal is ``jwt:<issuer>|<sub>``; the person's browser is
httpx following redirects and posting the provider's login and consent
forms (tests/consent/test_consent_flow.py's ``_sign_in``).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final
from urllib.parse import parse_qs, urlsplit

import httpx
import jwt
import pytest
import trio
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from mcp.types import TextContent

from gateway.consent.vault import generate_key
from tests.consent.test_consent_flow import BACKEND, _authorization_server, _sign_in
from tests.harness import Running, gateway_config, start_gateway
from tests.subprocess_servers import free_port, run_server

KEY: Final = rsa.generate_private_key(public_exponent=65537, key_size=2048)
TOOL: Final = "tracker__whoami"
ROBOT: Final = "tok-robot"


class Bound:
    """The running pieces: the gateway, its issuer, the backend's record of calls."""

    def __init__(self, running: Running, issuer: str, audience: str, record: Path) -> None:
        self.running = running
        self.issuer = issuer
        self.audience = audience
        self.record = record

    def token(self, subject: str) -> str:
        """A JWT of the callers' issuer for ``subject``."""
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": subject,
            "aud": self.audience,
            "iat": now,
            "exp": now + 3600,
        }
        return jwt.encode(claims, KEY, algorithm="RS256", headers={"kid": "callers"})

    def carried(self) -> list[str]:
        """The ``sub`` of each token the backend's tool was called with."""
        if not self.record.exists():
            return []
        return [json.loads(line)["sub"] for line in self.record.read_text().splitlines()]


@asynccontextmanager
async def _bound(nursery: trio.Nursery, tmp_path: Path) -> AsyncIterator[Bound]:
    gateway_port, idp_port, backend_port = free_port(), free_port(), free_port()
    public_url = f"http://127.0.0.1:{gateway_port}/mcp"
    redirect_uri = f"http://127.0.0.1:{gateway_port}/oauth/callback"
    backend_url = f"http://127.0.0.1:{backend_port}/mcp"
    record = tmp_path / "calls.jsonl"
    keys = tmp_path / "vault.keys"
    keys.write_text(generate_key() + "\n")
    jwks = tmp_path / "jwks.json"
    public = json.loads(jwt.get_algorithm_by_name("RS256").to_jwk(KEY.public_key()))
    jwks.write_text(json.dumps({"keys": [{**public, "kid": "callers", "alg": "RS256"}]}))
    argv = [sys.executable, str(BACKEND), str(backend_port), str(record)]
    with run_server(argv, backend_port):
        async with _authorization_server(idp_port, backend_url, redirect_uri) as issuer:
            config = gateway_config(
                [
                    {
                        "name": "tracker",
                        "transport": "http",
                        "url": backend_url,
                        "auth": {
                            "type": "user_consent",
                            "client_id": "gateway",
                            "client_secret": "gateway-secret",
                            "scopes": ["tracker:read"],
                            "authorization_server": issuer,
                        },
                    }
                ],
                server={"port": gateway_port, "public_url": public_url},
                auth={
                    "jwt": {"jwks_file": str(jwks), "issuer": issuer},
                    "tokens": {"robot": ROBOT},
                },
                consent={
                    "vault_key_file": str(keys),
                    "bind_login": {
                        "client_id": "gateway-login",
                        "client_secret": "gateway-login-secret",
                    },
                },
                store={"path": str(tmp_path / "state.sqlite")},
            )
            yield Bound(await start_gateway(nursery, config), issuer, public_url, record)


@asynccontextmanager
async def _host(bound: Bound, bearer: str) -> AsyncIterator[ClientSession]:
    async with (
        httpx.AsyncClient(headers={"authorization": f"Bearer {bearer}"}) as http,
        streamable_http_client(bound.running.url, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def _link(session: ClientSession) -> str:
    with pytest.raises(McpError) as caught:
        await session.call_tool(TOOL, {})
    assert caught.value.error.code == -32042
    data = caught.value.error.data
    assert isinstance(data, dict)
    url: str = data["elicitations"][0]["url"]
    return url


async def _opened(url: str) -> str:
    """Open a link without following: where the gateway sends the browser."""
    async with httpx.AsyncClient() as browser:
        response = await browser.get(url)
    assert response.status_code == 302, response.text
    location: str = response.headers["location"]
    return location


async def test_with_bind_login_the_caller_logs_in_as_themselves_then_consents(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """gateway choice: the link first leads to an OpenID login at the callers' issuer; an ID
    token naming the link's principal leads on to the backend's consent, and the call
    then carries that person's token."""
    async with _bound(nursery, tmp_path) as bound, _host(bound, bound.token("alice")) as alice:
        page = await _sign_in(await _link(alice), "alice")
        assert isinstance(page, httpx.Response) and page.status_code == 200, page
        assert "Signed in" in page.text
        result = await alice.call_tool(TOOL, {})
        content = result.content[0]
        assert isinstance(content, TextContent) and not result.isError, content
        assert content.text == "acting for alice"
        assert bound.carried() == ["alice"]


async def test_with_bind_login_someone_else_opening_the_link_is_refused_and_nothing_stored(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """gateway choice: the login must name the link's principal; a login as another person
    is a 403 page, stores no token, and the link is used up."""
    async with _bound(nursery, tmp_path) as bound, _host(bound, bound.token("alice")) as alice:
        link = await _link(alice)
        login = await _opened(link)
        query = parse_qs(urlsplit(login).query)
        assert login.startswith(bound.issuer)
        assert query["client_id"] == ["gateway-login"]
        assert "openid" in query["scope"][0].split()
        assert query["nonce"] and query["code_challenge_method"] == ["S256"]
        assert "resource" not in query
        page = await _sign_in(login, "mallory")
        assert isinstance(page, httpx.Response) and page.status_code == 403, page
        assert "another account" in page.text
        async with httpx.AsyncClient() as browser:
            assert (await browser.get(link)).status_code == 400  # used up
        await _link(alice)  # still no token
        assert bound.carried() == []


async def test_with_bind_login_a_static_token_callers_link_is_refused(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """gateway choice: a static-token caller has no personal login to prove; its link is a
    403 page naming that, before any server is asked."""
    async with _bound(nursery, tmp_path) as bound, _host(bound, ROBOT) as robot:
        async with httpx.AsyncClient() as browser:
            page = await browser.get(await _link(robot))
        assert page.status_code == 403
        assert "caller without a personal login" in page.text
