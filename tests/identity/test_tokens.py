"""The JWT checks, table-driven: each algorithm, each claim, each attack (no I/O, fixed clock)."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any, Final

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from gateway.config import AuthConfig, JwtConfig
from gateway.identity.authenticator import (
    Authenticator,
    InsufficientScope,
    Unauthenticated,
)
from gateway.identity.keys import DEFAULT_ALGORITHMS, KeySet
from gateway.identity.tokens import JwtRules, TokenRejected, UnknownKey, verify

NOW: Final = 1_800_000_000.0
ISS: Final = "https://idp.test/realms/r"
AUD: Final = "https://gw.test/mcp"
SECRET: Final = "jwt-shared-secret-at-least-32-bytes!!"

RSA_KEY: Final = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY: Final = ec.generate_private_key(ec.SECP256R1())
ED_KEY: Final = ed25519.Ed25519PrivateKey.generate()
OTHER_RSA: Final = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _jwk(private: Any, kid: str, alg: str | None = None) -> dict[str, Any]:
    algo = jwt.get_algorithm_by_name(
        {"rsa": "RS256", "ec": "ES256", "ed": "EdDSA"}[
            "rsa"
            if isinstance(private, rsa.RSAPrivateKey)
            else "ec"
            if isinstance(private, ec.EllipticCurvePrivateKey)
            else "ed"
        ]
    )
    jwk: dict[str, Any] = json.loads(algo.to_jwk(private.public_key()))
    jwk["kid"] = kid
    if alg:
        jwk["alg"] = alg
    return jwk


JWKS: Final = {
    "keys": [
        _jwk(RSA_KEY, "rsa-1"),
        _jwk(EC_KEY, "ec-1"),
        _jwk(ED_KEY, "ed-1"),
        _jwk(OTHER_RSA, "rsa-ps-only", alg="PS256"),
        {"kty": "RSA", "kid": "enc", "use": "enc", "n": "AQAB", "e": "AQAB"},
    ]
}
KEYS: Final = KeySet.from_jwks(JWKS, DEFAULT_ALGORITHMS)
RULES: Final = JwtRules(audience=AUD, issuer=ISS, leeway=5, secret=SECRET)


def _claims(**overrides: Any) -> dict[str, Any]:
    claims: dict[str, Any] = {
        "iss": ISS,
        "aud": AUD,
        "sub": "ada",
        "exp": NOW + 60,
        "scope": "mcp:tools read",
    }
    claims.update(overrides)
    return {k: v for k, v in claims.items() if v is not None}


def _sign(alg: str, key: Any, kid: str | None, **overrides: Any) -> str:
    headers = {"kid": kid} if kid else {}
    return jwt.encode(_claims(**overrides), key, algorithm=alg, headers=headers)


def _rsa_public_pem() -> bytes:
    return RSA_KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _forge(header: dict[str, Any], claims: dict[str, Any], signature: bytes = b"") -> str:
    part = jwt.utils.base64url_encode
    return b".".join(
        [part(json.dumps(header).encode()), part(json.dumps(claims).encode()), part(signature)]
    ).decode()


def _hs256_with_the_rsa_public_key() -> str:
    """The classic attack: HMAC the token with the RSA public key the verifier holds."""
    part = jwt.utils.base64url_encode
    head = part(json.dumps({"alg": "HS256", "kid": "rsa-1"}).encode())
    body = part(json.dumps(_claims()).encode())
    signature = hmac.new(_rsa_public_pem(), head + b"." + body, hashlib.sha256).digest()
    return b".".join([head, body, part(signature)]).decode()


ACCEPTED = [
    ("RS256", RSA_KEY, "rsa-1"),
    ("RS512", RSA_KEY, "rsa-1"),
    ("PS256", RSA_KEY, "rsa-1"),
    ("PS256", OTHER_RSA, "rsa-ps-only"),
    ("ES256", EC_KEY, "ec-1"),
    ("EdDSA", ED_KEY, "ed-1"),
    ("HS256", SECRET, None),
]


@pytest.mark.parametrize(("alg", "key", "kid"), ACCEPTED, ids=[f"{a}-{k}" for a, _, k in ACCEPTED])
def test_each_algorithm_verifies_with_its_key(alg: str, key: Any, kid: str | None) -> None:
    """Issue 16 item 1: RS256, PS256, ES256, EdDSA (JWKS) and HS256 (secret) are accepted."""
    claims = verify(_sign(alg, key, kid), KEYS, RULES, NOW)
    assert claims["sub"] == "ada"


REFUSED: list[tuple[str, str, str]] = [
    ("wrong issuer", _sign("RS256", RSA_KEY, "rsa-1", iss="https://evil.test"), "issuer"),
    ("wrong audience", _sign("RS256", RSA_KEY, "rsa-1", aud="https://other/mcp"), "audience"),
    ("no audience", _sign("RS256", RSA_KEY, "rsa-1", aud=None), "'aud'"),
    ("expired past leeway", _sign("ES256", EC_KEY, "ec-1", exp=NOW - 6), "expired"),
    ("no exp", _sign("ES256", EC_KEY, "ec-1", exp=None), "without exp"),
    ("exp is a string", _sign("ES256", EC_KEY, "ec-1", exp="soon"), "without exp"),
    ("nbf in the future", _sign("EdDSA", ED_KEY, "ed-1", nbf=NOW + 6), "not valid yet"),
    ("unknown kid", _sign("RS256", OTHER_RSA, "rsa-2"), "no key with kid"),
    ("signed by another key", _sign("RS256", OTHER_RSA, "rsa-1"), "signature"),
    (
        "alg none",
        _forge({"alg": "none", "kid": "rsa-1"}, _claims()),
        "'none'",
    ),
    (
        "alg None, any case",
        _forge({"alg": "NoNe"}, _claims()),
        "'none'",
    ),
    (
        "HS256 keyed with the RSA public key (alg confusion)",
        _hs256_with_the_rsa_public_key(),
        "not allowed for this key",
    ),
    ("RS256 on a key pinned to PS256", _sign("RS256", OTHER_RSA, "rsa-ps-only"), "not allowed"),
    ("ES256 claiming the RSA key", _sign("ES256", EC_KEY, "rsa-1"), "not allowed"),
    ("HS256 with the wrong secret", _sign("HS256", "x" * 40, None), "signature"),
    ("not a JWT", "abc.def.ghi", "malformed"),
    ("kid is a number", _forge({"alg": "RS256", "kid": 7}, _claims()), "malformed"),
    ("encryption key's kid", _sign("RS256", RSA_KEY, "enc"), "no key with kid"),
    ("kid path traversal", _sign("RS256", RSA_KEY, "../../../etc/passwd"), "no key with kid"),
    ("1 MiB token", _sign("RS256", RSA_KEY, "rsa-1", pad="x" * (1024 * 1024)), "too long"),
    (
        "far-future exp with a wrong iss",
        _sign("RS256", RSA_KEY, "rsa-1", exp=NOW + 10**9, iss="https://idp.evil"),
        "issuer",
    ),
]


@pytest.mark.parametrize(("token", "why"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_each_bad_token_is_refused_with_its_reason(token: str, why: str) -> None:
    """A41: Issue 16 item 1: iss, aud, exp, nbf, alg pinned per key, none never, unknown kid."""
    with pytest.raises(TokenRejected, match=why):
        verify(token, KEYS, RULES, NOW)


def test_an_unknown_kid_is_its_own_condition_so_the_keys_can_be_refetched() -> None:
    """Gateway choice: an unknown kid raises UnknownKey (a refetch may find it), a bad
    signature does not."""
    with pytest.raises(UnknownKey):
        verify(_sign("RS256", OTHER_RSA, "rotated"), KEYS, RULES, NOW)
    with pytest.raises(TokenRejected) as caught:
        verify(_sign("RS256", OTHER_RSA, "rsa-1"), KEYS, RULES, NOW)
    assert not isinstance(caught.value, UnknownKey)


def test_the_leeway_accepts_small_skew_both_ways() -> None:
    """Issue 16 item 1: leeway applies to exp and nbf."""
    verify(_sign("RS256", RSA_KEY, "rsa-1", exp=NOW - 4, nbf=NOW + 4), KEYS, RULES, NOW)


def test_a_jwk_whose_alg_is_not_configured_is_not_used() -> None:
    """A41: Gateway choice: a JWK's own alg must also be in auth.jwt.algorithms."""
    keys = KeySet.from_jwks(JWKS, ["RS256", "ES256", "EdDSA"])
    with pytest.raises(UnknownKey):
        verify(_sign("PS256", OTHER_RSA, "rsa-ps-only"), keys, RULES, NOW)


