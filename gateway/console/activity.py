"""What the router tells the console about each finished request.

:class:`Activity` satisfies the router's ``RequestObserver``: one call per
host request, in the router's ``finally``, feeding the latency window (calls
that reached a backend) and the recent-errors ring (requests that failed).
Both clocks are injected: the window ages on the monotonic clock, the
errors carry wall-clock times for matching against log lines.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from gateway.console.recent import FailedRequest, RecentErrors, cut
from gateway.console.window import LatencyWindow

if TYPE_CHECKING:
    from collections.abc import Callable


class Activity:
    """The console's record of requests: a latency window and the recent errors.

    Args:
        clock: the monotonic clock (``trio.current_time`` in the gateway).
        wall: the wall clock (``time.time``).
    """

    def __init__(self, clock: Callable[[], float], wall: Callable[[], float] = time.time) -> None:
        self.window = LatencyWindow()
        self.errors = RecentErrors()
        self._clock = clock
        self._wall = wall

    def observe(
        self,
        method: str,
        item: str,
        backend: str,
        outcome: str,
        seconds: float,
        code: int | None,
        message: str,
    ) -> None:
        """One host request finished (the router's ``RequestObserver``)."""
        failed = outcome != "ok"
        if backend:
            self.window.record(backend, seconds, failed, self._clock())
        if failed:
            self.errors.add(
                FailedRequest(
                    at=self._wall(),
                    method=method[:64],
                    item=item[:200],
                    backend=backend,
                    outcome=outcome,
                    code=code,
                    message=cut(message),
                    duration_ms=round(seconds * 1000, 3),
                )
            )

    def filter_decision(
        self, filter_name: str, decision: str, point: str, item: str, backend: str, reason: str
    ) -> None:
        """A guardrail filter changed or stopped a payload (``guardrails.chains`` rule 4).

        It joins the recent errors as ``filter:DECISION`` under the point
        (``requests``, ``results``, ...): a result redacted or withheld is no
        failed request, yet an operator looking for why a host saw less
        than its tool sent must find it here. The reason is the filter's,
        never the payload.
        """
        self.errors.add(
            FailedRequest(
                at=self._wall(),
                method=point,
                item=item[:200],
                backend=backend,
                outcome=f"filter:{decision}",
                code=None,
                message=cut(f"{filter_name}: {reason}"),
                duration_ms=0.0,
            )
        )
