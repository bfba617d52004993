"""The sans-IO grants of backend credentials (backends/credentials/grants.py): no I/O."""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gateway.backends.credentials.grants import (
    ACCESS_TOKEN_TYPE,
    DEFAULT_LIFETIME,
    TOKEN_EXCHANGE_GRANT,
    CallerToken,
    IssuedToken,
    TokenCache,
    TokenEndpointError,
    client_credentials_request,
    parse_token_response,
    refresh_time,
    token_exchange_request,
)
from gateway.config.schema_backend_auth import BackendAuth
from gateway.errors import CredentialUnavailable


def _auth(**extra: Any) -> BackendAuth:
    settings: dict[str, Any] = {
        "type": "client_credentials",
        "token_url": "https://idp.test/token",
        "client_id": "gate way",
        **extra,
    }
    return BackendAuth(**settings)


def _body(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


def test_client_credentials_with_basic_auth_form_encodes_id_and_secret() -> None:
    """RFC 6749 2.3.1: id and secret are form-urlencoded before Basic; nothing in the form."""
    request = client_credentials_request(
        _auth(scopes=["a", "b"], audience="api", resource="https://b.test/mcp"), "s:e/c"
    )
    assert request.url == "https://idp.test/token"
    encoded = request.headers["authorization"].removeprefix("Basic ")
    assert base64.b64decode(encoded) == b"gate%20way:s%3Ae%2Fc"
    assert request.form == {
        "grant_type": "client_credentials",
        "scope": "a b",
        "audience": "api",
        "resource": "https://b.test/mcp",
    }
    assert request.headers["content-type"] == "application/x-www-form-urlencoded"


def test_client_secret_post_puts_the_credentials_in_the_form() -> None:
    request = client_credentials_request(_auth(client_auth="client_secret_post"), "pw")
    assert "authorization" not in request.headers
    assert request.form == {
        "grant_type": "client_credentials",
        "client_id": "gate way",
        "client_secret": "pw",
    }


def test_token_exchange_sends_the_callers_token_as_subject_only() -> None:
    """RFC 8693 2.1: subject_token and its type; the target is the backend."""
    auth = _auth(type="token_exchange", resource="https://b.test/mcp")
    request = token_exchange_request(auth, "pw", CallerToken("caller-jwt"))
    assert request.form["grant_type"] == TOKEN_EXCHANGE_GRANT
    assert request.form["subject_token"] == "caller-jwt"
    assert request.form["subject_token_type"] == ACCESS_TOKEN_TYPE
    assert request.form["requested_token_type"] == ACCESS_TOKEN_TYPE
    assert request.form["resource"] == "https://b.test/mcp"
    assert "caller-jwt" not in repr(request)  # form and headers stay out of reprs


def test_caller_token_never_shows_itself_and_cannot_be_encoded() -> None:
    token = CallerToken("secret-value")
    assert "secret-value" not in repr(token) and "secret-value" not in str(token)
    assert "secret-value" not in f"{[token]}"
    with pytest.raises(TypeError):
        msgspec.json.encode(token)
    with pytest.raises(TypeError):
        json.dumps(token)


def test_a_token_response_is_read_with_its_refresh_time() -> None:
    issued = parse_token_response(
        200, _body(access_token="t", token_type="Bearer", expires_in=600), 1000.0, 30.0, 0.1
    )
    assert issued == IssuedToken("t", refresh_at=1000.0 + 540.0, expires_at=1600.0)
    assert "'t'" not in repr(issued)


@pytest.mark.parametrize(
    ("lifetime", "skew", "fraction", "stale_after"),
    [
        (600.0, 30.0, 0.1, 540.0),  # 10 % of the lifetime beats the skew
        (60.0, 30.0, 0.1, 30.0),  # the skew beats 10 %
        (20.0, 30.0, 0.1, 0.0),  # shorter than the skew: used once, then replaced
        (3600.0, 0.0, 0.0, 3600.0),
    ],
)
def test_refresh_time_keeps_the_larger_margin(
    lifetime: float, skew: float, fraction: float, stale_after: float
) -> None:
    assert refresh_time(0.0, lifetime, skew, fraction) == stale_after


@pytest.mark.parametrize("expires_in", [None, "600", -5, 0, True, [600]])
def test_an_odd_or_missing_expires_in_means_the_default_lifetime(expires_in: Any) -> None:
    fields: dict[str, Any] = {"access_token": "t", "token_type": "bearer"}
    if expires_in is not None:
        fields["expires_in"] = expires_in
    body = json.dumps(fields).encode()
    issued = parse_token_response(200, body, 0.0, 0.0, 0.0)
    assert issued.expires_at == DEFAULT_LIFETIME


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (
            400,
            _body(error="invalid_client", error_description="bad secret"),
            "token endpoint answered 400 invalid_client (bad secret)",
        ),
        (401, _body(error="invalid_client"), "token endpoint answered 401 invalid_client"),
        (503, b"<html>down</html>", "token endpoint answered 503"),
        (
            200,
            _body(token_type="Bearer"),
            "token endpoint answered 200 (the answer holds no access_token)",
        ),
        (200, b"not json", "token endpoint answered 200 (the answer holds no access_token)"),
        (
            200,
            _body(access_token="t", token_type="DPoP"),
            "token endpoint answered 200 (token_type 'DPoP' is not Bearer)",
        ),
    ],
)
def test_a_refusal_names_status_and_oauth_error_only(
    status: int, body: bytes, message: str
) -> None:
    with pytest.raises(TokenEndpointError) as caught:
        parse_token_response(status, body, 0.0, 30.0, 0.1)
    assert str(caught.value) == message
    assert isinstance(caught.value, CredentialUnavailable)


