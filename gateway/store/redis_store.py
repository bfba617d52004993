"""The shared store: one Valkey or Redis server that every replica uses.

Rules:

1. **coredis, on anyio, under trio.** coredis is fully typed, maintained,
   speaks RESP3, and runs its connections in anyio task groups, so it lives
   inside the gateway's nurseries with no thread (redis-py's asyncio client
   would need an asyncio loop in a thread). Its client is entered by
   :func:`open_redis_store`'s owning task and left by the same task.
2. **Atomic on the server.** Every operation that reads and then writes is
   one command (``SET NX``, ``GETDEL``) or one Lua script (:data:`SWAP`,
   :data:`ADD`, :data:`SPEND`), so replicas never race; the token bucket
   reads the server's ``TIME``, not a replica's clock.
3. **Bounded waits.** Each operation runs under ``store.timeout``; a
   timeout, a refused connection or a server error raises
   :class:`~gateway.store.api.StoreUnavailable` and marks the store down
   until an operation succeeds again (counted as a reconnect).
4. **Keys carry the prefix**, channels too; nothing outside the prefix is
   ever read, written or scanned.
"""

from __future__ import annotations

import contextlib
import math
import ssl
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import anyio
import coredis
import coredis.exceptions
import trio

from gateway.store.api import StoreHealth, StoreState, StoreUnavailable

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from gateway.config import StoreConfig

__all__ = ["ADD", "SPEND", "SWAP", "RedisStore", "open_redis_store", "redis_location"]

#: Compare and set: ARGV[1] is "1" when a value is expected (ARGV[2]), ARGV[3]
#: "1" when a new value (ARGV[4]) is set with ARGV[5] ms of life ("0": none).
SWAP: Final = """
local current = redis.call('GET', KEYS[1])
if ARGV[1] == '1' then
  if current ~= ARGV[2] then return 0 end
elseif current then
  return 0
end
if ARGV[3] == '1' then
  if ARGV[5] ~= '0' then
    redis.call('SET', KEYS[1], ARGV[4], 'PX', ARGV[5])
  else
    redis.call('SET', KEYS[1], ARGV[4])
  end
else
  redis.call('DEL', KEYS[1])
end
return 1
"""

#: INCRBY that sets the expiry only when it created the key.
ADD: Final = """
local total = redis.call('INCRBY', KEYS[1], ARGV[1])
if total == tonumber(ARGV[1]) and ARGV[2] ~= '0' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return total
"""

#: A token bucket on the server's clock: ARGV rate, burst, cost. Returns the
#: wait in microseconds as an integer (Lua numbers reach Redis as integers).
SPEND: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local rate = tonumber(ARGV[1])
local burst = math.max(tonumber(ARGV[2]), tonumber(ARGV[3]))
local cost = tonumber(ARGV[3])
local level = burst
local stamp = now
local stored = redis.call('HMGET', KEYS[1], 'level', 'stamp')
if stored[1] then
  level = tonumber(stored[1])
  stamp = tonumber(stored[2])
end
level = math.min(burst, level + math.max(0, now - stamp) * rate)
local wait = 0
if level >= cost then
  level = level - cost
elseif rate > 0 then
  wait = (cost - level) / rate
else
  wait = -1
end
redis.call('HSET', KEYS[1], 'level', tostring(level), 'stamp', tostring(now))
if rate > 0 then
  redis.call('PEXPIRE', KEYS[1], math.ceil(((burst - level) / rate + 1) * 1000))
