"""The gateway as an OAuth client for one person at one backend: the messages, sans-IO.

Rules:

1. **Discovery, in the spec's order.** The backend's 401 names its
   protected resource metadata (RFC 9728, ``resource_metadata`` in
   ``WWW-Authenticate``), else the well-known URL beside the backend's URL;
   that document names the authorization servers; each server's metadata
   comes from RFC 8414's well-known path, else OpenID's
   (:func:`metadata_urls`).
2. **Authorization code with PKCE S256 and the resource indicator**
   (RFC 7636, RFC 8707): a server that does not list ``S256`` is refused
   rather than used without PKCE. The ``resource`` is the backend's
   canonical URL; scopes are the config's, else the resource metadata's.
3. **Refusals are typed** (:class:`ConsentSetupError`) and never carry a
   token, a code or a verifier.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from typing import Any, Final
from urllib.parse import urlencode, urlsplit, urlunsplit

import msgspec

from gateway.errors import GatewayError

__all__ = [
    "AuthorizationServer",
    "ConsentSetupError",
    "Pkce",
    "ResourceMetadata",
    "authorization_url",
    "canonical_resource",
    "metadata_urls",
    "new_pkce",
    "parse_authorization_server",
    "parse_resource_metadata",
    "protected_resource_urls",
    "registration_body",
    "resource_metadata_url",
]

_DECODER: Final = msgspec.json.Decoder()
_PARAM: Final = re.compile(r'([A-Za-z_]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')


class ConsentSetupError(GatewayError):
    """Discovery or registration cannot go on (rule 3): what is missing, where."""


class Pkce(msgspec.Struct, frozen=True):
    """A PKCE pair: the verifier stays with the gateway, the challenge goes to the server."""

    verifier: str
    challenge: str


def new_pkce() -> Pkce:
    """A fresh verifier (86 characters of base64url) and its S256 challenge (RFC 7636 4.1-4.2)."""
    verifier = secrets.token_urlsafe(64)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    challenge = base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
    return Pkce(verifier, challenge)


def canonical_resource(url: str) -> str:
    """The backend's canonical URI for ``resource`` (RFC 8707; MCP authorization).

    Lower-case scheme and host, no fragment, no trailing slash on the path
    unless it is the whole path.
    """
    parts = urlsplit(url)
    path = parts.path.rstrip("/") if parts.path not in ("", "/") else ""
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def resource_metadata_url(www_authenticate: str | None) -> str | None:
    """The ``resource_metadata`` URL a 401's ``WWW-Authenticate: Bearer`` names, if any."""
    if not www_authenticate or not www_authenticate.lstrip().lower().startswith("bearer"):
        return None
    for name, quoted, bare in _PARAM.findall(www_authenticate):
        if name.lower() == "resource_metadata":
            value: str = quoted if quoted else bare
            return value.replace('\\"', '"')
    return None


def protected_resource_urls(backend_url: str) -> list[str]:
    """Rule 1's fallbacks: the well-known URLs of the backend's resource metadata, in order."""
    parts = urlsplit(backend_url)
    path = parts.path.rstrip("/")
    root = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    found = []
    if path:
        found.append(f"{root}/.well-known/oauth-protected-resource{path}")
    found.append(f"{root}/.well-known/oauth-protected-resource")
    return found


def metadata_urls(issuer: str) -> list[str]:
    """Rule 1: RFC 8414's URL of an issuer's metadata, then OpenID Connect's two forms."""
    parts = urlsplit(issuer)
    root = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    path = parts.path.rstrip("/")
    if not path:
        return [
            f"{root}/.well-known/oauth-authorization-server",
            f"{root}/.well-known/openid-configuration",
        ]
    return [
        f"{root}/.well-known/oauth-authorization-server{path}",
        f"{root}/.well-known/openid-configuration{path}",
        f"{root}{path}/.well-known/openid-configuration",
    ]


class ResourceMetadata(msgspec.Struct, frozen=True, kw_only=True):
    """What the gateway needs of a protected resource metadata document (RFC 9728)."""

    resource: str
    authorization_servers: list[str]
    scopes_supported: list[str] = msgspec.field(default_factory=list)


