"""Who the gateway is at a backend's authorization server, and what a reload purges (sans-IO).

Rules:

1. **The client, in the MCP authorization spec's order.** A configured
   ``client_id`` is used as it is. Without one, a server that advertises
   ``client_id_metadata_document_supported`` gets the URL of the gateway's
   own client ID metadata document as the client id
   (:func:`metadata_document_url`; the gateway serves
   :func:`metadata_document` there); else a server with a
   ``registration_endpoint`` registers the gateway (RFC 7591,
   :func:`gateway.consent.oauth.registration_body`); else discovery stops
   with :class:`~gateway.consent.oauth.ConsentSetupError` naming what to
   configure.
2. **A registered client is kept in the store**
   (``consent:client:<backend>``), its record sealed by the vault under
   :func:`client_binding`, so every replica and every restart uses the same
   client; a record for another issuer or another redirect URI is not used
   (the gateway registers again and replaces it).
3. **Purge keyed by backend.** A reload that removes a ``user_consent``
   backend, or changes what its tokens were issued for (its URL, its
   ``authorization_server``, ``client_id`` or ``scopes``), purges that
   backend's tokens and registered client (:func:`purge_targets`); the
   keys name the backend, so no other backend's records are touched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final
from urllib.parse import quote

import msgspec

from gateway.config import NetworkBackend
from gateway.consent.oauth import ConsentSetupError, public_client_metadata

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from gateway.config import BackendConfig
    from gateway.config.schema_backend_auth import BackendAuth

__all__ = [
    "CLIENT_PREFIX",
    "CLIENT_DOCUMENT_PATH",
    "RegisteredClient",
    "client_binding",
    "client_key",
    "consent_settings",
    "decode_client",
    "metadata_document",
    "metadata_document_url",
    "parse_registration",
    "purge_targets",
]

CLIENT_PREFIX: Final = "consent:client:"
#: The path, under the gateway's public origin, of its client ID metadata documents.
CLIENT_DOCUMENT_PATH: Final = "/oauth/client/"

_DECODER: Final = msgspec.json.Decoder(dict[str, object])


class RegisteredClient(msgspec.Struct, frozen=True, kw_only=True):
    """The client a server registered for the gateway (rule 2).

    Attributes:
        issuer: the authorization server that registered it.
        redirect_uri: the redirect URI it was registered with.
        client_id: its id.
        client_secret: its secret ("" for a public client).
    """

    issuer: str
    redirect_uri: str
    client_id: str
    client_secret: str = ""

    def __repr__(self) -> str:
        return f"RegisteredClient(issuer={self.issuer!r}, client_id={self.client_id!r})"


_CLIENT_DECODER: Final = msgspec.json.Decoder(RegisteredClient)


def client_key(backend: str) -> str:
    """The store key of the client registered for ``backend`` (rules 2-3)."""
    return CLIENT_PREFIX + quote(backend, safe="")


def client_binding(backend: str) -> bytes:
    """The sealed client record's associated data: a token record does not open as one."""
    return b"consent-client\x00" + backend.encode()


def decode_client(plain: bytes) -> RegisteredClient | None:
    """A client record once opened; None when it is not one."""
    try:
        return _CLIENT_DECODER.decode(plain)
    except msgspec.DecodeError:
        return None


def parse_registration(status: int, body: bytes) -> tuple[str, str]:
    """The ``client_id`` and ``client_secret`` of a registration answer (RFC 7591 3.2.1).

    Raises:
        ConsentSetupError: not 201/200, not JSON, or no client id (the
            server's ``error`` is named; no secret ever is).
    """
    try:
        data = _DECODER.decode(body)
    except msgspec.DecodeError:
        data = {}
    if status not in (200, 201):
        error = data.get("error")
        named = f" {error}" if isinstance(error, str) else ""
        raise ConsentSetupError(f"dynamic client registration answered {status}{named}")
    client_id = data.get("client_id")
    if not isinstance(client_id, str) or not client_id:
        raise ConsentSetupError("dynamic client registration answered no client_id")
    secret = data.get("client_secret")
    return client_id, secret if isinstance(secret, str) else ""


def metadata_document_url(origin: str, backend: str) -> str:
    """The URL of the gateway's client ID metadata document for ``backend`` (rule 1)."""
    return origin.rstrip("/") + CLIENT_DOCUMENT_PATH + quote(backend, safe="")


def metadata_document(
    *, client_id: str, client_name: str, redirect_uri: str, scopes: list[str]
) -> bytes:
    """The client ID metadata document served at ``client_id`` itself (a public client)."""
    body = public_client_metadata(client_name=client_name, redirect_uri=redirect_uri, scopes=scopes)
    return msgspec.json.encode({"client_id": client_id, **body})


def _issued_for(url: str, auth: BackendAuth) -> tuple[str, str, str, tuple[str, ...]]:
    return (url, auth.authorization_server, auth.client_id, tuple(sorted(auth.scopes)))


def consent_settings(configs: Iterable[BackendConfig]) -> dict[str, tuple[str, BackendAuth]]:
    """(URL, auth) of each ``user_consent`` backend among ``configs``, by name."""
    return {
        backend.name: (backend.url, backend.auth)
        for backend in configs
        if isinstance(backend, NetworkBackend)
        and backend.auth is not None
        and backend.auth.type == "user_consent"
    }


def purge_targets(
    before: Mapping[str, tuple[str, BackendAuth]], after: Mapping[str, tuple[str, BackendAuth]]
) -> set[str]:
    """The ``user_consent`` backends whose records a reload purges (rule 3).

    Args:
        before: (URL, auth) of each ``user_consent`` backend before the reload.
        after: the same after it.
    """
    return {
        name
        for name, (url, auth) in before.items()
        if name not in after or _issued_for(url, auth) != _issued_for(*after[name])
    }
