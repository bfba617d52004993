"""The console's store page: which state store serves, how it is doing, what it holds, how fast.

Rules:

1. **What it shows.** The store's kind (``embedded`` or ``redis``), its
   location (the SQLite file or the server's address: never a password, as
   :meth:`~gateway.store.api.Store.health` gives it), its state, how often
   it reconnected and its last failure; how many keys each namespace holds;
   each operation's count, mean and quantile bounds from the gateway's own
   store metrics since it started.
2. **Bounded.** Keys are counted with one prefix scan per namespace of at
   most :data:`SCAN_LIMIT` keys; a namespace at the limit shows as "at
   least". A store that does not answer leaves the counts unknown and the
   rest of the page as it is: the page is how an operator sees it is down.
3. **Read only.** The page changes nothing, so it has no form and no CSRF
   field of its own (the logout form in the header carries one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Protocol

from gateway.console import page_data as views
from gateway.store.api import DURABLE_NAMESPACES, StoreUnavailable

if TYPE_CHECKING:
    from collections.abc import Callable

    from gateway.console.render import Renderer
    from gateway.frontend import http_util as h
    from gateway.store.api import Store
    from gateway.telemetry.metrics import Metrics

__all__ = ["NAMESPACES", "PAGES", "SCAN_LIMIT", "namespace_counts"]

#: The namespaces the gateway's tenants use (docs/operations.md, "What lives in the store").
NAMESPACES: Final = tuple(sorted(DURABLE_NAMESPACES | {"limits", "reload"}))
#: Keys counted per namespace at most (rule 2).
SCAN_LIMIT: Final = 1000


class _Parts(Protocol):
    metrics: Callable[[], Metrics | None]


class ConsoleApp(Protocol):
    """What this page uses of ``console.handler.ConsoleApp`` (a protocol: no import cycle)."""

    store: Store | None
    renderer: Renderer

    @property
    def parts(self) -> _Parts:
        """The running parts."""
        ...

    def _common(self, identity: str, active: str) -> dict[str, Any]: ...

    async def _html(self, send: h.Send, status: int, body: bytes) -> None: ...


async def namespace_counts(store: Store, limit: int = SCAN_LIMIT) -> list[tuple[str, int, bool]]:
    """``(namespace, keys, at_limit)`` per namespace, by one bounded scan each (rule 2).

    Raises:
        StoreUnavailable: the store did not answer.
    """
    counts = []
    for namespace in NAMESPACES:
        found = len(await store.scan(namespace + ":", limit=limit))
        counts.append((namespace, found, found >= limit))
    return counts


async def store_page(app: ConsoleApp, send: h.Send, who: str, query: dict[str, str]) -> None:
    """Rule 1: the store's health, its keys per namespace and its operations' latency."""
    store = app.store
    counts: list[tuple[str, int, bool]] | None = None
    unavailable = ""
    if store is not None:
        try:
            counts = await namespace_counts(store)
        except StoreUnavailable as exc:
            unavailable = exc.reason
    metrics = app.parts.metrics()
    body = app.renderer.page(
        "store.html",
        **app._common(who, "store"),
        health=None if store is None else store.health(),
        counts=counts,
        unavailable=unavailable,
        limit=SCAN_LIMIT,
        latencies=(
            []
            if metrics is None
            else views.store_latency_rows(metrics.store_operation_duration, metrics.store_errors)
        ),
    )
    await app._html(send, 200, body)


PAGES: Final[dict[str, Any]] = {"/store": store_page}
