"""All configured backends, their nursery, and the catalog they feed.

The pool is what the router sees of the backends: look one up by name, see
the current catalog snapshot, subscribe to changes. It owns one nursery in
which every backend's supervisor runs; leaving ``open_pool`` stops them all.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog
import trio

from gateway.backends.backend import Backend
from gateway.backends.state import (
    BackendNotificationHandler,
    BackendRequestHandler,
    BackendState,
    BackendView,
)
from gateway.catalog.catalog import Catalog
from gateway.catalog.snapshot import Kind, Snapshot
from gateway.errors import METHOD_NOT_FOUND, LocalProtocolError
from gateway.telemetry.scrape import BackendSample

if TYPE_CHECKING:
    import msgspec

    from gateway.backends.channel import ChannelOpener
    from gateway.backends.credentials.provider import PersonalTokens, Subject
    from gateway.backends.links import HostFacts
    from gateway.backends.pins import PinGuard
    from gateway.catalog.naming import NamingRules
    from gateway.config import BackendConfig

logger = structlog.get_logger("gateway.backends.pool")

CatalogListener = Callable[[Snapshot, frozenset[Kind]], None]


class Pool:
    """The live backends, by name.

    The pool keeps the nursery it is handed: backends start and stop one by
    one long after construction (``start``, ``reload``), and ``open_pool``
    opens that nursery for the pool alone, so the two live exactly as long.

    Args:
        nursery: where backend supervisors run.
        rules: naming rules for the catalog.
        connect: opens backend transports (tests pass fakes).
        subjects: who a client session is (principal key, raw token), for
            token exchange (the client registry's); nobody by default.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        rules: NamingRules,
        connect: ChannelOpener | None = None,
        *,
        subjects: Callable[[str], Subject | None] | None = None,
        hosts: Callable[[str], HostFacts | None] | None = None,
        authenticated: bool = False,
        pins: PinGuard | None = None,
    ) -> None:
        self._nursery = nursery
        self.pins = pins
        """What judges each listing against its pins before the catalog publishes it."""
        if pins is not None:
            pins.republish = self.republish
        self._connect = connect
        self._tasks: dict[str, _Task] = {}
        self.catalog = Catalog(rules)
        self.backends: dict[str, Backend] = {}
        self._catalog_listeners: list[CatalogListener] = []
        self._notification_listeners: list[BackendNotificationHandler] = []
        self._state_listeners: list[Callable[[Backend], None]] = []
        self._request_handler: BackendRequestHandler | None = None
        self.state_changed = trio.Event()
        self.subjects: Callable[[str], Subject | None] = (
            subjects if subjects is not None else lambda _client: None
        )
        self.hosts: Callable[[str], HostFacts | None] = (
            hosts if hosts is not None else lambda _client: None
        )
        """A client session's principal and declared capabilities, for the
        per-principal and per-client backend sessions."""
        self.personal: PersonalTokens | None = None
        """Each person's tokens at ``user_consent`` backends, set once the
        state store is open (``runtime.app``)."""
        self.authenticated = authenticated
        """Whether ``auth`` is configured (``session: auto`` follows it; a
        reload's ``apply_auth`` changes it)."""

    @property
    def snapshot(self) -> Snapshot:
        """The current merged catalog."""
        return self.catalog.snapshot

    def get(self, name: str) -> Backend | None:
        """The backend of that name, if configured."""
        return self.backends.get(name)

    def samples(self) -> list[BackendSample]:
        """Each backend's figures for the metrics, read at scrape time."""
        return [
            BackendSample(
                b.name,
                b.state.value,
                b.in_flight,
                b.restarts,
                b.initializations,
                dict(b.list_guard_trips),
                dict(b.credentials.requests) if b.credentials is not None else {},
                era="" if b.info is None else "modern" if b.info.modern else "legacy",
                sessions_by_era={"legacy": b.handshake.count, "modern": b.handshake.discovered},
                requests_by_era=dict(b.handshake.requests),
            )
            for b in self.backends.values()
        ]

    def on_catalog_change(self, listener: CatalogListener) -> None:
        """Call ``listener(snapshot, changed_kinds)`` after each visible change."""
        self._catalog_listeners.append(listener)

    def on_state_change(self, listener: Callable[[Backend], None]) -> None:
        """Call ``listener(backend)`` whenever a backend's state or listing changes."""
        self._state_listeners.append(listener)

    def on_request(self, handler: BackendRequestHandler) -> None:
        """Have ``handler`` answer backends' own requests (the router's relay; one at a time)."""
        self._request_handler = handler

    def on_notification(self, listener: BackendNotificationHandler) -> None:
        """Call ``listener(backend, method, params, client)`` for backend notifications."""
        self._notification_listeners.append(listener)

    def start(self, configs: Iterable[BackendConfig]) -> None:
        """Start a supervisor for each enabled backend; returns at once."""
        configs = [cfg for cfg in configs if cfg.enabled]
        self._set_prefixes(configs)
        for cfg in configs:
            self._start_one(cfg)

    def _set_prefixes(self, configs: Iterable[BackendConfig]) -> None:
        self.catalog.set_prefixes(
            {cfg.public_prefix: cfg.name for cfg in configs if cfg.public_prefix}
        )

    def _start_one(self, cfg: BackendConfig) -> None:
        backend = Backend(
            cfg,
            on_change=self._backend_changed,
            on_notification=self._backend_notified,
            on_request=self._backend_requested,
            connect=self._connect,
            subjects=lambda client: self.subjects(client),
            hosts=lambda client: self.hosts(client),
            authenticated=lambda: self.authenticated,
            personal=lambda: self.personal,
        )
        self.backends[cfg.name] = backend
        self._tasks[cfg.name] = _Task()
        self._nursery.start_soon(
            self._run, backend, self._tasks[cfg.name], name=f"backend:{cfg.name}"
        )

    @staticmethod
    async def _run(backend: Backend, task: _Task) -> None:
        try:
            with task.scope:
                await backend.run()
        finally:
            task.done.set()

    async def stop(self, name: str, drain_timeout: float) -> None:
        """Stop one backend: let its calls in flight finish (bounded), then end it.

        New calls are refused from the moment this starts; the backend's
        items leave the catalog when its supervisor ends.
        """
        backend = self.backends.get(name)
        task = self._tasks.get(name)
        if backend is None or task is None:
            return
        backend.accepting = False
        with trio.move_on_after(drain_timeout):
            await backend.drained()
        task.scope.cancel()
        await task.done.wait()
        if self.backends.get(name) is backend:
            del self.backends[name]
            del self._tasks[name]

    async def reload(self, configs: Iterable[BackendConfig], drain_timeout: float) -> ReloadPlan:
        """Apply a new list of backends; unchanged ones are not touched.

        Removed backends are drained and stopped; changed ones are drained,
        stopped and started again with the new config; added ones start.
        """
        wanted = {cfg.name: cfg for cfg in configs if cfg.enabled}
        plan = plan_reload({n: b.config for n, b in self.backends.items()}, wanted)
        self._set_prefixes([*wanted.values()])
        async with trio.open_nursery() as nursery:
            for name in (*plan.removed, *plan.changed):
                nursery.start_soon(self.stop, name, drain_timeout)
        for name in (*plan.changed, *plan.added):
            self._start_one(wanted[name])
        logger.info(
            "config.reload.backends",
            added=list(plan.added),
            removed=list(plan.removed),
            changed=list(plan.changed),
            unchanged=len(plan.unchanged),
        )
        return plan

    async def _backend_requested(
        self, backend: BackendView, method: str, params: msgspec.Raw | None, client: str | None
    ) -> msgspec.Raw:
        if self._request_handler is None:
            raise LocalProtocolError(f"method not found: {method}", METHOD_NOT_FOUND)
        return await self._request_handler(backend, method, params, client)

    def _backend_notified(
        self, backend: BackendView, method: str, params: msgspec.Raw | None, client: str | None
    ) -> None:
        for listener in self._notification_listeners:
            listener(backend, method, params, client)

    def republish(self, name: str | None) -> None:
        """Judge one backend's listing (None: every backend's) against its pins again."""
        for backend in list(self.backends.values()):
            if name is None or backend.name == name:
                self._backend_changed(backend)

    def pin_refused(self, backend: str, kind: Kind, name: str) -> bool:
        """Whether calls to that item are refused until its change is approved (``block``)."""
        return self.pins is not None and self.pins.refuses(backend, kind, name)

    def pin_withheld(self, backend: str, kind: Kind, name: str) -> bool:
        """Whether hosts are shown that item's pin, or nothing, instead of it (``hold``)."""
        return self.pins is not None and self.pins.withholds(backend, kind, name)

    def _backend_changed(self, backend: Backend) -> None:
        listing = backend.listing
        if listing is not None and self.pins is not None:
            listing = self.pins.judge(listing)
        if backend.state is BackendState.UP and listing is not None:
            changed = self.catalog.publish(listing)
        else:
            changed = self.catalog.withdraw(backend.name)
        self.state_changed.set()
        self.state_changed = trio.Event()
        for state_listener in self._state_listeners:
            state_listener(backend)
        if changed:
            for listener in self._catalog_listeners:
                listener(self.catalog.snapshot, changed)
            for problem in self.catalog.snapshot.problems:
                logger.warning("catalog.item_skipped", problem=problem)

    def apply_auth(self, enabled: bool) -> None:
        """A reload changed ``auth``: ``session: auto`` follows whether it is on."""
        self.authenticated = enabled

    async def settled(self) -> None:
        """Wait until every backend has finished its first connect attempt."""
        for backend in list(self.backends.values()):
            await backend.settled.wait()

    def down(self) -> list[Backend]:
        """Backends that are not serving right now."""
        return [b for b in self.backends.values() if b.state is not BackendState.UP]

    def ready(self) -> bool:
        """True when every backend marked ``required`` is up."""
        return all(b.state is BackendState.UP for b in self.backends.values() if b.config.required)


