"""The client command of the conformance suite's client scenarios (issues 14 and 16).

The suite (``conformance client --command "<python> driver.py"``) starts the
scenario's own MCP server and runs this script with the server URL as the
last argument, the scenario in ``MCP_CONFORMANCE_SCENARIO`` and any context
(tool calls to make, client credentials) as JSON in
``MCP_CONFORMANCE_CONTEXT``. The script is not the client the suite judges:
it starts the gateway in-process with that server as its ONLY backend
(``transport: http``, unprefixed) and acts as a host through the gateway
(the official SDK 1.x client): initialize, list tools, call them. What the
scenario server sees is therefore the gateway's backend leg.

For the ``auth/client-credentials-*`` scenarios the driver plays the
operator: the suite gives the client id and secret (or private key) but not
the token endpoint, so it discovers that once (the backend's 401 challenge,
RFC 9728 protected resource metadata, RFC 8414 authorization server
metadata) and writes it into the backend's ``auth:`` block; the gateway then
gets and presents the tokens itself.

Exit code 0 when the host-side calls went through, 1 otherwise (the suite
reports a non-zero exit next to its checks).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import trio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from prometheus_client import CollectorRegistry

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gateway.backends.state import BackendState  # noqa: E402
from gateway.config import parse  # noqa: E402
from gateway.runtime.app import serve  # noqa: E402

# The era the backend is configured with where the scenario needs one
# (default ``auto``).
PROTOCOL = {"request-metadata": "modern"}
# Whole run bound: the suite's own client timeout is 30 s.
RUN_TIMEOUT = 25.0
# Backend readiness bound (the scenario server is already listening).
READY_TIMEOUT = 10.0


def log(message: str) -> None:
    """Print to stderr, which the suite saves as the client's stderr.txt."""
    print(f"[driver] {message}", file=sys.stderr, flush=True)


async def discover_token_endpoint(server_url: str) -> tuple[str, str]:
    """The token endpoint and issuer the scenario's authorization server advertises.

    An unauthenticated POST gets the 401 whose ``WWW-Authenticate`` names the
    protected resource metadata; its first authorization server's RFC 8414
    metadata names the token endpoint.
    """
    async with httpx.AsyncClient(timeout=5.0) as http:
        probe = await http.post(
            server_url,
            json={"jsonrpc": "2.0", "id": 0, "method": "ping"},
            headers={"Accept": "application/json, text/event-stream"},
        )
        challenge = probe.headers.get("www-authenticate", "")
        metadata_url = ""
        for part in challenge.replace(",", " ").split():
            if part.startswith("resource_metadata="):
                metadata_url = part.split("=", 1)[1].strip('"')
        if not metadata_url:
            origin = httpx.URL(server_url).copy_with(path="/", query=None)
            metadata_url = str(origin.join("/.well-known/oauth-protected-resource"))
        resource = (await http.get(metadata_url)).json()
        issuer = httpx.URL(resource["authorization_servers"][0])
        path = issuer.path.rstrip("/")
        well_known = issuer.copy_with(path=f"/.well-known/oauth-authorization-server{path}")
        metadata = (await http.get(str(well_known))).json()
        return str(metadata["token_endpoint"]), str(metadata.get("issuer", ""))


