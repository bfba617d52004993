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

import enum
import os
import sys
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import structlog
import trio

from gateway import __version__
from gateway.backends.backoff import Backoff
from gateway.catalog.snapshot import BackendListing, Kind
from gateway.config import BackendConfig, StdioBackend
from gateway.errors import (
    BackendUnavailable,
    ConnectError,
    GatewayError,
    LocalProtocolError,
    ProtocolError,
    RequestTimeout,
    TransportError,
)
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.versions import LATEST_VERSION, accept_as_client
from gateway.session import NotificationHandler, Peer, RequestHandler, open_session
from gateway.transports.stdio import open_stdio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    import msgspec

    from gateway.transports.base import MessageChannel

logger = structlog.get_logger("gateway.backends")

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


def _stdio_command(cfg: StdioBackend) -> list[str]:
    # ``python`` means the gateway's own interpreter, so the bundled demos
    # (and any module installed beside the gateway) run from a virtualenv
    # without it being on PATH. Documented in the README.
    program = sys.executable if cfg.command == "python" else cfg.command
    return [program, *cfg.args]


def _stdio_environment(cfg: StdioBackend) -> dict[str, str]:
    base = dict(os.environ) if cfg.inherit_env else {"PATH": os.environ.get("PATH", "")}
    base.update(cfg.env)
    return base


@asynccontextmanager
async def open_channel(cfg: BackendConfig) -> AsyncIterator[MessageChannel]:
    """Open the transport a backend's config asks for.

    Raises:
        ConnectError: the transport could not be opened.
    """
    if isinstance(cfg, StdioBackend):
        async with open_stdio(
            _stdio_command(cfg),
            env=_stdio_environment(cfg),
            cwd=cfg.cwd,
            max_line_bytes=cfg.max_line_bytes,
            stop_grace=cfg.stop_grace,
            backend=cfg.name,
        ) as channel:
            yield channel
        return
    raise ConnectError(f"transport {type(cfg).__name__} is not supported yet")


