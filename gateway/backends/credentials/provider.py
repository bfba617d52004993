"""Credentials to backends: tokens fetched, cached, refreshed and put on requests.

The grants themselves (requests, responses, freshness) are sans-IO in
:mod:`gateway.backends.credentials.grants`; this module does the I/O: reading
secret files, POSTing to the token endpoint with httpx, and the
credential whose ``httpx.Auth`` (``BearerAuth``) puts the token on every
request of a backend's HTTP client. httpx is imported where it is used (the
``BearerAuth`` class is defined on first use, since it subclasses
``httpx.Auth``), so a gateway with only stdio backends does not load it.

Rules:

1. The caller's token is never put on a backend request. A per-client
   session of a ``token_exchange`` backend sends the token the exchange
   returned; one of a ``user_consent`` backend sends its principal's own
   token from that person's consent (``consent_tokens``), never another
   principal's; the shared (catalog) session sends the gateway's own
   credential (``auth.catalog``) or none.
2. Single flight: however many requests need a token at once, one token
   request is made per cache key (the backend, or the principal for an
   exchange); the others wait for it and use its result, or its failure.
3. A backend's 401 invalidates the token it refused and repeats the request
   once with a fresh one; a second 401 goes back to the request as it is.
4. A secret in a file (``*_file``) is read at each token request, so a
   rotated Kubernetes secret is used from the next one on (and at once
   after a reload, which drops the cached tokens with the backend).
5. Nothing here logs or raises a token or a secret: errors name the token
   endpoint's status and OAuth ``error`` only.

Past 450 lines and still one idea: a backend's credential, from its config
to the header on each request, for every kind of ``auth``; the grants'
messages are sans-IO in ``grants``, a person's consent in ``consent_tokens``.
"""

from __future__ import annotations

import collections
import functools
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

import structlog
import trio

from gateway.backends.channel import open_channel
from gateway.backends.credentials.grants import (
    CLIENT_CREDENTIALS,
    CallerToken,
    IssuedToken,
    TokenCache,
    TokenEndpointError,
    TokenRequest,
    client_credentials_request,
    parse_token_response,
    token_exchange_request,
)
from gateway.config import NetworkBackend
from gateway.errors import CredentialUnavailable

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Awaitable, Callable, Hashable
    from contextlib import AbstractAsyncContextManager

    import httpx

    from gateway.backends.channel import ChannelOpener
    from gateway.config import BackendConfig
    from gateway.config.schema_backend_auth import BackendAuth
    from gateway.transports.base import MessageChannel

logger = structlog.get_logger("gateway.backends.credentials.provider")

# A token request gets this long, connect and answer together (rule 3 of
# STYLE: a cancel scope at the call site).
TOKEN_REQUEST_TIMEOUT: Final = 10.0
# The largest token endpoint answer read.
MAX_TOKEN_RESPONSE: Final = 64 * 1024
# Exchanged tokens kept per backend: one per principal; past this the
# oldest goes (a new caller then costs one more exchange).
MAX_EXCHANGED_TOKENS: Final = 1024

Subject = tuple[str, CallerToken]
"""Whose token a per-client session exchanges: the principal's key and its raw token."""


class PersonalTokens(Protocol):
    """Each person's own tokens at ``user_consent`` backends (``consent_tokens.ConsentTokens``)."""

    async def access_token(self, principal: str, backend: str) -> str | None:
        """The principal's token at the backend, refreshed when due; None: no consent."""
        ...

    def refused(self, principal: str, backend: str, token: str) -> None:
        """The backend refused that token (401): refresh it, or ask for consent again."""
        ...


@dataclass(frozen=True, slots=True)
class TokenAnswer:
    """What a token endpoint answered: the status and the body."""

    status: int
    body: bytes


