"""``client_auth: private_key_jwt`` (RFC 7523): the signed client assertion and its config.

The end-to-end proof is the conformance suite's ``auth/client-credentials-jwt``
scenario through the gateway (tests/conformance_client); these pin the
assertion's claims and the config's refusals without a network.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jwt
import pytest
import trio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from trio.testing import MockClock

from gateway.backends.credentials.grants import (
    ASSERTION_LIFETIME,
    JWT_BEARER_ASSERTION,
    TokenRequest,
    client_assertion,
    client_credentials_request,
)
from gateway.backends.credentials.provider import BackendCredentials, TokenAnswer
from gateway.config import parse
from gateway.config.schema_backend_auth import BackendAuth
from gateway.errors import ConfigError, CredentialUnavailable

TOKEN_URL = "https://idp.test/token"


def _pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


@pytest.fixture(scope="module")
def ec_key() -> ec.EllipticCurvePrivateKey:
    """One P-256 key for the module (generation is the slow part)."""
    return ec.generate_private_key(ec.SECP256R1())


def _auth(**extra: Any) -> BackendAuth:
    settings: dict[str, Any] = {
        "type": "client_credentials",
        "token_url": TOKEN_URL,
        "client_id": "gateway-client",
        "client_auth": "private_key_jwt",
        "private_key_file": "/run/secrets/key.pem",
        "signing_algorithm": "ES256",
        **extra,
    }
    return BackendAuth(**settings)


def test_the_request_carries_a_verifiable_assertion_and_no_secret(
    ec_key: ec.EllipticCurvePrivateKey,
) -> None:
    request = client_credentials_request(_auth(), _pem(ec_key))
    assert "authorization" not in request.headers
    assert "client_secret" not in request.form
    assert request.form["grant_type"] == "client_credentials"
    assert request.form["client_id"] == "gateway-client"
    assert request.form["client_assertion_type"] == JWT_BEARER_ASSERTION
    claims = jwt.decode(
        request.form["client_assertion"],
        ec_key.public_key(),
        algorithms=["ES256"],
        audience=TOKEN_URL,
    )
    assert claims["iss"] == claims["sub"] == "gateway-client"
    assert claims["exp"] - claims["iat"] == ASSERTION_LIFETIME


def test_each_request_has_a_new_jti(ec_key: ec.EllipticCurvePrivateKey) -> None:
    pem = _pem(ec_key)
    first, second = (
        jwt.decode(
            client_credentials_request(_auth(), pem).form["client_assertion"],
            options={"verify_signature": False},
        )["jti"]
        for _ in range(2)
    )
    assert first != second


def test_the_assertion_claims_at_a_fixed_time(ec_key: ec.EllipticCurvePrivateKey) -> None:
    token = client_assertion(
        _auth(assertion_audience="https://idp.test"), _pem(ec_key), 1000.9, "j-1"
    )
    assert jwt.get_unverified_header(token)["alg"] == "ES256"
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims == {
        "iss": "gateway-client",
        "sub": "gateway-client",
        "aud": "https://idp.test",
        "iat": 1000,
        "exp": 1000 + ASSERTION_LIFETIME,
        "jti": "j-1",
    }


def test_a_key_of_the_wrong_type_is_unavailable_without_showing_it() -> None:
    rsa_pem = _pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    with pytest.raises(CredentialUnavailable) as caught:
        client_assertion(_auth(), rsa_pem, 0.0, "j")
    assert str(caught.value).startswith("private_key_file cannot sign ES256")
    assert "PRIVATE KEY" not in str(caught.value)


def test_text_that_is_no_key_is_unavailable() -> None:
    with pytest.raises(CredentialUnavailable, match="cannot sign ES256"):
        client_assertion(_auth(), "not a key", 0.0, "j")


def _config(auth: dict[str, Any]) -> None:
    backend = {"name": "b", "transport": "http", "url": "http://127.0.0.1:1/mcp", "auth": auth}
    parse(json.dumps({"backends": [backend]}), env={})


BASE = {"type": "client_credentials", "token_url": TOKEN_URL, "client_id": "c"}


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ({"client_auth": "private_key_jwt"}, "private_key_jwt needs the signing key"),
        (
            {"client_auth": "private_key_jwt", "private_key_file": "k", "client_secret": "s"},
            "private_key_jwt signs with a key, not a secret",
        ),
        ({"private_key_file": "k"}, "only client_auth: private_key_jwt uses it"),
        ({"assertion_audience": "https://idp.test"}, "only client_auth: private_key_jwt"),
        (
            {
                "client_auth": "private_key_jwt",
                "private_key_file": "k",
                "signing_algorithm": "HS256",
            },
            "signing_algorithm",
        ),
    ],
)
def test_the_config_refuses_a_half_set_private_key_jwt(extra: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        _config({**BASE, **extra})


def test_the_config_takes_a_complete_private_key_jwt() -> None:
    _config({**BASE, "client_auth": "private_key_jwt", "private_key_file": "k"})


class KeyEndpoint:
    """A token endpoint that records each assertion and answers 60 s tokens."""

    def __init__(self) -> None:
        self.assertions: list[str] = []

    async def __call__(self, request: TokenRequest) -> TokenAnswer:
        self.assertions.append(request.form["client_assertion"])
        body = {"access_token": f"tok-{len(self.assertions)}", "expires_in": 60}
        return TokenAnswer(200, json.dumps(body).encode())


def _file_credentials(key_file: Path, endpoint: KeyEndpoint) -> BackendCredentials:
    return BackendCredentials(
        "b",
        _auth(private_key_file=str(key_file)),
        subjects=lambda _client: None,
        fetch=endpoint,
    )


async def test_the_key_file_is_read_at_each_token_request(
    tmp_path: Path, autojump_clock: MockClock, ec_key: ec.EllipticCurvePrivateKey
) -> None:
    """A rotated key signs from the next token request on, without a reload."""
    key_file = tmp_path / "key.pem"
    key_file.write_text(_pem(ec_key) + "\n")
    endpoint = KeyEndpoint()
    credentials = _file_credentials(key_file, endpoint)
    credential = credentials.shared()
    assert credential is not None
    assert await credential.bearer() == "tok-1"
    rotated = ec.generate_private_key(ec.SECP256R1())
    key_file.write_text(_pem(rotated))
    await trio.sleep(61)
    assert await credential.bearer() == "tok-2"
    first, second = endpoint.assertions
    jwt.decode(first, ec_key.public_key(), algorithms=["ES256"], audience=TOKEN_URL)
    jwt.decode(second, rotated.public_key(), algorithms=["ES256"], audience=TOKEN_URL)
    assert credentials.requests == {("client_credentials", "ok"): 2}


async def test_a_missing_or_unusable_key_is_unavailable_and_counted(tmp_path: Path) -> None:
    endpoint = KeyEndpoint()
    missing = _file_credentials(tmp_path / "nope.pem", endpoint)
    credential = missing.shared()
    assert credential is not None
    with pytest.raises(CredentialUnavailable, match="cannot read private_key file"):
        await credential.bearer()
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a key")
    unusable = _file_credentials(garbage, endpoint)
    credential = unusable.shared()
    assert credential is not None
    with pytest.raises(CredentialUnavailable, match="private_key_file cannot sign ES256"):
        await credential.bearer()
    assert endpoint.assertions == []
    assert missing.requests == unusable.requests == {("client_credentials", "secret_unreadable"): 1}