async def backend_auth(server_url: str, context: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """The backend ``auth:`` block for an auth scenario, or {} for the others."""
    if "client_id" not in context:
        return {}
    token_url, issuer = await discover_token_endpoint(server_url)
    log(f"token endpoint {token_url}")
    auth: dict[str, Any] = {
        "type": "client_credentials",
        "token_url": token_url,
        "client_id": context["client_id"],
    }
    if "private_key_pem" in context:
        key = workdir / "client-key.pem"
        key.write_text(context["private_key_pem"])
        auth.update(
            client_auth="private_key_jwt",
            private_key_file=str(key),
            signing_algorithm=context.get("signing_algorithm", "ES256"),
            # The scenario verifies aud against the issuer URL.
            assertion_audience=issuer,
        )
    else:
        auth["client_secret"] = context["client_secret"]
    return auth


def config_document(server_url: str, auth: dict[str, Any], protocol: str) -> dict[str, Any]:
    """A gateway on a free loopback port with the scenario's server as its only backend."""
    backend: dict[str, Any] = {
        "name": "scenario",
        "transport": "http",
        "url": server_url,
        "prefix": "",
        "required": True,
        "protocol": protocol,
        # One backend session: the scenario servers count every GET stream
        # they see as the client's reconnection (sse-retry), so a second
        # session's own GET stream, opened while the first session's POST
        # stream closes, would be judged an early reconnect without
        # Last-Event-ID. The shared session runs the same transport code.
        "session": "shared",
    }
    if auth:
        backend["auth"] = auth
    return {
        "server": {"host": "127.0.0.1", "port": 0, "path": "/mcp"},
        "logging": {"level": "info", "format": "json"},
        "backends": [backend],
    }


def arguments_for(schema: dict[str, Any]) -> dict[str, Any]:
    """Plain arguments for a tool the scenario does not script: one per required property."""
    samples = {"number": 1, "integer": 1, "string": "x", "boolean": True, "array": [], "object": {}}
    properties = schema.get("properties") or {}
    out: dict[str, Any] = {}
    for name in schema.get("required") or []:
        kind = (properties.get(name) or {}).get("type", "string")
        out[name] = samples.get(kind if isinstance(kind, str) else "string", "x")
    return out


def planned_calls(
    scenario: str, context: dict[str, Any], schemas: dict[str, dict[str, Any]]
) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls a host makes in ``scenario``: what the context scripts, or each tool once.

    The JSON Schema scenarios judge what the host received: ``json-schema-ref-no-deref``
    only lists, and ``json-schema-2020-12-preservation`` echoes the focal tool's
    ``inputSchema`` exactly as the gateway served it.
    """
    scripted = context.get("toolCalls")
    if scripted is not None:
        return [(c["name"], c.get("arguments") or {}) for c in scripted]
    if scenario == "json-schema-ref-no-deref":
        return []
    if scenario == "json-schema-2020-12-preservation":
        return [("json_schema_echo", {"schema": schemas["json_schema_2020_12_tool"]})]
    return [(name, arguments_for(schema)) for name, schema in schemas.items()]


async def act_as_host(url: str, scenario: str, context: dict[str, Any]) -> None:
    """Initialize, list the tools and call them through the gateway."""
    async with (
        streamable_http_client(url) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = (await session.list_tools()).tools
        log(f"tools: {[t.name for t in tools]}")
        calls = planned_calls(scenario, context, {t.name: t.inputSchema for t in tools})
        for name, arguments in calls:
            result = await session.call_tool(name, arguments)
            log(f"call {name}: isError={result.isError}")


async def run(server_url: str, scenario: str, context: dict[str, Any]) -> None:
    """Start the gateway in-process, drive it as a host, stop it."""
    with tempfile.TemporaryDirectory() as tmp, trio.fail_after(RUN_TIMEOUT):
        auth = await backend_auth(server_url, context, Path(tmp))
        document = config_document(server_url, auth, PROTOCOL.get(scenario, "auto"))
        config = parse(json.dumps(document), env={})
        async with trio.open_nursery() as nursery:
            gateway, binds = await nursery.start(
                partial(serve, config, registry=CollectorRegistry())
            )
            with trio.fail_after(READY_TIMEOUT):
                while gateway.pool.backends["scenario"].state is not BackendState.UP:
                    await gateway.pool.state_changed.wait()
            await act_as_host(binds[0] + config.server.path, scenario, context)
            nursery.cancel_scope.cancel()


def main() -> int:
    """Read what the suite passes, run, exit 0 or 1."""
    server_url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    log(f"scenario {scenario!r} server {server_url}")
    try:
        trio.run(run, server_url, scenario, context)
    except Exception as exc:
        log(f"failed: {type(exc).__name__}: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