@dataclass(frozen=True, slots=True)
class ReloadPlan:
    """What a reload does to the backends, by name."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]
    unchanged: tuple[str, ...]


def plan_reload(
    current: Mapping[str, BackendConfig], wanted: Mapping[str, BackendConfig]
) -> ReloadPlan:
    """Diff two sets of backend configs (pure). Configs compare by value."""
    return ReloadPlan(
        added=tuple(sorted(n for n in wanted if n not in current)),
        removed=tuple(sorted(n for n in current if n not in wanted)),
        changed=tuple(sorted(n for n in wanted if n in current and current[n] != wanted[n])),
        unchanged=tuple(sorted(n for n in wanted if n in current and current[n] == wanted[n])),
    )


@dataclass(eq=False)
class _Task:
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    done: trio.Event = field(default_factory=trio.Event)


@asynccontextmanager
async def open_pool(
    configs: Iterable[BackendConfig],
    rules: NamingRules,
    connect: ChannelOpener | None = None,
    *,
    subjects: Callable[[str], Subject | None] | None = None,
    hosts: Callable[[str], HostFacts | None] | None = None,
    authenticated: bool = False,
    pins: PinGuard | None = None,
) -> AsyncIterator[Pool]:
    """Run every configured backend for the body of the block."""
    async with trio.open_nursery() as nursery:
        pool = Pool(
            nursery,
            rules,
            connect,
            subjects=subjects,
            hosts=hosts,
            authenticated=authenticated,
            pins=pins,
        )
        pool.start(configs)
        try:
            yield pool
        finally:
            nursery.cancel_scope.cancel()
