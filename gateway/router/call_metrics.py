"""The metrics the router records, and a no-op stand-in when none are wanted.

``observability.Metrics`` satisfies ``RouterMetrics`` as it is; a router built
without metrics gets ``NO_METRICS``, so the code that records never asks
whether there is anywhere to record to.
"""

from __future__ import annotations

from typing import Final, Protocol


class Counter(Protocol):
    """One counter series (a prometheus ``Counter``, or a labelled child of one)."""

    def inc(self) -> None:
        """Add one."""
        ...


class LabelledCounter(Protocol):
    """A counter family: ``labels(...)`` picks the series."""

    def labels(self, **labels: str) -> Counter:
        """The series with these label values."""
        ...


class RouterMetrics(Protocol):
    """What the router counts and times (names as on ``observability.Metrics``)."""

    @property
    def timeouts(self) -> LabelledCounter:
        """Forwarded calls that timed out, by backend."""
        ...

    @property
    def cancellations(self) -> LabelledCounter:
        """Calls ended early, by direction (client or timeout)."""
        ...

    @property
    def invalid_cursors(self) -> Counter:
        """List requests with a cursor we did not issue."""
        ...

    @property
    def pages_served(self) -> LabelledCounter:
        """List pages answered, by kind."""
        ...

    @property
    def internal_errors(self) -> LabelledCounter:
        """Unexpected exceptions on a request path, by component."""
        ...

    def observe_request(self, method: str, outcome: str, seconds: float, backend: str = "") -> None:
        """Count and time one routed request."""
        ...

    def count_tool_call(self, backend: str, tool: str) -> None:
        """Count one tools/call (tool labels are capped by the implementation)."""
        ...

    def count_client_request(self, version: str) -> None:
        """Count one routed request by the era and revision the host spoke."""
        ...

    def count_tool_search(self, profile: str, hits: int | None) -> None:
        """Count one search-mode search (None: its arguments were refused)."""
        ...

    def count_input_required(self, origin: str) -> None:
        """Count one ``input_required`` round (``bridge`` or ``backend``)."""
        ...

    def count_retry(self) -> None:
        """Count one retry carrying ``requestState``."""
        ...

    def count_state_rejection(self, reason: str) -> None:
        """Count one refused ``requestState``, by reason."""
        ...

    def count_policy_denial(self, reason: str) -> None:
        """Count one access-policy refusal, by what was refused."""
        ...


class _NoCounter:
    def labels(self, **labels: str) -> _NoCounter:
        return self

    def inc(self) -> None:
        pass


class NoMetrics:
    """Records nothing; what a router built without metrics uses."""

    timeouts: Final = _NoCounter()
    cancellations: Final = _NoCounter()
    invalid_cursors: Final = _NoCounter()
    pages_served: Final = _NoCounter()
    internal_errors: Final = _NoCounter()

    def observe_request(self, method: str, outcome: str, seconds: float, backend: str = "") -> None:
        """Record nothing."""

    def count_tool_call(self, backend: str, tool: str) -> None:
        """Record nothing."""

    def count_client_request(self, version: str) -> None:
        """Record nothing."""

    def count_tool_search(self, profile: str, hits: int | None) -> None:
        """Record nothing."""

    def count_input_required(self, origin: str) -> None:
        """Record nothing."""

    def count_retry(self) -> None:
        """Record nothing."""

    def count_state_rejection(self, reason: str) -> None:
        """Record nothing."""

    def count_policy_denial(self, reason: str) -> None:
        """Record nothing."""


NO_METRICS: Final = NoMetrics()


class RequestObserver(Protocol):
    """Told of every finished host request (the operator console's ``Activity``)."""

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
        """One request finished: its item's public name, never its arguments."""
        ...