async def http_fetch(request: TokenRequest) -> TokenAnswer:
    """POST a token request with httpx (tests pass another fetcher of this shape).

    ``trust_env`` is off, as for backends: no proxy variable or ``.netrc``
    entry changes what is sent where. httpx's own timeouts are off: the
    cancel scope here bounds the whole request (STYLE rule 3).

    Raises:
        CredentialUnavailable: the endpoint could not be reached, or did not
            answer in ``TOKEN_REQUEST_TIMEOUT``.
    """
    import httpx  # here, not at the top: only HTTP backends and token grants need it (start-up)

    try:
        with trio.fail_after(TOKEN_REQUEST_TIMEOUT):
            async with (
                httpx.AsyncClient(
                    trust_env=False, follow_redirects=False, timeout=httpx.Timeout(None)
                ) as client,
                client.stream(
                    "POST", request.url, data=request.form, headers=request.headers
                ) as response,
            ):
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_TOKEN_RESPONSE:
                        break
                return TokenAnswer(response.status_code, bytes(body[:MAX_TOKEN_RESPONSE]))
    except trio.TooSlowError:
        raise CredentialUnavailable(
            f"token endpoint did not answer within {TOKEN_REQUEST_TIMEOUT:g} s"
        ) from None
    except (httpx.HTTPError, OSError) as exc:
        raise CredentialUnavailable(f"token endpoint unreachable ({type(exc).__name__})") from None


def read_secret(value: str, path: str, what: str) -> str:
    """A secret from its key or, when set, its ``*_file`` (rule 4); trailing newlines go.

    Raises:
        CredentialUnavailable: the file cannot be read or is empty.
    """
    if not path:
        return value
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
        raise CredentialUnavailable(f"cannot read {what} file {path}: {reason}") from None
    if not text:
        raise CredentialUnavailable(f"{what} file {path} is empty")
    return text


class ChannelCredential:
    """The credential of one backend session (shared or one client's).

    Args:
        source: returns the token to send.
        refused: told the token a backend refused.
        retry: whether a 401 is retried with a fresh token.
    """

    def __init__(
        self,
        source: Callable[[], Awaitable[str]],
        refused: Callable[[str], None],
        *,
        retry: bool,
    ) -> None:
        self._source = source
        self._refused = refused
        self._retry = retry

    def http_auth(self) -> httpx.Auth:
        """For an HTTP transport's client: every request carries the token."""
        return _bearer_auth()(self._source, self._refused, self._retry)

    async def bearer(self) -> str:
        """The token now, for a WebSocket handshake."""
        return await self._source()

    def refused(self, token: str) -> None:
        """The backend refused ``token`` (a WebSocket handshake's 401)."""
        self._refused(token)


@functools.cache
def _bearer_auth() -> Callable[
    [Callable[[], Awaitable[str]], Callable[[str], None], bool], httpx.Auth
]:
    """The ``BearerAuth`` class, defined on first use: only HTTP backends load httpx."""
    import httpx  # here, not at the top: only HTTP backends need it (start-up)

    class BearerAuth(httpx.Auth):
        """Puts a bearer token on every request; on a 401, one retry with a fresh one (rule 3).

        Args:
            source: returns the token to send (cached or fetched).
            refused: told the token a backend refused, to drop it.
            retry: whether a 401 is worth a retry (not for a static token).
        """

        def __init__(
            self,
            source: Callable[[], Awaitable[str]],
            refused: Callable[[str], None],
            retry: bool,
        ) -> None:
            self._source = source
            self._refused = refused
            self._retry = retry

        async def async_auth_flow(
            self, request: httpx.Request
        ) -> AsyncGenerator[httpx.Request, httpx.Response]:
            """Send ``request`` with the token; once more with a new one after a 401."""
            token = await self._source()
            request.headers["authorization"] = f"Bearer {token}"
            response = yield request
            if response.status_code != 401 or not self._retry:
                return
            self._refused(token)
            request.headers["authorization"] = f"Bearer {await self._source()}"
            yield request

    return BearerAuth


