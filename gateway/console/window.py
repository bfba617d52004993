"""Latency and error rate per backend over the last five minutes (sans-IO).

Rules:

1. Recording is O(1) and allocates nothing after a backend's first call: a
   call lands in the time slot of ``now`` and in one latency bin of that
   slot (a bisect over fixed bounds).
2. Slots are ``SLOT_SECONDS`` wide and there are ``SLOTS`` of them; a slot
   older than the window is reset when its ring position is reused, and
   ignored when read, so an idle backend's old calls age out without a
   timer.
3. Percentiles are read from the merged bins: the answer is the upper
   bound of the bin the rank falls in, so it is never under the true value
   and at most ``GROWTH`` times over it (25 %).

Times are the caller's (``now`` in seconds on any monotonic clock): tests
pass explicit timestamps, the gateway passes ``trio.current_time()``.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Final

SLOT_SECONDS: Final = 10.0
SLOTS: Final = 30  # 30 x 10 s = the five minutes the overview shows
GROWTH: Final = 1.25
_SMALLEST: Final = 0.0001  # 0.1 ms
_LARGEST: Final = 600.0  # the longest request timeout we allow, roughly

#: Upper bounds of the latency bins, in seconds; the last bin is unbounded.
BOUNDS: Final[tuple[float, ...]] = tuple(
    _SMALLEST * GROWTH**i
    for i in range(math.ceil(math.log(_LARGEST / _SMALLEST) / math.log(GROWTH)) + 1)
)


@dataclass(frozen=True, slots=True)
class WindowStats:
    """One backend's figures over the window.

    Attributes:
        calls: requests finished in the window.
        errors: of those, the ones that failed.
        p50: median latency in seconds (a bin's upper bound; rule 3).
        p99: 99th percentile latency in seconds.
    """

    calls: int
    errors: int
    p50: float
    p99: float

    @property
    def error_rate(self) -> float:
        """Failed over finished, 0..1."""
        return self.errors / self.calls if self.calls else 0.0


class _Slot:
    __slots__ = ("bins", "calls", "epoch", "errors")

    def __init__(self) -> None:
        self.epoch = -1
        self.calls = 0
        self.errors = 0
        self.bins = [0] * (len(BOUNDS) + 1)

    def reset(self, epoch: int) -> None:
        self.epoch = epoch
        self.calls = 0
        self.errors = 0
        for i in range(len(self.bins)):
            self.bins[i] = 0


class LatencyWindow:
    """The last ``SLOTS * SLOT_SECONDS`` seconds of calls, per backend."""

    def __init__(self) -> None:
        self._rings: dict[str, list[_Slot]] = {}

    def record(self, backend: str, seconds: float, failed: bool, now: float) -> None:
        """Count one finished call to ``backend`` that took ``seconds``."""
        ring = self._rings.get(backend)
        if ring is None:
            ring = self._rings[backend] = [_Slot() for _ in range(SLOTS)]
        epoch = int(now // SLOT_SECONDS)
        slot = ring[epoch % SLOTS]
        if slot.epoch != epoch:
            slot.reset(epoch)
        slot.calls += 1
        if failed:
            slot.errors += 1
        slot.bins[bisect.bisect_left(BOUNDS, seconds)] += 1

    def stats(self, backend: str, now: float) -> WindowStats | None:
        """The backend's figures over the window ending at ``now``; None without calls."""
        ring = self._rings.get(backend)
        if ring is None:
            return None
        newest = int(now // SLOT_SECONDS)
        live = [s for s in ring if newest - SLOTS < s.epoch <= newest]
        calls = sum(s.calls for s in live)
        if not calls:
            return None
        merged = [sum(column) for column in zip(*(s.bins for s in live), strict=True)]
        return WindowStats(
            calls=calls,
            errors=sum(s.errors for s in live),
            p50=_percentile(merged, calls, 0.50),
            p99=_percentile(merged, calls, 0.99),
        )

    def forget(self, backend: str) -> None:
        """Drop a backend's figures (it left the config)."""
        self._rings.pop(backend, None)


def _percentile(bins: list[int], total: int, fraction: float) -> float:
    rank = max(1, math.ceil(total * fraction))
    seen = 0
    for index, count in enumerate(bins):
        seen += count
        if seen >= rank:
            return BOUNDS[index] if index < len(BOUNDS) else math.inf
    return math.inf  # pragma: no cover - the counts add up to total
