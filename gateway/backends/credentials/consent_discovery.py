"""Finding a ``user_consent`` backend's authorization server and the gateway's client there.

The messages are sans-IO in :mod:`gateway.consent.oauth` and
:mod:`gateway.consent.registration`; this module does their I/O.

Rules:

1. **Discovery, as the MCP authorization spec orders it.**
   ``authorization_server`` when configured; else the issuer the backend's
   protected resource metadata names (RFC 9728): first the
   ``resource_metadata`` URL of the ``WWW-Authenticate`` header the backend
   answers a request without a token with, then the well-known URLs
   beside the backend's URL; a document for another ``resource`` than the
   backend's URL is refused (RFC 9728 section 3.3). The server's metadata
   comes from RFC 8414's or OpenID's well-known URL. Scopes are the config's, else the resource
   metadata's ``scopes_supported``.
2. **The client** (``registration`` rule 1): the configured ``client_id``;
   else the gateway's client ID metadata document URL where the server
   supports those; else dynamic client registration (RFC 7591), the
   registered client sealed in the store under the backend's key and
   reused by every replica and after restarts. Two replicas registering at
   once both succeed at the server; the record first written wins
   (``put_new``) and both use it.
3. **Once per backend, per setting.** What was discovered is kept by
   (backend, URL, ``authorization_server``, ``client_id``, ``scopes``); a reload that
   changes any of them discovers again. A failure is
   :class:`~gateway.consent.oauth.ConsentSetupError` and is retried on the
   next sign-in.
4. Nothing here logs a secret.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import msgspec
import structlog
import trio

from gateway.backends.credentials.provider import read_secret
from gateway.consent import oauth, registration
from gateway.consent.vault import VaultError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from gateway.config.schema_backend_auth import BackendAuth
    from gateway.consent.vault import Vault
    from gateway.store.api import Store

logger = structlog.get_logger("gateway.backends.credentials.consent_discovery")

#: The largest discovery document read.
MAX_DOCUMENT: Final = 256 * 1024
#: A discovery request gets this long (STYLE rule 3: a cancel scope).
DISCOVERY_TIMEOUT: Final = 10.0
#: What the gateway calls itself when it registers (RFC 7591 ``client_name``).
CLIENT_NAME: Final = "mcp-gateway"
#: The request sent without a token to read the backend's ``WWW-Authenticate``.
_PROBE: Final = b'{"jsonrpc":"2.0","id":0,"method":"ping"}'


@dataclass(frozen=True, slots=True)
class ConsentBackend:
    """What the consent flow needs of one ``user_consent`` backend.

    Attributes:
        name: the backend's name.
        url: its MCP URL (the ``resource`` is its canonical form).
        auth: its ``auth`` block.
    """

    name: str
    url: str
    auth: BackendAuth


@dataclass(frozen=True, slots=True)
class ServerClient:
    """The authorization server of a backend and who the gateway is there.

    Attributes:
        server: the server's metadata.
        auth: the backend's ``auth`` with ``client_id`` the one in use.
        secret: the client secret ("" for a public client).
        scopes: the scopes asked for (rule 1).
    """

    server: oauth.AuthorizationServer
    auth: BackendAuth
    secret: str
    scopes: list[str]


class ConsentServers:
    """Discovery and client registration for the ``user_consent`` backends.

    Args:
        store: the state store (registered clients, ``consent:client:``).
        vault: seals the registered clients.
        origin: the gateway's public origin (its client ID metadata documents).
        redirect_uri: the consent callback's URL.
        get: fetches a discovery document: (status, body).
        post: POSTs JSON (registration): (status, body).
        probe: the ``WWW-Authenticate`` of the backend's answer without a token.
    """

    def __init__(
        self,
        store: Store,
        vault: Vault,
        *,
        origin: str,
        redirect_uri: str,
        get: Callable[[str], Awaitable[tuple[int, bytes]]],
        post: Callable[[str, bytes], Awaitable[tuple[int, bytes]]],
        probe: Callable[[str], Awaitable[str | None]],
    ) -> None:
        self._store = store
        self._vault = vault
        self._origin = origin
        self._redirect_uri = redirect_uri
        self._get = get
        self._post = post
        self._probe = probe
        self._found: dict[tuple[str, str, str, str, tuple[str, ...]], ServerClient] = {}
        # One discovery at a time per backend (registration runs once); a slow
        # server of one backend does not hold up another's.
        self._locks: dict[str, trio.Lock] = {}

    async def client(self, backend: ConsentBackend) -> ServerClient:
        """The server and client for ``backend`` (rules 1-3).

        Raises:
            ConsentSetupError: no server, no usable metadata, or no way to a client.
            CredentialUnavailable: the configured secret file cannot be read.
            StoreUnavailable: the store did not answer.
        """
        auth = backend.auth
        where = (
            backend.name,
            backend.url,
            auth.authorization_server,
            auth.client_id,
            tuple(auth.scopes),
        )
        found = self._found.get(where)
        if found is None:
            async with self._locks.setdefault(backend.name, trio.Lock()):
                found = self._found.get(where) or await self._discover(backend)
                self._found[where] = found
        if auth.client_id:
            # Read per use, so a rotated secret file is picked up.
            secret = read_secret(auth.client_secret, auth.client_secret_file, "client_secret")
            return ServerClient(found.server, found.auth, secret, found.scopes)
        return found

    def forget(self, backend: str) -> None:
        """Discover ``backend`` afresh next time (its records were purged)."""
        for where in [where for where in self._found if where[0] == backend]:
            del self._found[where]

    async def _discover(self, backend: ConsentBackend) -> ServerClient:
        auth = backend.auth
        scopes = list(auth.scopes)
        issuer = auth.authorization_server
        if not issuer or not scopes:
            metadata = await self._resource_metadata(backend) if not issuer else None
            if metadata is not None:
                issuer = metadata.authorization_servers[0]
                scopes = scopes or list(metadata.scopes_supported)
        server: oauth.AuthorizationServer | None = None
        for url in oauth.metadata_urls(issuer):
            status, body = await self._get(url)
            if status == 200:
                server = oauth.parse_authorization_server(body, issuer)
                break
        if server is None:
            raise oauth.ConsentSetupError(f"no authorization server metadata for {issuer}")
        if auth.client_id:
            return ServerClient(server, auth, "", scopes)
        if server.client_id_metadata_document_supported:
            client_id = registration.metadata_document_url(self._origin, backend.name)
            logger.info("consent.client_metadata_document", backend=backend.name)
            return ServerClient(
                server, msgspec.structs.replace(auth, client_id=client_id), "", scopes
            )
        if server.registration_endpoint:
            registered = await self._registered(backend, server, scopes)
            return ServerClient(
                server,
                msgspec.structs.replace(auth, client_id=registered.client_id),
                registered.client_secret,
                scopes,
            )
        raise oauth.ConsentSetupError(
            f"backend {backend.name!r}: {server.issuer} offers neither client ID metadata "
            "documents nor dynamic client registration; set auth.client_id"
        )

    async def _resource_metadata(self, backend: ConsentBackend) -> oauth.ResourceMetadata:
        urls = oauth.protected_resource_urls(backend.url)
        named = oauth.resource_metadata_url(await self._probe(backend.url))
        if named is not None:
            urls.insert(0, named)
        for url in urls:
            status, body = await self._get(url)
            if status == 200:
                metadata = oauth.parse_resource_metadata(body)
                resource = oauth.canonical_resource(metadata.resource)
                if resource != oauth.canonical_resource(backend.url):
                    # RFC 9728 3.3: metadata for another resource is not used.
                    raise oauth.ConsentSetupError(
                        f"backend {backend.name!r}: its resource metadata is for "
                        f"{metadata.resource!r}, not {backend.url!r}"
                    )
                return metadata
        raise oauth.ConsentSetupError(
            f"backend {backend.name!r} serves no protected resource metadata; "
            "set auth.authorization_server"
        )

    async def _registered(
        self, backend: ConsentBackend, server: oauth.AuthorizationServer, scopes: list[str]
    ) -> registration.RegisteredClient:
        """The client registered for ``backend`` at ``server``: the store's, else a new one."""
        key = registration.client_key(backend.name)
        binding = registration.client_binding(backend.name)
        kept = self._open(await self._store.get(key), binding)
        if (
            kept is not None
            and kept.issuer == server.issuer
            and kept.redirect_uri == self._redirect_uri
        ):
            return kept
        body = oauth.registration_body(
            client_name=CLIENT_NAME, redirect_uri=self._redirect_uri, scopes=scopes
        )
        client_id, secret = registration.parse_registration(
            *await self._post(server.registration_endpoint, body)
        )
        record = registration.RegisteredClient(
            issuer=server.issuer,
            redirect_uri=self._redirect_uri,
            client_id=client_id,
            client_secret=secret,
        )
        sealed = self._vault.seal(msgspec.json.encode(record), binding)
        if kept is None:
            if not await self._store.put_new(key, sealed):
                # Another replica registered first: use its client (rule 2).
                other = self._open(await self._store.get(key), binding)
                if other is not None:
                    return other
                await self._store.put(key, sealed)
        else:
            await self._store.put(key, sealed)  # another issuer or redirect: replaced
        logger.info("consent.client_registered", backend=backend.name, issuer=server.issuer)
        return record

    def _open(self, blob: bytes | None, binding: bytes) -> registration.RegisteredClient | None:
        if blob is None:
            return None
        try:
            return registration.decode_client(self._vault.open(blob, binding))
        except VaultError:
            logger.warning("consent.client_record_unusable")
            return None


