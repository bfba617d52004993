"""Discovery, the client, revocation and purge of the consent flow, without sockets.

The authorization server is a fake here for what a real one cannot be made
to do on cue (be unreachable for a revocation, advertise client ID
metadata documents over plain HTTP); oidc-provider does the rest in
test_consent_discovery_e2e.py.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgspec
import pytest
import trio

from gateway.backends.credentials.consent_tokens import AtServer, ConsentBackend, ConsentTokens
from gateway.backends.credentials.grants import TokenRequest
from gateway.backends.credentials.provider import TokenAnswer
from gateway.config.schema_backend_auth import BackendAuth
from gateway.consent.oauth import ConsentSetupError
from gateway.consent.registration import client_key, purge_targets
from gateway.consent.vault import Vault, generate_key
from gateway.errors import CredentialUnavailable
from gateway.frontend.consent_pages import ConsentPages
from gateway.store.embedded import EmbeddedStore

ISSUER = "http://127.0.0.1:9"
BACKEND_URL = "http://tracker.test/mcp"
RESOURCE_METADATA = ISSUER + "/rm"


class FakeServer:
    """Discovery, registration, token and revocation answers, each recorded."""

    def __init__(self, **metadata: Any) -> None:
        self.metadata = {
            "issuer": ISSUER,
            "authorization_endpoint": ISSUER + "/auth",
            "token_endpoint": ISSUER + "/token",
            "code_challenge_methods_supported": ["S256"],
            **metadata,
        }
        self.fetched: list[str] = []
        self.registered: list[dict[str, Any]] = []
        self.revoked: list[dict[str, str]] = []
        self.revocation_down = False
        self.probes = 0

    async def get(self, url: str) -> tuple[int, bytes]:
        self.fetched.append(url)
        if url == RESOURCE_METADATA:
            body = {
                "resource": BACKEND_URL,
                "authorization_servers": [ISSUER],
                "scopes_supported": ["tracker:read"],
            }
            return 200, msgspec.json.encode(body)
        if url.endswith("oauth-authorization-server"):
            return 200, msgspec.json.encode(self.metadata)
        return 404, b""

    async def post(self, url: str, body: bytes) -> tuple[int, bytes]:
        assert url == self.metadata["registration_endpoint"]
        self.registered.append(msgspec.json.decode(body))
        answer = {"client_id": f"dyn-{len(self.registered)}", "client_secret": "dyn-secret"}
        return 201, msgspec.json.encode(answer)

    async def probe(self, url: str) -> str | None:
        self.probes += 1
        return f'Bearer error="invalid_token", resource_metadata="{RESOURCE_METADATA}"'

    async def fetch(self, request: TokenRequest) -> TokenAnswer:
        if "token_type_hint" in request.form:
            if self.revocation_down:
                raise CredentialUnavailable("token endpoint unreachable (ConnectError)")
            self.revoked.append(dict(request.form))
            return TokenAnswer(200, b"")
        body = {"access_token": "at", "refresh_token": "rt", "expires_in": 100}
        return TokenAnswer(200, msgspec.json.encode(body))


def _flow(
    server: FakeServer,
    store: EmbeddedStore | None = None,
    vault: Vault | None = None,
    **auth: Any,
) -> ConsentTokens:
    config = BackendAuth(type="user_consent", **auth)
    backends = {
        "tracker": ConsentBackend("tracker", BACKEND_URL, config),
        "mail": ConsentBackend("mail", "http://mail.test/mcp", config),
    }
    return ConsentTokens(
        lambda: backends,
        store or EmbeddedStore(""),
        vault or Vault.from_text(generate_key()),
        public_origin="http://gw.test",
        callback_path="/oauth/callback",
        login_timeout=600.0,
        fetch=server.fetch,
        get=server.get,
        post=server.post,
        probe=server.probe,
    )


async def _sign_in(flow: ConsentTokens, principal: str, backend: str = "tracker") -> dict[str, Any]:
    url, _ = await flow.new_link(principal, backend)
    query = parse_qs(urlsplit(await flow.start(url.rsplit("/", 1)[1])).query)
    await flow.finish(query["state"][0], "code", "")
    return query


async def test_without_a_server_configured_the_401s_resource_metadata_names_it() -> None:
    """spec: RFC 9728 via WWW-Authenticate resource_metadata, then RFC 8414; its
    scopes_supported are asked for when the config names none."""
    server = FakeServer()
    flow = _flow(server, client_id="gw")
    query = await _sign_in(flow, "token:alice")
    assert server.probes == 1
    well_known = ISSUER + "/.well-known/oauth-authorization-server"
    assert server.fetched[:2] == [RESOURCE_METADATA, well_known]
    assert query["scope"] == ["tracker:read"]
    assert query["client_id"] == ["gw"]


async def test_without_a_client_id_the_gateway_registers_once_for_every_replica() -> None:
    """spec: RFC 7591 dynamic registration; gateway choice: the client is sealed in the
    store, so a second gateway on the same store and keys (a replica, a restart) reuses it."""
    server = FakeServer(registration_endpoint=ISSUER + "/reg")
    store, vault = EmbeddedStore(""), Vault.from_text(generate_key())
    first = _flow(server, store, vault, authorization_server=ISSUER)
    query = await _sign_in(first, "token:alice")
    assert query["client_id"] == ["dyn-1"]
    (request,) = server.registered
    assert request["redirect_uris"] == ["http://gw.test/oauth/callback"]
    assert request["token_endpoint_auth_method"] == "none"
    sealed = await store.get(client_key("tracker"))
    assert sealed is not None and b"dyn-secret" not in sealed
    replica = _flow(server, store, vault, authorization_server=ISSUER)
    assert (await _sign_in(replica, "token:bob"))["client_id"] == ["dyn-1"]
    assert len(server.registered) == 1


async def test_a_server_taking_client_id_metadata_documents_gets_the_gateways_url() -> None:
    """spec: client ID metadata documents: the client id is the URL of a document the
    gateway serves, naming that same id and the callback."""
    server = FakeServer(
        client_id_metadata_document_supported=True, registration_endpoint=ISSUER + "/reg"
    )
    flow = _flow(server, authorization_server=ISSUER)
    query = await _sign_in(flow, "token:alice")
    assert query["client_id"] == ["http://gw.test/oauth/client/tracker"]
    assert server.registered == []
    document = flow.client_document("tracker")
    assert document is not None
    body = msgspec.json.decode(document)
    assert body["client_id"] == "http://gw.test/oauth/client/tracker"
    assert body["redirect_uris"] == ["http://gw.test/oauth/callback"]
    assert flow.client_document("nothing") is None


async def test_no_client_id_and_no_way_to_get_one_names_what_to_set() -> None:
    """gateway choice: a server without registration or metadata documents is a setup error."""
    flow = _flow(FakeServer(), authorization_server=ISSUER)
    url, _ = await flow.new_link("token:alice", "tracker")
    with pytest.raises(ConsentSetupError, match=r"set auth\.client_id"):
        await flow.start(url.rsplit("/", 1)[1])


async def test_revoke_revokes_both_tokens_at_the_server_then_deletes_them() -> None:
    """spec: RFC 7009, the refresh token (ending the grant) then the access token."""
    server = FakeServer(revocation_endpoint=ISSUER + "/revoke")
    flow = _flow(server, client_id="gw", client_secret="s", authorization_server=ISSUER)
    await _sign_in(flow, "token:alice")
    assert await flow.revoke("token:alice", "tracker") == (True, AtServer.REVOKED)
    assert [(r["token"], r["token_type_hint"]) for r in server.revoked] == [
        ("rt", "refresh_token"),
        ("at", "access_token"),
    ]
    assert await flow.access_token("token:alice", "tracker") is None
    assert await flow.revoke("token:alice", "tracker") == (False, AtServer.NOTHING)


async def test_an_unreachable_revocation_endpoint_still_deletes_the_tokens() -> None:
    """gateway choice: the person asked to be forgotten: the tokens go, the failure is said."""
    server = FakeServer(revocation_endpoint=ISSUER + "/revoke")
    server.revocation_down = True
    flow = _flow(server, client_id="gw", authorization_server=ISSUER)
    await _sign_in(flow, "token:alice")
    assert await flow.revoke("token:alice", "tracker") == (True, AtServer.FAILED)
    assert await flow.list() == []


async def test_a_purge_deletes_only_the_named_backends_tokens_and_client() -> None:
    """gateway choice: purge keys name the backend; another backend's consents stay."""
    server = FakeServer(registration_endpoint=ISSUER + "/reg")
    store = EmbeddedStore("")
    flow = _flow(server, store, authorization_server=ISSUER)
    for principal in ("token:alice", "token:bob"):
        await _sign_in(flow, principal, "tracker")
        await _sign_in(flow, principal, "mail")
    assert await flow.purge({"tracker"}) == 2
    assert sorted((p, b) for p, b, _ in await flow.list()) == [
        ("token:alice", "mail"),
        ("token:bob", "mail"),
    ]
    assert await store.get(client_key("tracker")) is None
    assert await store.get(client_key("mail")) is not None
    # Discovered afresh: the next sign-in registers the backend again.
    await _sign_in(flow, "token:alice", "tracker")
    assert len(server.registered) == 3


