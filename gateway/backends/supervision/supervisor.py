"""Keeping one backend alive: connect, initialize, list, serve, restart.

Rules:

1. A backend is one task (``Supervisor.run``) that enters and leaves all of
   its own contexts: transport, session, the session's nursery (refresher,
   pinger, ejector, per-client links). Nothing about a backend outlives that
   task, and no other task enters its contexts.
2. The state is explicit (``BackendState``) and changes only in
   ``_set_state``, which also records why (``reason``, and ``cause``: the
   exception that took the backend down, when one did), wakes whoever waits
   for a change, and tells the owner (``on_change``). A session exists
   exactly while the state is ``UP``: calls never wait on a backend that is
   starting or down (robustness A31).
3. Items are published only after a complete listing, and withdrawn the
   moment the session ends; a listing is never half-updated.
4. Failure of any step ends the attempt; the next one starts after a
   jittered exponential delay. A backend must stay up ``STABLE_UPTIME`` to
   earn a fresh start (no spawn storm, robustness B7). A backend that speaks
   no revision we know is retried at the longest delay only (D12); one whose
   server only forgot our session (``SessionExpired``) at once (D14).
5. The session ends, and the backend restarts like after any failure, when
   a ping (``server/discover`` on a modern session) gets no answer in time
   after a quiet spell, or when
   ``eject_after_timeouts`` requests in a row timed out (B12).
6. A 2026-07-28 leg that fails (``StatelessLegFailed``) under
   ``protocol: auto`` is no failure of the backend: one warning, and the
   next connection opens at once in the handshake era; while up so, the
   2026-07-28 leg is tried again with backoff beside the session, and the
   session reopens in it once it holds (``EraRestored``). The decisions are
   ``stateless/era_fallback.py``'s.

One module past 450 lines because it is one idea, one backend's life: each
step (connect, era, listen, list, serve, restart) decides the next from the
same state, and splitting them would pass that state around; the rules
each step applies (backoff, listing, era choice, liveness) live in modules
of their own.

One idea past 450 lines: a backend's life. The state machine, the attempt
that nests transport, session and nursery, and the two things that run
inside the session for the supervisor alone (the list walk, ``walk``, and
the liveness probe, ``ping_when_quiet``) share the session's lifetime and
the rules above; split, each part would only be read with the others.

Theory of operation: ``run`` calls ``task_status.started()`` before the
first connect, so the pool starts every backend at once and none waits for
another. Each attempt (``_serve_once``) nests the transport, the session and
a nursery; when any of them fails, the failure arrives as (a group around)
the exception that ended it, and ``_attempt`` returns it as the attempt's
outcome. ``run`` turns that outcome into the next state and the delay
before the next attempt. While up, ``_refresher`` re-lists what a
``list_changed`` named (``mark_changed``), debounced (D16); the walk over
the pages is the pure ``listing`` module, driven here.
"""

from __future__ import annotations

import collections
import math
import time
from typing import TYPE_CHECKING, Any, Final

import trio

from gateway.backends import listing
from gateway.backends.failure_reasons import EXPECTED, describe, first_leaf
from gateway.backends.handshake import (
    IncompatibleBackend,
    StatelessLegFailed,
    effective_protocol,
)
from gateway.backends.state import BackendState
from gateway.backends.stateless.era_fallback import EraFallback, EraRestored, try_stateless_leg
from gateway.backends.stateless.freshness import relist_when_stale
from gateway.backends.stateless.listen_client import (
    LISTEN_ACK_TIMEOUT,
    UpstreamListen,
    start_upstream_listen,
)
from gateway.backends.supervision.backoff import Backoff
from gateway.catalog.snapshot import Kind
from gateway.errors import (
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    GatewayError,
    ProtocolError,
    SessionExpired,
    TransportBroken,
    TransportError,
)
from gateway.session.peer import Peer, open_session
from gateway.transports.base import schemas_for