def test_an_error_description_is_shortened() -> None:
    with pytest.raises(TokenEndpointError) as caught:
        parse_token_response(400, _body(error="x", error_description="d" * 5000), 0.0, 0.0, 0.0)
    assert len(caught.value.description) == 200


def test_the_cache_serves_fresh_tokens_and_drops_only_the_refused_one() -> None:
    """Rule 3: a 401 for an old token does not throw away the new one."""
    cache = TokenCache(max_entries=2)
    cache.put("k", IssuedToken("old", refresh_at=10.0, expires_at=20.0))
    assert cache.fresh("k", 9.9) is not None
    assert cache.fresh("k", 10.0) is None  # stale from refresh_at on
    cache.put("k", IssuedToken("new", refresh_at=50.0, expires_at=60.0))
    assert not cache.invalidate("k", "old")
    assert cache.fresh("k", 11.0) == IssuedToken("new", refresh_at=50.0, expires_at=60.0)
    assert cache.invalidate("k", "new")
    assert cache.fresh("k", 11.0) is None


def test_the_cache_is_bounded_and_forgets_the_oldest() -> None:
    cache = TokenCache(max_entries=2)
    for key in ("a", "b", "c"):
        cache.put(key, IssuedToken(key, refresh_at=100.0, expires_at=100.0))
    assert len(cache) == 2
    assert cache.fresh("a", 0.0) is None
    assert cache.fresh("c", 0.0) is not None


@pytest.mark.parametrize(
    ("settings", "place"),
    [
        ({"type": "static"}, "token"),
        ({"type": "static", "token": "a", "token_file": "/f"}, "token"),
        ({"type": "client_credentials", "client_id": "x"}, "token_url"),
        ({"type": "client_credentials", "token_url": "https://t"}, "client_id"),
        (
            {
                "type": "client_credentials",
                "token_url": "https://t",
                "client_id": "x",
                "client_secret": "a",
                "client_secret_file": "/f",
            },
            "client_secret_file",
        ),
        (
            {
                "type": "client_credentials",
                "token_url": "https://t",
                "client_id": "x",
                "catalog": {"type": "static", "token": "t"},
            },
            "catalog",
        ),
    ],
)
def test_config_rules_name_the_field(settings: dict[str, Any], place: str) -> None:
    from gateway.config.schema import Invalid

    with pytest.raises(Invalid) as caught:
        BackendAuth(**{k: BackendAuth(**v) if k == "catalog" else v for k, v in settings.items()})
    assert place in [where for where, _ in caught.value.problems]


@pytest.mark.parametrize(
    ("backend", "problem"),
    [
        (
            {"headers": {"authorization": "Bearer x"}, "auth": {"type": "static", "token": "t"}},
            "backends[0].headers: Authorization is set by auth: remove one of them",
        ),
        (
            {
                "session": "shared",
                "auth": {
                    "type": "token_exchange",
                    "token_url": "https://idp/token",
                    "client_id": "g",
                },
            },
            "backends[0].session: token_exchange acts for each caller: use per_principal, "
            "per_client (or auto)",
        ),
        (
            {"auth": {"type": "client_credentials", "token_url": "ftp://x", "client_id": "g"}},
            "backends[0].auth.token_url: must start with http:// or https:// (got 'ftp://x')",
        ),
    ],
)
def test_backend_auth_problems_are_placed_in_the_file(
    backend: dict[str, Any], problem: str
) -> None:
    from gateway.config import parse
    from gateway.errors import ConfigError

    entry = {"name": "b", "transport": "http", "url": "http://b.test/mcp", **backend}
    with pytest.raises(ConfigError) as caught:
        parse(json.dumps({"backends": [entry]}), env={})
    assert problem in str(caught.value)


@given(
    status=st.integers(min_value=100, max_value=599),
    body=st.one_of(
        st.binary(max_size=300),
        st.dictionaries(
            st.sampled_from(
                ["access_token", "token_type", "expires_in", "error", "error_description", "x"]
            ),
            st.one_of(
                st.none(),
                st.booleans(),
                st.integers(),
                st.floats(),
                st.text(max_size=50),
                st.lists(st.integers(), max_size=3),
            ),
        ).map(lambda d: json.dumps(d, allow_nan=True).encode()),
    ),
)
@example(status=200, body=b'{"access_token": "t", "expires_in": 1' + b"0" * 400 + b"}")
def test_any_token_endpoint_answer_is_a_token_or_a_token_endpoint_error(
    status: int, body: bytes
) -> None:
    """Whatever a token endpoint sends, the outcome is an IssuedToken with a sane refresh time
    or TokenEndpointError; nothing else escapes."""
    try:
        issued = parse_token_response(status, body, 100.0, 30.0, 0.1)
    except TokenEndpointError:
        return
    assert status == 200
    assert issued.access_token
    assert 100.0 <= issued.refresh_at <= issued.expires_at