@pytest.mark.parametrize(
    ("change", "purged"),
    [
        ({}, set()),
        ({"scopes": ["b", "a"]}, set()),
        ({"scopes": ["a"]}, {"tracker"}),
        ({"client_id": "other"}, {"tracker"}),
        ({"authorization_server": "https://other.test"}, {"tracker"}),
        ({"url": "https://tracker.test/v2"}, {"tracker"}),
        ({"removed": True}, {"tracker"}),
    ],
)
def test_a_reload_purges_a_backend_removed_or_changed_in_what_its_tokens_are_for(
    change: dict[str, Any], purged: set[str]
) -> None:
    """gateway choice: tokens issued for another server, client, scopes or resource go;
    the order of scopes is no change; other backends are never named."""
    auth = {
        "type": "user_consent",
        "client_id": "gw",
        "scopes": ["a", "b"],
        "authorization_server": "https://as.test",
    }
    other = ("https://mail.test", BackendAuth(**auth))  # type: ignore[arg-type]
    before = {"tracker": ("https://tracker.test", BackendAuth(**auth)), "mail": other}  # type: ignore[arg-type]
    url = change.pop("url", "https://tracker.test")
    after = {"mail": other}
    if not change.pop("removed", False):
        after["tracker"] = (url, BackendAuth(**{**auth, **change}))
    assert purge_targets(before, after) == purged


