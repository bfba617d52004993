"""Issue 28 end to end, discovered: no authorization server or client id in the config.

The backend (tests/servers/consent_backend.py with an issuer) answers every
MCP request without a bearer token 401 with ``WWW-Authenticate:
resource_metadata=...`` and serves that RFC 9728 document; oidc-provider
(tests/node/consent_server.mjs) offers open dynamic registration (RFC 7591)
and revocation (RFC 7009). The gateway finds the server from the 401,
registers itself, keeps the client in the store; revocation reaches the
server; a reload that changes what a backend's tokens are for purges them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import httpx
import msgspec
import pytest
import trio
from mcp import ClientSession
from mcp.shared.exceptions import McpError
from mcp.types import TextContent

from gateway.backends.credentials.consent_tokens import AtServer, ConsentTokens
from gateway.backends.state import BackendState
from gateway.config import parse
from gateway.consent.records import open_tokens, seal_tokens, token_key
from gateway.consent.registration import client_binding, client_key, decode_client
from gateway.consent.vault import Vault, generate_key
from gateway.runtime.app import reload_config
from tests.consent.test_consent_flow import (
    ADMIN,
    BACKEND,
    TOKENS,
    Setup,
    _authorization_server,
    _host,
    _sign_in,
)
from tests.harness import Running, start_gateway, wait_for_states
from tests.subprocess_servers import free_port, run_server

STATIC_CATALOG: Final = {"type": "static", "token": "catalog-listing"}


class Discovered:
    """One test's pieces: the running setup, the config file and the vault."""

    def __init__(
        self, setup: Setup, document: dict[str, Any], path: Path, vault: Vault, issuer: str
    ) -> None:
        self.setup = setup
        self.issuer = issuer
        self.document = document
        self.path = path
        self.vault = vault

    @property
    def flow(self) -> ConsentTokens:
        """The running gateway's consent flow."""
        flow = self.setup.running.gateway.pool.personal
        assert isinstance(flow, ConsentTokens)
        return flow

    @property
    def store(self) -> Any:
        """The running gateway's state store."""
        return self.setup.running.gateway.store


def _backend(name: str, url: str, *, listed: bool = True) -> dict[str, Any]:
    auth: dict[str, Any] = {"type": "user_consent"}
    if listed:
        # The catalog session's own credential: this backend 401s without any.
        auth["catalog"] = STATIC_CATALOG
    return {
        "name": name,
        "transport": "http",
        "url": url,
        "session": "per_principal",
        "auth": auth,
    }


async def _run(
    config: Any,
    listed: list[str] | None = None,
    *,
    task_status: trio.TaskStatus[tuple[Running, trio.CancelScope]],
) -> None:
    """A gateway under a cancel scope of its own, waiting for ``listed`` (default: all)
    to be up."""
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as inner:
            task_status.started((await start_gateway(inner, config, wait_up=listed), scope))
            await trio.sleep_forever()


