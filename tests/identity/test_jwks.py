"""The JWKS source on a fake clock and a fake IdP: caching, refetch on unknown kid, outages."""

from __future__ import annotations

import json
from typing import Any, Final

import httpx
import jwt
import pytest
import trio
from cryptography.hazmat.primitives.asymmetric import rsa
from prometheus_client import CollectorRegistry

from gateway.config import AuthConfig, JwtConfig
from gateway.identity.authenticator import Authenticator, Unauthenticated
from gateway.identity.jwks import JwksSource, cache_lifetime
from gateway.identity.keys import DEFAULT_ALGORITHMS
from gateway.telemetry.metrics import Metrics

URL: Final = "https://idp.test/jwks"
AUD: Final = "https://gw.test/mcp"


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _jwk(key: rsa.RSAPrivateKey, kid: str) -> dict[str, Any]:
    jwk: dict[str, Any] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    return {**jwk, "kid": kid, "alg": "RS256", "use": "sig"}


class FakeIdp:
    """Serves a JWK Set; counts fetches; can be taken down."""

    def __init__(self, keys: dict[str, rsa.RSAPrivateKey], cache_control: str = "") -> None:
        self.keys = keys
        self.cache_control = cache_control
        self.fetches = 0
        self.down: str | None = None

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.fetches += 1
        if self.down == "refused":
            raise httpx.ConnectError("connection refused", request=request)
        if self.down == "500":
            return httpx.Response(500, text="oops")
        if self.down == "garbage":
            return httpx.Response(200, text="<html>")
        if self.down == "slow":
            await trio.sleep(30)
        if self.down == "huge":
            return httpx.Response(200, content=b" " * (2 * 1024 * 1024))
        body = {"keys": [_jwk(k, kid) for kid, k in self.keys.items()]}
        headers = {"cache-control": self.cache_control} if self.cache_control else {}
        return httpx.Response(200, json=body, headers=headers)


def _source(idp: FakeIdp, metrics: Metrics | None = None) -> JwksSource:
    return JwksSource(
        URL,
        DEFAULT_ALGORITHMS,
        min_refresh=30,
        default_max_age=600,
        metrics=metrics,
        transport=httpx.MockTransport(idp.handle),
    )


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        (None, 600.0),
        ("max-age=120", 120.0),
        ("public, max-age=7200, must-revalidate", 7200.0),
        ('max-age="45"', 45.0),
        ("max-age=5", 30.0),  # never below min_refresh
        ("max-age=99999999", 86400.0),  # never above a day
        ("no-store", 600.0),
    ],
)
def test_the_cache_lifetime_follows_cache_control_within_bounds(
    header: str | None, seconds: float
) -> None:
    """Issue 16 item 1: cached per Cache-Control max-age."""
    assert cache_lifetime(header, 600, 30) == seconds


async def test_the_set_is_refetched_when_its_max_age_runs_out(autojump_clock: Any) -> None:
    """Issue 16 item 1: fetched at start, again when max-age is over, not before."""
    idp = FakeIdp({"k1": _key()}, cache_control="max-age=120")
    source = _source(idp)
    async with trio.open_nursery() as nursery:
        await nursery.start(source.run)
        assert (idp.fetches, len(source.keys)) == (1, 1)
        await trio.sleep(119)
        assert idp.fetches == 1
        await trio.sleep(2)
        assert idp.fetches == 2
        nursery.cancel_scope.cancel()