class Backend:
    """Supervisor and call gate of one configured backend.

    Args:
        config: this backend's config.
        on_change: called (synchronously) whenever state or listing changes.
        on_notification: called for each notification the backend sends
            (other than progress, which the session routes itself).
        on_request: answers the backend's own requests (sampling, roots).
    """

    def __init__(
        self,
        config: BackendConfig,
        *,
        on_change: Callable[[Backend], None],
        on_notification: Callable[[Backend, str, msgspec.Raw | None], None] | None = None,
        on_request: RequestHandler | None = None,
    ) -> None:
        self.config = config
        self.name = config.name
        self.prefix = config.public_prefix
        self.state = BackendState.STARTING
        self.reason = "starting"
        self.info: ServerInfo | None = None
        self.listing: BackendListing | None = None
        self.restarts = 0
        self._on_change = on_change
        self._on_notification = on_notification
        self._on_request = on_request
        self._peer: Peer | None = None
        self._dirty: set[Kind] = set()
        self._dirty_event = trio.Event()
        self._log = logger.bind(backend=self.name)
        restart = config.restart
        self._backoff = Backoff(restart.initial_delay, restart.max_delay, restart.multiplier)

    # -- calls -----------------------------------------------------------

    def _live_peer(self) -> Peer:
        peer = self._peer
        if peer is None or self.state is not BackendState.UP:
            raise BackendUnavailable(self.name, self.reason)
        return peer

    async def request(self, method: str, params: msgspec.Raw | None = None) -> msgspec.Raw:
        """Forward one request and return the backend's result.

        The deadline is the backend's ``timeouts.request``: the one place
        that knows it sets it, as a cancel scope around the wait.

        Raises:
            BackendUnavailable: the backend is not up, or went down mid-call.
            RequestTimeout: no answer in time; the backend is told
                (``notifications/cancelled``).
            RemoteProtocolError: the backend answered with an error.
        """
        peer = self._live_peer()
        limit = self.config.timeouts.request
        with trio.move_on_after(limit) as scope:
            try:
                return await peer.request(method, params)
            except TransportError as exc:
                raise BackendUnavailable(self.name, str(exc)) from None
        assert scope.cancelled_caught
        raise RequestTimeout(self.name, limit)

    async def notify(self, method: str, params: msgspec.Raw | None = None) -> None:
        """Forward a notification; silently dropped when the backend is down."""
        peer = self._peer
        if peer is None:
            return
        with suppress(TransportError):
            await peer.notify(method, params)

    # -- supervision -----------------------------------------------------

    def _set_state(self, state: BackendState, reason: str) -> None:
        self.state = state
        self.reason = reason
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
                went_up = self.state is BackendState.UP
                self._peer = None
                self.listing = None
                self.info = None
                self._set_state(state, reason)
                if went_up:
                    attempt = 0
                    self.restarts += 1
                self._log.warning("backend.down", reason=reason, state=state.value)
                delay = (
                    self._backoff.maximum
                    if state is BackendState.INCOMPATIBLE
                    else self._backoff.delay(attempt)
                )
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
            return _first_leaf(expected)
        return None

    async def _serve_once(self) -> None:
        self._peer_reason = None
        timeouts = self.config.timeouts
        async with (
            open_channel(self.config) as channel,
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
            self._set_state(BackendState.UP, "up")
            self._log.info(
                "backend.connect.complete",
                protocol_version=self.info.protocol_version,
                server=self.info.name,
                tools=len(listing.tools),
                prompts=len(listing.prompts),
                resources=len(listing.resources),
                templates=len(listing.templates),
            )
            nursery.start_soon(self._refresher, peer)
            await peer.closed.wait()
            self._peer_reason = str(peer.close_reason) if peer.close_reason else None
            nursery.cancel_scope.cancel()

    async def _initialize(self, peer: Peer) -> ServerInfo:
        params = jsonrpc.to_raw(
            {
                "protocolVersion": LATEST_VERSION,
                "capabilities": CLIENT_CAPABILITIES,
                "clientInfo": {"name": "mcp-gateway", "version": __version__},
            }
        )
        result = mcp.decode_object(await peer.request("initialize", params))
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
                self._log.warning("backend.list.cursor_repeated", method=method, items=len(items))
                break
            seen_cursors.add(cursor)
        else:
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
        )

    async def _refresher(self, peer: Peer) -> None:
        while True:
            await self._dirty_event.wait()
            await trio.sleep(REFRESH_DEBOUNCE)
            kinds, self._dirty = self._dirty, set()
            self._dirty_event = trio.Event()
            try:
                self.listing = await self._list_all(peer, kinds)
            except (GatewayError, trio.TooSlowError) as exc:
                self._log.warning("backend.refresh.failed", error=_describe(exc))
                continue
            self._on_change(self)

    # -- messages from the backend ----------------------------------------

    def _handle_notification(self, method: str, params: msgspec.Raw | None) -> None:
        kinds = _LIST_CHANGED.get(method)
        if kinds is not None:
            self._dirty.update(kinds)
            self._dirty_event.set()
            return
        if self._on_notification is not None:
            self._on_notification(self, method, params)

    async def _handle_request(self, method: str, params: msgspec.Raw | None) -> msgspec.Raw:
        if self._on_request is None:
            raise LocalProtocolError(f"method not found: {method}", -32601)
        return await self._on_request(method, params)


def _first_leaf(group: BaseExceptionGroup[Exception]) -> Exception:
    first = group.exceptions[0]
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first


def _describe(exc: BaseException) -> str:
    if isinstance(exc, trio.TooSlowError):
        return "timed out"
    if isinstance(exc, ProtocolError):
        return f"error {exc.code}: {exc.message}"
    return str(exc) or type(exc).__name__


__all__ = ["Backend", "BackendState", "NotificationHandler", "ServerInfo", "open_channel"]
