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
4. **Discovery and the client** are :mod:`.consent_discovery`'s: the
   authorization server configured or found from the backend's protected
   resource metadata (RFC 9728), the client configured, a client ID
   metadata document, or registered (RFC 7591). A failure is
   :class:`~gateway.consent.oauth.ConsentSetupError` and is retried on the
   next link.
5. **Revoked at the server, deleted here.** :meth:`ConsentTokens.revoke`
   asks the server to revoke the refresh and access tokens (RFC 7009) when
   it advertises a ``revocation_endpoint``; whatever the server answers, or
   when it cannot be reached, the sealed tokens are deleted and the outcome
   is logged and returned. :meth:`ConsentTokens.purge` deletes a backend's
   records when policy removed it (``registration`` rule 3);
   :meth:`ConsentTokens.purge_withdrawn` revokes those of principals a
   reload took the backend from (``identity.consent_standing``).
6. Nothing here logs a token, a code or a verifier.
7. **Counts for operators, never who.** :meth:`ConsentTokens.survey`
   counts per backend the principals holding tokens that open, those whose
   sign-in ends within ``EXPIRING_SOON`` (no refresh token, the access
   token ends soon or ended), and the refreshes the server refused since
   start; :meth:`ConsentTokens.run` keeps the last survey for ``/readyz``
   (every ``SURVEY_INTERVAL``, and soon after a grant, a revocation or a
   refused refresh here), since ``/readyz`` answers from memory.
