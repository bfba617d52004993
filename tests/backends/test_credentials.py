"""Backend credentials at work (gateway/backends/credentials/provider.py), on trio's MockClock.

The token endpoint is a fake fetcher here: these tests are about time
(expiry, refresh, single flight) and faults, which a real server cannot
stage on a virtual clock. The same flows against the real oidc-provider
are in tests/identity/test_backend_credentials.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from trio.testing import MockClock

from gateway.backends.credentials.grants import CallerToken, TokenRequest
from gateway.backends.credentials.provider import (
    BackendCredentials,
    TokenAnswer,
    read_secret,
)
from gateway.config.schema_backend_auth import BackendAuth
from gateway.errors import CredentialUnavailable

TOKEN_URL = "https://idp.test/token"


class FakeEndpoint:
    """A token endpoint: numbered tokens, a latency, and a status to answer with."""

    def __init__(self, lifetime: float = 600.0, latency: float = 0.5) -> None:
        self.lifetime = lifetime
        self.latency = latency
        self.status = 200
        self.requests: list[TokenRequest] = []

    async def __call__(self, request: TokenRequest) -> TokenAnswer:
        self.requests.append(request)
        await trio.sleep(self.latency)
        if self.status != 200:
            return TokenAnswer(self.status, json.dumps({"error": "invalid_client"}).encode())
        body = {
            "access_token": f"tok-{len(self.requests)}",
            "token_type": "Bearer",
            "expires_in": self.lifetime,
        }
        return TokenAnswer(200, json.dumps(body).encode())


def _cc(**extra: Any) -> BackendAuth:
    settings: dict[str, Any] = {
        "type": "client_credentials",
        "token_url": TOKEN_URL,
        "client_id": "gateway",
        "client_secret": "s",
        **extra,
    }
    return BackendAuth(**settings)


def _credentials(
    auth: BackendAuth, endpoint: FakeEndpoint, subjects: Any = None
) -> BackendCredentials:
    return BackendCredentials(
        "b", auth, subjects=subjects or (lambda _client: None), fetch=endpoint
    )


def _fetching_from(port: int) -> BackendCredentials:
    """client_credentials from 127.0.0.1:``port``, with the real token fetcher (httpx)."""
    auth = _cc(token_url=f"http://127.0.0.1:{port}/token")
    return BackendCredentials("b", auth, subjects=lambda _client: None)


async def test_a_hundred_concurrent_requests_make_one_token_request(
    autojump_clock: MockClock,
) -> None:
    """Rule 2: single flight; everyone gets the one token."""
    endpoint = FakeEndpoint(latency=1.0)
    credential = _credentials(_cc(), endpoint).shared()
    assert credential is not None
    got: list[str] = []

    async def one() -> None:
        got.append(await credential.bearer())

    async with trio.open_nursery() as nursery:
        for _ in range(100):
            nursery.start_soon(one)
    assert len(endpoint.requests) == 1
    assert got == ["tok-1"] * 100


async def test_a_token_is_refreshed_shortly_before_it_expires(autojump_clock: MockClock) -> None:
    """60 s tokens, 30 s skew: reused for 30 s, then replaced; the count is a metric."""
    endpoint = FakeEndpoint(lifetime=60.0, latency=0.0)
    credentials = _credentials(_cc(refresh_skew=30.0), endpoint)
    credential = credentials.shared()
    assert credential is not None
    assert await credential.bearer() == "tok-1"
    await trio.sleep(29.9)
    assert await credential.bearer() == "tok-1"
    await trio.sleep(0.2)
    assert await credential.bearer() == "tok-2"
    assert credentials.requests == {("client_credentials", "ok"): 2}


async def test_a_refused_token_endpoint_fails_each_waiter_and_is_counted(
    autojump_clock: MockClock,
) -> None:
    endpoint = FakeEndpoint()
    endpoint.status = 401
    credentials = _credentials(_cc(), endpoint)
    credential = credentials.shared()
    assert credential is not None
    with pytest.raises(CredentialUnavailable, match="answered 401 invalid_client"):
        await credential.bearer()
    endpoint.status = 200
    assert await credential.bearer() == "tok-2"  # a failure is not cached
    assert credentials.requests == {
        ("client_credentials", "refused"): 1,
        ("client_credentials", "ok"): 1,
    }


async def test_an_unreachable_token_endpoint_is_credential_unavailable(
    autojump_clock: MockClock,
) -> None:
    """The real fetcher against a closed port: a clear error, counted as unreachable."""
    with trio.socket.socket() as probe:
        await probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    credentials = _fetching_from(port)
    credential = credentials.shared()
    assert credential is not None
    with pytest.raises(CredentialUnavailable, match="token endpoint unreachable"):
        await credential.bearer()
    assert credentials.requests == {("client_credentials", "unreachable"): 1}


def _transport(refuse: set[str], seen: list[str]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        seen.append(token)
        return httpx.Response(401 if token in refuse or "*" in refuse else 200)

    return httpx.MockTransport(handle)


async def test_a_401_is_retried_once_with_a_fresh_token(autojump_clock: MockClock) -> None:
    """Rule 3, through the httpx.Auth the transports use."""
    endpoint = FakeEndpoint(latency=0.0)
    credential = _credentials(_cc(), endpoint).shared()
    assert credential is not None
    seen: list[str] = []
    refuse = {"tok-1"}
    async with httpx.AsyncClient(
        auth=credential.http_auth(), transport=_transport(refuse, seen)
    ) as client:
        response = await client.post("http://backend.test/mcp", content=b"{}")
        assert response.status_code == 200
        assert seen == ["tok-1", "tok-2"]
        refuse.add("*")
        response = await client.post("http://backend.test/mcp", content=b"{}")
    assert response.status_code == 401  # the second 401 goes back as it is
    assert seen == ["tok-1", "tok-2", "tok-2", "tok-3"]


async def test_many_requests_refused_with_one_token_fetch_one_new_token(
    autojump_clock: MockClock,
) -> None:
    """Rule 3: only the first 401 for a token invalidates it; the rest find the new one."""
    endpoint = FakeEndpoint(latency=1.0)
    credential = _credentials(_cc(), endpoint).shared()
    assert credential is not None
    seen: list[str] = []
    async with httpx.AsyncClient(
        auth=credential.http_auth(), transport=_transport({"tok-1"}, seen)
    ) as client:
        assert await credential.bearer() == "tok-1"

        async def post() -> None:
            assert (await client.post("http://backend.test/mcp")).status_code == 200

        async with trio.open_nursery() as nursery:
            for _ in range(20):
                nursery.start_soon(post)
    assert len(endpoint.requests) == 2


async def test_a_static_token_is_not_retried(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("static-1\n")
    credentials = _credentials(
        BackendAuth(type="static", token_file=str(token_file)), FakeEndpoint()
    )
    credential = credentials.shared()
    assert credential is not None
    seen: list[str] = []
    async with httpx.AsyncClient(
        auth=credential.http_auth(), transport=_transport({"static-1"}, seen)
    ) as client:
        assert (await client.get("http://backend.test/mcp")).status_code == 401
        token_file.write_text("static-2")  # a rotated mount is read on the next request
        assert (await client.get("http://backend.test/mcp")).status_code == 200
    assert seen == ["static-1", "static-2"]


async def test_token_exchange_is_per_principal_and_the_catalog_uses_its_own(
    autojump_clock: MockClock,
) -> None:
    endpoint = FakeEndpoint(latency=0.0)
    subjects = {
        "session-a": ("jwt:iss|alice", CallerToken("alice-token")),
        "session-a2": ("jwt:iss|alice", CallerToken("alice-token-refreshed")),
        "session-b": ("jwt:iss|bob", CallerToken("bob-token")),
    }
    auth = BackendAuth(
        type="token_exchange",
        token_url=TOKEN_URL,
        client_id="gateway",
        client_secret="s",
        audience="backend-b",
        catalog=BackendAuth(type="static", token="catalog-token"),
    )
    credentials = _credentials(auth, endpoint, subjects.get)
    shared = credentials.shared()
    assert shared is not None
    assert await shared.bearer() == "catalog-token"
    a = credentials.for_client("session-a")
    a2 = credentials.for_client("session-a2")
    b = credentials.for_client("session-b")
    assert a is not None and a2 is not None and b is not None
    assert await a.bearer() == "tok-1"
    assert await a2.bearer() == "tok-1"  # the same principal: cached
    assert await b.bearer() == "tok-2"
    subject_tokens = [r.form["subject_token"] for r in endpoint.requests]
    assert subject_tokens == ["alice-token", "bob-token"]
    assert {r.form["audience"] for r in endpoint.requests} == {"backend-b"}
    nobody = credentials.for_client("unauthenticated")
    assert nobody is not None
    with pytest.raises(CredentialUnavailable, match="no caller token to exchange"):
        await nobody.bearer()


async def test_an_unreadable_secret_file_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    credentials = _credentials(
        _cc(client_secret="", client_secret_file=str(missing)), FakeEndpoint()
    )
    credential = credentials.shared()
    assert credential is not None
    with pytest.raises(CredentialUnavailable, match="cannot read client_secret file") as caught:
        await credential.bearer()
    assert str(missing) in str(caught.value)
    assert credentials.requests == {("client_credentials", "secret_unreadable"): 1}


def test_read_secret_strips_the_newline_and_refuses_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "s"
    path.write_text("value\n")
    assert read_secret("ignored", str(path), "x") == "value"
    assert read_secret("direct", "", "x") == "direct"
    path.write_text("\n")
    with pytest.raises(CredentialUnavailable, match="is empty"):
        read_secret("", str(path), "x")


async def test_a_token_endpoint_that_never_answers_is_given_up_after_ten_seconds(
    autojump_clock: MockClock,
) -> None:
    """A listening socket that accepts and says nothing: the token request ends at
    TOKEN_REQUEST_TIMEOUT (virtual time) with a clear error, counted as unreachable."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    held: list[trio.SocketStream] = []

    async def hold(stream: trio.SocketStream) -> None:
        held.append(stream)  # read nothing, answer nothing
        await trio.sleep_forever()

    credentials = _fetching_from(port)
    credential = credentials.shared()
    assert credential is not None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, hold, listeners)
        started = trio.current_time()
        with pytest.raises(CredentialUnavailable, match="did not answer within 10 s"):
            await credential.bearer()
        assert trio.current_time() - started == pytest.approx(10.0, abs=0.5)
        nursery.cancel_scope.cancel()
    assert held  # the request did reach the socket
    assert credentials.requests == {("client_credentials", "unreachable"): 1}


