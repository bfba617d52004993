"""Hypothesis over malformed tokens and Authorization headers: a 401, never anything else,
and no log line that holds the token."""

from __future__ import annotations

import base64
import json
from typing import Any, Final

import jwt
import pytest
import trio
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from gateway.config import AuthConfig, JwtConfig
from gateway.frontend.guard import Guard
from gateway.frontend.origin import OriginPolicy
from gateway.frontend.rejection import Rejection
from gateway.identity.authenticator import Authenticator, AuthHolder
from gateway.identity.keys import KeySet

SECRET: Final = "jwt-shared-secret-0123456789abcdef0123"
RSA_JWK: Final = {
    **json.loads(
        jwt.algorithms.RSAAlgorithm.to_jwk(
            rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
        )
    ),
    "kid": "k1",
    "alg": "RS256",
}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _guard() -> Guard:
    config = AuthConfig(
        tokens={"ci": "the-static-token-0123"},
        jwt=JwtConfig(secret=SECRET),
        required_scopes=["mcp"],
    )
    keys = KeySet.from_jwks({"keys": [RSA_JWK]}, ["RS256"])
    holder = AuthHolder(Authenticator(config, "http://gw.test/mcp", file_keys=keys))
    return Guard(OriginPolicy("127.0.0.1", [], []), holder)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=10,
)
headers_like = st.fixed_dictionaries(
    {},
    optional={
        "alg": st.sampled_from(["none", "HS256", "RS256", "ES256", "EdDSA", "x"]) | json_values,
        "kid": st.sampled_from(["k1", "k2", ""]) | json_values,
        "typ": json_values,
    },
)
claims_like = st.dictionaries(
    st.sampled_from(["sub", "iss", "aud", "exp", "nbf", "scope", "scp", "client_id"]),
    json_values,
)
segments = st.one_of(
    st.builds(lambda v: _b64(json.dumps(v).encode()), headers_like | claims_like),
    st.text(alphabet="ABCDEFabcdef0123456789-_=.+/ ", max_size=40),
)
jwt_like = st.builds(lambda a, b, c: f"{a}.{b}.{c}", segments, segments, segments)
tokens = st.one_of(jwt_like, st.text(min_size=1, max_size=60))
authorization = st.one_of(
    st.binary(max_size=80),
    st.builds(lambda t: b"Bearer " + t.encode("utf-8", "replace"), tokens),
    st.builds(lambda s, t: s + b" " + t.encode("utf-8", "replace"), st.binary(max_size=8), tokens),
)


@settings(max_examples=300, deadline=None)
@given(authorization)
def test_no_authorization_header_gets_anything_but_401_or_logs_the_token(value: bytes) -> None:
    """A42: Issue 16 tests: no 500, no traceback, nothing logged that holds the token."""
    guard = _guard()
    scope: dict[str, Any] = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1:8000"), (b"authorization", value)],
    }

    async def admit() -> None:
        with pytest.raises(Rejection) as refused:
            await guard.admit(scope)
        assert refused.value.status == 401, refused.value.status
        assert dict(refused.value.headers)[b"www-authenticate"].startswith(b"Bearer ")

    with capture_logs() as logs:
        trio.run(admit)
    _, _, token = value.partition(b" ")
    token_text = token.strip().decode("latin-1")
    if len(token_text) >= 12:
        assert token_text not in repr(logs)
    assert not any("exc_info" in entry or "exception" in entry for entry in logs)
