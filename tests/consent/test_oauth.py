"""The OAuth client's messages for per-person consent (gateway/consent/oauth.py)."""

from __future__ import annotations

import base64
import hashlib
import json
from urllib.parse import parse_qs, urlsplit

import pytest

from gateway.consent.oauth import (
    ConsentSetupError,
    authorization_url,
    canonical_resource,
    metadata_urls,
    new_pkce,
    parse_authorization_server,
    parse_resource_metadata,
    protected_resource_urls,
    registration_body,
    resource_metadata_url,
)

AS = {
    "issuer": "https://auth.example.com/tenant",
    "authorization_endpoint": "https://auth.example.com/tenant/authorize",
    "token_endpoint": "https://auth.example.com/tenant/token",
    "registration_endpoint": "https://auth.example.com/tenant/register",
    "code_challenge_methods_supported": ["S256"],
}


def test_pkce_challenge_is_the_s256_of_the_verifier() -> None:
    """RFC 7636 4.2, and a fresh verifier each time."""
    pkce = new_pkce()
    expected = base64.urlsafe_b64encode(hashlib.sha256(pkce.verifier.encode()).digest())
    assert pkce.challenge == expected.rstrip(b"=").decode()
    assert 43 <= len(pkce.verifier) <= 128
    assert new_pkce().verifier != pkce.verifier


@pytest.mark.parametrize(
    ("header", "url"),
    [
        (
            'Bearer resource_metadata="https://t.example/.well-known/oauth-protected-resource/mcp"',
            "https://t.example/.well-known/oauth-protected-resource/mcp",
        ),
        ('Bearer realm="x", error="invalid_token", resource_metadata="https://t/m"', "https://t/m"),
        ("Bearer resource_metadata=https://t/bare", "https://t/bare"),
        ('Basic realm="x"', None),
        ("Bearer", None),
        (None, None),
    ],
)
def test_the_401_names_the_resource_metadata(header: str | None, url: str | None) -> None:
    """RFC 9728 section 5.1."""
    assert resource_metadata_url(header) == url


def test_the_well_known_fallbacks_in_order() -> None:
    """Rule 1: path-aware first (RFC 9728 3.1; RFC 8414 3.1; OIDC)."""
    assert protected_resource_urls("https://t.example/mcp/") == [
        "https://t.example/.well-known/oauth-protected-resource/mcp",
        "https://t.example/.well-known/oauth-protected-resource",
    ]
    assert metadata_urls("https://auth.example.com/tenant") == [
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant",
        "https://auth.example.com/.well-known/openid-configuration/tenant",
        "https://auth.example.com/tenant/.well-known/openid-configuration",
    ]


def test_the_documents_are_read_and_checked() -> None:
    """Rules 1-2: the resource names its servers; the server must do PKCE S256."""
    metadata = parse_resource_metadata(
        json.dumps({"resource": "https://t/mcp", "authorization_servers": [AS["issuer"]]}).encode()
    )
    assert metadata.authorization_servers == [AS["issuer"]]
    server = parse_authorization_server(json.dumps(AS).encode(), AS["issuer"])
    assert server.token_endpoint == AS["token_endpoint"]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({**AS, "code_challenge_methods_supported": ["plain"]}, "PKCE with S256"),
        ({**AS, "issuer": "https://evil.example"}, "not 'https://auth.example.com/tenant'"),
        ({**AS, "token_endpoint": "http://auth.example.com/token"}, "is not https"),
        ({"issuer": AS["issuer"]}, "authorization server metadata"),
    ],
)
def test_an_unfit_authorization_server_is_refused(
    document: dict[str, object], message: str
) -> None:
    """Rule 2: never without PKCE, never another issuer's document, never plain HTTP."""
    with pytest.raises(ConsentSetupError, match=message):
        parse_authorization_server(json.dumps(document).encode(), AS["issuer"])


def test_the_authorization_url_carries_pkce_state_and_resource() -> None:
    """Rule 2: RFC 7636 and RFC 8707 parameters."""
    server = parse_authorization_server(json.dumps(AS).encode(), AS["issuer"])
    pkce = new_pkce()
    url = authorization_url(
        server,
        client_id="gw",
        redirect_uri="https://gw.example/oauth/callback",
        state="s1",
        pkce=pkce,
        resource=canonical_resource("HTTPS://Tracker.Example/mcp/"),
        scopes=["read", "write"],
    )
    query = parse_qs(urlsplit(url).query)
    assert query["code_challenge"] == [pkce.challenge]
    assert query["code_challenge_method"] == ["S256"]
    assert query["resource"] == ["https://tracker.example/mcp"]
    assert query["scope"] == ["read write"]
    assert query["state"] == ["s1"]
    assert pkce.verifier not in url


def test_registration_asks_for_a_public_client_with_its_redirect() -> None:
    """RFC 7591: authorization code and refresh, no client secret."""
    body = json.loads(registration_body(client_name="gw", redirect_uri="https://gw/cb", scopes=[]))
    assert body["token_endpoint_auth_method"] == "none"
    assert body["redirect_uris"] == ["https://gw/cb"]