8. **Optionally, the person proves who they are first** (``consent.bind_login``,
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
import enum
import secrets
import time
from typing import TYPE_CHECKING, Final

import msgspec
import structlog
import trio

from gateway.backends.credentials.consent_discovery import (
    CLIENT_NAME,
    ConsentBackend,
    ConsentServers,
    http_get,
    http_post,
    http_probe,
)
from gateway.backends.credentials.grants import (
    TokenEndpointError,
    authorization_code_request,
    parse_token_response,
    refresh_token_request,
    revocation_error,
    revocation_request,
    token_extras,
)
from gateway.backends.credentials.provider import http_fetch, read_secret
from gateway.config.schema_backend_auth import BackendAuth
from gateway.consent import login_binding, oauth, registration
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

__all__ = ["START_PATH", "AtServer", "ConsentBackend", "ConsentTokens"]

logger = structlog.get_logger("gateway.backends.credentials.consent_tokens")

#: The path a consent link opens on the gateway, before the link's id.
START_PATH: Final = "/oauth/start/"
#: A sign-in that ends within this many seconds, with nothing to refresh it, is expiring.
EXPIRING_SOON: Final = 3600.0
#: How often the counts ``/readyz`` shows are taken again at the latest (rule 7).
SURVEY_INTERVAL: Final = 30.0
#: After a change here, the counts are taken again this soon (changes come in bursts).
SURVEY_SETTLE: Final = 0.5


class AtServer(enum.Enum):
    """What the authorization server did of a revocation (rule 5)."""

    REVOKED = "revoked"
    NOT_OFFERED = "no revocation endpoint"
    FAILED = "failed"
    NOTHING = "nothing to revoke"


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
        bind_login: ``consent.bind_login`` with its issuer resolved (rule 8);
            None: the link alone is the proof.
        fetch: performs a token request (tests pass their own).
        get: fetches a discovery document: (status, body).
        post: POSTs a registration request: (status, body).
        probe: the ``WWW-Authenticate`` of a backend's answer without a token.
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
        post: Callable[[str, bytes], Awaitable[tuple[int, bytes]]] = http_post,
        probe: Callable[[str], Awaitable[str | None]] = http_probe,
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
        self.servers = ConsentServers(
            store,
            vault,
            origin=self._origin,
            redirect_uri=self.redirect_uri,
            get=get or http_get,
            post=post,
            probe=probe,
        )
        self._locks: dict[tuple[str, str], trio.Lock] = {}
        self._done: dict[str, trio.Event] = {}
        # The last token a backend refused (401), by (principal, backend).
        self._refused: dict[tuple[str, str], str] = {}
        # Rule 6: refused refreshes since start, the last survey, and a nudge.
        self._refresh_failures: dict[str, int] = {}
        self.last_survey: ConsentSurvey | None = None
        self._changed = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep :attr:`last_survey` current (rule 7) until cancelled, the first count
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
        """The counts of every ``user_consent`` backend now (rule 7), kept as :attr:`last_survey`.

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
        found = await self.servers.client(backend)
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
            found.server,
            client_id=found.auth.client_id,
            redirect_uri=self.redirect_uri,
            state=state,
            pkce=pkce,
            resource=oauth.canonical_resource(backend.url),
            scopes=found.scopes,
        )

    async def finish(self, state: str, code: str, error: str) -> PendingLogin | str:
        """The callback: the login of ``state`` used up, its code exchanged, tokens stored.

        Returns:
            The completed login; or, for the login at the gateway's OpenID
            provider (rule 8), the backend's authorization URL to go on to.

        Raises:
            LoginRefused: unknown/used/tampered state, expired, the server's
                refusal (``error``), a code the token endpoint refused, or
                (rule 8) a login as someone else than the link's principal.
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
            found = await self.servers.client(backend)
            request = authorization_code_request(
                found.auth,
                found.secret,
                token_url=found.server.token_endpoint,
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

    def client_document(self, backend: str) -> bytes | None:
        """The gateway's client ID metadata document for ``backend``; None: it has none.

        Only a ``user_consent`` backend configured without a ``client_id``
        has one (``registration`` rule 1).
        """
        config = self._backends().get(backend)
        if config is None or config.auth.client_id:
            return None
        return registration.metadata_document(
            client_id=registration.metadata_document_url(self._origin, backend),
            client_name=CLIENT_NAME,
            redirect_uri=self.redirect_uri,
            scopes=list(config.auth.scopes),
        )

    # -- consent.bind_login (rule 8) ---------------------------------------------------

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

    async def revoke(self, principal: str, backend: str) -> tuple[bool, AtServer]:
        """Revoke ``principal``'s tokens at ``backend`` at its server, then forget them (rule 5).

        Returns:
            Whether there were any here, and what the server did.

        Raises:
            StoreUnavailable: the store did not answer (nothing was deleted).
        """
        # Taken, not read: of replicas revoking the same consent, one revokes.
        blob = await self._store.take(token_key(principal, backend))
        tokens = None if blob is None else self._open(principal, backend, blob)
        outcome = AtServer.NOTHING
        config = self._backends().get(backend)
        if tokens is not None and config is not None:
            outcome = await self._revoke_at_server(config, tokens)
        deleted = blob is not None
        self._refused.pop((principal, backend), None)
        self._changed.set()
        log = logger.warning if outcome is AtServer.FAILED else logger.info
        log("consent.revoked", backend=backend, principal=principal, at_server=outcome.value)
        return deleted, outcome

    async def _revoke_at_server(self, config: ConsentBackend, tokens: StoredTokens) -> AtServer:
        """RFC 7009 for the refresh token (which ends the grant), then the access token."""
        try:
            found = await self.servers.client(config)
            endpoint = found.server.revocation_endpoint
            if not endpoint:
                return AtServer.NOT_OFFERED
            pairs = [(tokens.refresh_token, "refresh_token"), (tokens.access_token, "access_token")]
            for token, hint in pairs:
                if not token:
                    continue
                request = revocation_request(
                    found.auth, found.secret, revocation_url=endpoint, token=token, hint=hint
                )
                answer = await self._fetch(request)
                if answer.status == 200:  # RFC 7009 2.2: 200 whether or not it was valid
                    continue
                error = revocation_error(answer.body)
                if error == "unsupported_token_type" and hint == "access_token":
                    # RFC 7009 2.2.1: a server that cannot revoke self-contained
                    # (JWT) access tokens; the refresh token's grant is gone.
                    continue
                raise TokenEndpointError(answer.status, error)
        except (CredentialUnavailable, oauth.ConsentSetupError) as exc:
            logger.warning("consent.revocation_failed", backend=config.name, error=str(exc))
            return AtServer.FAILED
        return AtServer.REVOKED

    async def purge(self, backends: set[str]) -> int:
        """Delete every token and registered client of ``backends`` (rule 5); how many tokens.

        The keys name their backend, so no other backend's records are touched.

        Raises:
            StoreUnavailable: the store did not answer.
        """
        if not backends:
            return 0
        purged = 0
        for key, _blob in await self._store.scan(TOKEN_PREFIX):
            names = parse_token_key(key)
            if names is not None and names[1] in backends:
                purged += await self._store.delete(key)
        for name in backends:
            await self._store.delete(registration.client_key(name))
            self.servers.forget(name)
        logger.info("consent.purged", backends=sorted(backends), tokens=purged)
        return purged

    async def purge_withdrawn(self, may_use: Callable[[str, str], bool]) -> int:
        """Revoke and delete the consents whose principal lost the backend (rule 5); how many.

        ``may_use(principal, backend)`` judges each stored pair
        (:func:`gateway.identity.consent_standing.may_use`); each refused pair goes
        through :meth:`revoke`, so with replicas judging the same reload
        each consent is revoked once, and a second run finds nothing.

        Raises:
            StoreUnavailable: the store did not answer.
        """
        purged: list[tuple[str, str]] = []
        for key, _blob in await self._store.scan(TOKEN_PREFIX):
            names = parse_token_key(key)
            if names is None or may_use(*names):
                continue
            deleted, _at_server = await self.revoke(*names)
            if deleted:
                purged.append(names)
        if purged:
            logger.info(
                "consent.purged",
                reason="access removed",
                tokens=len(purged),
                principals=len({principal for principal, _ in purged}),
                backends=sorted({backend for _, backend in purged}),
            )
        return len(purged)

    # -- inside ----------------------------------------------------------------------------

    async def _tokens(self, principal: str, backend: str) -> StoredTokens | None:
        blob = await self._store.get(token_key(principal, backend))
        if blob is None:
            return None
        return self._open(principal, backend, blob)

    def _open(self, principal: str, backend: str, blob: bytes) -> StoredTokens | None:
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
            found = await self.servers.client(config)
            request = refresh_token_request(
                found.auth,
                found.secret,
                token_url=found.server.token_endpoint,
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
