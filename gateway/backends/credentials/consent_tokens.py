"""Each person's own token at ``user_consent`` backends: links, logins, the code exchange, refresh.

The records and their rules are sans-IO in :mod:`gateway.consent.records`,
the OAuth messages in :mod:`gateway.consent.oauth` and
:mod:`gateway.backends.credentials.grants`; this module does the I/O: the
state store, discovery documents and token requests over httpx.

Rules:

1. **A token is only ever its principal's.** :meth:`ConsentTokens.access_token`
   is asked for (principal, backend) and opens only the record sealed for
   exactly that pair; there is no way to ask for "a" token of a backend.
2. **A link, then a login, then tokens** (``records`` rule 1): each step
   takes the record of the step before, so each is single use. A waiting
   call is told when its login completed (:meth:`ConsentTokens.completed`);
   the tokens are in the store before it is told.
3. **Refresh before expiry, single flight.** From ``refresh_at`` on (or
   once the backend refused the token with a 401), the first request
   refreshes with the refresh token (one token request per (principal,
   backend) however many wait) and stores the new pair; a refresh the
   server refuses deletes the record, so the person is sent through
   consent again (once, on the next call); without a refresh token the
   access token is used until it expires, or until a backend refuses it.
4. **Discovery once per backend** (again after a reload changed its URL
   or ``authorization_server``): ``authorization_server`` when set, else
   the issuer the backend's protected resource metadata names (RFC 9728);
   its metadata from RFC 8414's or OpenID's well-known URL. A failure is
   :class:`~gateway.consent.oauth.ConsentSetupError` and is retried on the
   next link.
5. Nothing here logs a token, a code or a verifier.
6. **Counts for operators, never who.** :meth:`ConsentTokens.survey`
   counts per backend the principals holding tokens that open, those whose
   sign-in ends within ``EXPIRING_SOON`` (no refresh token, the access
   token ends soon or ended), and the refreshes the server refused since
   start; :meth:`ConsentTokens.run` keeps the last survey for ``/readyz``
   (every ``SURVEY_INTERVAL``, and soon after a grant, a revocation or a
   refused refresh here), since ``/readyz`` answers from memory.
7. **Optionally, the person proves who they are first** (``consent.bind_login``,
   :mod:`gateway.consent.login_binding`): opening a link sends the browser
   to the gateway's OpenID provider; the callback of that login checks the
   ID token names the link's principal and only then sends the browser on
   to the backend's server. Off, the single-use link is the proof.

Past 450 lines and still one idea: one person's token at one backend, from
the sign-in link (and the optional login proving who opened it) to the last
refresh; the pure record rules are in :mod:`gateway.consent.records` and
:mod:`gateway.consent.login_binding`, the messages in :mod:`gateway.consent.oauth`.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import msgspec
import structlog
import trio

from gateway.backends.credentials.grants import (
    TokenEndpointError,
    authorization_code_request,
    parse_token_response,
    refresh_token_request,
    token_extras,
)
from gateway.backends.credentials.provider import http_fetch, read_secret
from gateway.config.schema_backend_auth import BackendAuth
from gateway.consent import login_binding, oauth
from gateway.consent.records import (
    TOKEN_PREFIX,
    ConsentLink,
    LoginRefused,
    PendingLogin,
    Refusal,
    StoredTokens,
    decode_link,
    decode_login,
    link_key,
    login_key,
    open_tokens,
    parse_token_key,
    seal_tokens,
    token_key,
)
from gateway.consent.vault import VaultError
from gateway.errors import CredentialUnavailable
from gateway.store.api import StoreUnavailable
from gateway.telemetry.overview import ConsentCount, ConsentSurvey

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from gateway.backends.credentials.grants import TokenRequest
    from gateway.backends.credentials.provider import TokenAnswer
    from gateway.config.schema_consent import LoginBinding
    from gateway.consent.vault import Vault
    from gateway.store.api import Store

logger = structlog.get_logger("gateway.backends.credentials.consent_tokens")

#: The path a consent link opens on the gateway, before the link's id.
START_PATH: Final = "/oauth/start/"
#: The largest discovery document read.
MAX_DOCUMENT: Final = 256 * 1024
#: A discovery request gets this long (STYLE rule 3: a cancel scope).
DISCOVERY_TIMEOUT: Final = 10.0
#: A sign-in that ends within this many seconds, with nothing to refresh it, is expiring.
EXPIRING_SOON: Final = 3600.0
#: How often the counts ``/readyz`` shows are taken again at the latest (rule 6).
SURVEY_INTERVAL: Final = 30.0
#: After a change here, the counts are taken again this soon (changes come in bursts).
SURVEY_SETTLE: Final = 0.5


@dataclass(frozen=True, slots=True)
class ConsentBackend:
    """What the flow needs of one ``user_consent`` backend.

    Attributes:
        name: the backend's name.
        url: its MCP URL (the ``resource`` is its canonical form).
        auth: its ``auth`` block.
    """

    name: str
    url: str
    auth: BackendAuth


class ConsentTokens:
    """The gateway as the OAuth client of each person at each ``user_consent`` backend.

    Args:
        backends: returns the ``user_consent`` backends now, by name (a
            reload changes them).
        store: the state store (namespace ``consent``).
        vault: seals and opens the tokens.
        public_origin: ``scheme://host[:port]`` the person's browser reaches
            the gateway at (``server.public_url``'s origin).
        callback_path: ``consent.callback_path``.
        login_timeout: ``consent.login_timeout``: how long a link and a login live.
        bind_login: ``consent.bind_login`` with its issuer resolved (rule 7);
            None: the link alone is the proof.
        fetch: performs a token request (tests pass their own).
        get: fetches a discovery document: (status, body).
        wall: the wall clock (expiry survives a restart).
    """

    def __init__(
        self,
        backends: Callable[[], dict[str, ConsentBackend]],
        store: Store,
        vault: Vault,
        *,
        public_origin: str,
        callback_path: str,
        login_timeout: float,
        bind_login: LoginBinding | None = None,
        fetch: Callable[[TokenRequest], Awaitable[TokenAnswer]] = http_fetch,
        get: Callable[[str], Awaitable[tuple[int, bytes]]] | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._backends = backends
        self._store = store
        self._vault = vault
        self._origin = public_origin.rstrip("/")
        self.redirect_uri = self._origin + callback_path
        self.login_timeout = login_timeout
        self._fetch = fetch
        self._bind = bind_login
        self._login_server: oauth.AuthorizationServer | None = None
        self._get = get or http_get
        self._wall = wall
        # Discovered servers, by (backend, configured issuer, backend URL):
        # a reload that changes either discovers again.
        self._servers: dict[tuple[str, str, str], oauth.AuthorizationServer] = {}
        self._locks: dict[tuple[str, str], trio.Lock] = {}
        self._done: dict[str, trio.Event] = {}
        # The last token a backend refused (401), by (principal, backend).
        self._refused: dict[tuple[str, str], str] = {}
        # Rule 6: refused refreshes since start, the last survey, and a nudge.
        self._refresh_failures: dict[str, int] = {}
        self.last_survey: ConsentSurvey | None = None
        self._changed = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep :attr:`last_survey` current (rule 6) until cancelled, the first count
        taken before it reports started; a store that does not answer keeps the last one."""
        started = False
        while True:
            # A fresh event first: a change while counting is counted next.
            changed = self._changed = trio.Event()
            # A store that does not answer: its own health says so; the counts stay.
            with contextlib.suppress(StoreUnavailable):
                await self.survey()
            if not started:
                task_status.started()
                started = True
            with trio.move_on_after(SURVEY_INTERVAL):
                await changed.wait()
                await trio.sleep(SURVEY_SETTLE)

    async def survey(self) -> ConsentSurvey:
        """The counts of every ``user_consent`` backend now (rule 6), kept as :attr:`last_survey`.

        Raises:
            StoreUnavailable: the store did not answer.
        """
        now = self._wall()
        names = sorted(self._backends())
        consented = dict.fromkeys(names, 0)
        expiring = dict.fromkeys(names, 0)
        for _principal, backend, tokens in await self.list():
            if tokens is None or backend not in consented:
                continue
            consented[backend] += 1
            if not tokens.refresh_token and tokens.expires_at - now <= EXPIRING_SOON:
                expiring[backend] += 1
        survey = ConsentSurvey(
            counted_at=now,
            backends=[
                ConsentCount(
                    backend=name,
                    consented=consented[name],
                    expiring_soon=expiring[name],
                    refresh_failures=self._refresh_failures.get(name, 0),
                )
                for name in names
            ],
        )
        self.last_survey = survey
        return survey

    # -- the request path ------------------------------------------------------

    def refused(self, principal: str, backend: str, token: str) -> None:
        """The backend answered 401 to ``token``: the next request refreshes it (rule 3),
        or, without a refresh token, asks for consent again."""
        self._refused[(principal, backend)] = token

    def _due(self, key: tuple[str, str], tokens: StoredTokens) -> bool:
        return self._wall() >= tokens.refresh_at or self._refused.get(key) == tokens.access_token

    def acts_for_people(self, backend: str) -> bool:
        """Whether ``backend`` is one of the ``user_consent`` backends."""
        return backend in self._backends()

    async def access_token(self, principal: str, backend: str) -> str | None:
        """``principal``'s access token at ``backend``, refreshed when due; None: no consent.

        Raises:
            StoreUnavailable: the store did not answer.
        """
        key = (principal, backend)
        tokens = await self._tokens(principal, backend)
        if tokens is None:
            return None
        if not self._due(key, tokens):
            return tokens.access_token
        if not tokens.refresh_token:
            if self._refused.get(key) == tokens.access_token:
                # Refused and nothing to refresh with: the person consents again.
                self._refused.pop(key, None)
                await self._store.delete(token_key(principal, backend))
                return None
            return tokens.access_token if self._wall() < tokens.expires_at else None
        lock = self._locks.setdefault(key, trio.Lock())
        try:
            async with lock:
                fresh = await self._tokens(principal, backend)
                if fresh is None:
                    return None
                if not self._due(key, fresh):
                    return fresh.access_token  # another request refreshed it
                self._refused.pop(key, None)
                return await self._refresh(principal, backend, fresh)
        finally:
            if not lock.locked() and lock.statistics().tasks_waiting == 0:
                self._locks.pop(key, None)

    async def has_consent(self, principal: str, backend: str) -> bool:
        """Whether ``principal`` holds tokens at ``backend`` that open (no refresh)."""
        return await self._tokens(principal, backend) is not None

    async def new_link(self, principal: str, backend: str) -> tuple[str, str]:
        """A consent link for ``principal``'s call to ``backend``: (URL, elicitation id)."""
        link_id = secrets.token_urlsafe(24)
        elicitation_id = secrets.token_urlsafe(16)
        expires_at = self._wall() + self.login_timeout
        record = ConsentLink(
            principal=principal,
            backend=backend,
            elicitation_id=elicitation_id,
            expires_at=expires_at,
        )
        await self._store.put(
            link_key(link_id), msgspec.json.encode(record), ttl=self.login_timeout
        )
        return self._origin + START_PATH + link_id, elicitation_id

    def expect(self, elicitation_id: str) -> None:
        """A call will wait for the login of ``elicitation_id`` (:meth:`completed`)."""
        self._done.setdefault(elicitation_id, trio.Event())

    async def completed(self, elicitation_id: str) -> None:
        """Return once the login of ``elicitation_id`` stored its tokens (rule 2).

        Returns at once when it already did, or when nobody :meth:`expect`-ed it.
        """
        event = self._done.get(elicitation_id)
        if event is not None:
            await event.wait()

    def forget(self, elicitation_id: str) -> None:
        """The waiting call is done or gave up: nobody waits for that login any more."""
        self._done.pop(elicitation_id, None)

    # -- the browser's two requests ---------------------------------------------

    async def start(self, link_id: str) -> str:
        """The authorization URL a link leads to; the link is used up (rule 2).

        Raises:
            LoginRefused: the link is unknown, used, or expired.
            ConsentSetupError: the authorization server cannot be found or used.
            StoreUnavailable: the store did not answer.
        """
        link = decode_link(await self._store.take(link_key(link_id)), self._wall())
        if self._bind is not None:
            return await self._identify(link)
        return await self._authorize(link)

    async def _authorize(self, link: ConsentLink) -> str:
        """The backend's authorization URL for a link's principal; its login stored."""
        backend = self._backends().get(link.backend)
        if backend is None:
            raise LoginRefused(Refusal.UNKNOWN, "the backend is no longer configured")
        server = await self._server(backend)
        pkce = oauth.new_pkce()
        state = secrets.token_urlsafe(32)
        login = PendingLogin(
            principal=link.principal,
            backend=link.backend,
            elicitation_id=link.elicitation_id,
            verifier=pkce.verifier,
            redirect_uri=self.redirect_uri,
            expires_at=link.expires_at,
        )
        await self._store.put(
            login_key(state),
            msgspec.json.encode(login),
            ttl=max(link.expires_at - self._wall(), 1.0),
        )
        return oauth.authorization_url(
            server,
            client_id=backend.auth.client_id,
            redirect_uri=self.redirect_uri,
            state=state,
            pkce=pkce,
            resource=oauth.canonical_resource(backend.url),
            scopes=list(backend.auth.scopes),
        )

    async def finish(self, state: str, code: str, error: str) -> PendingLogin | str:
        """The callback: the login of ``state`` used up, its code exchanged, tokens stored.

        Returns:
            The completed login; or, for the login at the gateway's OpenID
            provider (rule 7), the backend's authorization URL to go on to.

        Raises:
            LoginRefused: unknown/used/tampered state, expired, the server's
                refusal (``error``), a code the token endpoint refused, or
                (rule 7) a login as someone else than the link's principal.
            StoreUnavailable: the store did not answer.
        """
        if state.startswith(login_binding.STATE_PREFIX):
            return await self._identified(state, code, error)
        login = decode_login(await self._store.take(login_key(state)), self._wall())
        if error:
            raise LoginRefused(Refusal.DENIED, error[:80])
        if not code:
            raise LoginRefused(Refusal.MALFORMED, "the callback carries no code")
        backend = self._backends().get(login.backend)
        if backend is None:
            raise LoginRefused(Refusal.UNKNOWN, "the backend is no longer configured")
        try:
            server = await self._server(backend)
            auth = backend.auth
            secret = read_secret(auth.client_secret, auth.client_secret_file, "client_secret")
            request = authorization_code_request(
                auth,
                secret,
                token_url=server.token_endpoint,
                code=code,
                verifier=login.verifier,
                redirect_uri=login.redirect_uri,
                resource=oauth.canonical_resource(backend.url),
            )
            tokens = await self._issue(request, backend)
        except (CredentialUnavailable, oauth.ConsentSetupError) as exc:
            logger.warning("consent.exchange_failed", backend=login.backend, error=str(exc))
            raise LoginRefused(Refusal.EXCHANGE_FAILED, str(exc)) from None
        await self._put(login.principal, login.backend, tokens)
        logger.info("consent.granted", backend=login.backend, principal=login.principal)
        self._changed.set()
        waiting = self._done.pop(login.elicitation_id, None)
        if waiting is not None:
            waiting.set()
        return login

    # -- consent.bind_login (rule 7) ---------------------------------------------------

    async def _identify(self, link: ConsentLink) -> str:
        """The login URL at the gateway's OpenID provider for a link's person."""
        bind = self._bind
        assert bind is not None
        if not link.principal.startswith("jwt:"):
            raise LoginRefused(Refusal.CANNOT_BIND)
        server = await self._identity_server(bind.issuer)
        pkce = oauth.new_pkce()
        state = login_binding.STATE_PREFIX + secrets.token_urlsafe(32)
        nonce = secrets.token_urlsafe(24)
        login = login_binding.IdentifyingLogin(
            principal=link.principal,
            backend=link.backend,
            elicitation_id=link.elicitation_id,
            verifier=pkce.verifier,
            nonce=nonce,
            redirect_uri=self.redirect_uri,
            expires_at=link.expires_at,
        )
        await self._store.put(
            login_binding.identify_key(state),
            msgspec.json.encode(login),
            ttl=max(link.expires_at - self._wall(), 1.0),
        )
        return login_binding.login_url(
            server,
            client_id=bind.client_id,
            redirect_uri=self.redirect_uri,
            state=state,
            pkce=pkce,
            nonce=nonce,
            scopes=list(bind.scopes),
        )

    async def _identified(self, state: str, code: str, error: str) -> str:
        """The person logged in at the gateway's OpenID provider: the backend's URL next,
        if the ID token names the link's principal."""
        bind = self._bind
        taken = await self._store.take(login_binding.identify_key(state))
        login = login_binding.decode_identifying(taken, self._wall())
        if bind is None:
            raise LoginRefused(Refusal.UNKNOWN, "consent.bind_login is off")
        if error:
            raise LoginRefused(Refusal.DENIED, error[:80])
        if not code:
            raise LoginRefused(Refusal.MALFORMED, "the callback carries no code")
        try:
            server = await self._identity_server(bind.issuer)
            secret = read_secret(bind.client_secret, bind.client_secret_file, "client_secret")
            client = BackendAuth(
                type="user_consent", client_id=bind.client_id, client_secret=secret
            )
            request = authorization_code_request(
                client,
                secret,
                token_url=server.token_endpoint,
                code=code,
                verifier=login.verifier,
                redirect_uri=login.redirect_uri,
                resource="",
            )
            answer = await self._fetch(request)
        except (CredentialUnavailable, oauth.ConsentSetupError) as exc:
            logger.warning("consent.login_failed", backend=login.backend, error=str(exc))
            raise LoginRefused(Refusal.EXCHANGE_FAILED, str(exc)) from None
        if answer.status != 200:
            logger.warning("consent.login_failed", backend=login.backend, status=answer.status)
            raise LoginRefused(Refusal.EXCHANGE_FAILED, f"HTTP {answer.status}")
        proven = login_binding.identity_of(
            answer.body,
            issuer=server.issuer,
            client_id=bind.client_id,
            nonce=login.nonce,
            now=self._wall(),
        )
        if proven != login.principal:
            logger.warning("consent.login_mismatch", backend=login.backend)
            raise LoginRefused(Refusal.NOT_THE_CALLER)
        link = ConsentLink(
            principal=login.principal,
            backend=login.backend,
            elicitation_id=login.elicitation_id,
            expires_at=login.expires_at,
        )
        return await self._authorize(link)

    async def _identity_server(self, issuer: str) -> oauth.AuthorizationServer:
        if self._login_server is not None:
            return self._login_server
        for url in oauth.metadata_urls(issuer):
            status, body = await self._get(url)
            if status == 200:
                self._login_server = oauth.parse_authorization_server(body, issuer)
                return self._login_server
        raise oauth.ConsentSetupError(f"no OpenID provider metadata for {issuer}")

    # -- the operator's view --------------------------------------------------------

    async def list(self) -> list[tuple[str, str, StoredTokens | None]]:
        """Every consent stored: (principal, backend, tokens or None when they do not open)."""
        found: list[tuple[str, str, StoredTokens | None]] = []
        for key, blob in await self._store.scan(TOKEN_PREFIX):
            names = parse_token_key(key)
            if names is None:
                continue
            try:
                tokens: StoredTokens | None = open_tokens(self._vault, *names, blob)
            except VaultError:
                tokens = None
            found.append((*names, tokens))
        return found

    async def counts(self) -> dict[str, int]:
        """How many principals hold tokens that open, by ``user_consent`` backend (0 for none).

        Raises:
            StoreUnavailable: the store did not answer.
        """
        return {count.backend: count.consented for count in (await self.survey()).backends}

    async def revoke(self, principal: str, backend: str) -> bool:
        """Forget ``principal``'s tokens at ``backend``; whether there were any."""
        removed = await self._store.delete(token_key(principal, backend))
        self._changed.set()
        return removed

    # -- inside ----------------------------------------------------------------------------

    async def _tokens(self, principal: str, backend: str) -> StoredTokens | None:
        blob = await self._store.get(token_key(principal, backend))
        if blob is None:
            return None
        try:
            return open_tokens(self._vault, principal, backend, blob)
        except VaultError as exc:
            # Altered, copied from another record, or its key was removed:
            # the person consents again rather than anyone using it.
            logger.warning("consent.record_unusable", backend=backend, error=str(exc))
            return None

    async def _put(self, principal: str, backend: str, tokens: StoredTokens) -> None:
        blob = seal_tokens(self._vault, principal, backend, tokens)
        await self._store.put(token_key(principal, backend), blob)

    async def _refresh(self, principal: str, backend: str, tokens: StoredTokens) -> str | None:
        config = self._backends().get(backend)
        if config is None:
            return None
        try:
            server = await self._server(config)
            auth = config.auth
            secret = read_secret(auth.client_secret, auth.client_secret_file, "client_secret")
            request = refresh_token_request(
                auth,
                secret,
                token_url=server.token_endpoint,
                refresh_token=tokens.refresh_token,
                resource=oauth.canonical_resource(config.url),
            )
            fresh = await self._issue(request, config, keep_refresh=tokens.refresh_token)
        except TokenEndpointError as exc:
            # Rule 3: a refused refresh token sends the person back through consent.
            logger.warning("consent.refresh_refused", backend=backend, error=str(exc))
            self._refresh_failures[backend] = self._refresh_failures.get(backend, 0) + 1
            self._changed.set()
            await self._store.delete(token_key(principal, backend))
            return None
        await self._put(principal, backend, fresh)
        return fresh.access_token

    async def _issue(
        self, request: TokenRequest, backend: ConsentBackend, keep_refresh: str = ""
    ) -> StoredTokens:
        started = self._wall()
        answer = await self._fetch(request)
        auth = backend.auth
        issued = parse_token_response(
            answer.status, answer.body, started, auth.refresh_skew, auth.refresh_fraction
        )
        refresh, scope = token_extras(answer.body)
        return StoredTokens(
            access_token=issued.access_token,
            refresh_token=refresh or keep_refresh,
            expires_at=issued.expires_at,
            refresh_at=issued.refresh_at,
            scope=scope,
            obtained_at=started,
        )

    async def _server(self, backend: ConsentBackend) -> oauth.AuthorizationServer:
        where = (backend.name, backend.auth.authorization_server, backend.url)
        cached = self._servers.get(where)
        if cached is not None:
            return cached
        issuer = backend.auth.authorization_server
        if not issuer:
            issuer = (await self._resource_metadata(backend)).authorization_servers[0]
        server: oauth.AuthorizationServer | None = None
        for url in oauth.metadata_urls(issuer):
            status, body = await self._get(url)
            if status == 200:
                server = oauth.parse_authorization_server(body, issuer)
                break
        if server is None:
            raise oauth.ConsentSetupError(f"no authorization server metadata for {issuer}")
        self._servers[where] = server
        return server

    async def _resource_metadata(self, backend: ConsentBackend) -> oauth.ResourceMetadata:
        for url in oauth.protected_resource_urls(backend.url):
            status, body = await self._get(url)
            if status == 200:
                return oauth.parse_resource_metadata(body)
        raise oauth.ConsentSetupError(
            f"backend {backend.name!r} serves no protected resource metadata; "
            "set auth.authorization_server"
        )


async def http_get(url: str) -> tuple[int, bytes]:
    """GET a discovery document with httpx: (status, body), bounded in size and time.

    Raises:
        ConsentSetupError: unreachable, or no answer within ``DISCOVERY_TIMEOUT``.
    """
    import httpx  # here, not at the top: only consent backends need it (start-up)

    try:
        with trio.fail_after(DISCOVERY_TIMEOUT):
            async with (
                httpx.AsyncClient(
                    trust_env=False, follow_redirects=False, timeout=httpx.Timeout(None)
                ) as client,
                client.stream("GET", url, headers={"accept": "application/json"}) as response,
            ):
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_DOCUMENT:
                        break
                return response.status_code, bytes(body[:MAX_DOCUMENT])
    except trio.TooSlowError:
        raise oauth.ConsentSetupError(f"{url} did not answer in {DISCOVERY_TIMEOUT:g} s") from None
    except (httpx.HTTPError, OSError) as exc:
        raise oauth.ConsentSetupError(f"{url} unreachable ({type(exc).__name__})") from None