if TYPE_CHECKING:
    import random
    from collections.abc import Callable

    from gateway.backends.channel import ChannelOpener
    from gateway.backends.handshake import Handshake
    from gateway.backends.links import Links, SessionNotificationHandler, SessionRequestHandler
    from gateway.backends.state import ServerInfo
    from gateway.catalog.snapshot import BackendListing
    from gateway.config import BackendConfig, HealthConfig
    from gateway.protocol.stateless.cache_hints import CacheHint

# A backend must stay up this long before its backoff starts over.
STABLE_UPTIME: Final = 30.0
# A burst of list_changed notifications becomes one refresh after this quiet
# period (issue: list_changed storms, robustness D16).
REFRESH_DEBOUNCE: Final = 0.2


class Supervisor:
    """The life of one backend: its state, its session, its listing.

    Args:
        config: the backend's config.
        connect: opens the transport.
        handshake: runs ``initialize``.
        links: the per-client sessions, run in each session's nursery.
        on_change: called (synchronously) whenever state or listing changes.
        on_request: answers the backend's requests on the shared session.
        on_notification: takes its notifications on the shared session.
        rng: the jitter's random source.
        log: the backend's bound logger.
    """

    def __init__(
        self,
        config: BackendConfig,
        *,
        connect: ChannelOpener,
        handshake: Handshake,
        links: Links,
        on_change: Callable[[], None],
        on_request: SessionRequestHandler,
        on_notification: SessionNotificationHandler,
        rng: random.Random | None,
        log: Any,
    ) -> None:
        self._config = config
        self._connect = connect
        self._handshake = handshake
        self._links = links
        self._on_change = on_change
        self._on_request = on_request
        self._on_notification = on_notification
        self._rng = rng
        self._log = log
        restart = config.restart
        self._backoff = Backoff(restart.initial_delay, restart.max_delay, restart.multiplier)
        self._state = BackendState.STARTING
        self._reason = "starting"
        self._cause: BaseException | None = None
        self._last_failure: BaseException | None = None
        self.peer: Peer | None = None
        self.info: ServerInfo | None = None
        self.listing: BackendListing | None = None
        # The ttlMs/cacheScope each list's last walk carried (a modern
        # backend's promise; a legacy backend's pages carry none: {0, private}).
        self.list_hints: dict[Kind, CacheHint] = {}
        self.restarts = 0
        # The last failure that took the backend down or kept it from
        # starting, with its wall-clock time: /readyz shows it after the
        # backend is back up, when ``reason`` says "up" again.
        self.last_error: tuple[str, float] | None = None
        # Times a listing was cut short by a guard, by reason (metric).
        self.list_guard_trips: collections.Counter[str] = collections.Counter()
        # The lists the backend declared and then refused with -32601 at the
        # last walk: what it does not really serve (capabilities, E7).
        self.refused_lists: set[Kind] = set()
        # The lists a 2026-07-28 backend refused with -32022 at the last walk:
        # all of them after a good discover is an incompatible backend.
        self._version_refused: set[Kind] = set()
        # Set once the first connect attempt has ended, either way.
        self.settled = trio.Event()
        self._state_event = trio.Event()
        self._up_since = 0.0
        self._was_up = False
        self._ended_by: TransportError | None = None
        self._timeouts_in_a_row = 0
        self._eject = trio.Event()
        self._dirty: set[Kind] = set()
        self._dirty_event = trio.Event()
        # The standing listen of a modern session (None otherwise), and the
        # backend-side URIs it subscribes, kept across sessions.
        self.upstream_listen: UpstreamListen | None = None
        # When each list was last walked, and an event set after each
        # re-listing: what honouring a modern backend's ttl needs (freshness).
        self._listed_at: dict[Kind, float] = {}
        self._relisted = trio.Event()
        self.listened_uris: set[str] = set()
        # The era of the next connection, after a failed 2026-07-28 leg (rule 6).
        self._era = EraFallback(effective_protocol(config))

    # -- the one place the state changes -------------------------------------

    @property
    def state(self) -> BackendState:
        """Where the backend is in its life (rule 2: read-only outside ``_set_state``)."""
        return self._state

    @property
    def reason(self) -> str:
        """Why it is in that state, as human text."""
        return self._reason

    @property
    def up_since(self) -> float | None:
        """When the current session came up (trio clock), or None when not up."""
        return self._up_since if self._state is BackendState.UP else None

    @property
    def era_reason(self) -> str | None:
        """Why the backend speaks the handshake era although it offers 2026-07-28 (rule 6)."""
        return self._era.reason()

    @property
    def cause(self) -> BaseException | None:
        """The exception that took the backend down, when one did and it is still down."""
        return self._cause

    @property
    def last_failure(self) -> BaseException | None:
        """What ended the last attempt, kept between attempts; None once up again."""
        return self._last_failure

    def _set_state(
        self, state: BackendState, reason: str, cause: BaseException | None = None
    ) -> None:
        self._state = state
        self._reason = reason
        self._cause = cause
        if state is BackendState.UP or cause is not None:
            self._last_failure = cause
        if state is not BackendState.UP:
            self.peer = None  # a session exists only while up (rule 2)
        self._state_event.set()
        self._state_event = trio.Event()
        self._on_change()

    async def new_session(self, old: Peer | None) -> None:
        """Wait (bounded by connect + initialize time) for a session other than ``old``."""
        timeouts = self._config.timeouts
        with trio.move_on_after(timeouts.connect + timeouts.initialize):
            while self.state is not BackendState.UP or self.peer is None or self.peer is old:
                await self._state_event.wait()

    # -- what calls report ----------------------------------------------------

    def note_answer(self) -> None:
        """A request was answered in time: the timeouts in a row start over."""
        self._timeouts_in_a_row = 0

    def note_timeout(self) -> None:
        """A request timed out; enough in a row eject the session (rule 5)."""
        limit = self._config.health.eject_after_timeouts
        self._timeouts_in_a_row += 1
        if limit and self._timeouts_in_a_row >= limit:
            self._eject.set()

    def mark_changed(self, kinds: tuple[Kind, ...]) -> None:
        """The shared session said these lists changed: re-list them soon."""
        self._dirty.update(kinds)
        self._dirty_event.set()

    # -- supervision ----------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep the backend alive until cancelled. Returns at once to ``start``."""
        task_status.started()
        attempt = 0
        try:
            while True:
                self._log.info("backend.connect.started", attempt=attempt)
                failure = await self._attempt()
                if self._era_changes(failure):
                    continue
                cause: BaseException | None = failure
                if isinstance(failure, IncompatibleBackend):
                    reason, state = str(failure), BackendState.INCOMPATIBLE
                elif failure is not None:
                    reason, state = describe(failure), BackendState.DOWN
                else:
                    cause = self._ended_by
                    reason = (str(cause) if cause is not None else "") or "session ended"
                    state = BackendState.DOWN
                went_up, self._was_up = self._was_up, False
                self.settled.set()
                stable = went_up and trio.current_time() - self._up_since >= STABLE_UPTIME
                self.listing = None
                self.info = None
                self.list_hints = {}
                self._listed_at.clear()
                self.last_error = (reason, time.time())
                self._set_state(state, reason, cause)
                if went_up:
                    self.restarts += 1
                if stable:
                    # Only a backend that stayed up a while earns a fresh
                    # start: one that dies seconds after every start keeps
                    # backing off (robustness B7, no spawn storm).
                    attempt = 0
                self._log.warning("backend.down", reason=reason, state=state.value)
                if went_up and isinstance(cause, SessionExpired):
                    delay = 0.0  # the server is there; only our session is gone
                elif state is BackendState.INCOMPATIBLE:
                    delay = self._backoff.maximum
                else:
                    delay = self._backoff.delay(attempt, self._rng)
                    attempt += 1
                await trio.sleep(delay)
                self._set_state(BackendState.STARTING, "restarting")
        finally:
            self.listing = None
            self._set_state(BackendState.STOPPED, "stopped")

    def _era_changes(self, failure: Exception | None) -> bool:
        """Whether ``failure`` only changes the era of the next connection (rule 6).

        If so, the next attempt starts at once: the backend is not down,
        and the one line about it is said here.
        """
        era = self._era
        went_up, now = self._was_up, trio.current_time()
        if isinstance(failure, EraRestored):
            era.restored()
            self._log.info("backend.era.restored", era="modern")
        elif isinstance(failure, StatelessLegFailed) and era.strict and not went_up:
            delay = era.leg_failed(str(failure), now, self._rng)
            self._log.warning(
                "backend.era.fallback",
                problem=str(failure),
                era="legacy",
                modern_retry_in=round(delay, 1),
            )
        elif (
            era.falling_back
            and not went_up
            and isinstance(failure, IncompatibleBackend | ProtocolError)
        ):
            # It refused the handshake era too: 2026-07-28, tolerating the
            # failing part (era_fallback rule 4).
            era.handshake_failed()
            self._log.info("backend.era.handshake_refused", problem=describe(failure))
        else:
            return False
        self._was_up = False
        self.info = None
        self.listing = None
        next_era = "the handshake era" if era.falling_back else "2026-07-28"
        self._set_state(BackendState.STARTING, f"reconnecting in {next_era}")
        return True

    async def _attempt(self) -> Exception | None:
        """One connect-to-close cycle; returns the failure that ended it, if any.

        The contexts of one attempt are nested nurseries, so a failure
        arrives wrapped in exception groups; only groups made entirely of
        expected failures are unwrapped, anything else propagates.
        """
        try:
            await self._serve_once()
        except EXPECTED as exc:
            return exc
        except BaseExceptionGroup as group:
            expected, rest = group.split(EXPECTED)
            if rest is not None or expected is None:
                raise
            leaf = first_leaf(expected)
            assert isinstance(leaf, Exception)
            return leaf
        return None

    async def _serve_once(self) -> None:
        self._ended_by = None
        timeouts = self._config.timeouts
        async with (
            self._connect(self._config) as channel,
            open_session(
                channel,
                name=self._config.name,
                on_request=self._on_request,
                on_notification=self._on_notification,
            ) as peer,
            trio.open_nursery() as nursery,
        ):
            schemas_for(channel, self.tool_schema)
            era = self._era
            self.info = info = await self._handshake(peer, era.protocol(), timeouts)
            if not info.modern:
                await peer.notify("notifications/initialized")
            else:
                # Kept before it starts: its acknowledgement is looked up here.
                listen = self.upstream_listen = UpstreamListen(
                    info.capabilities, self.listened_uris, self.mark_changed, self._log, self._rng
                )
                ack_timeout = min(LISTEN_ACK_TIMEOUT, timeouts.initialize)
                await start_upstream_listen(listen, peer, nursery, ack_timeout, strict=era.strict)
            fresh = await self._list_all(peer, set(Kind))
            self._check_envelope_accepted(info)
            self.peer = peer
            self.listing = fresh
            self._up_since = trio.current_time()
            self._was_up = True
            self._links.attach(nursery)
            self._set_state(
                BackendState.UP, "up" if era.reason() is None else f"up, {era.reason()}"
            )
            self.settled.set()
            self._log.info(
                "backend.connect.complete",
                protocol_version=info.protocol_version,
                era="modern" if info.modern else "legacy",
                server=info.name,
                tools=len(fresh.tools),
                prompts=len(fresh.prompts),
                resources=len(fresh.resources),
                templates=len(fresh.templates),
                skills=len(fresh.skills),
            )
            try:
                nursery.start_soon(self._refresher, peer)
                if info.modern:
                    nursery.start_soon(
                        relist_when_stale,
                        info.capabilities,
                        self._listed_at,
                        self.list_hints,
                        lambda: self._relisted,
                        self.mark_changed,
                        self._rng,
                    )
                self._eject = trio.Event()
                nursery.start_soon(self._ejector)
                if self._config.health.ping_interval > 0:
                    nursery.start_soon(ping_when_quiet, peer, self._config.health)
                if era.falling_back:
                    nursery.start_soon(self._retry_modern)
                await peer.closed.wait()
                self._ended_by = peer.close_reason
            finally:
                # Refuse new calls now, not after the transport has finished
                # closing (an HTTP DELETE can take a while): a caller must never
                # be handed a session that is already over.
                self._links.detach()
                if self.state is BackendState.UP:
                    self._set_state(BackendState.DOWN, "session ending", peer.close_reason)
                self.peer = None
                self._links.close_all()
                nursery.cancel_scope.cancel()

    async def _retry_modern(self) -> None:
        """Try the 2026-07-28 leg beside the session, with backoff, until it holds (rule 6)."""
        era = self._era
        while True:
            await trio.sleep_until(era.retry_at)
            problem = await try_stateless_leg(
                self._config, self._connect, self._handshake, self._log
            )
            if problem is None:
                raise EraRestored("the 2026-07-28 leg works again: reopening in it")
            delay = era.leg_failed(problem, trio.current_time(), self._rng)
            self._log.info(
                "backend.era.retry_failed", problem=problem, modern_retry_in=round(delay, 1)
            )
            self._on_change()

    def _check_envelope_accepted(self, info: ServerInfo) -> None:
        """A backend that refused every list with -32022 is incompatible.

        Its ``server/discover`` was good, yet it refuses the requests the
        gateway builds (in either era: after the stateless leg failed, the
        handshake-era session it falls back to is refused alike): shown as
        such (state, reason, ``/readyz``, console), never "up" with nothing
        in it; retried at the longest delay.

        Raises:
            IncompatibleBackend: every list it declared was refused so.
        """
        declared = {kind for kind in Kind if listing.wanted(kind, info.capabilities, self._config)}
        if declared and declared <= self._version_refused:
            raise IncompatibleBackend(
                "backend refuses every 2026-07-28 request with -32022 (unsupported "
                "protocol version) after a good server/discover"
            )

    async def _ejector(self) -> None:
        """End the session once too many requests in a row timed out (B12)."""
        await self._eject.wait()
        count, self._timeouts_in_a_row = self._timeouts_in_a_row, 0
        raise TransportBroken(f"ejected: {count} requests in a row timed out")

    # -- listing --------------------------------------------------------------

    def tool_schema(self, name: str) -> object:
        """The current ``inputSchema`` of the backend's tool ``name`` (None if unknown).

        The Streamable HTTP channel of a modern backend mints the call's
        ``Mcp-Param-*`` headers from it: the backend's own schema, not the
        public one, since the backend checks against its own.
        """
        listing_now = self.listing
        if listing_now is None:
            return None
        for tool in listing_now.tools:
            if tool.get("name") == name:
                return tool.get("inputSchema")
        return None

    async def _refresher(self, peer: Peer) -> None:
        """Re-list what a backend said changed: at once after a quiet spell,
        then at most once per ``REFRESH_DEBOUNCE`` while changes keep coming.

        The first change of a burst costs no delay (hosts see it promptly);
        a storm still costs one re-list per window (robustness D16).
        """
        last_refresh = -math.inf
        while True:
            await self._dirty_event.wait()
            await trio.sleep_until(last_refresh + REFRESH_DEBOUNCE)
            kinds, self._dirty = self._dirty, set()
            self._dirty_event = trio.Event()
            try:
                self.listing = await self._list_all(peer, kinds)
            except (GatewayError, trio.TooSlowError) as exc:
                self._log.warning("backend.refresh.failed", error=describe(exc))
                continue
            finally:
                last_refresh = trio.current_time()
                self._relisted.set()
                self._relisted = trio.Event()
            self._on_change()

    async def _list_all(self, peer: Peer, kinds: set[Kind]) -> BackendListing:
        """Re-list ``kinds`` and keep the rest; a list that fails counts as empty."""
        config = self._config
        capabilities = self.info.capabilities if self.info is not None else {}
        fresh: dict[Kind, listing.Items] = {}
        for kind in Kind:
            if kind not in kinds:
                continue
            if not listing.wanted(kind, capabilities, config):
                fresh[kind] = ()
                continue
            self._listed_at[kind] = trio.current_time()
            outcome = await walk(peer, kind, self._config)
            if isinstance(outcome, listing.Failed):
                # A backend that advertises a list and then fails it still
                # serves everything else.
                self._log.warning(
                    "backend.list.failed", kind=kind.value, error=outcome.error.message
                )
                if outcome.error.code == METHOD_NOT_FOUND:
                    self.refused_lists.add(kind)
                if outcome.error.code == UNSUPPORTED_PROTOCOL_VERSION:
                    self._version_refused.add(kind)
                fresh[kind] = ()
                continue
            self.refused_lists.discard(kind)
            self._version_refused.discard(kind)
            if outcome.guard is not None:
                self.list_guard_trips[outcome.guard.value] += 1
                event, fields = listing.guard_report(outcome, config)
                self._log.warning(event, **fields)
            items = listing.filtered(kind, outcome.items, config)
            if kind is Kind.TOOLS and self.info is not None and self.info.modern:
                # Our leg to it is 2026-07-28: its client must drop them.
                items, dropped = listing.usable_tools(items)
                for tool in dropped:
                    self._log.warning("backend.tool.dropped", tool=tool.name, reason=tool.reason)
            fresh[kind] = items
            self.list_hints[kind] = outcome.hint
        return listing.merged(config, fresh, self.listing)