async def test_a_refused_exchanged_token_is_exchanged_again_once(
    autojump_clock: MockClock,
) -> None:
    """Rule 3 for token exchange: the 401 drops that principal's token; the retry exchanges the
    caller's token afresh; another principal's cached token is untouched."""
    endpoint = FakeEndpoint(latency=0.0)
    subjects = {
        "a": ("jwt:iss|alice", CallerToken("alice-token")),
        "b": ("jwt:iss|bob", CallerToken("bob-token")),
    }
    auth = BackendAuth(
        type="token_exchange", token_url=TOKEN_URL, client_id="gateway", client_secret="s"
    )
    credentials = _credentials(auth, endpoint, subjects.get)
    alice, bob = credentials.for_client("a"), credentials.for_client("b")
    assert alice is not None and bob is not None
    assert await bob.bearer() == "tok-1"
    seen: list[str] = []
    async with httpx.AsyncClient(
        auth=alice.http_auth(), transport=_transport({"tok-2"}, seen)
    ) as client:
        assert (await client.post("http://backend.test/mcp")).status_code == 200
    assert seen == ["tok-2", "tok-3"]
    assert [r.form["subject_token"] for r in endpoint.requests] == [
        "bob-token",
        "alice-token",
        "alice-token",
    ]
    assert await bob.bearer() == "tok-1"
    assert credentials.requests == {("token_exchange", "ok"): 3}
