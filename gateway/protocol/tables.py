"""Pure bookkeeping the router keeps about client sessions (sans-IO).

Each table answers one question the router must answer synchronously when a
message arrives, and each says which I/O the caller must now perform rather
than performing it:

- ``Subscriptions``: which clients want ``resources/updated`` for a backend
  URI, and whether a (un)subscribe must now go to the backend: the backend
  sees one subscription per URI however many clients hold it, and nobody
  holds one the backend has not accepted.
- ``LogLevels``: which level each client asked for, and the most verbose
  of them, which is what the backend must be set to.
- ``Owners``: which clients have calls in flight to which backend, to find
  the one client that owns a backend's request (sampling, roots...).
"""

from __future__ import annotations

from collections import defaultdict
from enum import Enum
from typing import TYPE_CHECKING, Final, Generic, TypeVar

if TYPE_CHECKING:
    from collections.abc import Container

LOG_LEVELS: Final = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
_RANK: Final = {level: rank for rank, level in enumerate(LOG_LEVELS)}

T = TypeVar("T")


def level_rank(level: object) -> int | None:
    """The severity rank of a level name (debug = 0), or None if unknown."""
    return _RANK.get(level) if isinstance(level, str) else None


class Subscribe(Enum):
    """What the caller of ``Subscriptions.subscribe`` must do next."""

    SEND = "send"
    """Subscribe at the backend, then ``confirm`` or ``abandon``."""
    WAIT = "wait"
    """Another client's subscribe to the backend is in flight: wait for its
    outcome, then ask again."""
    HELD = "held"
    """The backend is subscribed; the client now holds the subscription too."""


class Subscriptions:
    """Reference-counted subscriptions, keyed by (backend, backend URI).

    A client counts as a subscriber only once the backend has accepted the
    subscription: while the first subscribe of a URI is in flight, other
    clients wait for it rather than believe themselves subscribed, and if
    it fails one of them sends its own.
    """

    def __init__(self) -> None:
        self._clients: dict[tuple[str, str], set[str]] = defaultdict(set)
        self._pending: dict[tuple[str, str], str] = {}

    def subscribe(self, backend: str, uri: str, client: str) -> Subscribe:
        """A client asks to subscribe; says whether the backend must be asked first."""
        key = (backend, uri)
        if key in self._pending:
            return Subscribe.WAIT
        holders = self._clients.get(key)
        if holders:
            holders.add(client)
            return Subscribe.HELD
        self._pending[key] = client
        return Subscribe.SEND

    def confirm(self, backend: str, uri: str) -> None:
        """The backend accepted the pending subscribe: its client now holds it."""
        key = (backend, uri)
        client = self._pending.pop(key, None)
        if client is not None:
            self._clients[key].add(client)

    def abandon(self, backend: str, uri: str) -> None:
        """The pending subscribe failed or was cancelled: nobody holds the URI."""
        self._pending.pop((backend, uri), None)

    def unsubscribe(self, backend: str, uri: str, client: str) -> bool:
        """Drop a subscriber; True when the backend must now be unsubscribed."""
        key = (backend, uri)
        holders = self._clients.get(key)
        if not holders or client not in holders:
            return False
        holders.discard(client)
        if holders:
            return False
        del self._clients[key]
        return True

    def drop_client(self, client: str) -> list[tuple[str, str]]:
        """Remove a client everywhere; returns the (backend, uri) to unsubscribe."""
        held = [key for key, holders in self._clients.items() if client in holders]
        return [key for key in held if self.unsubscribe(key[0], key[1], client)]

    def subscribers(self, backend: str, uri: str) -> frozenset[str]:
        """The clients subscribed to a backend URI."""
        return frozenset(self._clients.get((backend, uri), ()))

    def uris_of(self, backend: str) -> list[str]:
        """Every URI of a backend that someone holds (to renew after a restart)."""
        return sorted(uri for (name, uri) in self._clients if name == backend)


class LogLevels:
    """The logging level each client session asked for."""

    def __init__(self) -> None:
        self._levels: dict[str, int] = {}

    def set(self, client: str, level: str) -> None:
        """Record a client's ``logging/setLevel``."""
        rank = level_rank(level)
        if rank is None:
            raise ValueError(f"unknown log level {level!r}")
        self._levels[client] = rank

    def drop_client(self, client: str) -> None:
        """Forget a client that has gone."""
        self._levels.pop(client, None)

    def level_of(self, client: str) -> str | None:
        """The level a client asked for, or None if it never did."""
        rank = self._levels.get(client)
        return None if rank is None else LOG_LEVELS[rank]

    def most_verbose(self) -> str | None:
        """The lowest level any client asked for, or None if none asked."""
        if not self._levels:
            return None
        return LOG_LEVELS[min(self._levels.values())]

    def wants(self, client: str, level: object) -> bool:
        """Whether a client receives a message of this level.

        A client that never asked for a level receives no log messages: a
        gateway fans in many backends, and unrequested logs from all of them
        would be noise.
        """
        asked = self._levels.get(client)
        rank = level_rank(level)
        return asked is not None and rank is not None and rank >= asked


class Owners(Generic[T]):
    """Calls in flight by backend and client, in arrival order."""

    def __init__(self) -> None:
        self._calls: dict[str, dict[str, list[T]]] = defaultdict(dict)

    def add(self, backend: str, client: str, call: T) -> None:
        """A call from ``client`` to ``backend`` started."""
        self._calls[backend].setdefault(client, []).append(call)

    def remove(self, backend: str, client: str, call: T) -> None:
        """That call ended (answered, failed or cancelled)."""
        by_client = self._calls.get(backend)
        if by_client is None:
            return
        calls = by_client.get(client)
        if calls is None:
            return
        if call in calls:
            calls.remove(call)
        if not calls:
            del by_client[client]
        if not by_client:
            del self._calls[backend]

    def sole_owner(self, backend: str, ignore: Container[str] = ()) -> tuple[str, T] | None:
        """The one client with calls in flight to ``backend`` and its latest call.

        None when no client or more than one has calls there: a request
        from the backend then cannot be attributed, and guessing would send
        one user's question to another. Clients in ``ignore`` are not
        candidates (a held modern call already waiting on its question).
        """
        by_client = {
            c: calls for c, calls in self._calls.get(backend, {}).items() if c not in ignore
        }
        if len(by_client) != 1:
            return None
        ((client, calls),) = by_client.items()
        return client, calls[-1]

    def latest(self, backend: str, client: str) -> T | None:
        """The newest call in flight from ``client`` to ``backend``, if any."""
        calls = self._calls.get(backend, {}).get(client)
        return calls[-1] if calls else None

    def count(self) -> int:
        """Calls in flight in total."""
        return sum(len(calls) for by in self._calls.values() for calls in by.values())