end
return math.ceil(wait * 1000000)
"""

_FAILURES: Final = (
    coredis.exceptions.RedisError,
    OSError,
    trio.TooSlowError,
    TimeoutError,
)
#: What a subscriber sees when the server closed its subscription's connection.
_ENDED: Final = (trio.EndOfChannel, trio.BrokenResourceError)


def redis_location(url: str) -> str:
    """The server's address from ``url``, without credentials (for health and logs).

    Args:
        url: ``redis://[user:password@]host:port/db``.

    Returns:
        ``host:port/db``.
    """
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    return f"{host}:{parts.port or 6379}{parts.path or '/0'}"


def _ms(ttl: float | None) -> int:
    return 0 if ttl is None else max(1, math.ceil(ttl * 1000))


class RedisStore:
    """The store on a shared server (module rules); made by :func:`open_redis_store`.

    Args:
        client: an entered coredis client.
        prefix: put in front of every key and channel.
        timeout: seconds an operation may take.
        location: the server's address for health (no password).
    """

    def __init__(
        self, client: coredis.Redis[bytes], *, prefix: str, timeout: float, location: str
    ) -> None:
        self._client = client
        self._prefix = prefix
        self._timeout = timeout
        self._location = location
        self._swap = client.register_script(SWAP)
        self._add = client.register_script(ADD)
        self._spend = client.register_script(SPEND)
        self._down_reason = ""
        self._reconnects = 0

    async def _run(self, operation: str, call: Callable[[], Awaitable[Any]]) -> Any:
        try:
            with trio.fail_after(self._timeout):
                result = await call()
        except _FAILURES as exc:
            reason = "timed out" if isinstance(exc, trio.TooSlowError) else type(exc).__name__
            if str(exc) and not isinstance(exc, trio.TooSlowError):
                reason = f"{reason}: {exc}"
            self._down_reason = reason
            raise StoreUnavailable(operation, reason) from exc
        if self._down_reason:
            self._down_reason = ""
            self._reconnects += 1
        return result

    def _key(self, key: str) -> str:
        return self._prefix + key

    async def get(self, key: str) -> bytes | None:
        """See :meth:`gateway.store.api.Store.get`."""
        value = await self._run("get", lambda: self._client.get(self._key(key)))
        return None if value is None else bytes(value)

    async def put(self, key: str, value: bytes, *, ttl: float | None = None) -> None:
        """See :meth:`gateway.store.api.Store.put`."""
        if ttl is None:
            await self._run("put", lambda: self._client.set(self._key(key), value))
        else:
            await self._run("put", lambda: self._client.set(self._key(key), value, px=_ms(ttl)))

    async def put_new(self, key: str, value: bytes, *, ttl: float | None = None) -> bool:
        """See :meth:`gateway.store.api.Store.put_new`."""
        nx: Final = coredis.PureToken.NX
        if ttl is None:
            done = await self._run(
                "put_new", lambda: self._client.set(self._key(key), value, condition=nx)
            )
        else:
            done = await self._run(
                "put_new",
                lambda: self._client.set(self._key(key), value, condition=nx, px=_ms(ttl)),
            )
        return bool(done)

    async def take(self, key: str) -> bytes | None:
        """See :meth:`gateway.store.api.Store.take`."""
        value = await self._run("take", lambda: self._client.getdel(self._key(key)))
        return None if value is None else bytes(value)

    async def delete(self, key: str) -> bool:
        """See :meth:`gateway.store.api.Store.delete`."""
        count = await self._run("delete", lambda: self._client.delete([self._key(key)]))
        return bool(count)

    async def swap(
        self, key: str, expected: bytes | None, new: bytes | None, *, ttl: float | None = None
    ) -> bool:
        """See :meth:`gateway.store.api.Store.swap`."""
        args: list[bytes | str | int] = [
            "1" if expected is not None else "0",
            expected if expected is not None else b"",
            "1" if new is not None else "0",
            new if new is not None else b"",
            _ms(ttl),
        ]
        done = await self._run("swap", lambda: self._swap(keys=[self._key(key)], args=args))
        return bool(done)

    async def scan(self, prefix: str, *, limit: int = 1000) -> list[tuple[str, bytes]]:
        """See :meth:`gateway.store.api.Store.scan`."""
        pattern = _glob_escape(self._key(prefix)) + "*"

        async def walk() -> list[tuple[str, bytes]]:
            """SCAN the prefix, then MGET in chunks: one bounded operation."""
            keys = sorted([key async for key in self._client.scan_iter(match=pattern, count=500)])
            found: list[tuple[str, bytes]] = []
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                values = await self._client.mget(chunk)
                for raw, value in zip(chunk, values, strict=True):
                    if value is not None:
                        name = raw.decode()
                        found.append((name[len(self._prefix) :], bytes(value)))
                        if len(found) >= limit:
                            return found
            return found

        result: list[tuple[str, bytes]] = await self._run("scan", walk)
        return result

    async def add(self, key: str, amount: int = 1, *, ttl: float | None = None) -> int:
        """See :meth:`gateway.store.api.Store.add`."""
        total = await self._run(
            "add", lambda: self._add(keys=[self._key(key)], args=[amount, _ms(ttl)])
        )
        return int(total)

    async def spend(self, key: str, *, rate: float, burst: float, cost: float = 1.0) -> float:
        """See :meth:`gateway.store.api.Store.spend`."""
        micros = await self._run(
            "spend",
            lambda: self._spend(keys=[self._key(key)], args=[repr(rate), repr(burst), repr(cost)]),
        )
        micros = int(micros)
        return float("inf") if micros < 0 else micros / 1_000_000

    async def publish(self, channel: str, message: bytes) -> None:
        """See :meth:`gateway.store.api.Store.publish`."""
        await self._run("publish", lambda: self._client.publish(self._key(channel), message))

    @asynccontextmanager
    async def subscribe(self, channel: str) -> AsyncIterator[trio.MemoryReceiveChannel[bytes]]:
        """See :meth:`gateway.store.api.Store.subscribe`."""
        # coredis's pub/sub connects without a bound and retries a server
        # that is gone: one ping under store.timeout first, so a subscriber
        # hears StoreUnavailable at once and retries on its own schedule.
        await self._run("subscribe", lambda: self._client.ping())
        send, receive = trio.open_memory_channel[bytes](64)
        name = self._key(channel)
        try:
            try:
                async with (
                    self._client.pubsub(channels=[name]) as pubsub,
                    trio.open_nursery() as nursery,
                ):

                    async def pump() -> None:
                        """Move the server's messages into the memory channel."""
                        async with send:
                            async for message in pubsub:
                                if message["type"] == "message":
                                    data = message["data"]
                                    payload = (
                                        data if isinstance(data, bytes) else str(data).encode()
                                    )
                                    # best effort, as the embedded store
                                    with contextlib.suppress(trio.WouldBlock):
                                        send.send_nowait(payload)

                    nursery.start_soon(pump)
                    try:
                        async with receive:
                            yield receive
                    finally:
                        nursery.cancel_scope.cancel()
            except _FAILURES as exc:
                raise StoreUnavailable("subscribe", type(exc).__name__) from exc
        except BaseExceptionGroup as group:
            # coredis runs pub/sub in anyio task groups, so its failures come
            # grouped. A connection refused or lost while subscribing is the
            # store failing: one StoreUnavailable, which every subscriber
            # retries (never a crash of the nursery that holds the client).
            # Its pubsub task, cancelled with its connection, may still send
            # UNSUBSCRIBE on it while it closes (ClosedResourceError): the
            # subscription is over either way. A cancellation goes on as it came.
            # A server that closes the connection (a restart) ends the pump
            # quietly: the subscriber's receive then sees the channel's end,
            # which is the store failing too.
            _closed, rest = group.split(anyio.ClosedResourceError)
            ended, rest = (None, None) if rest is None else rest.split(_ENDED)
            failed, rest = (None, None) if rest is None else rest.split(_FAILURES)
            if rest is not None:
                raise rest from None
            if failed is not None:
                first = failed.exceptions[0]
                while isinstance(first, BaseExceptionGroup):
                    first = first.exceptions[0]
                raise StoreUnavailable("subscribe", type(first).__name__) from group
            if ended is not None:
                raise StoreUnavailable("subscribe", "the server ended the subscription") from group

    def health(self) -> StoreHealth:
        """See :meth:`gateway.store.api.Store.health`."""
        return StoreHealth(
            kind="redis",
            state=StoreState.DOWN if self._down_reason else StoreState.OK,
            location=self._location,
            detail=self._down_reason,
            reconnects=self._reconnects,
        )

    async def ping(self) -> None:
        """One round trip; raises StoreUnavailable (and marks the store down) on failure."""
        await self._run("ping", self._client.ping)

    async def run(
        self,
        *,
        interval: float = 5.0,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Ping every ``interval`` seconds so health is current without traffic; never returns."""
        task_status.started()
        while True:
            await trio.sleep(interval)
            with contextlib.suppress(StoreUnavailable):  # health() says so; next ping retries
                await self.ping()


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _password(config: StoreConfig) -> str | None:
    if config.password_file:
        try:
            with open(config.password_file, encoding="utf-8") as handle:
                return handle.read().rstrip("\n")
        except OSError as exc:
            raise StoreUnavailable("open", f"password_file: {exc.strerror}") from exc
    return config.password or None


@asynccontextmanager
async def open_redis_store(config: StoreConfig) -> AsyncIterator[RedisStore]:
    """Connect to ``config.url`` and yield the store; the connection closes on exit.

    A server that is down at start is not fatal: the store starts down and
    recovers when the server answers (rule 3).

    Args:
        config: the ``store:`` block, with ``url`` set.

    Yields:
        The store.
    """
    parts = urlsplit(config.url)
    use_tls = config.tls or parts.scheme in ("rediss", "valkeys")
    context: ssl.SSLContext | None = None
    if use_tls:
        context = ssl.create_default_context(cafile=config.ca_file or None)
    db = int((parts.path or "/0").lstrip("/") or 0)
    client: coredis.Redis[bytes] = coredis.Redis(
        host=parts.hostname or "localhost",
        port=parts.port or 6379,
        db=db,
        username=config.username or parts.username or None,
        password=_password(config) or parts.password or None,
        ssl=use_tls,
        ssl_context=context,
        connect_timeout=config.timeout,
        stream_timeout=config.timeout,
        decode_responses=False,
        verify_version=False,
    )
    async with client:
        yield RedisStore(
            client,
            prefix=config.key_prefix,
            timeout=config.timeout,
            location=redis_location(config.url),
        )
