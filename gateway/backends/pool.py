"""All configured backends, their nursery, and the catalog they feed.

The pool is what the router sees of the backends: look one up by name, see
the current catalog snapshot, subscribe to changes. It owns one nursery in
which every backend's supervisor runs; leaving ``open_pool`` stops them all.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import structlog
import trio

from gateway.backends.backend import (
    Backend,
    BackendNotificationHandler,
    BackendRequestHandler,
    BackendState,
)
from gateway.catalog.snapshot import Catalog, Kind, Snapshot
from gateway.errors import METHOD_NOT_FOUND, LocalProtocolError

if TYPE_CHECKING:
    import msgspec

    from gateway.catalog.naming import NamingRules
    from gateway.config import BackendConfig

logger = structlog.get_logger("gateway.backends.pool")

CatalogListener = Callable[[Snapshot, frozenset[Kind]], None]


class Pool:
    """The live backends, by name.

    Args:
        nursery: where backend supervisors run.
        rules: naming rules for the catalog.
    """

    def __init__(self, nursery: trio.Nursery, rules: NamingRules) -> None:
        self._nursery = nursery
        self.catalog = Catalog(rules)
        self.backends: dict[str, Backend] = {}
        self._catalog_listeners: list[CatalogListener] = []
        self._notification_listeners: list[BackendNotificationHandler] = []
        self._state_listeners: list[Callable[[Backend], None]] = []
        self.request_handler: BackendRequestHandler | None = None
        self.state_changed = trio.Event()

    @property
    def snapshot(self) -> Snapshot:
        """The current merged catalog."""
        return self.catalog.snapshot

    def get(self, name: str) -> Backend | None:
        """The backend of that name, if configured."""
        return self.backends.get(name)

    def on_catalog_change(self, listener: CatalogListener) -> None:
        """Call ``listener(snapshot, changed_kinds)`` after each visible change."""
        self._catalog_listeners.append(listener)

    def on_state_change(self, listener: Callable[[Backend], None]) -> None:
        """Call ``listener(backend)`` whenever a backend's state or listing changes."""
        self._state_listeners.append(listener)

    def on_notification(self, listener: BackendNotificationHandler) -> None:
        """Call ``listener(backend, method, params, client)`` for backend notifications."""
        self._notification_listeners.append(listener)

    def start(self, configs: Iterable[BackendConfig]) -> None:
        """Start a supervisor for each enabled backend; returns at once."""
        configs = [cfg for cfg in configs if cfg.enabled]
        self.catalog.set_prefixes(
            {cfg.public_prefix: cfg.name for cfg in configs if cfg.public_prefix}
        )
        for cfg in configs:
            backend = Backend(
                cfg,
                on_change=self._backend_changed,
                on_notification=self._backend_notified,
                on_request=self._backend_requested,
            )
            self.backends[cfg.name] = backend
            self._nursery.start_soon(backend.run, name=f"backend:{cfg.name}")

    async def _backend_requested(
        self, backend: Backend, method: str, params: msgspec.Raw | None, client: str | None
    ) -> msgspec.Raw:
        if self.request_handler is None:
            raise LocalProtocolError(f"method not found: {method}", METHOD_NOT_FOUND)
        return await self.request_handler(backend, method, params, client)

    def _backend_notified(
        self, backend: Backend, method: str, params: msgspec.Raw | None, client: str | None
    ) -> None:
        for listener in self._notification_listeners:
            listener(backend, method, params, client)

    def _backend_changed(self, backend: Backend) -> None:
        if backend.state is BackendState.UP and backend.listing is not None:
            changed = self.catalog.publish(backend.listing)
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

    def down(self) -> list[Backend]:
        """Backends that are not serving right now."""
        return [b for b in self.backends.values() if b.state is not BackendState.UP]

    def ready(self) -> bool:
        """True when every backend marked ``required`` is up."""
        return all(b.state is BackendState.UP for b in self.backends.values() if b.config.required)


@asynccontextmanager
async def open_pool(configs: Iterable[BackendConfig], rules: NamingRules) -> AsyncIterator[Pool]:
    """Run every configured backend for the body of the block."""
    async with trio.open_nursery() as nursery:
        pool = Pool(nursery, rules)
        pool.start(configs)
        try:
            yield pool
        finally:
            nursery.cancel_scope.cancel()