async def test_resource_metadata_for_another_resource_is_refused() -> None:
    """spec: RFC 9728 section 3.3, metadata whose resource is not the backend's URL is not
    used (no authorization server is taken from it)."""
    server = FakeServer()

    async def elsewhere(url: str) -> tuple[int, bytes]:
        body = {"resource": "https://evil.test/mcp", "authorization_servers": [ISSUER]}
        return 200, msgspec.json.encode(body)

    server.get = elsewhere  # type: ignore[method-assign]
    flow = _flow(server, client_id="gw")
    url, _ = await flow.new_link("token:alice", "tracker")
    with pytest.raises(ConsentSetupError, match="resource metadata is for"):
        await flow.start(url.rsplit("/", 1)[1])


async def test_the_gateway_serves_its_client_id_metadata_document_at_its_client_id() -> None:
    """spec: client ID metadata documents, the document is fetched from the client id URL;
    gateway choice: only for a user_consent backend without a configured client_id."""
    from tests.consent.test_consent_tokens import _status

    server = FakeServer(client_id_metadata_document_supported=True)
    pages = ConsentPages(_flow(server, authorization_server=ISSUER), "/oauth/callback")
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    assert pages.owns("/oauth/client/tracker")
    scope = {"type": "http", "method": "GET", "path": "/oauth/client/tracker", "headers": []}
    await pages(scope, receive, send)
    assert sent[0]["status"] == 200
    assert msgspec.json.decode(sent[1]["body"])["client_id"] == (
        "http://gw.test/oauth/client/tracker"
    )
    assert await _status(pages, "/oauth/client/nothing", b"") == 404
    configured = ConsentPages(_flow(server, client_id="gw"), "/oauth/callback")
    assert await _status(configured, "/oauth/client/tracker", b"") == 404


async def test_two_replicas_registering_at_once_end_up_with_one_client() -> None:
    """gateway choice: both registrations reach the server, the record first stored wins,
    and both replicas send their people with that one client id."""
    server = FakeServer(registration_endpoint=ISSUER + "/reg")
    both_posted = trio.Event()
    answer = server.post

    async def overlapping(url: str, body: bytes) -> tuple[int, bytes]:
        result = await answer(url, body)
        if len(server.registered) == 2:
            both_posted.set()
        await both_posted.wait()
        return result

    server.post = overlapping  # type: ignore[method-assign]
    store, vault = EmbeddedStore(""), Vault.from_text(generate_key())
    replicas = [_flow(server, store, vault, authorization_server=ISSUER) for _ in range(2)]
    client_ids: list[list[str]] = []

    async def sign_in(flow: ConsentTokens, principal: str) -> None:
        client_ids.append((await _sign_in(flow, principal))["client_id"])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sign_in, replicas[0], "token:alice")
        nursery.start_soon(sign_in, replicas[1], "token:bob")
    assert len(server.registered) == 2
    assert client_ids[0] == client_ids[1]
