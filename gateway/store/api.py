"""What every state store offers: a small key-value interface with expiry and atomic steps.

Rules:

1. **Small on purpose.** Tenants (tasks, pins and approvals, consent tokens,
   rate-limit buckets, console logins, cache entries) build on nine
   operations; each maps onto one Redis command or one Lua script, so two
   replicas never race through a read-modify-write in Python.
2. **Bytes in, bytes out.** Values are opaque; a tenant encodes its own
   records (msgspec) and owns their schema. Keys are ``namespace:rest``
   strings; the namespace decides whether the embedded store keeps a key in
   its file (:data:`DURABLE_NAMESPACES`) or in memory.
3. **Expiry is the store's.** A ``ttl`` in seconds is enforced by the store
   (Redis's own expiry; the embedded store's clock), never by a tenant
   comparing timestamps.
4. **Failures are typed.** An operation that the store could not complete
   within ``store.timeout`` raises :class:`StoreUnavailable`; nothing waits
   on the store longer than that. A store's :meth:`Store.health` says how it
   is doing, for ``/readyz`` and the console.
5. **No backend traffic.** The store holds the gateway's own state only.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Final, Protocol

import msgspec

from gateway.errors import GatewayError

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    import trio

__all__ = [
    "DURABLE_NAMESPACES",
    "Store",
    "StoreHealth",
    "StoreState",
    "StoreUnavailable",
    "namespace_of",
]

#: Namespaces whose keys outlive a restart of a single gateway (the embedded
#: store keeps them in its SQLite file; Redis keeps every key alike). Tasks,
#: pins and consent are what a person would lose; the rest may start afresh.
DURABLE_NAMESPACES: Final = frozenset({"tasks", "tasks-native", "pins", "consent", "console"})


class StoreUnavailable(GatewayError):
    """The store did not complete an operation in time, or refused it.

    Attributes:
        operation: what was asked (``get``, ``put``, ...).
        reason: what went wrong, for logs and ``/readyz`` (never a value).
    """

    def __init__(self, operation: str, reason: str) -> None:
        self.operation = operation
        self.reason = reason
        super().__init__(f"state store {operation}: {reason}")


class StoreState(enum.Enum):
    """How a store is doing."""

    OK = "ok"
    #: Unreachable or failing: operations raise StoreUnavailable until it answers again.
    DOWN = "down"


class StoreHealth(msgspec.Struct, frozen=True, kw_only=True):
    """A store's health as ``/readyz`` and the console show it.

    Attributes:
        kind: ``embedded`` or ``redis``.
        state: ``ok`` or ``down``.
        location: the SQLite file or the server's address (never a password).
        detail: the last failure's reason, when down.
        reconnects: how often the connection was re-established.
    """

    kind: str
    state: StoreState
    location: str
    detail: str = ""
    reconnects: int = 0


def namespace_of(key: str) -> str:
    """The namespace of ``key``: the part before its first colon.

    Args:
        key: a store key, ``namespace:rest``.

    Returns:
        The namespace ("" for a key without a colon).
    """
    head, sep, _ = key.partition(":")
    return head if sep else ""


class Store(Protocol):
    """The state store every tenant uses (rule 1)."""

    async def get(self, key: str) -> bytes | None:
        """The value at ``key``, or None when absent or expired."""
        ...

    async def put(self, key: str, value: bytes, *, ttl: float | None = None) -> None:
        """Set ``key``; ``ttl`` seconds from now it is gone (None: never)."""
        ...

    async def put_new(self, key: str, value: bytes, *, ttl: float | None = None) -> bool:
        """Set ``key`` only if absent; True when this call set it."""
        ...

    async def take(self, key: str) -> bytes | None:
        """Read and delete ``key`` in one step (single-use values); None when absent."""
        ...

    async def delete(self, key: str) -> bool:
        """Delete ``key``; True when it existed."""
        ...

    async def swap(
        self, key: str, expected: bytes | None, new: bytes | None, *, ttl: float | None = None
    ) -> bool:
        """Compare and set: replace the value only if it is ``expected``.

        ``expected`` None means "only if absent"; ``new`` None deletes. True
        when the swap happened; a False tells the caller another replica won.
        """
        ...

    async def scan(self, prefix: str, *, limit: int = 1000) -> list[tuple[str, bytes]]:
        """Up to ``limit`` live ``(key, value)`` pairs whose key starts with ``prefix``."""
        ...

    async def add(self, key: str, amount: int = 1, *, ttl: float | None = None) -> int:
        """Add to the integer at ``key`` (0 when absent) and return the sum.

        ``ttl`` is set when the key is created and left alone afterwards, so a
        counter of a fixed window expires with its window.
        """
        ...

    async def spend(self, key: str, *, rate: float, burst: float, cost: float = 1.0) -> float:
        """Take ``cost`` tokens from the bucket at ``key`` (created full).

        The bucket refills at ``rate`` tokens a second up to ``burst``; the
        check and the take are one atomic step on the store's clock, so
        replicas sharing the store share the budget.

        Returns:
            0 when admitted, else the seconds until enough tokens are due.
        """
        ...

    async def publish(self, channel: str, message: bytes) -> None:
        """Tell every subscriber on every replica (best effort; at most once)."""
        ...

    def subscribe(
        self, channel: str
    ) -> AbstractAsyncContextManager[trio.MemoryReceiveChannel[bytes]]:
        """Messages published on ``channel`` while the context is open."""
        ...

    def health(self) -> StoreHealth:
        """How the store is doing now (rule 4)."""
        ...
