"""One supervisor per configured backend: connect, initialize, list, serve.

Rules:

1. A backend is one task (``Backend.run``) that enters and leaves all of its
   own contexts: transport, session, refresher. Nothing about a backend
   outlives that task, and no other task enters its contexts.
2. The state is explicit (``BackendState``) and changes only here.
   ``request`` refuses at once unless the state is ``UP``: a caller never
   waits on a backend that is starting or down (robustness A31).
3. Items are published to the catalog only after a complete listing, and
   withdrawn the moment the session ends; a listing is never half-updated.
4. Failure of any step ends the attempt; the next one starts after a
   jittered exponential delay. A backend that speaks no revision we know
   is retried at the longest delay only (robustness D12).

Theory of operation: ``run`` calls ``task_status.started()`` before the
first connect, so the pool starts every backend at once and none waits for
another. Callers learn of readiness through ``on_change``.
"""

from __future__ import annotations

import collections
import enum
import math
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Protocol

import structlog
import trio

from gateway import __version__
from gateway.backends.backoff import Backoff
from gateway.backends.channel import ChannelOpener, open_channel
from gateway.catalog.snapshot import BackendListing, Kind
from gateway.errors import (
    METHOD_NOT_FOUND,
    BackendUnavailable,
    GatewayError,
    LocalProtocolError,
    ProtocolError,
    RequestTimeout,
    TransportBroken,
    TransportError,
)
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.versions import LATEST_VERSION, accept_as_client
from gateway.session import Peer, ProgressHandler, open_session

if TYPE_CHECKING:
    import random
    from collections.abc import AsyncIterator, Awaitable, Callable

    import msgspec

    from gateway.config import BackendConfig
    from gateway.protocol.jsonrpc import RequestId

logger = structlog.get_logger("gateway.backends")

# Requests that may be sent twice without harm: retried once after the
# backend's session expired. Never tools/call (it may have had effects).
IDEMPOTENT_METHODS: Final = frozenset(
    {
        "ping",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/get",
        "completion/complete",
    }
)
# What HTTP transports say when the server no longer knows our session.
SESSION_EXPIRED: Final = "session expired"
# A backend must stay up this long before its backoff starts over.
STABLE_UPTIME: Final = 30.0
# A burst of list_changed notifications becomes one refresh after this quiet
# period (issue: list_changed storms, robustness D16).
REFRESH_DEBOUNCE: Final = 0.2

_LIST_METHODS: Final = {
    Kind.TOOLS: "tools/list",
    Kind.PROMPTS: "prompts/list",
    Kind.RESOURCES: "resources/list",
    Kind.TEMPLATES: "resources/templates/list",
}
_CAPABILITY_OF: Final = {
    Kind.TOOLS: "tools",
    Kind.PROMPTS: "prompts",
    Kind.RESOURCES: "resources",
    Kind.TEMPLATES: "resources",
}
_LIST_CHANGED: Final = {
    "notifications/tools/list_changed": (Kind.TOOLS,),
    "notifications/prompts/list_changed": (Kind.PROMPTS,),
    "notifications/resources/list_changed": (Kind.RESOURCES, Kind.TEMPLATES),
}
# What the gateway tells backends about itself as a client. Roots,
# sampling and elicitation are relayed to hosts (router), so we offer them.
CLIENT_CAPABILITIES: Final = {
    "roots": {"listChanged": True},
    "sampling": {},
    "elicitation": {},
}


