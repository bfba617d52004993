"""Restart delays: exponential backoff with full jitter (sans-IO).

Full jitter (a uniform draw between 0 and the capped exponential) spreads
restarts of many backends that failed together, so they do not come back
in lockstep and fail together again.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delay policy; from a backend's ``restart`` config."""

    initial: float = 0.5
    maximum: float = 60.0
    multiplier: float = 2.0

    def ceiling(self, attempt: int) -> float:
        """The largest delay for the given failed attempt (0-based)."""
        # Large exponents overflow float; the cap is reached long before.
        try:
            return min(self.maximum, self.initial * self.multiplier ** min(attempt, 64))
        except OverflowError:
            return self.maximum

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """A jittered delay in ``[0, ceiling(attempt)]``."""
        draw = (rng or random).random()
        return draw * self.ceiling(attempt)
