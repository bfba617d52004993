"""Per-credential rate limits counted in the shared store: replicas admit one budget.

Rules:

1. **Shared only when the store is.** With ``store.url`` set, every
   credential's bucket (``limits.token_rate``, ``limits.token_burst``) lives
   in the server, spent by :meth:`~gateway.store.api.Store.spend` in one
   atomic step on the server's clock, so N replicas together admit what one
   would. The embedded store serves one gateway: its local buckets
   (:class:`~gateway.frontend.rate_limits.RateLimiter`) stay in charge.
2. **Fail open, visibly.** A store that does not answer (``StoreUnavailable``)
   must not refuse every request: the local bucket decides instead, so each
   replica admits at most its own budget while the store is down. The
   fallback is logged once per outage (``limits.store_fallback``, warning;
   ``limits.store_restored`` when it answers again) and counted
   (``mcp_gateway_store_fallbacks_total{tenant="rate_limits"}``).
3. **No request waits on a store that is down.** After a failure the store
   is not asked again for :data:`RETRY_AFTER` seconds; the local bucket
   decides meanwhile.
4. **Keys name no credential.** A bucket's key is a digest of the
   principal's key (``limits:token:<sha256>``).
5. **A reload's limits apply to the next request**; a shared bucket keeps
   its level (the local buckets start full again).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Final

import structlog
import trio

from gateway.store.api import StoreUnavailable

if TYPE_CHECKING:
    from collections.abc import Callable

    from gateway.frontend.rate_limits import RateLimiter
    from gateway.store.api import Store

__all__ = ["RETRY_AFTER", "SharedLimiter", "bucket_key"]

logger = structlog.get_logger("gateway.frontend")

#: Seconds the local buckets decide alone after the store failed (rule 3).
RETRY_AFTER: Final = 1.0


def bucket_key(principal_key: str) -> str:
    """The store key of a credential's bucket (rule 4)."""
    return "limits:token:" + hashlib.sha256(principal_key.encode()).hexdigest()[:32]


class SharedLimiter:
    """Per-credential buckets in the store, the local ones when it is down (module rules).

    Args:
        local: the local buckets; their ``rate`` and ``burst`` are the limits
            in force (a reload configures them).
        store: the shared store.
        on_fallback: called once for each request the local bucket decided
            because the store could not (the metric).
    """

    def __init__(
        self, local: RateLimiter, store: Store, on_fallback: Callable[[], None] | None = None
    ) -> None:
        self.local = local
        self._store = store
        self._on_fallback = on_fallback
        self._retry_at: float | None = None  # set while the store is judged down

    async def check(self, key: str, now: float) -> float:
        """0 when the request may go ahead, else the seconds to wait (Retry-After)."""
        if self.local.rate <= 0:
            return 0.0
        if self._retry_at is None or now >= self._retry_at:
            try:
                wait = await self._store.spend(
                    bucket_key(key), rate=self.local.rate, burst=self.local.burst
                )
            except StoreUnavailable as exc:
                if self._retry_at is None:
                    logger.warning("limits.store_fallback", reason=exc.reason)
                self._retry_at = trio.current_time() + RETRY_AFTER
            else:
                if self._retry_at is not None:
                    logger.info("limits.store_restored")
                    self._retry_at = None
                return wait
        if self._on_fallback is not None:
            self._on_fallback()
        return self.local.check(key, now)