class AuthorizationServer(msgspec.Struct, frozen=True, kw_only=True):
    """What the gateway needs of an authorization server's metadata (RFC 8414)."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str = ""
    revocation_endpoint: str = ""
    code_challenge_methods_supported: list[str] = msgspec.field(default_factory=list)
    client_id_metadata_document_supported: bool = False


def _document(body: bytes, what: str) -> dict[str, Any]:
    try:
        data = _DECODER.decode(body)
    except msgspec.DecodeError as exc:
        raise ConsentSetupError(f"{what} is not JSON") from exc
    if not isinstance(data, dict):
        raise ConsentSetupError(f"{what} is not a JSON object")
    return data


def parse_resource_metadata(body: bytes) -> ResourceMetadata:
    """Read a protected resource metadata document (RFC 9728 section 2).

    Raises:
        ConsentSetupError: not JSON, or no authorization server named.
    """
    data = _document(body, "protected resource metadata")
    try:
        metadata = msgspec.convert(data, ResourceMetadata)
    except msgspec.ValidationError as exc:
        raise ConsentSetupError(f"protected resource metadata: {exc}") from exc
    if not metadata.authorization_servers:
        raise ConsentSetupError("protected resource metadata names no authorization server")
    return metadata


def parse_authorization_server(body: bytes, issuer: str) -> AuthorizationServer:
    """Read an authorization server's metadata (RFC 8414 section 3.2) and check it (rule 2).

    Args:
        body: the document.
        issuer: the issuer it was fetched for; the document must name the same.

    Raises:
        ConsentSetupError: unreadable, another issuer, no PKCE S256, or an
            endpoint that is not HTTPS (loopback HTTP is allowed, for tests
            and local servers).
    """
    data = _document(body, "authorization server metadata")
    try:
        server = msgspec.convert(data, AuthorizationServer)
    except msgspec.ValidationError as exc:
        raise ConsentSetupError(f"authorization server metadata: {exc}") from exc
    if server.issuer.rstrip("/") != issuer.rstrip("/"):
        raise ConsentSetupError(
            f"authorization server metadata is for {server.issuer!r}, not {issuer!r}"
        )
    if "S256" not in server.code_challenge_methods_supported:
        raise ConsentSetupError("the authorization server does not support PKCE with S256")
    for endpoint in (server.authorization_endpoint, server.token_endpoint):
        if not _secure(endpoint):
            raise ConsentSetupError(f"endpoint {endpoint!r} is not https")
    return server


def _secure(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme == "https" or (
        parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1")
    )


def authorization_url(
    server: AuthorizationServer,
    *,
    client_id: str,
    redirect_uri: str,
    state: str,
    pkce: Pkce,
    resource: str,
    scopes: list[str],
) -> str:
    """The URL the person opens to consent (rule 2)."""
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "state": state,
        "code_challenge": pkce.challenge,
        "code_challenge_method": "S256",
        "resource": resource,
    }
    if scopes:
        query["scope"] = " ".join(scopes)
    separator = "&" if urlsplit(server.authorization_endpoint).query else "?"
    return server.authorization_endpoint + separator + urlencode(query)


def public_client_metadata(
    *, client_name: str, redirect_uri: str, scopes: list[str]
) -> dict[str, Any]:
    """The gateway's client metadata (RFC 7591 section 2): a public client with PKCE.

    One description serves both ways of becoming a client: the body of a
    dynamic registration and the client ID metadata document.
    """
    body: dict[str, Any] = {
        "client_name": client_name,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    if scopes:
        body["scope"] = " ".join(scopes)
    return body


def registration_body(*, client_name: str, redirect_uri: str, scopes: list[str]) -> bytes:
    """A dynamic client registration request (RFC 7591 section 2): a public client with PKCE."""
    return msgspec.json.encode(
        public_client_metadata(client_name=client_name, redirect_uri=redirect_uri, scopes=scopes)
    )