def _auth(**jwt_config: Any) -> Authenticator:
    config = AuthConfig(
        tokens={"ci": "static-token-for-ci"},
        jwt=JwtConfig(secret=SECRET, issuer=ISS, leeway=0, **jwt_config),
        required_scopes=["mcp:tools"],
    )
    return Authenticator(config, AUD, file_keys=KEYS)


async def test_the_principal_of_a_jwt_and_of_a_static_token() -> None:
    """Issue 16: a frozen Principal (kind, subject, scopes); the key is iss+sub or the name."""
    auth = _auth()
    principal = await auth.authenticate(
        f"Bearer {_sign('RS256', RSA_KEY, 'rsa-1')}".encode(), now=NOW
    )
    assert principal is not None
    assert (principal.kind, principal.subject) == ("jwt", "ada")
    assert principal.scopes == {"mcp:tools", "read"}
    assert principal.key == f"jwt:{ISS}|ada"
    static = await auth.authenticate(b"Bearer static-token-for-ci", now=NOW)
    assert static is not None
    assert static.key == "token:ci"


async def test_a_missing_required_scope_is_insufficient_scope_naming_it() -> None:
    """Issue 16 item 2: a valid token without a required scope → 403 insufficient_scope."""
    auth = _auth()
    token = _sign("RS256", RSA_KEY, "rsa-1", scope="read")
    with pytest.raises(InsufficientScope) as caught:
        await auth.authenticate(f"Bearer {token}".encode(), now=NOW)
    assert caught.value.missing == ["mcp:tools"]
    header = auth.challenge("/mcp", caught.value).decode()
    assert 'error="insufficient_scope"' in header
    assert 'scope="mcp:tools"' in header