class BackendState(enum.Enum):
    """Where a backend is in its life."""

    STARTING = "starting"
    UP = "up"
    DOWN = "down"
    INCOMPATIBLE = "incompatible"
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What a backend said about itself in its InitializeResult."""

    protocol_version: str
    capabilities: dict[str, Any]
    instructions: str | None
    name: str
    version: str


class IncompatibleBackend(GatewayError):
    """The backend answered initialize with a revision we do not speak."""


class Backend:
    """Supervisor and call gate of one configured backend.

    Args:
        config: this backend's config.
        on_change: called (synchronously) whenever state or listing changes.
        on_notification: called for each notification the backend sends
            (other than progress, which the session routes itself).
        on_request: answers the backend's own requests (sampling, roots).
        connect: opens the transport (tests pass in-memory fakes).
        rng: the jitter's random source (tests seed it).
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
    ) -> None:
        self.config = config
        self.name = config.name
        self.prefix = config.public_prefix
        self.state = BackendState.STARTING
        self.reason = "starting"
        self.info: ServerInfo | None = None
        self.listing: BackendListing | None = None
        self.restarts = 0
        self.initializations = 0
        # Times a listing was cut short by a guard, by reason (metric).
        self.list_guard_trips: collections.Counter[str] = collections.Counter()
        self._on_change = on_change
        self._on_notification = on_notification
        self._on_request = on_request
        self._connect: ChannelOpener = connect or open_channel
        self._rng = rng
        self._up_since = 0.0
        # Set once the first connect attempt has ended, either way.
        self.settled = trio.Event()
        self._state_event = trio.Event()
        self._timeouts_in_a_row = 0
        self._eject = trio.Event()
        self._was_up = False
        self._waiting = 0
        self._slots = trio.Semaphore(config.max_in_flight) if config.max_in_flight else None
        # False once the backend is being removed (reload, shutdown): new
        # calls are refused while those in flight finish.
        self.accepting = True
        self.in_flight = 0
        self._idle = trio.Event()
        self._idle.set()
        self._peer: Peer | None = None
        self._nursery: trio.Nursery | None = None
        self._links: dict[str, _ClientLink] = {}
        self._dirty: set[Kind] = set()
        self._dirty_event = trio.Event()
        self._log = logger.bind(backend=self.name)
        restart = config.restart
        self._backoff = Backoff(restart.initial_delay, restart.max_delay, restart.multiplier)

    # -- calls -----------------------------------------------------------

    @property
    def per_client(self) -> bool:
        """Whether each client session gets a backend session of its own."""
        return self.config.effective_session == "per_client"

    def _live_peer(self) -> Peer:
        peer = self._peer
        if peer is None or self.state is not BackendState.UP:
            raise BackendUnavailable(self.name, self.reason)
        return peer

    async def _peer_for(self, client: str | None) -> Peer:
        shared = self._live_peer()
        if client is None or not self.per_client:
            return shared
        link = self._links.get(client)
        if link is None:
            link = _ClientLink(client)
            self._links[client] = link
            assert self._nursery is not None  # set whenever the state is UP
            try:
                await self._nursery.start(self._run_link, link)
            except (GatewayError, trio.TooSlowError, BaseExceptionGroup) as exc:
                self._links.pop(client, None)
                link.ready.set()
                raise BackendUnavailable(
                    self.name, f"cannot open a session for this client: {_describe_any(exc)}"
                ) from None
        await link.ready.wait()
        if link.peer is None:
            raise BackendUnavailable(self.name, "the client's backend session closed")
        return link.peer

    async def request(
        self,
        method: str,
        params: msgspec.Raw | None = None,
        *,
        client: str | None = None,
        progress_token: RequestId | None = None,
        on_progress: ProgressHandler | None = None,
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

        Raises:
            BackendUnavailable: the backend is not up, or went down mid-call.
            RequestTimeout: no answer in time; the backend is told
                (``notifications/cancelled``).
            RemoteProtocolError: the backend answered with an error.
        """
        if not self.accepting:
            raise BackendUnavailable(self.name, "being removed from the configuration")
        async with self._slot():
            return await self._request_counted(method, params, client, progress_token, on_progress)

    @asynccontextmanager
    async def _slot(self) -> AsyncIterator[None]:
        """Hold one of ``max_in_flight`` slots; refuse at once past ``max_pending`` (B18)."""
        slots = self._slots
        if slots is None:
            yield
            return
        if slots.value == 0 and self._waiting >= self.config.max_pending:
            raise BackendUnavailable(
                self.name,
                f"overloaded: {self.config.max_in_flight} calls in flight and "
                f"{self._waiting} waiting",
                kind="overloaded",
            )
        self._waiting += 1
        try:
            await slots.acquire()
        finally:
            self._waiting -= 1
        try:
            yield
        finally:
            slots.release()

    async def _request_counted(
        self,
        method: str,
        params: msgspec.Raw | None,
        client: str | None,
        progress_token: RequestId | None,
        on_progress: ProgressHandler | None,
    ) -> msgspec.Raw:
        self.in_flight += 1
        self._idle = trio.Event() if self.in_flight == 1 else self._idle
        peer: Peer | None = None
        try:
            try:
                peer = await self._peer_for(client)
                return await self._request_on(peer, method, params, progress_token, on_progress)
            except BackendUnavailable as exc:
                # The server forgot our session (an HTTP backend restarted):
                # the supervisor re-initializes at once; a request that is
                # safe to repeat is sent once more on the new session, a
                # tools/call never is (robustness D14, B11).
                if method not in IDEMPOTENT_METHODS or SESSION_EXPIRED not in exc.reason:
                    raise
                await self._wait_for_new_session(peer)
                peer = await self._peer_for(client)
                return await self._request_on(peer, method, params, progress_token, on_progress)
        finally:
            self.in_flight -= 1
            if self.in_flight == 0:
                self._idle.set()

    async def _wait_for_new_session(self, old: Peer | None) -> None:
        """Wait (bounded by connect + initialize time) for a session other than ``old``."""
        timeouts = self.config.timeouts
        with trio.move_on_after(timeouts.connect + timeouts.initialize):
            while self.state is not BackendState.UP or self._peer is None or self._peer is old:
                await self._state_event.wait()

    def _note_timeout(self) -> None:
        limit = self.config.health.eject_after_timeouts
        self._timeouts_in_a_row += 1
        if limit and self._timeouts_in_a_row >= limit:
            self._eject.set()

    async def _ejector(self) -> None:
        """End the session once too many requests in a row timed out (B12)."""
        await self._eject.wait()
        count, self._timeouts_in_a_row = self._timeouts_in_a_row, 0
        raise TransportBroken(f"ejected: {count} requests in a row timed out")

    async def drained(self) -> None:
        """Wait until no call is in flight."""
        await self._idle.wait()

    async def _request_on(
        self,
        peer: Peer,
        method: str,
        params: msgspec.Raw | None,
        progress_token: RequestId | None,
        on_progress: ProgressHandler | None,
    ) -> msgspec.Raw:
        timeouts = self.config.timeouts
        started = trio.current_time()
        hard_deadline = started + timeouts.max_total
        handler = on_progress
        with trio.CancelScope(deadline=min(started + timeouts.request, hard_deadline)) as scope:
            if timeouts.reset_on_progress and on_progress is not None:

                def handler(body: dict[str, Any]) -> None:
                    scope.deadline = min(trio.current_time() + timeouts.request, hard_deadline)
                    on_progress(body)

            try:
                result = await peer.request(
                    method, params, progress_token=progress_token, on_progress=handler
                )
                self._timeouts_in_a_row = 0
                return result
            except TransportError as exc:
                raise BackendUnavailable(self.name, str(exc)) from None
        assert scope.cancelled_caught
        self._note_timeout()
        raise RequestTimeout(self.name, trio.current_time() - started)

    async def notify(
        self, method: str, params: msgspec.Raw | None = None, *, client: str | None = None
    ) -> None:
        """Forward a notification; dropped when there is no session to carry it."""
        if client is not None and self.per_client:
            link = self._links.get(client)
            peer = link.peer if link is not None else None
        else:
            peer = self._peer
        if peer is None:
            return
        with suppress(TransportError):
            await peer.notify(method, params)

    def has_link(self, client: str) -> bool:
        """Whether a per-client backend session is open for this client."""
        return client in self._links

    def close_client(self, client: str) -> None:
        """The client session ended: close its own backend session, if any."""
        link = self._links.pop(client, None)
        if link is not None:
            link.scope.cancel()
            link.ready.set()

    async def _run_link(
        self, link: _ClientLink, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """One client's own backend session, owned by the backend's nursery.

        Failures before ``started`` go to the caller; after that, the link
        just ends: one client's broken session never takes the backend down.
        """
        started = False
        log = self._log.bind(client_session=link.client[:8])
        try:
            with link.scope:
                async with (
                    self._connect(self.config) as channel,
                    open_session(
                        channel,
                        name=f"{self.name}/{link.client[:8]}",
                        on_request=partial(self._handle_request, client=link.client),
                        on_notification=partial(self._handle_notification, client=link.client),
                    ) as peer,
                ):
                    with trio.fail_after(self.config.timeouts.initialize):
                        await self._initialize(peer)
                    await peer.notify("notifications/initialized")
                    link.peer = peer
                    link.ready.set()
                    started = True
                    task_status.started()
                    log.info("backend.client_session.opened")
                    await peer.closed.wait()
        except (GatewayError, trio.TooSlowError, BaseExceptionGroup) as exc:
            if isinstance(exc, BaseExceptionGroup):
                _, rest = exc.split((GatewayError, trio.TooSlowError))
                if rest is not None:
                    raise
            if not started:
                raise
            log.info("backend.client_session.failed", error=_describe_any(exc))
        finally:
            link.peer = None
            link.ready.set()
            if self._links.get(link.client) is link:
                del self._links[link.client]
            log.info("backend.client_session.closed")

    # -- supervision -----------------------------------------------------

    def _set_state(self, state: BackendState, reason: str) -> None:
        self.state = state
        self.reason = reason
        self._state_event.set()
        self._state_event = trio.Event()
        self._on_change(self)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep the backend alive until cancelled. Returns at once to ``start``."""
        task_status.started()
        attempt = 0
        try:
            while True:
                self._log.info("backend.connect.started", attempt=attempt)
                failure = await self._attempt()
                if isinstance(failure, IncompatibleBackend):
                    reason, state = str(failure), BackendState.INCOMPATIBLE
                elif failure is not None:
                    reason, state = _describe(failure), BackendState.DOWN
                else:
                    reason, state = self._peer_reason or "session ended", BackendState.DOWN
                went_up, self._was_up = self._was_up, False
                self.settled.set()
                stable = went_up and trio.current_time() - self._up_since >= STABLE_UPTIME
                self._peer = None
                self.listing = None
                self.info = None
                self._set_state(state, reason)
                if went_up:
                    self.restarts += 1
                if stable:
                    # Only a backend that stayed up a while earns a fresh
                    # start: one that dies seconds after every start keeps
                    # backing off (robustness B7, no spawn storm).
                    attempt = 0
                self._log.warning("backend.down", reason=reason, state=state.value)
                if went_up and SESSION_EXPIRED in reason:
                    delay = 0.0  # the server is there; only our session is gone
                elif state is BackendState.INCOMPATIBLE:
                    delay = self._backoff.maximum
                else:
                    delay = self._backoff.delay(attempt, self._rng)
                    attempt += 1
                await trio.sleep(delay)
                self._set_state(BackendState.STARTING, "restarting")
        finally:
            self._peer = None
            self.listing = None
            self.state = BackendState.STOPPED
            self.reason = "stopped"
            self._on_change(self)

    _peer_reason: str | None = None

    async def _attempt(self) -> Exception | None:
        """One connect-to-close cycle; returns the failure that ended it, if any.

        The contexts of one attempt are nested nurseries, so a failure
        arrives wrapped in exception groups; only groups made entirely of
        expected failures are unwrapped, anything else propagates.
        """
        try:
            await self._serve_once()
        except (GatewayError, trio.TooSlowError) as exc:
            return exc
        except BaseExceptionGroup as group:
            expected, rest = group.split((GatewayError, trio.TooSlowError))
            if rest is not None or expected is None:
                raise
            leaf = _first_leaf(expected)
            assert isinstance(leaf, Exception)
            return leaf
        return None

    async def _serve_once(self) -> None:
        self._peer_reason = None
        timeouts = self.config.timeouts
        async with (
            self._connect(self.config) as channel,
            open_session(
                channel,
                name=self.name,
                on_request=self._handle_request,
                on_notification=self._handle_notification,
            ) as peer,
            trio.open_nursery() as nursery,
        ):
            with trio.fail_after(timeouts.initialize):
                self.info = await self._initialize(peer)
            await peer.notify("notifications/initialized")
            listing = await self._list_all(peer, set(Kind))
            self._peer = peer
            self.listing = listing
            self._up_since = trio.current_time()
            self._was_up = True
            self._set_state(BackendState.UP, "up")
            self.settled.set()
            self._log.info(
                "backend.connect.complete",
                protocol_version=self.info.protocol_version,
                server=self.info.name,
                tools=len(listing.tools),
                prompts=len(listing.prompts),
                resources=len(listing.resources),
                templates=len(listing.templates),
            )
            self._nursery = nursery
            try:
                nursery.start_soon(self._refresher, peer)
                self._eject = trio.Event()
                nursery.start_soon(self._ejector)
                if self.config.health.ping_interval > 0:
                    nursery.start_soon(self._pinger, peer)
                await peer.closed.wait()
                self._peer_reason = str(peer.close_reason) if peer.close_reason else None
            finally:
                # Refuse new calls now, not after the transport has finished
                # closing (an HTTP DELETE can take a while): a caller must never
                # be handed a session that is already over.
                self._nursery = None
                self._peer = None
                if self.state is BackendState.UP:
                    self._set_state(BackendState.DOWN, "session ending")
                for link in list(self._links.values()):
                    link.scope.cancel()
                self._links.clear()
                nursery.cancel_scope.cancel()

    async def _initialize(self, peer: Peer) -> ServerInfo:
        params = jsonrpc.to_raw(
            {
                "protocolVersion": LATEST_VERSION,
                "capabilities": CLIENT_CAPABILITIES,
                "clientInfo": {"name": "mcp-gateway", "version": __version__},
            }
        )
        result = mcp.decode_object(await peer.request("initialize", params)) or {}
        self.initializations += 1
        version = accept_as_client(result.get("protocolVersion"))
        if version is None:
            raise IncompatibleBackend(
                f"backend answered protocolVersion {result.get('protocolVersion')!r}, "
                "which the gateway does not speak"
            )
        capabilities = result.get("capabilities")
        info = result.get("serverInfo")
        info = info if isinstance(info, dict) else {}
        instructions = result.get("instructions")
        return ServerInfo(
            protocol_version=version,
            capabilities=capabilities if isinstance(capabilities, dict) else {},
            instructions=instructions if isinstance(instructions, str) else None,
            name=str(info.get("name", "")),
            version=str(info.get("version", "")),
        )

    def offers(self, capability: str) -> bool:
        """Whether the backend declared a server capability (``tools``, ``logging``...)."""
        return self.info is not None and capability in self.info.capabilities

    async def _list_kind(self, peer: Peer, kind: Kind) -> tuple[dict[str, Any], ...]:
        if not self.offers(_CAPABILITY_OF[kind]):
            return ()
        if kind is Kind.RESOURCES and self.config.resources.list_mode == "passthrough":
            return ()  # fetched page by page during each host's walk (router)
        method = _LIST_METHODS[kind]
        items: list[dict[str, Any]] = []
        seen_cursors: set[str] = set()
        cursor: str | None = None
        for _page in range(self.config.max_list_pages):
            params = jsonrpc.to_raw({"cursor": cursor}) if cursor is not None else None
            with trio.fail_after(self.config.timeouts.request):
                result = await peer.request(method, params)
            page, cursor = mcp.list_items(result, kind.value)
            items.extend(page)
            if len(items) >= self.config.max_list_items:
                self.list_guard_trips["max_items"] += 1
                self._log.warning(
                    "backend.list.max_items",
                    method=method,
                    items=len(items),
                    limit=self.config.max_list_items,
                )
                del items[self.config.max_list_items :]
                break
            if cursor is None:
                break
            if cursor in seen_cursors:
                self.list_guard_trips["cursor_repeated"] += 1
                self._log.warning("backend.list.cursor_repeated", method=method, items=len(items))
                break
            seen_cursors.add(cursor)
        else:
            self.list_guard_trips["max_pages"] += 1
            self._log.warning(
                "backend.list.max_pages", method=method, pages=self.config.max_list_pages
            )
        return tuple(self._filtered(kind, items))

    def _filtered(self, kind: Kind, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rules = {
            Kind.TOOLS: self.config.tools,
            Kind.PROMPTS: self.config.prompts,
            Kind.RESOURCES: self.config.resources,
            Kind.TEMPLATES: self.config.resources,
        }[kind]
        key = kind.identity_key
        return [item for item in items if rules.allows(str(item.get(key, "")))]

    async def _list_all(self, peer: Peer, kinds: set[Kind]) -> BackendListing:
        old = self.listing
        lists: dict[Kind, tuple[dict[str, Any], ...]] = {}
        for kind in Kind:
            if kind in kinds:
                try:
                    lists[kind] = await self._list_kind(peer, kind)
                except ProtocolError as exc:
                    # A backend that advertises a list and then fails it
                    # still serves everything else.
                    self._log.warning("backend.list.failed", kind=kind.value, error=exc.message)
                    lists[kind] = ()
            else:
                lists[kind] = old.items(kind) if old is not None else ()
        return BackendListing(
            backend=self.name,
            prefix=self.prefix,
            tools=lists[Kind.TOOLS],
            prompts=lists[Kind.PROMPTS],
            resources=lists[Kind.RESOURCES],
            templates=lists[Kind.TEMPLATES],
            on_collision=self.config.on_collision,
        )

    async def _pinger(self, peer: Peer) -> None:
        """Ping the backend after each quiet spell; a failed ping ends the session.

        Raising here ends ``_serve_once`` through the nursery, and the
        supervisor restarts the backend like any other failure.
        """
        health = self.config.health
        while True:
            quiet = trio.current_time() - peer.last_heard
            if quiet < health.ping_interval or peer.in_flight:
                await trio.sleep(max(health.ping_interval - quiet, 0.001))
                continue
            try:
                with trio.fail_after(health.ping_timeout):
                    await peer.request("ping")
            except trio.TooSlowError:
                raise TransportBroken(
                    f"no answer to ping within {health.ping_timeout:g} s"
                ) from None
            except ProtocolError:
                pass  # an error answer is still an answer: the backend is alive

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
                self._log.warning("backend.refresh.failed", error=_describe(exc))
                continue
            finally:
                last_refresh = trio.current_time()
            self._on_change(self)

    # -- messages from the backend ----------------------------------------

    def _handle_notification(
        self, method: str, params: msgspec.Raw | None, *, client: str | None = None
    ) -> None:
        kinds = _LIST_CHANGED.get(method)
        if kinds is not None:
            if client is None:  # the catalog follows the shared session only
                self._dirty.update(kinds)
                self._dirty_event.set()
            return
        if self._on_notification is not None:
            self._on_notification(self, method, params, client)

    async def _handle_request(
        self, method: str, params: msgspec.Raw | None, *, client: str | None = None
    ) -> msgspec.Raw:
        if self._on_request is None:
            raise LocalProtocolError(f"method not found: {method}", METHOD_NOT_FOUND)
        return await self._on_request(self, method, params, client)


@dataclass(eq=False)
class _ClientLink:
    """A per-client backend session (session mode per_client)."""

    client: str
    peer: Peer | None = None
    ready: trio.Event = field(default_factory=trio.Event)
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)


class BackendNotificationHandler(Protocol):
    """Receives a backend's notifications (other than progress and list_changed)."""

    def __call__(
        self, backend: Backend, method: str, params: msgspec.Raw | None, client: str | None
    ) -> None:
        """``client`` is set when the notification came on that client's own session."""
        ...


class BackendRequestHandler(Protocol):
    """Answers a backend's own requests (sampling, elicitation, roots)."""

    def __call__(
        self, backend: Backend, method: str, params: msgspec.Raw | None, client: str | None
    ) -> Awaitable[msgspec.Raw]:
        """``client`` is set when the request came on that client's own session."""
        ...


def _describe_any(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return _describe(_first_leaf(exc))
    return _describe(exc)


def _first_leaf(group: BaseExceptionGroup[Any]) -> BaseException:
    first: BaseException = group.exceptions[0]
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first


def _describe(exc: BaseException) -> str:
    if isinstance(exc, trio.TooSlowError):
        return "timed out"
    if isinstance(exc, ProtocolError):
        return f"error {exc.code}: {exc.message}"
    return str(exc) or type(exc).__name__


__all__ = ["Backend", "BackendState", "ServerInfo"]
