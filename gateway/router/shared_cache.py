"""The response cache's shared tier: answers kept in the state store for every replica.

Rules:

1. **Opt-in, behind the local tier.** With ``cache.shared: true`` (which
   needs ``store.url``) an answer the local cache keeps is also written to
   the store, and a local miss asks the store before the backend; a store
   hit fills the local cache and is served. Off, the router holds no
   ``SharedCache`` and its path pays nothing for it.
2. **The same key and scope.** A store key is ``cache:r:`` and the SHA-256
   of (backend, generation, request key, principal): the request key holds
   what ``router.response_cache`` rule 6 holds (method, params, the host's
   protocol version). A ``private`` answer's principal is part of the
   digest (never the principal or a token in clear) and ``public`` ones
   have none, so a lookup finds only the caller's own private answers.
   Nothing without a principal is kept private (the local tier refuses
   it first, and only what it keeps is written).
3. **Never past the deadline.** The record carries the wall-clock instant
   it expires and the store key expires with it (the store's ttl is the
   entry's time left); a hit fills the local tier with the time left, so a
   modern host's ``ttlMs`` is still the time left (``response_cache`` rule
   7). Replicas' wall clocks are assumed to agree to well within a ttl.
4. **Invalidation by generation.** Each backend has a generation in the
   store (``cache:g:<backend>``), folded into its entries' keys. Whatever
   drops entries on one replica (``resources/updated``, a ``list_changed``,
   the backend down or up, a reload) bumps it with one atomic ``add``: the
   store's old entries are unreachable from then on, on every replica, and
   expire by their ttl. Drops are per backend here (a URI's update drops
   the backend's shared answers), which costs misses, never a wrong
   answer. Until the bump is in the store, the replica that dropped asks
   the store nothing for that backend and writes nothing for it.
5. **Other replicas' local tiers.** A bump is published on the ``cache``
   channel; a replica that hears of a newer generation drops its local
   entries of that backend. Pub/sub is at most once, so each store lookup
   also reads the generation (a changed one drops the local entries) and
   the generations seen are re-read every :data:`POLL_INTERVAL` seconds: a
   lost message leaves a local answer served at most that long, and never
   past its own ttl.
6. **The store never fails a call.** A lookup gets ``store.timeout`` in all
   and is a miss when the store does not answer; writes and bumps are done
   by the tier's own task, off the request path, from a bounded queue (a
   full queue drops the write). Each failure is counted
   (``mcp_gateway_store_fallbacks_total{tenant="cache"}``) and logged at
   debug; a bump that failed is retried until the store answers.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from typing import TYPE_CHECKING, Final, Literal

import msgspec
import structlog
import trio

from gateway.store.api import StoreUnavailable

if TYPE_CHECKING:
    from collections.abc import Callable

    from gateway.store.api import Store

__all__ = ["CHANNEL", "POLL_INTERVAL", "SharedCache", "SharedHit"]

logger = structlog.get_logger("gateway.router.shared_cache")

CHANNEL: Final = "cache"
#: Seconds between two reads of the generations seen (rule 5's bound).
POLL_INTERVAL: Final = 5.0
#: Writes waiting for the tier's task; more are dropped (rule 6).
QUEUE: Final = 256
#: Seconds between two tries of a bump the store refused (rule 6).
RETRY: Final = 1.0
_GENERATION: Final = "cache:g:"
_ENTRY: Final = "cache:r:"

Scope = Literal["public", "private"]


class _Record(msgspec.Struct, array_like=True):
    """A kept answer in the store: when it expires (wall clock) and its bytes."""

    expires: float
    value: bytes


class _News(msgspec.Struct, array_like=True):
    """A bump as published: who bumped (its own echo is ignored), which backend, to what."""

    origin: str
    backend: str
    generation: int


_record_decoder: Final = msgspec.msgpack.Decoder(_Record)
_news_decoder: Final = msgspec.msgpack.Decoder(_News)
_encode: Final = msgspec.msgpack.encode


class SharedHit(msgspec.Struct, frozen=True):
    """An answer the store held for this caller: its bytes, seconds left, scope."""

    value: bytes
    left: float
    scope: Scope


def entry_key(backend: str, generation: int, key: bytes, principal: str) -> str:
    """Rule 2: the store key of an answer; the principal only inside a digest."""
    digest = hashlib.sha256(_encode((backend, generation, key, principal))).hexdigest()
    return _ENTRY + digest


class SharedCache:
    """The shared tier of one gateway (module rules); it outlives reloads.

    Args:
        store: the shared store.
        timeout: seconds a lookup may take in all (``store.timeout``).
        on_failure: counts a store operation the tier went without.
        wall: the wall clock the records' expiry is on (rule 3).
        poll: seconds between two reads of the generations (rule 5).
    """

    def __init__(
        self,
        store: Store,
        *,
        timeout: float,
        on_failure: Callable[[], None] | None = None,
        wall: Callable[[], float] = time.time,
        poll: float = POLL_INTERVAL,
    ) -> None:
        self._store = store
        self._timeout = timeout
        self._on_failure = on_failure
        self._wall = wall
        self._poll = poll
        self.origin = secrets.token_hex(8)
        #: The generation last seen per backend (rule 4).
        self.generations: dict[str, int] = {}
        self._pending: set[str] = set()
        self._bumping: set[str] = set()
        self._wake = trio.Event()
        # (store key, record, wall-clock expiry): the expiry is the record's
        # own, carried beside it so the writer need not decode it again.
        self._writes, self._queued = trio.open_memory_channel[tuple[str, bytes, float]](QUEUE)
        self._drop: Callable[[str], object] = lambda backend: None
        #: Set once the first subscription is open (tests wait for it).
        self.listening = trio.Event()

    @property
    def pending(self) -> bool:
        """Whether a drop's bump is not in the store yet (rule 4)."""
        return bool(self._pending or self._bumping)

    def attach(self, drop: Callable[[str], object]) -> None:
        """The local tier in force: ``drop(backend)`` empties its entries of a backend."""
        self._drop = drop

    def _failed(self, step: str, reason: str) -> None:
        if self._on_failure is not None:
            self._on_failure()
        logger.debug("cache.shared_unavailable", step=step, reason=reason)

    def _seen(self, backend: str, generation: int) -> None:
        """A generation read or heard: a newer one empties the local tier's backend (rule 5)."""
        known = self.generations.get(backend)
        if known == generation:
            return
        if known is None or generation > known:
            self.generations[backend] = generation
            self._drop(backend)

    # -- the request path ----------------------------------------------------

    async def find(
        self, backend: str, key: bytes, principal: str
    ) -> tuple[SharedHit | None, int | None]:
        """The caller's answer from the store, and the generation to write under.

        Returns:
            The hit or None, and the backend's generation (None: write
            nothing, the store did not answer or a bump is pending).
        """
        if backend in self._pending or backend in self._bumping:
            return None, None
        found: tuple[SharedHit | None, int | None] = (None, None)
        with trio.move_on_after(self._timeout):
            try:
                found = await self._find(backend, key, principal)
            except StoreUnavailable as exc:
                self._failed("find", exc.reason)
            return found
        self._failed("find", "timed out")
        return None, None

    async def _find(
        self, backend: str, key: bytes, principal: str
    ) -> tuple[SharedHit | None, int | None]:
        store = self._store
        raw = await store.get(_GENERATION + backend)
        generation = int(raw) if raw is not None else 0
        self._seen(backend, generation)
        scopes: tuple[tuple[Scope, str], ...] = (("public", ""),)
        if principal:
            scopes += (("private", principal),)
        for scope, who in scopes:
            stored = await store.get(entry_key(backend, generation, key, who))
            if stored is None:
                continue
            try:
                record = _record_decoder.decode(stored)
            except msgspec.DecodeError:
                continue
            left = record.expires - self._wall()
            if left > 0:
                return SharedHit(record.value, left, scope), generation
        return None, generation

    def keep(
        self,
        backend: str,
        key: bytes,
        principal: str,
        scope: Scope,
        value: bytes,
        ttl: float,
        generation: int,
    ) -> None:
        """Queue an answer the local tier kept for the store (rules 2, 3, 6)."""
        who = principal if scope == "private" else ""
        if scope == "private" and not principal:
            return
        expires = self._wall() + ttl
        record = _encode(_Record(expires, value))
        try:
            self._writes.send_nowait((entry_key(backend, generation, key, who), record, expires))
        except trio.WouldBlock:
            self._failed("keep", "queue full")

    def invalidate(self, backend: str) -> None:
        """Rule 4: the backend's shared answers go; the bump is done by :meth:`run`."""
        self._pending.add(backend)
        self._wake.set()

    # -- the tier's own task ---------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Write, bump and follow the other replicas' bumps until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._write_loop)
            nursery.start_soon(self._bump_loop)
            nursery.start_soon(self._follow)
            task_status.started()

    async def _write_loop(self) -> None:
        async for key, record, expires in self._queued:
            try:
                left = expires - self._wall()
                if left > 0:
                    await self._store.put(key, record, ttl=left)
            except StoreUnavailable as exc:
                self._failed("keep", exc.reason)

    async def _bump_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            self._bumping, self._pending = self._pending, set()
            failed = False
            for backend in sorted(self._bumping):
                try:
                    generation = await self._store.add(_GENERATION + backend)
                    self.generations[backend] = max(generation, self.generations.get(backend, 0))
                    news = _News(self.origin, backend, generation)
                    await self._store.publish(CHANNEL, _encode(news))
                except StoreUnavailable as exc:
                    self._failed("invalidate", exc.reason)
                    self._pending.add(backend)
                    failed = True
            self._bumping = set()
            if failed:
                await trio.sleep(RETRY)
                self._wake.set()

    async def _follow(self) -> None:
        while True:
            try:
                async with self._store.subscribe(CHANNEL) as messages:
                    self.listening.set()
                    # The re-read is due every poll interval whatever else is
                    # heard: other backends' news must not put it off (rule 5).
                    due = trio.current_time() + self._poll
                    while True:
                        with trio.move_on_at(due) as waited:
                            message = await messages.receive()
                        if waited.cancelled_caught:
                            await self._reread()
                            due = trio.current_time() + self._poll
                        else:
                            self._heard(message)
            except (StoreUnavailable, trio.EndOfChannel, trio.BrokenResourceError) as exc:
                reason = exc.reason if isinstance(exc, StoreUnavailable) else "subscription ended"
                self._failed("follow", reason)
                await trio.sleep(self._poll)
                await self._reread()

    def _heard(self, message: bytes) -> None:
        try:
            news = _news_decoder.decode(message)
        except msgspec.DecodeError:
            return
        if news.origin != self.origin:
            self._seen(news.backend, news.generation)

    async def _reread(self) -> None:
        """Rule 5: the generations seen, read again (a lost message's bound)."""
        for backend in list(self.generations):
            try:
                raw = await self._store.get(_GENERATION + backend)
            except StoreUnavailable as exc:
                self._failed("follow", exc.reason)
                return
            self._seen(backend, int(raw) if raw is not None else 0)
