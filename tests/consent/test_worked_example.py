"""The worked example of docs/security.md ("Consent per person"), checked.

The YAML block under the ``worked-example`` marker is read from the doc.
It must load as it stands (a reader copies it); then it runs against
oidc-provider (tests/node/consent_server.mjs) with only what points
outside this machine replaced: the backend's URL, the public URL, the
client and its scopes, the authorization server, and the JWKS URL (by a
file of this test's key, with which it signs the host's JWT for the
example's issuer). A person signs in through it and the call carries
their token.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any, Final

import httpx
import jwt
import pytest
import trio
import yaml
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from mcp.types import TextContent

from gateway.config import parse
from gateway.consent.vault import generate_key
from tests.consent.test_consent_flow import BACKEND, _authorization_server, _sign_in
from tests.harness import ENGINE, start_gateway
from tests.subprocess_servers import free_port, run_server

DOC: Final = Path(__file__).parents[2] / "docs" / "security.md"
MARKER: Final = "<!-- worked-example: tests/consent/test_worked_example.py -->"
KEY: Final = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def worked_example() -> str:
    """The YAML block right under the marker in docs/security.md."""
    text = DOC.read_text(encoding="utf-8")
    assert text.count(MARKER) == 1, "the worked example's marker is gone from security.md"
    found = re.match(r"\s*```yaml\n(.*?)\n```", text.split(MARKER, 1)[1], re.DOTALL)
    assert found is not None, "no yaml block right under the worked example's marker"
    return found.group(1)


def test_the_worked_example_loads_as_it_stands() -> None:
    """gateway choice: the documented configuration is a valid one, with its settings."""
    config = parse(worked_example(), env={})
    (backend,) = config.backends
    assert backend.auth is not None and backend.auth.type == "user_consent"
    assert config.consent.vault_key_env == "MCP_GATEWAY_VAULT_KEYS"
    assert config.auth.jwt.issuer == "https://idp.example.com"


def _host_token(issuer: str, subject: str, audience: str) -> str:
    now = int(time.time())
    claims = {"iss": issuer, "sub": subject, "aud": audience, "iat": now, "exp": now + 3600}
    return jwt.encode(claims, KEY, algorithm="RS256", headers={"kid": "example"})


async def test_the_worked_example_signs_a_person_in_against_oidc_provider(
    nursery: trio.Nursery, tmp_path: Path, monkeypatch: Any
) -> None:
    """gateway choice: the documented configuration, pointed at oidc-provider, asks the
    JWT caller to sign in once and then carries that person's token."""
    document: dict[str, Any] = yaml.safe_load(worked_example())
    gateway_port, idp_port, backend_port = free_port(), free_port(), free_port()
    public_url = f"http://127.0.0.1:{gateway_port}/mcp"
    redirect_uri = f"http://127.0.0.1:{gateway_port}{document['consent']['callback_path']}"
    backend_url = f"http://127.0.0.1:{backend_port}/mcp"
    jwks = tmp_path / "jwks.json"
    public = json.loads(jwt.get_algorithm_by_name("RS256").to_jwk(KEY.public_key()))
    jwks.write_text(json.dumps({"keys": [{**public, "kid": "example", "alg": "RS256"}]}))
    secret = tmp_path / "client-secret"
    secret.write_text("gateway-secret\n")
    monkeypatch.setenv(document["consent"]["vault_key_env"], generate_key())

    jwt_settings = document["auth"]["jwt"]
    del jwt_settings["jwks_url"]
    jwt_settings["jwks_file"] = str(jwks)
    document["server"].update(
        {"public_url": public_url, "host": "127.0.0.1", "port": gateway_port, "engine": ENGINE}
    )
    document["store"] = {"path": str(tmp_path / "state.sqlite")}
    (backend,) = document["backends"]
    backend["url"] = backend_url
    backend["auth"].update(
        {"client_id": "gateway", "client_secret_file": str(secret), "scopes": ["tracker:read"]}
    )
    record = tmp_path / "calls.jsonl"
    argv = [sys.executable, str(BACKEND), str(backend_port), str(record)]
    with run_server(argv, backend_port):
        async with _authorization_server(idp_port, backend_url, redirect_uri) as issuer:
            backend["auth"]["authorization_server"] = issuer
            config = parse(json.dumps(document), env={})
            running = await start_gateway(nursery, config)
            token = _host_token(jwt_settings["issuer"], "alice", public_url)
            async with (
                httpx.AsyncClient(headers={"authorization": f"Bearer {token}"}) as http,
                streamable_http_client(running.url, http_client=http) as (read, write, _),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                tool = f"{backend['name']}__whoami"
                with pytest.raises(McpError) as caught:
                    await session.call_tool(tool, {})
                assert caught.value.error.code == -32042
                data = caught.value.error.data
                assert isinstance(data, dict)
                (asked,) = data["elicitations"]
                assert asked["url"].startswith(f"http://127.0.0.1:{gateway_port}/oauth/start/")
                page = await _sign_in(asked["url"], "alice@github")
                assert isinstance(page, httpx.Response) and page.status_code == 200, page
                result = await session.call_tool(tool, {})
                content = result.content[0]
                assert isinstance(content, TextContent) and not result.isError, content
                assert content.text == "acting for alice@github"
            (principal, name, _tokens), *others = await _listed(running)
            assert (principal, name, others) == (
                f"jwt:{jwt_settings['issuer']}|alice",
                "github",
                [],
            )
    (call,) = map(json.loads, record.read_text().splitlines())
    assert call["sub"] == "alice@github"


async def _listed(running: Any) -> list[tuple[str, str, Any]]:
    consent = running.gateway.consent
    assert consent is not None
    found: list[tuple[str, str, Any]] = await consent.list()
    return found
