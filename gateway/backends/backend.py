"""One configured backend, as the router and the pool see it.

``Backend`` is a facade over the four jobs a backend does, each in a module
of its own:

- ``supervisor``: its life (connect, initialize, list, serve, restart), its
  explicit state and the only place that state changes;
- ``gate``: admission of calls (in-flight limit, queue, drain);
- ``links``: the backend sessions of a ``per_principal`` or ``per_client``
  backend;
- ``listing``: the guarded walk over a paged list, pure.

What stays here is the call path that ties them together: admit, pick the
session, apply the backend's timeouts, and map what went wrong to
``BackendUnavailable`` or ``RequestTimeout``. It is one idea, the call path,
with the read-only properties the pool and the router see beside it; that
is why the module runs past 450 lines.

Rules:

1. ``request`` refuses at once unless the backend is ``UP``: a caller never
   waits on a backend that is starting or down (robustness A31).
2. A ``BackendUnavailable`` carries the condition that took the session
   down (``cause``). When that is ``SessionExpired`` (an HTTP backend forgot
   our session), a request that is safe to repeat is sent once more on the
   new session; a ``tools/call`` never is (robustness D14, B11). The
   decision is made on the type, never on a message.
3. A ``user_consent`` backend that refused the catalog session with HTTP
   401 (``refused_listing``) is down for the catalog but not for the
   people who consented: a call from a client goes to its principal's own
   backend session (``personal_links``), which carries that principal's
   token, runs in the backend's own nursery rather than the shared
   session's, and closes when idle like any link. Without a client (the
   catalog), or in ``shared`` mode, rule 1 holds.
"""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING, Any, Final

import structlog
import trio

from gateway.backends.call_clock import CallClock
from gateway.backends.credentials.provider import connectors
from gateway.backends.failure_reasons import condition
from gateway.backends.gate import Gate
from gateway.backends.handshake import (
    CLIENT_CAPABILITIES,
    Handshake,
    IncompatibleBackend,
)
from gateway.backends.links import HostFacts, Links
from gateway.backends.state import (
    BackendNotificationHandler,
    BackendRequestHandler,
    BackendState,
    ServerInfo,
)
from gateway.backends.stateless.listen_client import BRIDGED
from gateway.backends.supervision.supervisor import (
    REFRESH_DEBOUNCE,
    STABLE_UPTIME,
    Supervisor,
)
from gateway.catalog.snapshot import Kind
from gateway.errors import (
    METHOD_NOT_FOUND,
    BackendUnavailable,
    CredentialUnavailable,
    LocalProtocolError,
    RemoteProtocolError,
    RequestTimeout,
    SessionExpired,
    TransportError,
)
from gateway.protocol import jsonrpc
from gateway.protocol.stateless.cache_hints import NO_CACHE, CacheHint
from gateway.protocol.stateless.listen import ACKNOWLEDGED
from gateway.telemetry import tracing

if TYPE_CHECKING:
    import collections
    import random
    from collections.abc import Callable

    import msgspec

    from gateway.backends.channel import ChannelOpener
    from gateway.backends.credentials.provider import PersonalTokens, Subject
    from gateway.catalog.snapshot import BackendListing
    from gateway.config import BackendConfig
    from gateway.protocol.jsonrpc import RequestId
    from gateway.session.peer import Peer, ProgressHandler

logger = structlog.get_logger("gateway.backends")

# Requests that may be sent twice without harm: retried once after the
# backend's session expired. Never tools/call (it may have had effects).
#: The status of a backend's refusal of the catalog session's credential.
HTTP_UNAUTHORIZED: Final = 401
IDEMPOTENT_METHODS: Final = frozenset(
    {
        "ping",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/get",
        "skills/list",
        "skills/get",
        "resources/directory/read",
        "completion/complete",
    }
)