async def walk(peer: Peer, kind: Kind, config: BackendConfig) -> listing.Listed | listing.Failed:
    """Walk one list's pages over a live session: the I/O half of ``listing``.

    ``listing`` decides, page by page, what to ask next and when to stop
    (the guards against endless cursors and huge lists); this drives it
    against the session, with the backend's request timeout on each page. A
    page's error answer is the walk's to judge.

    Raises:
        trio.TooSlowError: a page got no answer within ``timeouts.request``.
        TransportError: the session broke.
    """
    step: listing.Step = listing.begin(
        kind, max_pages=config.max_list_pages, max_items=config.max_list_items
    )
    while isinstance(step, listing.PageRequest):
        try:
            with trio.fail_after(config.timeouts.request):
                answer = await peer.request(step.method, step.params)
        except ProtocolError as exc:
            step = listing.step(step, exc)
        else:
            step = listing.step(step, answer)
    return step


async def ping_when_quiet(peer: Peer, health: HealthConfig) -> None:
    """Probe ``peer`` after each quiet spell, for as long as the session lives (rule 5).

    A peer that talks is alive, so a probe is only sent once the session has
    been silent for ``health.ping_interval`` and no call is in flight (a
    standing listen does not count: ``Peer.in_flight``). 2026-07-28 has no
    ``ping``; ``server/discover`` is its cheapest request. A probe without
    an answer in ``health.ping_timeout`` ends the session; an error answer
    is still an answer.

    Raises:
        TransportBroken: a probe went unanswered; raised into the session's
            nursery, it ends the session and the supervisor restarts the
            backend like after any other failure.
    """
    while True:
        quiet = trio.current_time() - peer.last_heard
        if quiet < health.ping_interval or peer.in_flight:
            await trio.sleep(max(health.ping_interval - quiet, 0.001))
            continue
        try:
            with trio.fail_after(health.ping_timeout):
                await peer.request("server/discover" if peer.modern else "ping")
        except trio.TooSlowError:
            raise TransportBroken(f"no answer to ping within {health.ping_timeout:g} s") from None
        except ProtocolError:
            pass  # an error answer is still an answer: the backend is alive
