"""Admission of calls to one backend: the in-flight limit, the queue, the drain.

Rules:

1. A backend being removed (``accepting`` false) refuses new calls at once;
   those already in flight finish.
2. With ``max_in_flight`` set, at most that many calls run at once and at
   most ``max_pending`` wait for a slot; one more is refused at once with
   ``kind="overloaded"`` rather than queued without bound (robustness B18).
3. ``in_flight`` counts calls holding a slot; ``drained`` returns when it is
   zero, which is what a reload waits for before stopping the backend.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

from gateway.errors import BackendUnavailable

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


class Gate:
    """The call gate of one backend.

    Args:
        backend: the backend's name (for the errors it raises).
        max_in_flight: most calls at once; 0 means no limit.
        max_pending: calls that may wait for a slot when the limit is reached.
    """

    def __init__(self, backend: str, max_in_flight: int, max_pending: int) -> None:
        self._backend = backend
        self._max_in_flight = max_in_flight
        self._max_pending = max_pending
        self._slots = trio.Semaphore(max_in_flight) if max_in_flight else None
        self._waiting = 0
        # False once the backend is being removed (reload, shutdown).
        self.accepting = True
        self.in_flight = 0
        # Set when in_flight drops to 0; made only when ``drained`` waits, so
        # a call does not create and set an Event each time.
        self._idle: trio.Event | None = None

    @asynccontextmanager
    async def admit(self) -> AsyncIterator[None]:
        """Hold the right to run one call for the body of the block (``enter``, ``leave``).

        Raises:
            BackendUnavailable: the backend is being removed, or overloaded.
        """
        await self.enter()
        try:
            yield
        finally:
            self.leave()

    async def enter(self) -> None:
        """Take the right to run one call; ``leave`` gives it back.

        The call path uses this pair in a plain ``try``: a generator context
        manager costs a dozen Python calls a call.

        Raises:
            BackendUnavailable: the backend is being removed, or overloaded.
        """
        if not self.accepting:
            raise BackendUnavailable(self._backend, "being removed from the configuration")
        slots = self._slots
        if slots is not None:
            await self._take_slot(slots)
        self.in_flight += 1

    def leave(self) -> None:
        """Give back what ``enter`` took."""
        self.in_flight -= 1
        if self.in_flight == 0 and self._idle is not None:
            self._idle.set()
            self._idle = None
        if self._slots is not None:
            self._slots.release()

    async def _take_slot(self, slots: trio.Semaphore) -> None:
        """One of ``max_in_flight`` slots; refuse at once past ``max_pending``."""
        try:
            slots.acquire_nowait()
        except trio.WouldBlock:
            # Only a call that really waits counts as waiting: one whose
            # acquire succeeded but has not yet been scheduled again must not
            # make the next caller look overloaded.
            if self._waiting >= self._max_pending:
                raise BackendUnavailable(
                    self._backend,
                    f"overloaded: {self._max_in_flight} calls in flight and "
                    f"{self._waiting} waiting",
                    kind="overloaded",
                ) from None
            self._waiting += 1
            try:
                await slots.acquire()
            finally:
                self._waiting -= 1
        else:
            await trio.lowlevel.cancel_shielded_checkpoint()

    async def drained(self) -> None:
        """Wait until no call is in flight."""
        if self.in_flight == 0:
            await trio.lowlevel.checkpoint()
            return
        if self._idle is None:
            self._idle = trio.Event()
        await self._idle.wait()
