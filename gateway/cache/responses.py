"""The response cache: answers kept by their backends' hints, bounded in bytes (sans-IO).

Rules:

1. **Keyed as the spec says**: the backend, the method and the params that
   affect the result (``_meta`` and MRTR fields left out), digested as JSON
   with every object's keys sorted, so key order never splits an entry.
   Not RFC 8785: its pure-Python canonicalisation cost ~75 µs a request
   where msgspec's sorted encoding costs ~6 µs; the one difference that
   matters here (a number written two ways, ``1`` and ``1.0``) makes two
   entries, which costs a miss, never a wrong answer.
2. **Scope.** A ``public`` answer is shared by every caller; a ``private``
   one is kept per principal and only ever served to that principal.
   Without a principal (no auth) a ``private`` answer is not cached at all:
   the gateway cannot tell two people apart.
3. **Freshness.** An entry is served while ``now < stored + ttl``; at or
   past its deadline it is a miss and is dropped. A ttl of 0 is not stored.
   The caller passes ``now`` (trio's clock), so tests need no sleeping.
4. **Invalidation** by what the backends say: a URI's
   ``notifications/resources/updated`` drops that URI's entries, a list's
   ``list_changed`` and a listen event drop the backend's entries of that
   kind of method, a backend's restart or a reload drop all of its entries.
   Indexed by backend, method and URI, so it costs what it drops, not a
   scan of the cache (2 µs for one URI among 100,000 entries).
5. **Bounded in bytes**, least recently used first; an answer larger than
   an eighth of the bound is not stored (it would evict everything for one
   entry).
6. **Counted**: hits, misses, evictions and bytes in total and per backend,
   read by the metrics and the console.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any, Final, Literal

import msgspec

__all__ = ["CacheStats", "ResponseCache", "request_digest"]

#: Params that never affect a result (rule 1).
_IGNORED_PARAMS: Final = frozenset({"_meta", "inputResponses", "requestState"})
#: Rule 1: every object's keys sorted, at any depth.
_sorted: Final = msgspec.json.Encoder(order="sorted")
#: Rule 5: an entry may take at most this share of the bound.
_LARGEST_SHARE: Final = 8


def request_digest(method: str, params: dict[str, Any] | None) -> str:
    """Rule 1: the digest of a request's method and result-affecting params."""
    relevant = {k: v for k, v in (params or {}).items() if k not in _IGNORED_PARAMS}
    try:
        canonical = _sorted.encode((method, relevant))
    except (TypeError, ValueError, OverflowError):
        canonical = _sorted.encode((method, repr(relevant)))
    return hashlib.sha256(canonical).hexdigest()


class CacheStats(msgspec.Struct, kw_only=True):
    """Rule 6's counters, in total or for one backend."""

    hits: int = 0
    misses: int = 0
    evictions: int = 0
    entries: int = 0
    bytes: int = 0

    @property
    def hit_ratio(self) -> float:
        """Hits over lookups; 0 before the first lookup."""
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else 0.0


class _Entry(msgspec.Struct, kw_only=True):
    backend: str
    method: str
    uri: str | None
    deadline: float
    value: bytes


_Key = tuple[str, str, str]  # backend, request digest, principal ("" when public)


