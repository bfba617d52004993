"""Pure bookkeeping the router keeps about client sessions (sans-IO).

Each table answers one question the router must answer synchronously when a
message arrives, and each says which I/O the caller must now perform rather
than performing it:

- ``Subscriptions``: which clients want ``resources/updated`` for a backend
  URI, and whether a (un)subscribe must now go to the backend: the backend
  sees one subscription per URI however many clients hold it.
- ``LogLevels``: which level each client asked for, and the most verbose
  of them, which is what the backend must be set to.
- ``Owners``: which clients have calls in flight to which backend, to find
  the one client that owns a backend's request (sampling, roots...).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Final, Generic, TypeVar

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


class Subscriptions:
    """Reference-counted subscriptions, keyed by (backend, backend URI)."""

    def __init__(self) -> None:
        self._clients: dict[tuple[str, str], set[str]] = defaultdict(set)

    def subscribe(self, backend: str, uri: str, client: str) -> bool:
        """Add a subscriber; True when the backend must now be subscribed."""
        holders = self._clients[(backend, uri)]
        first = not holders
        holders.add(client)
        return first

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

    def sole_owner(self, backend: str) -> tuple[str, T] | None:
        """The one client with calls in flight to ``backend`` and its latest call.

        None when no client or more than one has calls there: a request
        from the backend then cannot be attributed, and guessing would send
        one user's question to another.
        """
        by_client = self._calls.get(backend, {})
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