class BackendCredentials:
    """One backend's credentials: the cache, single flight and the metric counts.

    Args:
        backend: the backend's name (errors and logs name it).
        auth: its ``auth`` block.
        subjects: the caller of a client session, for token exchange.
        fetch: performs a token request (tests pass their own).
        clock: the time ``refresh_at`` is measured on.
        personal: the ``user_consent`` token source, once the store is open.
    """

    def __init__(
        self,
        backend: str,
        auth: BackendAuth,
        *,
        subjects: Callable[[str], Subject | None],
        fetch: Callable[[TokenRequest], Awaitable[TokenAnswer]] = http_fetch,
        clock: Callable[[], float] = trio.current_time,
        personal: Callable[[], PersonalTokens | None] = lambda: None,
    ) -> None:
        self._backend = backend
        self._auth = auth
        self._subjects = subjects
        self._personal = personal
        self._fetch = fetch
        self._clock = clock
        self._cache = TokenCache(MAX_EXCHANGED_TOKENS + 1)
        self._locks: dict[Hashable, trio.Lock] = {}
        self._log = logger.bind(backend=backend)
        self.requests: collections.Counter[tuple[str, str]] = collections.Counter()
        """Token requests by (grant, outcome): the metric
        ``mcp_gateway_backend_token_requests_total``."""

    # -- the sessions' credentials --------------------------------------------

    def openers(
        self, open_channel: Callable[..., AbstractAsyncContextManager[MessageChannel]]
    ) -> tuple[ChannelOpener, Callable[[str], ChannelOpener]]:
        """The shared session's opener, and a client session's, each with its credential.

        Args:
            open_channel: ``gateway.backends.channel.open_channel``.
        """
        shared = partial(open_channel, credential=self.shared())

        def for_client(client: str) -> ChannelOpener:
            return partial(open_channel, credential=self.for_client(client))

        return shared, for_client

    def shared(self) -> ChannelCredential | None:
        """The shared (catalog) session's credential: the gateway's own, or none."""
        return self._own(self._auth.catalog_auth)

    def for_client(self, client: str) -> ChannelCredential | None:
        """A client's own session: the exchanged token, the person's own, or the gateway's."""
        if self._auth.type == "user_consent":
            return self._consented(client)
        if self._auth.type != "token_exchange":
            return self.shared()

        seen: list[str] = []  # the principal this session last exchanged for

        async def source() -> str:
            """The token exchanged for the client's caller (cached per principal)."""
            subject = self._subjects(client)
            if subject is None:
                # The caller is gone (a modern request that ended, its
                # session's DELETE still to send): its token, while fresh.
                cached = self._cache.fresh(("exchange", seen[-1]), self._clock()) if seen else None
                if cached is not None:
                    return cached.access_token
                raise CredentialUnavailable(
                    "no caller token to exchange (the client session is not authenticated)"
                )
            principal, token = subject
            seen[:] = [principal]
            return await self._token(
                ("exchange", principal),
                lambda secret: token_exchange_request(self._auth, secret, token),
                "token_exchange",
            )

        def refused(token: str) -> None:
            if seen:
                self._cache.invalidate(("exchange", seen[-1]), token)

        return ChannelCredential(source, refused, retry=True)

    def _consented(self, client: str) -> ChannelCredential:
        """A ``user_consent`` session: its principal's own token (rule 1), never another's.

        The session is bound to the principal of the client it opened for;
        a later request finds that principal's token even once that client
        is gone. Without a token (no consent yet, revoked, refresh refused)
        the request fails: the router asks for consent before it sends.
        """
        bound: list[str] = []

        async def source() -> str:
            if not bound:
                subject = self._subjects(client)
                if subject is None:
                    raise CredentialUnavailable("the backend session has no principal")
                bound.append(subject[0])
            personal = self._personal()
            token = (
                None if personal is None else await personal.access_token(bound[0], self._backend)
            )
            if token is None:
                raise CredentialUnavailable(
                    f"no consent of this principal for backend {self._backend!r}"
                )
            return token

        def refused(token: str) -> None:
            # A 401: the flow refreshes that token on the retry, or (no
            # refresh token, or the refresh refused) asks for consent again.
            personal = self._personal()
            if bound and personal is not None:
                personal.refused(bound[0], self._backend, token)

        return ChannelCredential(source, refused, retry=True)

    def _own(self, auth: BackendAuth | None) -> ChannelCredential | None:
        if auth is None:
            return None
        if auth.type == "static":
            static = auth

            async def static_source() -> str:
                return read_secret(static.token, static.token_file, "token")

            return ChannelCredential(static_source, lambda _token: None, retry=False)
        grant = auth

        async def source() -> str:
            return await self._token(
                ("own",),
                lambda secret: client_credentials_request(grant, secret),
                CLIENT_CREDENTIALS,
                grant,
            )

        def refused(token: str) -> None:
            if self._cache.invalidate(("own",), token):
                self._log.info("backend.credential.refused", grant=CLIENT_CREDENTIALS)

        return ChannelCredential(source, refused, retry=True)

    # -- fetching, once per key at a time (rule 2) -------------------------------

    async def _token(
        self,
        key: Hashable,
        build: Callable[[str], TokenRequest],
        grant: str,
        auth: BackendAuth | None = None,
    ) -> str:
        settings = auth or self._auth
        cached = self._cache.fresh(key, self._clock())
        if cached is not None:
            return cached.access_token
        lock = self._locks.setdefault(key, trio.Lock())
        try:
            async with lock:
                cached = self._cache.fresh(key, self._clock())
                if cached is not None:
                    return cached.access_token
                issued = await self._request(build, grant, settings)
                self._cache.put(key, issued)
                return issued.access_token
        finally:
            if not lock.locked() and lock.statistics().tasks_waiting == 0:
                self._locks.pop(key, None)

    async def _request(
        self, build: Callable[[str], TokenRequest], grant: str, auth: BackendAuth
    ) -> IssuedToken:
        try:
            secret = (
                read_secret("", auth.private_key_file, "private_key")
                if auth.client_auth == "private_key_jwt"
                else read_secret(auth.client_secret, auth.client_secret_file, "client_secret")
            )
            # A private key that cannot sign fails here: counted like an unreadable one.
            request = build(secret)
        except CredentialUnavailable:
            self.requests[(grant, "secret_unreadable")] += 1
            raise
        started = self._clock()
        try:
            answer = await self._fetch(request)
            issued = parse_token_response(
                answer.status, answer.body, started, auth.refresh_skew, auth.refresh_fraction
            )
        except TokenEndpointError as exc:
            self.requests[(grant, "refused")] += 1
            self._log.warning("backend.credential.refused_by_endpoint", grant=grant, error=str(exc))
            raise
        except CredentialUnavailable as exc:
            self.requests[(grant, "unreachable")] += 1
            self._log.warning("backend.credential.unavailable", grant=grant, error=str(exc))
            raise
        self.requests[(grant, "ok")] += 1
        self._log.debug(
            "backend.credential.issued", grant=grant, lifetime=issued.expires_at - started
        )
        return issued


def connectors(
    config: BackendConfig,
    connect: ChannelOpener | None,
    subjects: Callable[[str], Subject | None] | None,
    personal: Callable[[], PersonalTokens | None] = lambda: None,
) -> tuple[BackendCredentials | None, ChannelOpener, Callable[[str], ChannelOpener] | None]:
    """A backend's credentials (if its ``auth:`` asks for any) and its two openers.

    ``connect`` (tests' in-memory fakes) wins over everything; a network
    backend with ``auth:`` gets openers that carry its credential, the
    shared session's and a client session's; anything else opens plainly.
    """
    if connect is not None:
        return None, connect, None
    if isinstance(config, NetworkBackend) and config.auth is not None:
        credentials = BackendCredentials(
            config.name,
            config.auth,
            subjects=subjects or (lambda _client: None),
            personal=personal,
        )
        shared, for_client = credentials.openers(open_channel)
        return credentials, shared, for_client
    return None, open_channel, None
