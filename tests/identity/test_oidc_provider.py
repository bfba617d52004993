"""Issue 16 against a real authorization server: oidc-provider (tests/node/oidc_server.mjs).

Tokens come from its token endpoint by client credentials with a resource
indicator (RFC 8707), as JWTs signed with its key; the official SDK 1.x
client carries them. Its keys rotate mid-test (a restart makes a new kid):
the gateway accepts the new tokens without a restart and refuses the old.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import httpx
import trio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from gateway.config import parse
from tests.harness import (
    ENGINE,
    Running,
    gateway_config,
    initialize_message,
    sdk_backend,
    start_gateway,
    stdio_backend,
)

SCRIPT: Final = Path(__file__).parents[1] / "node" / "oidc_server.mjs"
RESOURCE: Final = "http://gw.test/mcp"
STARTUP_TIMEOUT: Final = 20.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@asynccontextmanager
async def _oidc_provider(
    port: int, resource: str = RESOURCE, *extra: str
) -> AsyncIterator[dict[str, Any]]:
    """Run the authorization server until the block ends; yields its ready line.

    ``extra`` are the script's further arguments: ALG, BACKENDS, TTL.
    """
    process = await trio.lowlevel.open_process(
        ["node", str(SCRIPT), str(port), resource, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        buffer = b""
        with trio.fail_after(STARTUP_TIMEOUT):
            while b"\n" not in buffer:
                chunk = await process.stdout.receive_some()
                assert chunk, "oidc_server.mjs exited before it was ready"
                buffer += chunk
        yield json.loads(buffer.split(b"\n", 1)[0])
    finally:
        with trio.CancelScope(shield=True, deadline=trio.current_time() + 10):
            process.terminate()
            with trio.move_on_after(5):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


async def _token(port: int, scope: str, client: str = "mcp-host") -> str:
    async with httpx.AsyncClient() as http:
        response = await http.post(
            f"http://127.0.0.1:{port}/token",
            auth=(client, f"{client}-secret"),
            data={"grant_type": "client_credentials", "resource": RESOURCE, "scope": scope},
        )
    assert response.status_code == 200, response.text
    token: str = response.json()["access_token"]
    return token


async def _tool_names(running: Running, token: str, path: str = "") -> list[str]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx.AsyncClient(headers=headers) as http,
        streamable_http_client(running.url + path, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return [tool.name for tool in (await session.list_tools()).tools]


async def test_oidc_provider_tokens_reach_the_tools_and_keys_rotate_without_restart(
    nursery: trio.Nursery,
) -> None:
    """A43, A47: Issue 16 items 1, 2 and 6 end to end with a real IdP and the official client."""
    port = _free_port()
    issuer = f"http://127.0.0.1:{port}"
    async with _oidc_provider(port) as first:
        config = gateway_config(
            [stdio_backend("toolbox", [sys.executable, "-m", "mcp_gateway_demo.toolbox"])],
            server={"public_url": RESOURCE},
            auth={
                "jwt": {
                    "jwks_url": f"{issuer}/jwks",
                    "issuer": issuer,
                    # Real time here (a real IdP): refetching at once keeps the
                    # test independent of machine speed.
                    "jwks_min_refresh": 0.001,
                },
                "required_scopes": ["mcp:tools"],
                "resource_metadata": {
                    "authorization_servers": [issuer],
                    "scopes_supported": ["mcp:tools", "mcp:admin"],
                },
            },
        )
        running = await start_gateway(nursery, config)
        old_token = await _token(port, "mcp:tools")
        names = await _tool_names(running, old_token)
        assert names and all(name.startswith("toolbox__") for name in names)

        lacking = await _token(port, "mcp:admin")
        async with httpx.AsyncClient() as http:
            refused = await http.post(
                running.url,
                headers={
                    "authorization": f"Bearer {lacking}",
                    "accept": "application/json, text/event-stream",
                    "content-type": "application/json",
                },
                content=b"{}",
            )
            metadata = await http.get(
                running.base_url + "/.well-known/oauth-protected-resource/mcp"
            )
        assert refused.status_code == 403
        assert 'error="insufficient_scope", ' in refused.headers["www-authenticate"]
        assert metadata.json()["authorization_servers"] == [issuer]

    async with _oidc_provider(port) as second:  # a restart: a new signing key
        assert second["kid"] != first["kid"]
        new_token = await _token(port, "mcp:tools")
        assert await _tool_names(running, new_token) == names
        async with httpx.AsyncClient() as http:
            old = await http.post(
                running.url,
                headers={
                    "authorization": f"Bearer {old_token}",
                    "accept": "application/json, text/event-stream",
                    "content-type": "application/json",
                },
                content=b"{}",
            )
        assert old.status_code == 401
        assert 'error="invalid_token"' in old.headers["www-authenticate"]
    registry = running.gateway.metrics.registry
    assert registry.get_sample_value("mcp_gateway_jwks_refresh_total", {"outcome": "ok"}) >= 2
    assert registry.get_sample_value("mcp_gateway_jwks_keys") == 1


class _MemoryStorage:
    """The SDK's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client

    async def set_client_info(self, client_info: Any) -> None:
        self.client = client_info


