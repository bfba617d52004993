"""The embedded store: memory, plus a SQLite file for what must survive a restart.

Rules:

1. **One process, no races.** Every operation runs to completion without
   an ``await`` in between its read and its write, so on trio's single
   thread each is atomic, as its Redis counterpart is on the server.
2. **Two tables, one code path.** Keys of a durable namespace
   (:data:`~gateway.store.api.DURABLE_NAMESPACES`) live in the SQLite file,
   the rest in a dict; both are a :class:`_Table`, and every operation is
   written once over that seam.
3. **SQLite on the loop.** The writes are a few hundred bytes to a local
   file in WAL mode with ``synchronous=NORMAL`` (tens of microseconds), so
   they run on the event loop rather than in a thread (the gateway runs no
   threads of its own). A store on a slow network file system would stall
   the loop: keep ``store.path`` on a local disk.
4. **Expiry on the injected clock.** An entry past its deadline is absent
   to every read and purged by :meth:`EmbeddedStore.run` once a minute; the
   clock is wall time (deadlines survive a restart), injected for tests.
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final, Protocol

import trio

from gateway.store.api import (
    DURABLE_NAMESPACES,
    StoreHealth,
    StoreState,
    StoreUnavailable,
    namespace_of,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

__all__ = ["PURGE_INTERVAL", "SUBSCRIBER_BUFFER", "EmbeddedStore"]

#: Seconds between sweeps of expired entries (reads never see them anyway).
PURGE_INTERVAL: Final = 60.0
#: Messages a slow subscriber may fall behind before it misses some; a
#: publisher never waits for a subscriber (rule 1 of the api: best effort).
SUBSCRIBER_BUFFER: Final = 64

_Entry = tuple[bytes, float | None]


class _Table(Protocol):
    def read(self, key: str, now: float) -> bytes | None: ...
    def write(self, key: str, value: bytes, expires: float | None) -> None: ...
    def expiry(self, key: str) -> float | None: ...
    def remove(self, key: str) -> bool: ...
    def prefixed(self, prefix: str, now: float, limit: int) -> list[tuple[str, bytes]]: ...
    def purge(self, now: float) -> int: ...


class _MemoryTable:
    """Keys that may die with the process."""

    def __init__(self) -> None:
        self._items: dict[str, _Entry] = {}

    def read(self, key: str, now: float) -> bytes | None:
        entry = self._items.get(key)
        if entry is None:
            return None
        value, expires = entry
        if expires is not None and expires <= now:
            del self._items[key]
            return None
        return value

    def write(self, key: str, value: bytes, expires: float | None) -> None:
        self._items[key] = (value, expires)

    def expiry(self, key: str) -> float | None:
        entry = self._items.get(key)
        return None if entry is None else entry[1]

    def remove(self, key: str) -> bool:
        return self._items.pop(key, None) is not None

    def prefixed(self, prefix: str, now: float, limit: int) -> list[tuple[str, bytes]]:
        found: list[tuple[str, bytes]] = []
        for key in sorted(k for k in self._items if k.startswith(prefix)):
            value = self.read(key, now)
            if value is not None:
                found.append((key, value))
                if len(found) >= limit:
                    break
        return found

    def purge(self, now: float) -> int:
        dead = [k for k, (_, exp) in self._items.items() if exp is not None and exp <= now]
        for key in dead:
            del self._items[key]
        return len(dead)


class _SqliteTable:
    """Keys of the durable namespaces, in one table of the store's file."""

    def __init__(self, path: str) -> None:
        # isolation_level=None: autocommit; each statement is its own
        # transaction, which is all rule 1 needs.
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=True)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS kv "
            "(key TEXT PRIMARY KEY, value BLOB NOT NULL, expires REAL)"
        )

    def close(self) -> None:
        self._db.close()

    def read(self, key: str, now: float) -> bytes | None:
        row = self._db.execute(
            "SELECT value FROM kv WHERE key = ? AND (expires IS NULL OR expires > ?)", (key, now)
        ).fetchone()
        return None if row is None else bytes(row[0])

    def write(self, key: str, value: bytes, expires: float | None) -> None:
        self._db.execute(
            "INSERT INTO kv (key, value, expires) VALUES (?, ?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value, expires = excluded.expires",
            (key, value, expires),
        )

    def expiry(self, key: str) -> float | None:
        row = self._db.execute("SELECT expires FROM kv WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def remove(self, key: str) -> bool:
        return self._db.execute("DELETE FROM kv WHERE key = ?", (key,)).rowcount > 0

    def prefixed(self, prefix: str, now: float, limit: int) -> list[tuple[str, bytes]]:
        # A range on the primary key instead of LIKE: no escaping of % and _.
        rows = self._db.execute(
            "SELECT key, value FROM kv WHERE key >= ? AND key < ? "
            "AND (expires IS NULL OR expires > ?) ORDER BY key LIMIT ?",
            (prefix, prefix + "\U0010ffff", now, limit),
        ).fetchall()
        return [(k, bytes(v)) for k, v in rows]

    def purge(self, now: float) -> int:
        return self._db.execute(
            "DELETE FROM kv WHERE expires IS NOT NULL AND expires <= ?", (now,)
        ).rowcount


class EmbeddedStore:
    """The default store: nothing to install, one gateway (module rules).

    Args:
        path: the SQLite file for the durable namespaces; "" keeps them in
            memory too (a config that came from no file, tests).
        clock: wall time in seconds; injected for tests.
    """

    def __init__(self, path: str = "", *, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self._clock = clock
        self._memory = _MemoryTable()
        self._file: _SqliteTable | None = None
        if path:
            try:
                self._file = _SqliteTable(path)
            except sqlite3.Error as exc:
                raise StoreUnavailable("open", f"{path}: {exc}") from exc
        self._channels: dict[str, set[trio.MemorySendChannel[bytes]]] = {}

    def close(self) -> None:
        """Close the file (the store is unusable afterwards)."""
        if self._file is not None:
            self._file.close()

    def _table(self, key: str) -> _Table:
        if self._file is not None and namespace_of(key) in DURABLE_NAMESPACES:
            return self._file
        return self._memory

    def _deadline(self, ttl: float | None) -> float | None:
        return None if ttl is None else self._clock() + ttl

    async def get(self, key: str) -> bytes | None:
        """See :meth:`gateway.store.api.Store.get`."""
        await trio.lowlevel.checkpoint()
        return self._table(key).read(key, self._clock())

    async def put(self, key: str, value: bytes, *, ttl: float | None = None) -> None:
        """See :meth:`gateway.store.api.Store.put`."""
        await trio.lowlevel.checkpoint()
        self._table(key).write(key, value, self._deadline(ttl))

    async def put_new(self, key: str, value: bytes, *, ttl: float | None = None) -> bool:
        """See :meth:`gateway.store.api.Store.put_new`."""
        await trio.lowlevel.checkpoint()
        table = self._table(key)
        if table.read(key, self._clock()) is not None:
            return False
        table.write(key, value, self._deadline(ttl))
        return True

    async def take(self, key: str) -> bytes | None:
        """See :meth:`gateway.store.api.Store.take`."""
        await trio.lowlevel.checkpoint()
        table = self._table(key)
        value = table.read(key, self._clock())
        if value is not None:
            table.remove(key)
        return value

    async def delete(self, key: str) -> bool:
        """See :meth:`gateway.store.api.Store.delete`."""
        await trio.lowlevel.checkpoint()
        table = self._table(key)
        live = table.read(key, self._clock()) is not None
        table.remove(key)
        return live

    async def swap(
        self, key: str, expected: bytes | None, new: bytes | None, *, ttl: float | None = None
    ) -> bool:
        """See :meth:`gateway.store.api.Store.swap`."""
        await trio.lowlevel.checkpoint()
        table = self._table(key)
        if table.read(key, self._clock()) != expected:
            return False
        if new is None:
            table.remove(key)
        else:
            table.write(key, new, self._deadline(ttl))
        return True

    async def scan(self, prefix: str, *, limit: int = 1000) -> list[tuple[str, bytes]]:
        """See :meth:`gateway.store.api.Store.scan`."""
        await trio.lowlevel.checkpoint()
        now = self._clock()
        found = self._memory.prefixed(prefix, now, limit)
        if self._file is not None:
            found += self._file.prefixed(prefix, now, limit)
            found.sort()
        return found[:limit]

    async def add(self, key: str, amount: int = 1, *, ttl: float | None = None) -> int:
        """See :meth:`gateway.store.api.Store.add`."""
        await trio.lowlevel.checkpoint()
        table = self._table(key)
        now = self._clock()
        current = table.read(key, now)
        if current is None:
            total, expires = amount, self._deadline(ttl)
        else:
            total, expires = int(current) + amount, table.expiry(key)
        table.write(key, b"%d" % total, expires)
        return total

    async def spend(self, key: str, *, rate: float, burst: float, cost: float = 1.0) -> float:
        """See :meth:`gateway.store.api.Store.spend`."""
        await trio.lowlevel.checkpoint()
        table = self._table(key)
        now = self._clock()
        burst = max(burst, cost)
        stored = table.read(key, now)
        if stored is None:
            level, stamp = burst, now
        else:
            level_text, _, stamp_text = stored.partition(b" ")
            level, stamp = float(level_text), float(stamp_text)
        level = min(burst, level + max(0.0, now - stamp) * rate)
        wait = 0.0
        if level >= cost:
            level -= cost
        else:
            wait = (cost - level) / rate if rate > 0 else float("inf")
        # A bucket left alone refills completely: it may expire once full.
        full_in = (burst - level) / rate if rate > 0 else None
        expires = None if full_in is None else now + full_in + 1.0
        table.write(key, b"%r %r" % (level, now), expires)
        return wait

    async def publish(self, channel: str, message: bytes) -> None:
        """See :meth:`gateway.store.api.Store.publish`."""
        await trio.lowlevel.checkpoint()
        for subscriber in list(self._channels.get(channel, ())):
            try:
                subscriber.send_nowait(message)
            except trio.WouldBlock:
                pass  # best effort: a subscriber that fell behind misses this one
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._channels[channel].discard(subscriber)

    @asynccontextmanager
    async def subscribe(self, channel: str) -> AsyncIterator[trio.MemoryReceiveChannel[bytes]]:
        """See :meth:`gateway.store.api.Store.subscribe`."""
        send, receive = trio.open_memory_channel[bytes](SUBSCRIBER_BUFFER)
        self._channels.setdefault(channel, set()).add(send)
        try:
            async with receive:
                yield receive
        finally:
            self._channels[channel].discard(send)
            send.close()

    def health(self) -> StoreHealth:
        """See :meth:`gateway.store.api.Store.health`."""
        return StoreHealth(kind="embedded", state=StoreState.OK, location=self.path or "memory")

    def purge(self) -> int:
        """Drop every expired entry now; returns how many went (rule 4)."""
        now = self._clock()
        dropped = self._memory.purge(now)
        if self._file is not None:
            dropped += self._file.purge(now)
        return dropped

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Purge expired entries once every :data:`PURGE_INTERVAL` (rule 4); never returns."""
        task_status.started()
        while True:
            await trio.sleep(PURGE_INTERVAL)
            self.purge()
