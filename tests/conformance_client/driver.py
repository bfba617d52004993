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

For the ``sep-2640-client-*`` scenarios (SEP-2640 skills) the driver is a
2026-07-28 host of the gateway: it walks ``skills/list``, and (but for
``sep-2640-client-no-prefetch``, where listing must read no file) loads
each skill: ``skills/get``, then ``resources/read`` of its ``SKILL.md``
checked against the entry's ``size``, sha256 ``digest`` and
``frontmatter``, and only then its other files, each checked the same way.
A skill that fails a check is not loaded and none of its other files is
read; the scenario servers judge exactly that, on the bytes the gateway
passed on.

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

import base64
import hashlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import trio
import yaml
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
# The skills scenarios: the host lists and loads skills through the gateway.
SKILLS_SCENARIOS = "sep-2640-client-"
NO_PREFETCH = "sep-2640-client-no-prefetch"
MODERN = "2026-07-28"
# A SKILL.md's leading YAML frontmatter block (the suite's own pattern).
FRONTMATTER = re.compile(r"\A---\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


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


Ask = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


class SkillRejected(Exception):
    """A skill file failed verification against its entry; the skill is not loaded."""


async def modern_request(
    http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    """One 2026-07-28 request through the gateway; its result (raises on an error)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "conformance-driver", "version": "0"},
    }
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    if "uri" in params and method == "resources/read":
        headers["Mcp-Name"] = params["uri"]
    response = await http.post(url, json=message, headers=headers)
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        lines = [line[len("data: ") :] for line in response.text.splitlines()]
        answer = json.loads([line for line in lines if line.startswith("{")][-1])
    else:
        answer = response.json()
    if "result" not in answer:
        raise RuntimeError(f"{method}: {answer.get('error', answer)}")
    result: dict[str, Any] = answer["result"]
    return result


def content_bytes(result: dict[str, Any], uri: str) -> bytes:
    """The bytes of the one content of a ``resources/read`` result."""
    (content,) = [c for c in result.get("contents", []) if c.get("uri") == uri]
    if "blob" in content:
        return base64.b64decode(content["blob"])
    text: str = content["text"]
    return text.encode("utf-8")


def verify_file(data: bytes, listed: dict[str, Any]) -> None:
    """SEP-2640: a read whose size or sha256 differs from the entry's is not used."""
    if len(data) != listed.get("size"):
        raise SkillRejected(f"{listed['uri']}: {len(data)} bytes, entry says {listed.get('size')}")
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if digest != listed.get("digest"):
        raise SkillRejected(f"{listed['uri']}: digest {digest}, entry says {listed.get('digest')}")


def verify_frontmatter(data: bytes, entry: dict[str, Any]) -> None:
    """SEP-2640: the SKILL.md's YAML frontmatter equals the entry's, field by field."""
    text = data.decode("utf-8").removeprefix("\ufeff")
    found = FRONTMATTER.match(text)
    parsed = yaml.safe_load(found.group(1)) if found else None
    if not isinstance(parsed, dict):
        raise SkillRejected(f"{entry['uri']}: no YAML frontmatter")
    listed = entry.get("frontmatter") or {}
    differ = sorted(k for k in {*parsed, *listed} if parsed.get(k) != listed.get(k))
    if differ:
        raise SkillRejected(f"{entry['uri']}: frontmatter differs in {differ}")


async def load_skill(ask: Ask, entry: dict[str, Any]) -> None:
    """Read and verify the skill's SKILL.md, then (only if it holds) its other files."""
    files = {f["uri"]: f for f in entry.get("resources") or [] if isinstance(f, dict)}
    skill_md = entry["uri"]
    data = content_bytes(await ask("resources/read", {"uri": skill_md}), skill_md)
    verify_file(data, files[skill_md])
    verify_frontmatter(data, entry)
    for uri, listed in files.items():
        if uri != skill_md:
            verify_file(content_bytes(await ask("resources/read", {"uri": uri}), uri), listed)


async def act_as_skills_host(url: str, scenario: str) -> None:
    """List the skills through the gateway; load each (not for no-prefetch)."""
    async with httpx.AsyncClient(timeout=10.0) as http:
        ask: Ask = partial(modern_request, http, url)
        entries: list[dict[str, Any]] = []
        params: dict[str, Any] = {}
        while True:
            page = await ask("skills/list", params)
            entries += page.get("skills", [])
            if not page.get("nextCursor"):
                break
            params = {"cursor": page["nextCursor"]}
        log(f"skills: {[e.get('uri') for e in entries]}")
        if scenario == NO_PREFETCH:
            return  # a host reads a skill's files when it loads the skill, not on listing
        for listed in entries:
            got = await ask("skills/get", {"uri": listed["uri"]})
            # The scenario servers answer skills/get with an empty result (they
            # serve skills/list only), which the gateway passes on as it came;
            # the entry the host then holds is the listed one.
            entry = got.get("skill") or listed
            try:
                await load_skill(ask, entry)
                log(f"loaded {entry['uri']}")
            except SkillRejected as rejected:
                log(f"not loaded: {rejected}")


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
            url = binds[0] + config.server.path
            if scenario.startswith(SKILLS_SCENARIOS):
                await act_as_skills_host(url, scenario)
            else:
                await act_as_host(url, scenario, context)
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