class Backend:
    """Supervisor and call gate of one configured backend.

    Args:
        config: this backend's config.
        on_change: called (synchronously) whenever state or listing changes.
        on_notification: called for each notification the backend sends
            (other than progress, which the session routes itself).
        on_request: answers the backend's own requests (sampling, roots).
        connect: opens the transport (tests pass in-memory fakes); without
            it, ``open_channel`` with the backend's ``auth:`` credential.
        rng: the jitter's random source (tests seed it).
        subjects: the caller (principal key and raw token) of a client
            session, for a ``token_exchange`` backend's per-client sessions.
        hosts: a client session's principal and declared capabilities, for
            the per-principal or per-client sessions.
        authenticated: whether the gateway authenticates its callers (it
            turns ``session: auto`` into ``per_principal`` for stdio).
        personal: each person's tokens at ``user_consent`` backends, once
            the state store is open.
    """

    def __init__(
        self,
        config: BackendConfig,
        *,
        on_change: Callable[[Backend], None],
        on_notification: BackendNotificationHandler | None = None,
        on_request: BackendRequestHandler | None = None,
        connect: ChannelOpener | None = None,
        rng: random.Random | None = None,
        subjects: Callable[[str], Subject | None] | None = None,
        hosts: Callable[[str], HostFacts | None] | None = None,
        authenticated: Callable[[], bool] | None = None,
        personal: Callable[[], PersonalTokens | None] | None = None,
    ) -> None:
        self.config = config
        self._authenticated = authenticated or (lambda: False)
        # ``session_mode`` without auth and with it: the config never changes
        # for a backend's life, and each call asks for it twice.
        self._session_modes = (config.effective_session(False), config.effective_session(True))
        self.name = config.name
        self.prefix = config.public_prefix
        self._on_notification = on_notification
        self._on_request = on_request
        # The shared session that refused a subscription (-32601): a new
        # session may serve it, so the refusal lasts as long as that one.
        self._subscribe_refused_on: Peer | None = None
        log = logger.bind(backend=self.name)
        # The ``auth:`` block at work (its token request counts are a metric).
        self.credentials, opener, client_opener = connectors(
            config, connect, subjects, personal or (lambda: None)
        )
        # Sessions opened and requests sent, by era (metrics read at scrape time).
        self.handshake = Handshake()
        self._gate = Gate(self.name, config.max_in_flight, config.max_pending)

        def links() -> Links:
            return Links(
                config,
                connect=opener,
                connect_client=client_opener,
                handshake=self.handshake,
                on_request=self._handle_request,
                on_notification=self._handle_notification,
                log=log,
                mode=lambda: "per_client" if self.session_mode == "per_client" else "per_principal",
                hosts=hosts,
                tool_schema=lambda name: self._supervisor.tool_schema(name),
                shared_info=lambda: self._supervisor.info,
            )

        self._links = links()
        # Rule 3: the people's own sessions while the catalog session is refused.
        self._personal_links = links()
        self._supervisor = Supervisor(
            config,
            connect=opener,
            handshake=self.handshake,
            links=self._links,
            on_change=lambda: on_change(self),
            on_request=self._handle_request,
            on_notification=self._handle_notification,
            rng=rng,
            log=log,
        )

    # -- what the pool, the router and the metrics read ----------------------

    @property
    def state(self) -> BackendState:
        """Where the backend is in its life."""
        return self._supervisor.state

    @property
    def reason(self) -> str:
        """Why it is in that state (human text)."""
        return self._supervisor.reason

    @property
    def era_reason(self) -> str | None:
        """Why it speaks the handshake era although it offers 2026-07-28; None otherwise."""
        return self._supervisor.era_reason

    @property
    def refused_listing(self) -> bool:
        """Down because it answered the catalog session HTTP 401: it lists only for a person.

        Decided on the failure's type and its ``data.httpStatus``, never on text;
        between two attempts (restarting, connecting) the last attempt's stands.
        """
        cause = self._supervisor.last_failure
        if self.state is BackendState.UP or cause is None:
            return False
        cause = condition(cause)
        data = cause.data if isinstance(cause, RemoteProtocolError) else None
        return isinstance(data, dict) and data.get("httpStatus") == HTTP_UNAUTHORIZED

    @property
    def serves_people_only(self) -> bool:
        """Rule 3: refused to the catalog, its calls go to each principal's own session."""
        return (
            self.refused_listing
            and self.per_client
            and self._supervisor.peer is None
            and self.state is not BackendState.STOPPED  # its own nursery is gone
        )

    @property
    def info(self) -> ServerInfo | None:
        """What the backend said in its InitializeResult; None unless it got that far."""
        return self._supervisor.info

    @property
    def listing(self) -> BackendListing | None:
        """Its complete current listing; None unless up."""
        return self._supervisor.listing

    @property
    def restarts(self) -> int:
        """Times the backend went down after having been up (a metric)."""
        return self._supervisor.restarts

    @property
    def up_since(self) -> float | None:
        """When its current session came up (trio clock); None unless up."""
        return self._supervisor.up_since

    @property
    def last_error(self) -> tuple[str, float] | None:
        """The last failure that took it down, with its wall-clock time (``/readyz``)."""
        return self._supervisor.last_error

    @property
    def initializations(self) -> int:
        """Initialize answers received, shared and per-client sessions alike (a metric)."""
        return self.handshake.count

    @property
    def list_guard_trips(self) -> collections.Counter[str]:
        """Times a listing was cut short by a guard, by reason (a metric)."""
        return self._supervisor.list_guard_trips

    @property
    def settled(self) -> trio.Event:
        """Set once the first connect attempt has ended, either way."""
        return self._supervisor.settled

    @property
    def accepting(self) -> bool:
        """False once the backend is being removed: new calls are refused."""
        return self._gate.accepting

    @accepting.setter
    def accepting(self, value: bool) -> None:
        """Set false by the pool when the backend is being removed (reload, shutdown)."""
        self._gate.accepting = value

    @property
    def in_flight(self) -> int:
        """Calls admitted and not yet finished."""
        return self._gate.in_flight

    @property
    def session_mode(self) -> str:
        """``shared``, ``per_principal`` or ``per_client``, with ``auto`` resolved."""
        return self._session_modes[self._authenticated()]

    @property
    def per_client(self) -> bool:
        """Whether calls go to backend sessions of their principal or client (links).

        Never for a 2026-07-28 backend: it holds no session, everything a
        call needs rides in the call's own envelope, so one link serves every
        client and a link per client would only cost a probe each.
        """
        info = self._supervisor.info
        if info is not None and info.modern:
            return False
        return self.session_mode != "shared"

    @property
    def open_links(self) -> int:
        """Per-principal or per-client backend sessions open now (a metric)."""
        return self._links.open_count + self._personal_links.open_count

    @property
    def _peer(self) -> Peer | None:
        """The shared session while up (tests look at it)."""
        return self._supervisor.peer

    def list_hint(self, kind: Kind) -> CacheHint:
        """How long and for whom this backend's list of ``kind`` may be reused.

        A 2026-07-28 backend's own ``ttlMs``/``cacheScope`` from its last
        walk; a handshake-era backend promises nothing: ``{0, private}``.
        """
        info = self._supervisor.info
        if info is None or not info.modern:
            return NO_CACHE
        return self._supervisor.list_hints.get(kind, NO_CACHE)

    def offers(self, capability: str) -> bool:
        """Whether the backend declared a server capability (``tools``, ``logging``...)
        and has not refused it since (``refused``)."""
        info = self._supervisor.info
        if info is None or capability in self.refused:
            return False
        # An extension (the skills') is declared under ``capabilities.extensions``.
        extensions = info.capabilities.get("extensions")
        return capability in info.capabilities or (
            isinstance(extensions, dict) and isinstance(extensions.get(capability), dict)
        )

    @property
    def refused(self) -> frozenset[str]:
        """Capabilities it declared and then refused with -32601 (robustness E7).

        ``resources`` (or ``prompts``, ``tools``) when that list was refused
        at the last walk; ``resources.subscribe`` once a subscription was
        (``resources/subscribe``, or a 2026-07-28 backend's listen). The
        gateway advertises to hosts only what some backend really serves.
        """
        # Skills are refused as the extension they are offered under.
        refused = {
            kind.capability if kind is Kind.SKILLS else kind.value
            for kind in self._supervisor.refused_lists
        }
        peer = self._supervisor.peer
        if peer is not None and self._subscribe_refused_on is peer:
            refused.add("resources.subscribe")
        return frozenset(refused)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep the backend alive until cancelled. Returns at once to ``start``."""
        async with trio.open_nursery() as nursery:
            self._personal_links.attach(nursery)  # rule 3
            try:
                await self._supervisor.run(task_status=task_status)
            finally:
                self._personal_links.detach()
                self._personal_links.close_all()

    async def drained(self) -> None:
        """Wait until no call is in flight."""
        await self._gate.drained()

    # -- calls ----------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: msgspec.Raw | None = None,
        *,
        client: str | None = None,
        progress_token: RequestId | None = None,
        on_progress: ProgressHandler | None = None,
        clock: CallClock | None = None,
    ) -> msgspec.Raw:
        """Forward one request and return the backend's result.

        The deadline is the backend's ``timeouts.request`` from the start of
        the call; each progress notification pushes it out again when
        ``reset_on_progress`` is on, never past ``max_total`` (spec:
        utilities/progress, timeouts). Only this method knows the limits, so
        it is the one that sets the cancel scope.

        Args:
            method: the MCP method.
            params: the backend-side params, forwarded verbatim.
            client: the client session the call is for (chooses its own
                backend session when this backend is per_client).
            progress_token: the backend-side token placed in ``params``.
            on_progress: receives the backend's progress params.
            clock: the call's request clock, which the router stops while
                the backend waits on the host for input (``call_clock``).

        Raises:
            BackendUnavailable: the backend is not up, or went down mid-call.
            RequestTimeout: no answer in time; the backend is told
                (``notifications/cancelled``).
            RemoteProtocolError: the backend answered with an error.
        """
        self.handshake.sent(self.info)
        tracer = tracing.active
        if tracer is not None:  # the only cost when tracing is off (tracing rule 1)
            version = None if self.info is None else self.info.protocol_version

            async def send(traced: msgspec.Raw | None) -> msgspec.Raw:
                """The same call, with the span's trace context in ``_meta``."""
                return await self._admitted(
                    method, traced, client, progress_token, on_progress, clock
                )

            return await tracing.traced(tracer, self.name, method, params, version, send)
        return await self._admitted(method, params, client, progress_token, on_progress, clock)

    async def _admitted(
        self,
        method: str,
        params: msgspec.Raw | None,
        client: str | None,
        progress_token: RequestId | None,
        on_progress: ProgressHandler | None,
        clock: CallClock | None,
    ) -> msgspec.Raw:
        gate = self._gate
        await gate.enter()
        try:
            peer: Peer | None = None
            try:
                if client is not None and self.serves_people_only:
                    return await self._on_link(  # rule 3
                        client,
                        method,
                        params,
                        progress_token,
                        on_progress,
                        clock,
                        links=self._personal_links,
                    )
                peer = self._shared_peer()
                if client is None or not self.per_client:
                    return await self._request_on(
                        peer, method, params, progress_token, on_progress, clock
                    )
                return await self._on_link(
                    client, method, params, progress_token, on_progress, clock
                )
            except BackendUnavailable as exc:
                # The server forgot our session (an HTTP backend restarted):
                # the supervisor re-initializes at once (rule 2).
                if method not in IDEMPOTENT_METHODS or not isinstance(exc.cause, SessionExpired):
                    raise
                if client is not None and self.per_client:
                    # The lane whose session expired has ended; another opens.
                    return await self._on_link(
                        client, method, params, progress_token, on_progress, clock
                    )
                await self._supervisor.new_session(peer)
                peer = self._shared_peer()
                return await self._request_on(
                    peer, method, params, progress_token, on_progress, clock
                )
        finally:
            gate.leave()

    def _shared_peer(self) -> Peer:
        supervisor = self._supervisor
        shared = supervisor.peer
        if shared is None or supervisor.state is not BackendState.UP:
            raise BackendUnavailable(self.name, supervisor.reason, cause=supervisor.cause)
        return shared

    async def _on_link(
        self,
        client: str,
        method: str,
        params: msgspec.Raw | None,
        progress_token: RequestId | None,
        on_progress: ProgressHandler | None,
        clock: CallClock | None,
        *,
        links: Links | None = None,
    ) -> msgspec.Raw:
        """One request on a backend session of the client's principal or its own."""
        links = self._links if links is None else links
        lane = await links.acquire(client, method)
        try:
            if not links.before(lane, client, method, params):
                return jsonrpc.EMPTY_OBJECT
            assert lane.peer is not None  # acquire returns open lanes only
            result = await self._request_on(
                lane.peer, method, params, progress_token, on_progress, clock
            )
            links.after(lane, client, method, params)
            return result
        finally:
            links.release(lane, client)

    async def _request_on(
        self,
        peer: Peer,
        method: str,
        params: msgspec.Raw | None,
        progress_token: RequestId | None,
        on_progress: ProgressHandler | None,
        clock: CallClock | None,
    ) -> msgspec.Raw:
        timeouts = self.config.timeouts
        started = trio.current_time()
        handler = on_progress
        deadline = clock if clock is not None else CallClock(trio.current_time)
        first = deadline.start(timeouts.request, started + timeouts.max_total, started)
        with trio.CancelScope(deadline=first) as scope:
            deadline.attach(scope)
            if timeouts.reset_on_progress and on_progress is not None:

                def handler(body: dict[str, Any]) -> None:
                    deadline.progressed()
                    on_progress(body)

            try:
                listen = self._supervisor.upstream_listen
                if (
                    method in BRIDGED
                    and listen is not None
                    and peer is self._supervisor.peer
                    and peer.modern
                ):
                    # 2026-07-28 has no resources/subscribe: the standing listen does it.
                    result = await listen.bridge(method, params)
                else:
                    result = await peer.request(
                        method, params, progress_token=progress_token, on_progress=handler
                    )
                self._supervisor.note_answer()
                return result
            except RemoteProtocolError as exc:
                if exc.code == METHOD_NOT_FOUND and method == "resources/subscribe":
                    self._subscribe_refused_on = peer  # declared, not served (E7)
                raise
            except CredentialUnavailable as exc:
                # The backend is fine; only this call lacks a credential.
                raise BackendUnavailable(
                    self.name, f"credential unavailable: {exc}", "credential_unavailable", exc
                ) from None
            except TransportError as exc:
                raise BackendUnavailable(self.name, str(exc), cause=exc) from None
        assert scope.cancelled_caught
        self._supervisor.note_timeout()
        raise RequestTimeout(self.name, trio.current_time() - started)

    async def notify(
        self, method: str, params: msgspec.Raw | None = None, *, client: str | None = None
    ) -> None:
        """Forward a notification; dropped when there is no session to carry it."""
        if client is not None and self.per_client:
            links = self._personal_links if self.serves_people_only else self._links
            if method == "notifications/roots/list_changed":
                peer = links.roots_changed(client)  # links rule 6
            else:
                peer = links.peer_of(client)
        else:
            peer = self._supervisor.peer
        if peer is None:
            return
        with suppress(TransportError):
            await peer.notify(method, params)

    def has_link(self, client: str) -> bool:
        """Whether a backend session of this client's principal or its own is open."""
        return client in self._links or client in self._personal_links

    def close_client(self, client: str) -> None:
        """The client session ended: close its own backend session, if any."""
        self._links.close(client)
        self._personal_links.close(client)

    @property
    def keyed_by_roots(self) -> bool:
        """Whether its sessions are a principal's, keyed by its hosts' roots too."""
        return self.per_client and self.session_mode == "per_principal"

    def rekey_client(self, client: str) -> None:
        """The client's roots are known anew: its principal's session follows them."""
        if self.per_client:
            self._links.rekey(client)
            self._personal_links.rekey(client)

    # -- messages from the backend --------------------------------------------

    def _handle_notification(
        self, method: str, params: msgspec.Raw | None, *, client: str | None = None
    ) -> None:
        if method == ACKNOWLEDGED:
            listen = self._supervisor.upstream_listen
            if client is None and listen is not None:
                listen.acknowledged(params)
            return  # the gateway's own listen: nothing for the clients
        kinds = Kind.changed_by(method)
        if kinds:
            if client is None:  # the catalog follows the shared session only
                self._supervisor.mark_changed(kinds)
            if self._on_notification is not None:  # the response cache drops what went stale
                self._on_notification(self, method, params, client)
            return
        if self._on_notification is not None:
            self._on_notification(self, method, params, client)

    async def _handle_request(
        self, method: str, params: msgspec.Raw | None, *, client: str | None = None
    ) -> msgspec.Raw:
        if self._on_request is None:
            raise LocalProtocolError(f"method not found: {method}", METHOD_NOT_FOUND)
        return await self._on_request(self, method, params, client)


__all__ = [
    "CLIENT_CAPABILITIES",
    "IDEMPOTENT_METHODS",
    "REFRESH_DEBOUNCE",
    "STABLE_UPTIME",
    "Backend",
    "IncompatibleBackend",
]
