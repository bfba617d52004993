"""Rate limits for the HTTP frontend (no I/O).

Who a request is from is :mod:`gateway.identity`'s question; this module
only meters how often a session or a principal may ask.
"""

from __future__ import annotations


class TokenBucket:
    """A token bucket over an injected clock (pure: callers pass ``now``)."""

    __slots__ = ("_burst", "_level", "_rate", "_stamp")

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self._rate = rate
        self._burst = max(burst, 1.0)
        self._level = self._burst
        self._stamp = now

    def take(self, now: float) -> float:
        """Take one token; returns 0 when allowed, else seconds until one is due."""
        self._level = min(self._burst, self._level + (now - self._stamp) * self._rate)
        self._stamp = now
        if self._level >= 1.0:
            self._level -= 1.0
            return 0.0
        return (1.0 - self._level) / self._rate


class RateLimiter:
    """Buckets by key (a session id or a principal), created on first use."""

    def __init__(self, rate: float, burst: float, max_keys: int = 100_000) -> None:
        self.rate = rate
        self._burst = burst
        self._buckets: dict[str, TokenBucket] = {}
        self._max_keys = max_keys

    @property
    def burst(self) -> float:
        """The bucket size in force."""
        return self._burst

    def configure(self, rate: float, burst: float) -> None:
        """New limits (a reload); every bucket starts full again under them."""
        self.rate = rate
        self._burst = burst
        self._buckets.clear()

    def check(self, key: str, now: float) -> float:
        """0 when the request may go ahead, else the seconds to wait (Retry-After)."""
        if self.rate <= 0:
            return 0.0
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= self._max_keys:
                self._buckets.clear()  # bounded memory beats exactness under a key flood
            bucket = self._buckets[key] = TokenBucket(self.rate, self._burst, now)
        return bucket.take(now)

    def forget(self, key: str) -> None:
        """Drop a key's bucket (its session ended)."""
        self._buckets.pop(key, None)