async def test_the_default_audience_is_the_gateways_resource_url() -> None:
    """Issue 16 item 1 (RFC 8707): with no auth.jwt.audience, aud must be the resource URL."""
    auth = _auth()
    good = _sign("RS256", RSA_KEY, "rsa-1")
    assert await auth.authenticate(f"Bearer {good}".encode(), now=NOW) is not None
    other = _sign("RS256", RSA_KEY, "rsa-1", aud="https://someone-else/mcp")
    with pytest.raises(Unauthenticated, match="audience"):
        await auth.authenticate(f"Bearer {other}".encode(), now=NOW)


async def test_a_clock_reading_of_zero_is_a_time_not_a_missing_clock() -> None:
    """Gateway choice: ``now=0`` is checked as the epoch."""
    auth = _auth()
    token = _sign("HS256", SECRET, None, exp=10)
    principal = await auth.authenticate(f"Bearer {token}".encode(), now=0)
    assert principal is not None
    with pytest.raises(Unauthenticated, match="not valid yet"):
        await auth.authenticate(
            f"Bearer {_sign('HS256', SECRET, None, exp=20, nbf=10)}".encode(), now=0
        )


async def test_without_a_clock_reading_the_wall_clock_is_used() -> None:
    """Gateway choice: ``now`` left out means the current time, so an old token is refused."""
    with pytest.raises(Unauthenticated, match="expired"):
        await _auth().authenticate(f"Bearer {_sign('HS256', SECRET, None, exp=10)}".encode())


@pytest.mark.parametrize(
    ("header", "token_sent"),
    [(None, False), (b"Basic dXNlcjpwYXNz", False), (b"Bearer ", False), (b"Bearer nope", True)],
)
async def test_a_missing_or_unknown_credential_says_whether_a_token_was_sent(
    header: bytes | None, token_sent: bool
) -> None:
    """RFC 6750 section 3.1: error="invalid_token" only when a token was sent."""
    auth = _auth()
    with pytest.raises(Unauthenticated) as caught:
        await auth.authenticate(header, now=NOW)
    assert caught.value.token_sent is token_sent
    challenge = auth.challenge("/mcp", caught.value).decode()
    assert ("invalid_token" in challenge) is token_sent
    assert 'resource_metadata="https://gw.test/.well-known/oauth-protected-resource/mcp"' in (
        challenge
    )


async def test_a_verified_token_is_remembered_but_still_expires(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Gateway choice: a host's repeated token is verified once per key set; exp is
    still checked on every request."""
    from gateway.identity import tokens

    calls: list[str] = []
    real = tokens.verify

    def counting(*args: Any) -> dict[str, Any]:
        calls.append("verify")
        return real(*args)

    monkeypatch.setattr(tokens, "verify", counting)
    auth = _auth()
    header = f"Bearer {_sign('RS256', RSA_KEY, 'rsa-1', exp=NOW + 10)}".encode()
    for _ in range(3):
        assert await auth.authenticate(header, now=NOW) is not None
    assert calls == ["verify"]
    with pytest.raises(Unauthenticated, match="expired"):
        await auth.authenticate(header, now=NOW + 11)
    other = f"Bearer {_sign('RS256', OTHER_RSA, 'rsa-1')}".encode()  # forged: never cached
    for _ in range(2):
        with pytest.raises(Unauthenticated, match="signature"):
            await auth.authenticate(other, now=NOW)
    assert len(calls) == 3
