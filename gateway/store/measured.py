"""A store that times and counts every operation of the store it wraps.

The gateway wraps its store in this once (``runtime.app``): each operation's
latency goes to ``mcp_gateway_store_operation_duration_seconds{operation}``
and each failure (``StoreUnavailable``) to ``mcp_gateway_store_errors_total``.
Tenants see the plain :class:`~gateway.store.api.Store` interface.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from gateway.store.api import StoreUnavailable

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from contextlib import AbstractAsyncContextManager

    import trio

    from gateway.store.api import Store, StoreHealth
    from gateway.telemetry.metrics import Metrics

__all__ = ["MeasuredStore"]


class MeasuredStore:
    """Delegates to ``inner``, recording each operation in ``metrics`` (module doc).

    Args:
        inner: the store that does the work.
        metrics: where the latency and the failures are recorded.
    """

    def __init__(self, inner: Store, metrics: Metrics) -> None:
        self.inner = inner
        self._metrics = metrics
        self._timers: dict[str, Any] = {}
        self._errors: dict[str, Any] = {}

    async def _measure(self, operation: str, call: Callable[[], Awaitable[Any]]) -> Any:
        timer = self._timers.get(operation)
        if timer is None:
            timer = self._timers[operation] = self._metrics.store_operation_duration.labels(
                operation
            )
        start = time.perf_counter()
        try:
            return await call()
        except StoreUnavailable:
            errors = self._errors.get(operation)
            if errors is None:
                errors = self._errors[operation] = self._metrics.store_errors.labels(operation)
            errors.inc()
            raise
        finally:
            timer.observe(time.perf_counter() - start)

    async def get(self, key: str) -> bytes | None:
        """See :meth:`gateway.store.api.Store.get`."""
        result: bytes | None = await self._measure("get", lambda: self.inner.get(key))
        return result

    async def put(self, key: str, value: bytes, *, ttl: float | None = None) -> None:
        """See :meth:`gateway.store.api.Store.put`."""
        await self._measure("put", lambda: self.inner.put(key, value, ttl=ttl))

    async def put_new(self, key: str, value: bytes, *, ttl: float | None = None) -> bool:
        """See :meth:`gateway.store.api.Store.put_new`."""
        result: bool = await self._measure(
            "put_new", lambda: self.inner.put_new(key, value, ttl=ttl)
        )
        return result

    async def take(self, key: str) -> bytes | None:
        """See :meth:`gateway.store.api.Store.take`."""
        result: bytes | None = await self._measure("take", lambda: self.inner.take(key))
        return result

    async def delete(self, key: str) -> bool:
        """See :meth:`gateway.store.api.Store.delete`."""
        result: bool = await self._measure("delete", lambda: self.inner.delete(key))
        return result

    async def swap(
        self, key: str, expected: bytes | None, new: bytes | None, *, ttl: float | None = None
    ) -> bool:
        """See :meth:`gateway.store.api.Store.swap`."""
        result: bool = await self._measure(
            "swap", lambda: self.inner.swap(key, expected, new, ttl=ttl)
        )
        return result

    async def scan(self, prefix: str, *, limit: int = 1000) -> list[tuple[str, bytes]]:
        """See :meth:`gateway.store.api.Store.scan`."""
        result: list[tuple[str, bytes]] = await self._measure(
            "scan", lambda: self.inner.scan(prefix, limit=limit)
        )
        return result

    async def add(self, key: str, amount: int = 1, *, ttl: float | None = None) -> int:
        """See :meth:`gateway.store.api.Store.add`."""
        result: int = await self._measure("add", lambda: self.inner.add(key, amount, ttl=ttl))
        return result

    async def spend(self, key: str, *, rate: float, burst: float, cost: float = 1.0) -> float:
        """See :meth:`gateway.store.api.Store.spend`."""
        result: float = await self._measure(
            "spend", lambda: self.inner.spend(key, rate=rate, burst=burst, cost=cost)
        )
        return result

    async def publish(self, channel: str, message: bytes) -> None:
        """See :meth:`gateway.store.api.Store.publish`."""
        await self._measure("publish", lambda: self.inner.publish(channel, message))

    def subscribe(
        self, channel: str
    ) -> AbstractAsyncContextManager[trio.MemoryReceiveChannel[bytes]]:
        """See :meth:`gateway.store.api.Store.subscribe` (long-lived: not timed)."""
        return self.inner.subscribe(channel)

    def health(self) -> StoreHealth:
        """See :meth:`gateway.store.api.Store.health`."""
        return self.inner.health()
