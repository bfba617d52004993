"""The request clock of one forwarded call, stopped while a person answers.

Rules:

1. A forwarded call's deadline is ``timeouts.request`` from its start (or
   from its last progress, with ``reset_on_progress``), never past
   ``timeouts.max_total`` from its start.
2. While the backend waits on the host for input (sampling, elicitation,
   roots, an MRTR round), the request clock stands still: what a person
   takes to answer is bounded by ``timeouts.input`` where the question is
   asked (``router/to_clients``, ``router/stateless/held_calls``), not here.
   ``max_total`` still caps the whole call.
3. When the last open question is answered, the call has what was left of
   its request time when the first was asked.

``Backend`` owns the cancel scope and binds it here; the router, which
knows which call a backend's question belongs to, marks the wait. Sans-IO:
the scope is anything with a ``deadline`` and the time is read from the
clock given at construction (trio's, in the gateway), so the router may
import this module beside ``backends.state`` and nothing else of the
backends.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator


class Deadline(Protocol):
    """What the clock moves: a cancel scope's deadline (``trio.CancelScope`` has one)."""

    deadline: float


class CallClock:
    """The deadline of one forwarded call (rules 1-3)."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self._scope: Deadline | None = None
        self._request = math.inf
        self._hard = math.inf
        self._asking = 0
        self._left = 0.0

    def bind(self, scope: Deadline, request: float, hard_deadline: float) -> None:
        """The call started: ``scope`` ends it ``request`` seconds from now (rule 1)."""
        scope.deadline = self.start(request, hard_deadline, self._now())
        self._scope = scope

    def start(self, request: float, hard_deadline: float, now: float) -> float:
        """The call starts at ``now``: the deadline its scope gets (rule 1); ``attach`` that scope.

        The caller opens its cancel scope with this deadline: a scope's
        deadline given at construction costs nothing, a later change is a
        context manager in trio. ``now`` is the caller's own reading of the
        clock (it has just read it for ``hard_deadline``): a second reading
        is four calls through trio.
        """
        self._scope = None
        self._request = request
        self._hard = hard_deadline
        self._asking = 0
        return min(now + request, hard_deadline)

    def attach(self, scope: Deadline) -> None:
        """The scope opened with ``start``'s deadline: the clock moves it from now on."""
        self._scope = scope

    @property
    def asking(self) -> bool:
        """Whether the backend waits on the host for input now."""
        return self._asking > 0

    def progressed(self) -> None:
        """A progress notification restarted the request clock (unless stopped)."""
        if self._scope is not None and not self._asking:
            self._scope.deadline = min(self._now() + self._request, self._hard)

    @contextmanager
    def waiting_for_input(self) -> Iterator[None]:
        """Stop the request clock for the body of the block (rules 2 and 3)."""
        scope = self._scope
        if scope is None:
            yield
            return
        if not self._asking:
            self._left = max(scope.deadline - self._now(), 0.0)
            scope.deadline = self._hard
        self._asking += 1
        try:
            yield
        finally:
            self._asking -= 1
            if not self._asking:
                scope.deadline = min(self._now() + self._left, self._hard)
