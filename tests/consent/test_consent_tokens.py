"""The consent flow's I/O without sockets: links, logins, exchange, refresh (consent_tokens.py).

The authorization server is a fake here only for what a real one cannot be
made to do on cue (a refresh at a chosen instant, a refused refresh token,
answers slow enough to overlap); the real one is in test_consent_flow.py.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgspec
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from trio.testing import MockClock

from gateway.backends.credentials.consent_tokens import AtServer, ConsentBackend, ConsentTokens
from gateway.backends.credentials.grants import TokenRequest
from gateway.backends.credentials.provider import TokenAnswer
from gateway.config.schema_backend_auth import BackendAuth
from gateway.config.schema_consent import LoginBinding
from gateway.consent.records import LoginRefused, Refusal, StoredTokens
from gateway.consent.vault import Vault, generate_key
from gateway.frontend.consent_pages import ConsentPages
from gateway.store.embedded import EmbeddedStore

ISSUER = "http://127.0.0.1:9"
METADATA = msgspec.json.encode(
    {
        "issuer": ISSUER,
        "authorization_endpoint": ISSUER + "/auth",
        "token_endpoint": ISSUER + "/token",
        "code_challenge_methods_supported": ["S256"],
    }
)


class FakeServer:
    """Answers discovery and token requests; counts them; can refuse refreshes."""

    def __init__(self) -> None:
        self.requests: list[dict[str, str]] = []
        self.refuse_refresh = False
        self.delay = 0.0

    async def get(self, url: str) -> tuple[int, bytes]:
        return (200, METADATA) if url.endswith("oauth-authorization-server") else (404, b"")

    async def fetch(self, request: TokenRequest) -> TokenAnswer:
        self.requests.append(dict(request.form))
        await trio.sleep(self.delay)
        if request.form["grant_type"] == "refresh_token" and self.refuse_refresh:
            return TokenAnswer(400, b'{"error":"invalid_grant"}')
        n = len(self.requests)
        body = {"access_token": f"at-{n}", "refresh_token": f"rt-{n}", "expires_in": 100}
        return TokenAnswer(200, msgspec.json.encode(body))


def _tokens(
    server: FakeServer, wall: list[float], bind_login: LoginBinding | None = None
) -> ConsentTokens:
    auth = BackendAuth(
        type="user_consent", client_id="gw", client_secret="s", authorization_server=ISSUER
    )
    return ConsentTokens(
        lambda: {"tracker": ConsentBackend("tracker", "http://Tracker.test/mcp/", auth)},
        EmbeddedStore("", clock=lambda: wall[0]),
        Vault.from_text(generate_key()),
        public_origin="http://gw.test",
        callback_path="/oauth/callback",
        login_timeout=600.0,
        bind_login=bind_login,
        fetch=server.fetch,
        get=server.get,
        wall=lambda: wall[0],
    )


async def _consent(tokens: ConsentTokens, principal: str) -> dict[str, list[str]]:
    """One person's link, start and callback; returns the authorization request's query."""
    url, _ = await tokens.new_link(principal, "tracker")
    location = await tokens.start(url.rsplit("/", 1)[1])
    query = parse_qs(urlsplit(location).query)
    await tokens.finish(query["state"][0], "the-code", "")
    return query


async def test_a_consent_stores_a_token_for_that_person_only() -> None:
    """spec: PKCE S256 and the resource indicator; gateway choice: (principal, backend) bound."""
    server, wall = FakeServer(), [1000.0]
    tokens = _tokens(server, wall)
    query = await _consent(tokens, "token:alice")
    assert query["code_challenge_method"] == ["S256"]
    assert query["resource"] == ["http://tracker.test/mcp"]
    assert query["redirect_uri"] == ["http://gw.test/oauth/callback"]
    (exchange,) = server.requests
    assert exchange["grant_type"] == "authorization_code"
    digest = hashlib.sha256(exchange["code_verifier"].encode()).digest()
    assert base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == query["code_challenge"][0]
    assert exchange["resource"] == "http://tracker.test/mcp"
    assert await tokens.access_token("token:alice", "tracker") == "at-1"
    assert await tokens.access_token("token:bob", "tracker") is None
    assert [(p, b) for p, b, _ in await tokens.list()] == [("token:alice", "tracker")]


async def test_a_link_and_a_login_are_single_use_and_expire() -> None:
    """gateway choice: a second start or callback finds nothing; a late one is expired."""
    server, wall = FakeServer(), [1000.0]
    tokens = _tokens(server, wall)
    url, _ = await tokens.new_link("token:alice", "tracker")
    link = url.rsplit("/", 1)[1]
    location = await tokens.start(link)
    with pytest.raises(LoginRefused) as again:
        await tokens.start(link)
    assert again.value.reason is Refusal.UNKNOWN
    state = parse_qs(urlsplit(location).query)["state"][0]
    wall[0] += 601
    with pytest.raises(LoginRefused) as late:
        await tokens.finish(state, "code", "")
    assert late.value.reason in (Refusal.EXPIRED, Refusal.UNKNOWN)
    assert server.requests == []  # nothing was exchanged


async def test_a_due_token_is_refreshed_once_however_many_calls_need_it(
    autojump_clock: MockClock,
) -> None:
    """gateway choice: refresh before expiry, single flight per (principal, backend)."""
    server, wall = FakeServer(), [1000.0]
    tokens = _tokens(server, wall)
    await _consent(tokens, "token:alice")
    wall[0] += 95  # past refresh_at (100 s token, 30 s skew), before expiry
    server.delay = 1.0
    got: list[str | None] = []

    async def use() -> None:
        got.append(await tokens.access_token("token:alice", "tracker"))

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(use)
    assert got == ["at-2"] * 5
    refreshes = [r for r in server.requests if r["grant_type"] == "refresh_token"]
    assert len(refreshes) == 1 and refreshes[0]["refresh_token"] == "rt-1"


async def test_a_refused_refresh_sends_the_person_back_through_consent() -> None:
    """gateway choice: the record goes, so the next call asks for consent again."""
    server, wall = FakeServer(), [1000.0]
    tokens = _tokens(server, wall)
    await _consent(tokens, "token:alice")
    wall[0] += 95
    server.refuse_refresh = True
    assert await tokens.access_token("token:alice", "tracker") is None
    assert await tokens.list() == []


async def test_revoke_forgets_the_persons_tokens() -> None:
    """gateway choice: revoked is as if never consented."""
    server, wall = FakeServer(), [1000.0]
    tokens = _tokens(server, wall)
    await _consent(tokens, "token:alice")
    deleted, at_server = await tokens.revoke("token:alice", "tracker")
    assert deleted and at_server is AtServer.NOT_OFFERED  # METADATA has no revocation_endpoint
    assert await tokens.access_token("token:alice", "tracker") is None


async def _status(pages: ConsentPages, path: str, query: bytes) -> int:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "query_string": query, "headers": []}
    await pages(scope, receive, send)
    status: int = sent[0]["status"]
    return status


@settings(max_examples=60, deadline=None)
@given(
    query=st.one_of(
        st.binary(max_size=200),
        st.dictionaries(
            st.sampled_from(["state", "code", "error", "iss", "x"]), st.text(max_size=40)
        ).map(lambda d: "&".join(f"{k}={v}" for k, v in d.items()).encode("utf-8", "replace")),
    ),
    link=st.text(max_size=40).filter(lambda s: "/" not in s),
)
def test_no_callback_or_link_a_browser_can_send_is_a_server_error(query: bytes, link: str) -> None:
    """gateway choice: whatever reaches the two paths, the answer is a 4xx page, never a 500."""

    async def main() -> tuple[int, int]:
        pages = ConsentPages(_tokens(FakeServer(), [1000.0]), "/oauth/callback")
        callback = await _status(pages, "/oauth/callback", query)
        start = await _status(pages, "/oauth/start/" + link, b"")
        return callback, start

    callback, start = trio.run(main)
    assert callback == 400 and start == 400


@settings(max_examples=40, deadline=None)
@given(
    state=st.text(max_size=40),
    code=st.text(max_size=40),
    error=st.sampled_from(["", "access_denied"]),
)
def test_no_login_callback_under_bind_login_is_a_server_error(
    state: str, code: str, error: str
) -> None:
    """gateway choice: with consent.bind_login, a callback naming any login state (the
    identifying step's prefix or not) is a 400 page, never a 500, and stores nothing."""
    from urllib.parse import urlencode

    async def main() -> tuple[int, int]:
        bind = LoginBinding(client_id="gw-login", client_secret="s", issuer=ISSUER)
        tokens = _tokens(FakeServer(), [1000.0], bind)
        pages = ConsentPages(tokens, "/oauth/callback")
        statuses = []
        for prefix in ("i.", ""):
            query = urlencode({"state": prefix + state, "code": code, "error": error})
            statuses.append(await _status(pages, "/oauth/callback", query.encode()))
        assert await tokens.list() == []
        return statuses[0], statuses[1]

    identifying, plain = trio.run(main)
    assert identifying == 400 and plain == 400


async def test_under_bind_login_a_link_leads_to_the_openid_login_or_is_refused() -> None:
    """gateway choice: the start sends a JWT caller's browser to the issuer's login (openid,
    nonce, PKCE, no resource); a static-token caller's link is refused (CANNOT_BIND)."""
    bind = LoginBinding(client_id="gw-login", client_secret="s", issuer=ISSUER)
    server = FakeServer()
    tokens = _tokens(server, [1000.0], bind)
    url, _ = await tokens.new_link("jwt:" + ISSUER + "|alice", "tracker")
    location = await tokens.start(url.rsplit("/", 1)[1])
    query = parse_qs(urlsplit(location).query)
    assert location.startswith(ISSUER + "/auth?")
    assert query["client_id"] == ["gw-login"] and query["scope"] == ["openid"]
    assert query["state"][0].startswith("i.") and query["nonce"]
    assert query["code_challenge_method"] == ["S256"] and "resource" not in query
    url, _ = await tokens.new_link("token:robot", "tracker")
    with pytest.raises(LoginRefused) as refused:
        await tokens.start(url.rsplit("/", 1)[1])
    assert refused.value.reason is Refusal.CANNOT_BIND
    assert server.requests == []


async def test_a_token_the_backend_refused_is_refreshed_and_without_refresh_asked_again() -> None:
    """gateway choice: a 401 from the backend refreshes that person's token on the retry;
    with no refresh token the record goes and the person consents again."""
    server, wall = FakeServer(), [1000.0]
    tokens = _tokens(server, wall)
    await _consent(tokens, "token:alice")
    tokens.refused("token:alice", "tracker", "at-1")
    assert await tokens.access_token("token:alice", "tracker") == "at-2"
    tokens.refused("token:alice", "tracker", "at-1")  # a late 401 of the old token
    assert await tokens.access_token("token:alice", "tracker") == "at-2"
    server.refuse_refresh = True
    tokens.refused("token:alice", "tracker", "at-2")
    assert await tokens.access_token("token:alice", "tracker") is None
    assert await tokens.list() == []


async def test_a_reloaded_backend_config_applies_to_the_next_sign_in() -> None:
    """gateway choice: the flow reads the backends now in force (a reload changes them)."""
    wall = [1000.0]
    live: dict[str, ConsentBackend] = {}

    def auth(client_id: str) -> BackendAuth:
        return BackendAuth(type="user_consent", client_id=client_id, authorization_server=ISSUER)

    server = FakeServer()
    tokens = ConsentTokens(
        lambda: live,
        EmbeddedStore("", clock=lambda: wall[0]),
        Vault.from_text(generate_key()),
        public_origin="http://gw.test",
        callback_path="/oauth/callback",
        login_timeout=600.0,
        fetch=server.fetch,
        get=server.get,
        wall=lambda: wall[0],
    )
    assert not tokens.acts_for_people("tracker")
    live["tracker"] = ConsentBackend("tracker", "http://tracker.test/mcp", auth("old"))
    assert tokens.acts_for_people("tracker")
    live["tracker"] = ConsentBackend("tracker", "http://tracker.test/mcp", auth("new"))
    url, _ = await tokens.new_link("token:alice", "tracker")
    location = await tokens.start(url.rsplit("/", 1)[1])
    assert parse_qs(urlsplit(location).query)["client_id"] == ["new"]


async def test_the_survey_counts_consents_expiring_ones_and_refused_refreshes_never_who() -> None:
    """gateway choice: per backend, principals with tokens that open, those with no refresh
    token ending within the hour, and refreshes refused since start; no principal, no token."""
    server, wall = FakeServer(), [1000.0]
    tokens = _tokens(server, wall)
    assert (await tokens.survey()).backends[0].consented == 0
    for principal in ("token:alice", "token:bob", "token:carol"):
        await _consent(tokens, principal)
    # carol's record has no refresh token: her sign-in ends with the access token.
    carol = await tokens._tokens("token:carol", "tracker")
    assert carol is not None
    await tokens._put("token:carol", "tracker", msgspec.structs.replace(carol, refresh_token=""))
    wall[0] += 95  # everyone's token is due; alice's refresh is refused
    server.refuse_refresh = True
    assert await tokens.access_token("token:alice", "tracker") is None
    survey = await tokens.survey()
    assert tokens.last_survey == survey
    assert survey.counted_at == wall[0]
    (row,) = survey.backends
    assert (row.backend, row.consented, row.expiring_soon, row.refresh_failures) == (
        "tracker",
        2,  # bob and carol: alice's record went with the refused refresh
        1,  # carol
        1,  # alice's refresh
    )
    shown = msgspec.json.encode(survey)
    assert b"alice" not in shown and b"carol" not in shown and b"at-" not in shown
    assert await tokens.counts() == {"tracker": 2}


async def test_the_survey_is_kept_current_after_a_change(autojump_clock: MockClock) -> None:
    """gateway choice: run() counts at start, soon after a grant or revocation, and every
    SURVEY_INTERVAL in any case."""
    from gateway.backends.credentials.consent_tokens import SURVEY_INTERVAL

    server, wall = FakeServer(), [1000.0]
    tokens = _tokens(server, wall)
    async with trio.open_nursery() as nursery:
        await nursery.start(tokens.run)
        assert tokens.last_survey is not None
        assert tokens.last_survey.backends[0].consented == 0
        await _consent(tokens, "token:alice")
        await trio.sleep(1)
        assert tokens.last_survey.backends[0].consented == 1
        await tokens.revoke("token:alice", "tracker")
        await trio.sleep(1)
        assert tokens.last_survey.backends[0].consented == 0
        # A consent stored elsewhere (another replica) shows within the interval.
        stored = StoredTokens(access_token="a", expires_at=wall[0] + 100, refresh_at=wall[0] + 70)
        await tokens._put("token:bob", "tracker", stored)
        await trio.sleep(1)
        assert tokens.last_survey.backends[0].consented == 0
        await trio.sleep(SURVEY_INTERVAL)
        assert tokens.last_survey.backends[0].consented == 1
        assert tokens.last_survey.backends[0].expiring_soon == 1  # no refresh token
        nursery.cancel_scope.cancel()


class RevokingServer(FakeServer):
    """A fake server that also advertises RFC 7009 revocation and records each request."""

    async def get(self, url: str) -> tuple[int, bytes]:
        if not url.endswith("oauth-authorization-server"):
            return 404, b""
        document = msgspec.json.decode(METADATA)
        return 200, msgspec.json.encode({**document, "revocation_endpoint": ISSUER + "/revoke"})

    async def fetch(self, request: TokenRequest) -> TokenAnswer:
        if "grant_type" not in request.form:
            self.requests.append(dict(request.form))
            return TokenAnswer(200, b"")
        return await super().fetch(request)


async def test_replicas_purging_a_withdrawn_consent_revoke_it_once_and_keep_the_rest() -> None:
    """gateway choice: each replica's reload judges the same pairs; the record is taken, so
    bob's tokens are revoked at the server once, alice's stay, and a later run finds none."""
    server, wall = RevokingServer(), [1000.0]
    store, vault = EmbeddedStore("", clock=lambda: wall[0]), Vault.from_text(generate_key())
    auth = BackendAuth(
        type="user_consent", client_id="gw", client_secret="s", authorization_server=ISSUER
    )
    replicas = [
        ConsentTokens(
            lambda: {"tracker": ConsentBackend("tracker", "http://tracker.test/mcp", auth)},
            store,
            vault,
            public_origin="http://gw.test",
            callback_path="/oauth/callback",
            login_timeout=600.0,
            fetch=server.fetch,
            get=server.get,
            wall=lambda: wall[0],
        )
        for _ in range(2)
    ]
    for principal in ("token:alice", "token:bob"):
        await _consent(replicas[0], principal)
    purged: list[int] = []

    async def purge(replica: ConsentTokens) -> None:
        purged.append(await replica.purge_withdrawn(lambda principal, _: principal != "token:bob"))

    async with trio.open_nursery() as nursery:
        for replica in replicas:
            nursery.start_soon(purge, replica)
    assert sorted(purged) == [0, 1]
    revoked = [r for r in server.requests if "grant_type" not in r]
    assert [r["token_type_hint"] for r in revoked] == ["refresh_token", "access_token"]
    assert [(p, b) for p, b, _ in await replicas[1].list()] == [("token:alice", "tracker")]
    assert await replicas[1].purge_withdrawn(lambda principal, _: principal != "token:bob") == 0