async def test_the_sdk_client_discovers_the_idp_from_the_gateways_401_and_gets_in(
    nursery: trio.Nursery,
) -> None:
    """A43: Issue 16 item 2 end to end: the official client's OAuth support reads the 401's
    resource_metadata, finds oidc-provider there, gets a token by client credentials for the
    gateway's resource, and lists the tools."""
    from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider

    idp_port, gateway_port = _free_port(), _free_port()
    issuer = f"http://127.0.0.1:{idp_port}"
    resource = f"http://127.0.0.1:{gateway_port}/mcp"
    async with _oidc_provider(idp_port, resource):
        config = gateway_config(
            [stdio_backend("toolbox", [sys.executable, "-m", "mcp_gateway_demo.toolbox"])],
            server={"port": gateway_port, "public_url": resource},
            auth={
                "jwt": {"jwks_url": f"{issuer}/jwks", "issuer": issuer},
                "required_scopes": ["mcp:tools"],
                "resource_metadata": {
                    "authorization_servers": [issuer],
                    "scopes_supported": ["mcp:tools"],
                },
            },
        )
        running = await start_gateway(nursery, config)
        provider = ClientCredentialsOAuthProvider(
            server_url=resource,
            storage=_MemoryStorage(),
            client_id="mcp-host",
            client_secret="mcp-host-secret",
            scopes="mcp:tools",
            issuer=issuer,
        )
        async with (
            httpx.AsyncClient(auth=provider) as http,
            streamable_http_client(running.url, http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            names = [tool.name for tool in (await session.list_tools()).tools]
        assert names and all(name.startswith("toolbox__") for name in names)


async def test_an_oidc_provider_token_reaches_exactly_the_profiles_and_tools_the_policy_grants(
    nursery: trio.Nursery,
) -> None:
    """Issue 16 "done when": the official client with an oidc-provider token carrying a groups
    claim reaches exactly the profiles and tools the access policy grants."""
    port = _free_port()
    issuer = f"http://127.0.0.1:{port}"
    async with _oidc_provider(port):
        document = {
            "server": {"host": "127.0.0.1", "port": 0, "engine": ENGINE, "public_url": RESOURCE},
            "auth": {"jwt": {"jwks_url": f"{issuer}/jwks", "issuer": issuer}},
            "backends": [sdk_backend("alpha"), sdk_backend("beta")],
            "profiles": [{"name": "math", "backends": {"include": ["beta"]}}],
            "policy": [
                {"claims": {"groups": ["platform"]}, "profiles": ["*"]},
                {
                    "claims": {"groups": ["dev"]},
                    "profiles": ["default"],
                    "tools": {"allow": ["alpha__echo", "beta__echo"]},
                },
                {"everyone": True, "tools": {"deny": ["*fail*"]}},
            ],
        }
        running = await start_gateway(nursery, parse(json.dumps(document), env={}))
        platform = await _token(port, "mcp:tools", "mcp-host")
        dev = await _token(port, "mcp:tools", "ci-bot")
        everything = await _tool_names(running, platform)
        assert "alpha__pid" in everything and "beta__multiply" in everything
        assert "alpha__fail" not in everything
        assert await _tool_names(running, platform, "/math") == ["beta__echo", "beta__multiply"]
        assert await _tool_names(running, dev) == ["alpha__echo", "beta__echo"]
        async with httpx.AsyncClient() as http:
            refused = await http.post(
                running.url + "/math",
                headers={
                    "authorization": f"Bearer {dev}",
                    "accept": "application/json, text/event-stream",
                    "content-type": "application/json",
                },
                json=initialize_message(),
            )
        assert refused.status_code == 403
        assert refused.json()["error"]["message"] == (
            "Forbidden: the access policy does not let this caller open the profile 'math'"
        )
