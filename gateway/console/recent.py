"""The last failed host requests, for the console's errors page (sans-IO).

A bounded ring (``CAPACITY``, oldest dropped): recording is one append of a
small frozen record, cheap enough for the router's ``finally``. Messages are
cut to ``MESSAGE_CHARS``; no argument value is ever kept, only the item's
public name.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Iterator

CAPACITY: Final = 500
MESSAGE_CHARS: Final = 300


@dataclass(frozen=True, slots=True)
class FailedRequest:
    """One host request that did not succeed.

    Attributes:
        at: when it finished, Unix seconds (wall clock: matched against logs).
        method: the JSON-RPC method.
        item: the tool, prompt or resource it named ("" when none).
        backend: the backend it went to ("" when it reached none).
        outcome: ``error``, ``unavailable``, ``timeout`` or ``cancelled``.
        code: the JSON-RPC error code (None when cancelled).
        message: the error message, cut to ``MESSAGE_CHARS``.
        duration_ms: how long it took.
    """

    at: float
    method: str
    item: str
    backend: str
    outcome: str
    code: int | None
    message: str
    duration_ms: float

    def matches(self, text: str) -> bool:
        """Whether ``text`` (lowercase) occurs in any column."""
        return any(
            text in field.lower()
            for field in (
                self.method,
                self.item,
                self.backend,
                self.outcome,
                self.message,
                "" if self.code is None else str(self.code),
            )
        )


class RecentErrors:
    """The last ``capacity`` failed requests, newest last."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self._ring: deque[FailedRequest] = deque(maxlen=capacity)
        self.total = 0  # ever recorded, so a page can say how many were dropped

    def __len__(self) -> int:
        return len(self._ring)

    def __iter__(self) -> Iterator[FailedRequest]:
        return iter(self._ring)

    def add(self, failure: FailedRequest) -> None:
        """Keep one failure (the oldest goes when full)."""
        self._ring.append(failure)
        self.total += 1

    def newest(
        self, text: str = "", backend: str = "", limit: int = CAPACITY
    ) -> list[FailedRequest]:
        """Newest first, keeping those matching ``text`` and ``backend`` (empty: any)."""
        wanted = text.strip().lower()
        found: list[FailedRequest] = []
        for failure in reversed(self._ring):
            if backend and failure.backend != backend:
                continue
            if wanted and not failure.matches(wanted):
                continue
            found.append(failure)
            if len(found) >= limit:
                break
        return found


def cut(message: str) -> str:
    """A message shortened to ``MESSAGE_CHARS`` (with an ellipsis when cut)."""
    return message if len(message) <= MESSAGE_CHARS else message[: MESSAGE_CHARS - 1] + "…"