@asynccontextmanager
async def _discovered(
    nursery: trio.Nursery,
    tmp_path: Path,
    *names: str,
    unlisted: tuple[str, ...] = (),
    console: bool = False,
) -> AsyncIterator[Discovered]:
    """Authorization server, protected backend and a gateway that configures neither the
    server nor a client: each of ``names`` is a user_consent backend at that backend;
    those in ``unlisted`` have no catalog credential, so their listing is refused."""
    gateway_port, idp_port, backend_port = free_port(), free_port(), free_port()
    issuer = f"http://127.0.0.1:{idp_port}"
    redirect_uri = f"http://127.0.0.1:{gateway_port}/oauth/callback"
    backend_url = f"http://127.0.0.1:{backend_port}/mcp"
    record = tmp_path / "calls.jsonl"
    key = generate_key()
    keys = tmp_path / "vault.keys"
    keys.write_text(key + "\n")
    document = {
        "server": {"host": "127.0.0.1", "port": gateway_port},
        "backends": [
            _backend(name, backend_url, listed=name not in unlisted)
            for name in names or ("tracker",)
        ],
        "auth": {"tokens": TOKENS},
        "consent": {"vault_key_file": str(keys)},
        "store": {"path": str(tmp_path / "state.sqlite")},
        **({"admin": {"enabled": True, "tokens": [ADMIN]}} if console else {}),
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(json.dumps(document))
    argv = [sys.executable, str(BACKEND), str(backend_port), str(record), issuer]
    with run_server(argv, backend_port):
        async with _authorization_server(idp_port, backend_url, redirect_uri) as started:
            assert started == issuer
            listed = [name for name in names or ("tracker",) if name not in unlisted]
            running, scope = await nursery.start(_run, parse(path.read_text(), env={}), listed)
            try:
                setup = Setup(running, record, redirect_uri, scope)
                yield Discovered(setup, document, path, Vault.from_text(key), issuer)
            finally:
                scope.cancel()


async def _link(session: ClientSession, tool: str) -> str:
    """The sign-in link of the -32042 a call to ``tool`` is answered with."""
    with pytest.raises(McpError) as caught:
        await session.call_tool(tool, {})
    assert caught.value.error.code == -32042
    data = caught.value.error.data
    assert isinstance(data, dict)
    url: str = data["elicitations"][0]["url"]
    return url


async def _signs_in(session: ClientSession, tool: str, login: str) -> None:
    """The person follows the link of a refused call and signs in."""
    page = await _sign_in(await _link(session, tool), login)
    assert isinstance(page, httpx.Response) and page.status_code == 200, page


async def _whoami(session: ClientSession, tool: str = "tracker__whoami") -> str:
    result = await session.call_tool(tool, {})
    content = result.content[0]
    assert isinstance(content, TextContent) and not result.isError, content
    return content.text


async def _client_id(found: Discovered) -> str:
    """The client id the server registered for the tracker, from the sealed store record."""
    sealed = await found.store.get(client_key("tracker"))
    assert sealed is not None
    client = decode_client(found.vault.open(sealed, client_binding("tracker")))
    assert client is not None
    return client.client_id


async def test_the_gateway_finds_the_server_from_the_401_registers_once_and_keeps_the_client(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """spec: MCP authorization discovery (the 401's resource_metadata, RFC 9728, then RFC
    8414) and dynamic client registration (RFC 7591); gateway choice: the registered client
    is sealed in the store and reused after a restart, so the server sees one registration."""
    async with (
        _discovered(nursery, tmp_path) as found,
        _host(found.setup, "alice") as (alice, _, _),
    ):
        await _signs_in(alice, "tracker__whoami", "alice@tracker")
        assert await _whoami(alice) == "acting for alice@tracker"
        registered = await _client_id(found)
        assert registered != "gateway"  # not the script's static client
        config = found.setup.running.gateway.config
        found.setup.stop()
        found.setup.running, restarted = await nursery.start(_run, config)
        try:
            async with _host(found.setup, "bob") as (bob, _, _):
                await _signs_in(bob, "tracker__whoami", "bob@tracker")
                assert await _whoami(bob) == "acting for bob@tracker"
            assert await _client_id(found) == registered
        finally:
            restarted.cancel()
    assert [sub for sub, _ in found.setup.carried()] == ["alice@tracker", "bob@tracker"]


async def test_revoke_ends_the_grant_at_the_authorization_server_and_deletes_the_tokens(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """spec: RFC 7009 revocation at the advertised revocation_endpoint; the refresh token no
    longer works there; gateway choice: the person is asked to sign in again."""
    async with (
        _discovered(nursery, tmp_path) as found,
        _host(found.setup, "alice") as (alice, _, _),
    ):
        await _signs_in(alice, "tracker__whoami", "alice@tracker")
        sealed = await found.store.get(token_key("token:alice", "tracker"))
        tokens = open_tokens(found.vault, "token:alice", "tracker", sealed)
        assert tokens.refresh_token
        assert await found.flow.revoke("token:alice", "tracker") == (True, AtServer.REVOKED)
        async with httpx.AsyncClient() as client:
            metadata = await client.get(found.issuer + "/.well-known/openid-configuration")
            refused = await client.post(
                metadata.json()["token_endpoint"],
                data={
                    "grant_type": "refresh_token",
                    "refresh_token": tokens.refresh_token,
                    "client_id": await _client_id(found),
                },
            )
        assert refused.status_code == 400
        assert refused.json()["error"] == "invalid_grant"
        await _link(alice, "tracker__whoami")  # asked again


async def test_a_reload_changing_one_backends_scopes_purges_its_consents_only(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """gateway choice: tokens issued under other settings are purged from the store when a
    reload changes them; another backend's consents stay and keep working."""
    async with (
        _discovered(nursery, tmp_path, "tracker", "notes") as found,
        _host(found.setup, "alice") as (alice, _, _),
    ):
        for tool in ("tracker__whoami", "notes__whoami"):
            await _signs_in(alice, tool, "alice@tracker")
        document = found.document
        document["backends"][0]["auth"]["scopes"] = ["tracker:read"]
        found.path.write_text(json.dumps(document))
        assert await reload_config(found.setup.running.gateway, str(found.path)) is True
        assert await found.store.get(token_key("token:alice", "tracker")) is None
        assert await found.store.get(client_key("tracker")) is None
        assert await found.store.get(token_key("token:alice", "notes")) is not None
        assert await _whoami(alice, "notes__whoami") == "acting for alice@tracker"
        # The reload restarted the changed backend: once up, it asks again.
        await wait_for_states(found.setup.running.gateway, {"tracker": BackendState.UP})
        await _signs_in(alice, "tracker__whoami", "alice@tracker")
        assert await _whoami(alice) == "acting for alice@tracker"


async def test_a_backend_that_refuses_to_list_without_a_token_is_named_not_silently_missing(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """gateway choice: a user_consent backend that answers the catalog session 401 takes
    nothing else down; a caller who has not signed in there finds it named in the list's
    _meta (dev.mcp-gateway/consent unlisted) instead of a silently shorter list."""
    async with (
        _discovered(nursery, tmp_path, "tracker", "notes", unlisted=("tracker",)) as found,
        _host(found.setup, "alice") as (alice, _, _),
    ):
        gateway = found.setup.running.gateway
        await wait_for_states(gateway, {"tracker": BackendState.DOWN})
        assert gateway.pool.backends["tracker"].refused_listing
        assert not gateway.pool.backends["notes"].refused_listing
        listed = await alice.list_tools()
        assert [tool.name for tool in listed.tools] == ["notes__whoami"]
        assert (listed.meta or {})["dev.mcp-gateway/consent"] == {
            "required": True,
            "unlisted": ["tracker"],
        }
        # The rest works as before: the listed backend's sign-in and call.
        await _signs_in(alice, "notes__whoami", "alice@tracker")
        assert await _whoami(alice, "notes__whoami") == "acting for alice@tracker"


async def test_a_backend_that_lists_only_for_a_person_is_listed_and_called_per_principal(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """gateway choice: once a principal signed in at a user_consent backend that refuses the
    catalog session (401), its tools are listed on that principal's own session, in that
    principal's list only, and calls go there with that principal's token; another principal
    still finds it named in _meta and is asked to sign in; a revoke unlists it again."""
    async with (
        _discovered(nursery, tmp_path, "tracker", "notes", unlisted=("tracker",)) as found,
        _host(found.setup, "alice") as (alice, _, _),
        _host(found.setup, "bob") as (bob, _, _),
    ):
        gateway = found.setup.running.gateway
        await wait_for_states(gateway, {"tracker": BackendState.DOWN})
        await _signs_in(alice, "tracker__whoami", "alice@tracker")
        listed = await alice.list_tools()
        assert [tool.name for tool in listed.tools] == ["notes__whoami", "tracker__whoami"]
        assert "dev.mcp-gateway/consent" not in (listed.meta or {})
        assert "dev.mcp-gateway/unavailable" not in (listed.meta or {})
        assert await _whoami(alice) == "acting for alice@tracker"
        assert gateway.pool.backends["tracker"].state is not BackendState.UP  # catalog still 401
        # Bob sees the hint, never alice's tools, and is asked for his own sign-in.
        theirs = await bob.list_tools()
        assert [tool.name for tool in theirs.tools] == ["notes__whoami"]
        assert (theirs.meta or {})["dev.mcp-gateway/consent"] == {
            "required": True,
            "unlisted": ["tracker"],
        }
        await _link(bob, "tracker__whoami")
        assert [sub for sub, _ in found.setup.carried()] == ["alice@tracker"]
        # Once bob signed in too, each call carries its own principal's token.
        await _signs_in(bob, "tracker__whoami", "bob@tracker")
        assert await _whoami(bob) == "acting for bob@tracker"
        assert await _whoami(alice) == "acting for alice@tracker"
        carried = found.setup.carried()
        assert [sub for sub, _ in carried] == ["alice@tracker", "bob@tracker", "alice@tracker"]
        assert carried[0][1] == carried[2][1] != carried[1][1]
        # A revoke takes it out of alice's list at once; bob's stays.
        await found.flow.revoke("token:alice", "tracker")
        again = await alice.list_tools()
        assert [tool.name for tool in again.tools] == ["notes__whoami"]
        assert (again.meta or {})["dev.mcp-gateway/consent"]["unlisted"] == ["tracker"]
        theirs = await bob.list_tools()
        assert [tool.name for tool in theirs.tools] == ["notes__whoami", "tracker__whoami"]


async def test_the_console_revokes_a_consent_at_the_server_and_says_what_it_did(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """gateway choice: the overview's revoke form (CSRF-checked) revokes at the server
    (RFC 7009) and deletes; the notice is fixed words, and a second revoke finds none."""
    from tests.console.test_http import csrf_of

    async with (
        _discovered(nursery, tmp_path, console=True) as found,
        _host(found.setup, "alice") as (alice, _, _),
    ):
        await _signs_in(alice, "tracker__whoami", "alice@tracker")
        base = found.setup.running.base_url
        admin = {"authorization": f"Bearer {ADMIN}"}
        async with httpx.AsyncClient(base_url=base, headers=admin) as console:
            page = await console.get("/admin/")
            assert 'action="/admin/consents/revoke"' in page.text
            form = {"csrf": csrf_of(page.text), "principal": "token:alice", "backend": "tracker"}
            refused = await console.post("/admin/consents/revoke", data={**form, "csrf": "x"})
            assert refused.status_code == 403
            assert await found.store.get(token_key("token:alice", "tracker")) is not None
            revoked = await console.post("/admin/consents/revoke", data=form)
            assert revoked.status_code == 303
            assert revoked.headers["location"] == "/admin/?revoked=REVOKED"
            shown = await console.get(revoked.headers["location"])
            assert "Consent revoked at the authorization server and deleted." in shown.text
            assert await found.store.get(token_key("token:alice", "tracker")) is None
            again = await console.post("/admin/consents/revoke", data=form)
            assert again.headers["location"] == "/admin/?revoked=NONE"
        await _link(alice, "tracker__whoami")  # asked again


async def _refresh_works(found: Discovered, refresh_token: str) -> bool:
    """Whether the authorization server still honours ``refresh_token`` at the tracker."""
    async with httpx.AsyncClient() as client:
        metadata = await client.get(found.issuer + "/.well-known/openid-configuration")
        answer = await client.post(
            metadata.json()["token_endpoint"],
            data={
                "grant_type": "refresh_token",
                "refresh_token": refresh_token,
                "client_id": await _client_id(found),
            },
        )
    return answer.status_code == 200


async def test_a_reload_taking_a_backend_from_one_principal_revokes_their_consent_only(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """gateway choice: once the policy no longer lets bob reach any item of the backend, his
    tokens there are revoked at the server (RFC 7009) and deleted; alice's stay and work."""
    async with (
        _discovered(nursery, tmp_path) as found,
        _host(found.setup, "alice") as (alice, _, _),
        _host(found.setup, "bob") as (bob, _, _),
    ):
        await _signs_in(alice, "tracker__whoami", "alice@tracker")
        await _signs_in(bob, "tracker__whoami", "bob@tracker")
        bobs = await found.store.get(token_key("token:bob", "tracker"))
        bobs_tokens = open_tokens(found.vault, "token:bob", "tracker", bobs)
        found.document["policy"] = [
            {"tokens": ["alice"], "profiles": ["*"]},
            {"tokens": ["bob"], "profiles": ["*"], "tools": {"allow": ["notes__*"]}},
        ]
        found.path.write_text(json.dumps(found.document))
        assert await reload_config(found.setup.running.gateway, str(found.path)) is True
        assert await found.store.get(token_key("token:bob", "tracker")) is None
        assert await found.store.get(token_key("token:alice", "tracker")) is not None
        assert await _whoami(alice) == "acting for alice@tracker"
        alices = await found.store.get(token_key("token:alice", "tracker"))
        alices_tokens = open_tokens(found.vault, "token:alice", "tracker", alices)
        assert await _refresh_works(found, alices_tokens.refresh_token)
        # Bob's grant ended at the server too: his refresh token is refused there.
        assert bobs_tokens.refresh_token
        assert not await _refresh_works(found, bobs_tokens.refresh_token)
        # A second reload of the same file (another replica's, say) finds nothing to do.
        assert await reload_config(found.setup.running.gateway, str(found.path)) is True
        assert await found.store.get(token_key("token:alice", "tracker")) is not None


async def test_a_reload_removing_a_static_token_purges_that_principals_consents(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """gateway choice: a principal whose static token the reload removed is nobody: its
    consents are revoked and deleted, the other principal's stay."""
    async with _discovered(nursery, tmp_path) as found:
        for principal in ("alice", "bob"):
            async with _host(found.setup, principal) as (session, _, _):
                await _signs_in(session, "tracker__whoami", f"{principal}@tracker")
        found.document["auth"] = {"tokens": {"alice": TOKENS["alice"]}}
        found.path.write_text(json.dumps(found.document))
        assert await reload_config(found.setup.running.gateway, str(found.path)) is True
        assert await found.store.get(token_key("token:bob", "tracker")) is None
        assert await found.store.get(token_key("token:alice", "tracker")) is not None
        assert [(p, b) for p, b, _ in await found.flow.list()] == [("token:alice", "tracker")]


async def test_a_refresh_token_the_server_refuses_sends_the_person_through_consent_once(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """gateway choice: a due token whose refresh the server refuses (the grant ended there)
    is forgotten; the call is answered with the sign-in link and a message naming the
    backend, and after one sign-in the calls carry the new token without asking again."""
    async with (
        _discovered(nursery, tmp_path) as found,
        _host(found.setup, "alice") as (alice, _, _),
    ):
        await _signs_in(alice, "tracker__whoami", "alice@tracker")
        key = token_key("token:alice", "tracker")
        tokens = open_tokens(found.vault, "token:alice", "tracker", await found.store.get(key))
        async with httpx.AsyncClient() as client:
            metadata = await client.get(found.issuer + "/.well-known/openid-configuration")
            revoked = await client.post(
                metadata.json()["revocation_endpoint"],
                data={
                    "token": tokens.refresh_token,
                    "token_type_hint": "refresh_token",
                    "client_id": await _client_id(found),
                },
            )
        assert revoked.status_code == 200
        # The token is due now: the next call refreshes it first.
        due = msgspec.structs.replace(tokens, refresh_at=0.0)
        await found.store.put(key, seal_tokens(found.vault, "token:alice", "tracker", due))
        with pytest.raises(McpError) as caught:
            await alice.call_tool("tracker__whoami", {})
        assert caught.value.error.code == -32042
        assert "'tracker'" in caught.value.error.message
        assert "sign in" in caught.value.error.message
        assert await found.store.get(key) is None
        data = caught.value.error.data
        assert isinstance(data, dict)
        page = await _sign_in(data["elicitations"][0]["url"], "alice@tracker")
        assert isinstance(page, httpx.Response) and page.status_code == 200, page
        assert await _whoami(alice) == "acting for alice@tracker"
        assert await _whoami(alice) == "acting for alice@tracker"
    assert [sub for sub, _ in found.setup.carried()] == ["alice@tracker"] * 2