async def test_an_unknown_kid_refetches_at_most_once_per_min_refresh(
    autojump_clock: Any,
) -> None:
    """A46: Issue 16 item 1: a flood of unknown kids costs the IdP one fetch per interval."""
    idp = FakeIdp({"k1": _key()})
    source = _source(idp)
    async with trio.open_nursery() as nursery:
        await nursery.start(source.run)
        assert await source.refresh_for_unknown_kid() is False  # just fetched
        await trio.sleep(30)
        assert await source.refresh_for_unknown_kid() is True
        assert idp.fetches == 2
        for _ in range(100):
            assert await source.refresh_for_unknown_kid() is False
        assert idp.fetches == 2
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("outage", ["refused", "500", "garbage", "huge"])
async def test_the_last_good_set_is_kept_while_the_idp_is_down(
    autojump_clock: Any, outage: str
) -> None:
    """A46: Issue 16 item 1: last good set kept; the failure is counted by outcome."""
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    idp = FakeIdp({"k1": _key(), "k2": _key()}, cache_control="max-age=60")
    source = _source(idp, metrics)
    async with trio.open_nursery() as nursery:
        await nursery.start(source.run)
        good = source.keys
        idp.down = outage
        await trio.sleep(61)
        assert idp.fetches == 2
        assert source.keys is good
        await trio.sleep(31)  # retried after min_refresh, still down
        assert idp.fetches == 3
        nursery.cancel_scope.cancel()
    outcome = {
        "refused": "unreachable",
        "500": "http_error",
        "garbage": "invalid",
        "huge": "invalid",  # over 1 MiB: not read further
    }[outage]
    sample = registry.get_sample_value
    assert sample("mcp_gateway_jwks_refresh_total", {"outcome": "ok"}) == 1
    assert sample("mcp_gateway_jwks_refresh_total", {"outcome": outcome}) == 2
    assert sample("mcp_gateway_jwks_keys") == 2


async def test_a_token_signed_with_a_rotated_key_is_accepted_without_a_restart(
    autojump_clock: Any,
) -> None:
    """A47: Issue 16 item 1/6: the IdP rotates; the first token with the new kid makes the
    gateway refetch, and it is accepted."""
    old, new = _key(), _key()
    idp = FakeIdp({"old": old})
    source = _source(idp)
    config = AuthConfig(jwt=JwtConfig(jwks_url=URL, issuer="https://idp.test"))
    auth = Authenticator(config, AUD, jwks=source)

    def bearer(key: rsa.RSAPrivateKey, kid: str) -> bytes:
        claims = {"iss": "https://idp.test", "aud": AUD, "sub": "svc", "exp": 2_000_000_000}
        return b"Bearer " + jwt.encode(claims, key, "RS256", headers={"kid": kid}).encode()

    async with trio.open_nursery() as nursery:
        await nursery.start(source.run)
        assert await auth.authenticate(bearer(old, "old"), now=1_900_000_000) is not None
        idp.keys = {"new": new}
        await trio.sleep(30)
        principal = await auth.authenticate(bearer(new, "new"), now=1_900_000_000)
        assert principal is not None
        assert principal.key == "jwt:https://idp.test|svc"
        assert idp.fetches == 2
        # The old key is gone from the set: its token, verified (and remembered)
        # before, is checked afresh against the new set and refused.
        with pytest.raises(Unauthenticated, match="no key with kid 'old'"):
            await auth.authenticate(bearer(old, "old"), now=1_900_000_000)
        # A made-up kid right after: no fetch allowed, refused.
        with pytest.raises(Unauthenticated, match="no key with kid"):
            await auth.authenticate(bearer(new, "made-up"), now=1_900_000_000)
        assert idp.fetches == 2
        nursery.cancel_scope.cancel()


async def test_a_slow_idp_holds_a_request_no_longer_than_the_fetch_timeout(
    autojump_clock: Any,
) -> None:
    """A46 (E9): the IdP takes 30 s to answer; a token with an unknown kid waits at most
    jwks_timeout + 1 s, then is refused; other tokens are not held at all."""
    key = _key()
    idp = FakeIdp({"k1": key})
    source = JwksSource(
        URL,
        DEFAULT_ALGORITHMS,
        min_refresh=30,
        timeout=5,
        transport=httpx.MockTransport(idp.handle),
    )
    config = AuthConfig(jwt=JwtConfig(jwks_url=URL))
    auth = Authenticator(config, AUD, jwks=source)
    claims = {"aud": AUD, "sub": "svc", "exp": 2_000_000_000}

    def bearer(kid: str) -> bytes:
        return b"Bearer " + jwt.encode(claims, key, "RS256", headers={"kid": kid}).encode()

    async with trio.open_nursery() as nursery:
        await nursery.start(source.run)
        idp.down = "slow"
        await trio.sleep(30)
        start = trio.current_time()
        with pytest.raises(Unauthenticated, match="no key with kid"):
            await auth.authenticate(bearer("rotated"), now=1_900_000_000)
        assert trio.current_time() - start <= 6
        start = trio.current_time()
        assert await auth.authenticate(bearer("k1"), now=1_900_000_000) is not None
        assert trio.current_time() == start
        nursery.cancel_scope.cancel()