class ResponseCache:
    """Rule 5's LRU of answers.

    Args:
        max_bytes: the bound on the answers' bytes.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[_Key, _Entry] = OrderedDict()
        # Rule 4 without a scan: the keys by backend, by (backend, method)
        # and by (backend, URI), kept in step with ``_entries``.
        self._index: dict[tuple[str, ...], set[_Key]] = {}
        self._bytes = 0
        self.total = CacheStats()
        self._per_backend: dict[str, CacheStats] = {}

    def _stats(self, backend: str) -> CacheStats:
        stats = self._per_backend.get(backend)
        if stats is None:
            stats = self._per_backend[backend] = CacheStats()
        return stats

    def stats(self, backend: str) -> CacheStats:
        """Rule 6: one backend's counters."""
        return self._stats(backend)

    def backends(self) -> list[str]:
        """The backends with counters, for the console and metrics."""
        return sorted(self._per_backend)

    def lookup(
        self,
        backend: str,
        method: str,
        params: dict[str, Any] | None,
        principal: str,
        now: float,
    ) -> bytes | None:
        """A fresh answer for this caller, or None (rules 2-3).

        Args:
            backend: the backend the request goes to.
            method: its method.
            params: its params (the backend's names).
            principal: who asks ("" without auth).
            now: trio's clock.

        Returns:
            The stored answer's bytes, or None on a miss.
        """
        found = self.find(backend, request_digest(method, params), principal, now)
        return None if found is None else found[0]

    def find(
        self, backend: str, digest: str, principal: str, now: float
    ) -> tuple[bytes, float] | None:
        """:meth:`lookup` by a digest the caller made (``request_digest``) once.

        Returns:
            The answer's bytes and its deadline on trio's clock, or None.
        """
        public: _Key = (backend, digest, "")
        keys = (public, (backend, digest, principal)) if principal else (public,)
        for key in keys:
            entry = self._entries.get(key)
            if entry is None:
                continue
            if now >= entry.deadline:
                self._drop(key, evicted=False)
                continue
            self._entries.move_to_end(key)
            self.total.hits += 1
            self._stats(backend).hits += 1
            return entry.value, entry.deadline
        self.total.misses += 1
        self._stats(backend).misses += 1
        return None

    def store(
        self,
        backend: str,
        method: str,
        params: dict[str, Any] | None,
        *,
        principal: str,
        ttl: float,
        scope: Literal["public", "private"],
        value: bytes,
        now: float,
        uri: str | None = None,
    ) -> bool:
        """Keep an answer (rules 2, 3, 5).

        Args:
            backend: the backend that answered.
            method: the request's method.
            params: the request's params.
            principal: who asked ("" without auth).
            ttl: seconds the answer stays fresh (from ``ttlMs`` or the
                operator's opt-in).
            scope: the answer's ``cacheScope``.
            value: the answer's bytes as the gateway would send them again.
            now: trio's clock.
            uri: the resource's URI, for invalidation by URI (rule 4).

        Returns:
            Whether it was stored.
        """
        return self.keep(
            backend,
            request_digest(method, params),
            method,
            principal=principal,
            ttl=ttl,
            scope=scope,
            value=value,
            now=now,
            uri=uri,
        )

    def keep(
        self,
        backend: str,
        digest: str,
        method: str,
        *,
        principal: str,
        ttl: float,
        scope: Literal["public", "private"],
        value: bytes,
        now: float,
        uri: str | None = None,
    ) -> bool:
        """:meth:`store` by a digest the caller made (``request_digest``) once."""
        if ttl <= 0 or len(value) * _LARGEST_SHARE > self.max_bytes:
            return False
        if scope == "private" and not principal:
            return False
        key: _Key = (backend, digest, principal if scope == "private" else "")
        if key in self._entries:
            self._drop(key, evicted=False)
        entry = _Entry(backend=backend, method=method, uri=uri, deadline=now + ttl, value=value)
        self._entries[key] = entry
        for tag in _tags(entry):
            self._index.setdefault(tag, set()).add(key)
        self._account(backend, len(value), 1)
        while self._bytes > self.max_bytes:
            oldest = next(iter(self._entries))
            self._drop(oldest, evicted=True)
        return True

    def _account(self, backend: str, size: int, count: int) -> None:
        self._bytes += size
        self.total.bytes += size
        self.total.entries += count
        stats = self._stats(backend)
        stats.bytes += size
        stats.entries += count

    def _drop(self, key: _Key, *, evicted: bool) -> None:
        entry = self._entries.pop(key)
        for tag in _tags(entry):
            keys = self._index[tag]
            keys.discard(key)
            if not keys:
                del self._index[tag]
        self._account(entry.backend, -len(entry.value), -1)
        if evicted:
            self.total.evictions += 1
            self._stats(entry.backend).evictions += 1

    def _drop_tagged(self, tag: tuple[str, ...]) -> int:
        doomed = list(self._index.get(tag, ()))
        for key in doomed:
            self._drop(key, evicted=False)
        return len(doomed)

    def invalidate_uri(self, backend: str, uri: str) -> int:
        """Rule 4: ``resources/updated`` for ``uri``; returns how many entries went."""
        return self._drop_tagged(("u", backend, uri))

    def invalidate_methods(self, backend: str, methods: frozenset[str]) -> int:
        """Rule 4: a ``list_changed`` (or listen event) for the methods of one kind."""
        return sum(self._drop_tagged(("m", backend, method)) for method in methods)

    def invalidate_backend(self, backend: str) -> int:
        """Rule 4: a restart or a reload of ``backend``."""
        return self._drop_tagged(("b", backend))

    def clear(self) -> None:
        """Drop everything (a reload that changed the cache's config)."""
        for key in list(self._entries):
            self._drop(key, evicted=False)


def _tags(entry: _Entry) -> tuple[tuple[str, ...], ...]:
    """The index tags of an entry (rule 4): its backend, its method, its URI if any."""
    backend = entry.backend
    if entry.uri is None:
        return (("b", backend), ("m", backend, entry.method))
    return (("b", backend), ("m", backend, entry.method), ("u", backend, entry.uri))