async def _bounded(method: str, url: str, body: bytes | None) -> tuple[int, bytes, str | None]:
    """One request with httpx, bounded in size and time: (status, body, WWW-Authenticate).

    Raises:
        ConsentSetupError: unreachable, or no answer within ``DISCOVERY_TIMEOUT``.
    """
    import httpx  # here, not at the top: only consent backends need it (start-up)

    headers = {"accept": "application/json"}
    if body is not None:
        headers["content-type"] = "application/json"
        headers["accept"] = "application/json, text/event-stream"
    try:
        with trio.fail_after(DISCOVERY_TIMEOUT):
            async with (
                httpx.AsyncClient(
                    trust_env=False, follow_redirects=False, timeout=httpx.Timeout(None)
                ) as client,
                client.stream(method, url, headers=headers, content=body) as response,
            ):
                read = bytearray()
                async for chunk in response.aiter_bytes():
                    read += chunk
                    if len(read) > MAX_DOCUMENT:
                        break
                challenge = response.headers.get("www-authenticate")
                return response.status_code, bytes(read[:MAX_DOCUMENT]), challenge
    except trio.TooSlowError:
        raise oauth.ConsentSetupError(f"{url} did not answer in {DISCOVERY_TIMEOUT:g} s") from None
    except (httpx.HTTPError, OSError) as exc:
        raise oauth.ConsentSetupError(f"{url} unreachable ({type(exc).__name__})") from None


async def http_get(url: str) -> tuple[int, bytes]:
    """GET a discovery document: (status, body).

    Raises:
        ConsentSetupError: unreachable, or too slow.
    """
    status, body, _ = await _bounded("GET", url, None)
    return status, body


async def http_post(url: str, body: bytes) -> tuple[int, bytes]:
    """POST a JSON registration request (RFC 7591): (status, body).

    Raises:
        ConsentSetupError: unreachable, or too slow.
    """
    status, answer, _ = await _bounded("POST", url, body)
    return status, answer


async def http_probe(url: str) -> str | None:
    """The ``WWW-Authenticate`` of a 401 the backend answers an MCP request without a token.

    None: the backend answered otherwise, or could not be reached (the
    well-known URLs are tried next).
    """
    try:
        status, _, challenge = await _bounded("POST", url, _PROBE)
    except oauth.ConsentSetupError:
        return None
    return challenge if status == 401 else None
