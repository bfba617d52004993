"""The response cache: answers kept by their backends' hints, bounded in bytes (sans-IO).

Rules:

1. **Keyed as the spec says**: the backend, the method and the params that
   affect the result (``_meta`` and MRTR fields left out), encoded as JSON
   with every object's keys sorted, so key order never splits an entry.
   Not RFC 8785: its pure-Python canonicalisation cost ~75 µs a request
   where msgspec's sorted encoding costs ~6 µs; the one difference that
   matters here (a number written two ways, ``1`` and ``1.0``) makes two
   entries, which costs a miss, never a wrong answer. A canonical form of
   at most ``VERBATIM_KEY_MAX`` bytes (a usual request's) is the key
   itself: compared byte for byte, it cannot collide, and no hash is made
   on a request that is looked up once a call; a longer one is keyed by its
   SHA-256, so a large argument is not held twice.
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

Theory of operation: the request path pays for a lookup and, on a miss
that is kept, a store; everything else is paid by invalidation. So an
entry carries what its drop needs (its index tags, its backend's counters),
made once when it is stored, and the index's backend and method tags, of
which there are a few per backend, keep their (possibly empty) sets rather
than building them again for the next answer.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["VERBATIM_KEY_MAX", "CacheStats", "ResponseCache", "request_key"]

#: Params that never affect a result (rule 1).
_IGNORED_PARAMS: Final = frozenset({"_meta", "inputResponses", "requestState"})
#: Rule 1: every object's keys sorted, at any depth.
_sorted: Final = msgspec.json.Encoder(order="sorted")
#: Rule 1: a canonical form up to this many bytes is its own key. A tool call
#: with a few short arguments is 60-100 bytes; a key costs its bytes (held
#: once, by reference from the index) beside the answer it keys.
VERBATIM_KEY_MAX: Final = 128
#: Rule 1: begins a hashed key; a canonical form begins with ``[``, so no
#: verbatim key equals a hashed one.
_HASHED: Final = b"#"
#: Rule 5: an entry may take at most this share of the bound.
_LARGEST_SHARE: Final = 8


def request_key(method: str, params: Mapping[str, Any] | None, variant: str = "") -> bytes:
    """Rule 1: the key of a request's method, its result-affecting params and ``variant``.

    Args:
        method: the request's method.
        params: its params; the ones rule 1 leaves out are filtered only
            when present, so the usual request is encoded as it is.
        variant: what else shapes the answer (the router's: the host's
            protocol version), a member of the key beside the params.
    """
    if params is None:
        params = {}
    elif not _IGNORED_PARAMS.isdisjoint(params):
        params = {k: v for k, v in params.items() if k not in _IGNORED_PARAMS}
    try:
        canonical = _sorted.encode((method, variant, params))
    except (TypeError, ValueError, OverflowError):
        canonical = _sorted.encode((method, variant, repr(params)))
    if len(canonical) <= VERBATIM_KEY_MAX:
        return canonical
    return _HASHED + hashlib.sha256(canonical).digest()


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


_Key = tuple[str, bytes, str]  # backend, request key, principal ("" when public)
_Tag = tuple[str, ...]  # ("b", backend), ("m", backend, method), ("u", backend, uri)


class _Entry(msgspec.Struct, gc=False):
    """One kept answer, with what dropping it needs (the theory of operation).

    Untracked by the cyclic collector (``gc=False``): it holds bytes, a
    float, tuples of strings and its backend's counters, none of which can
    lead back to it.
    """

    value: bytes
    deadline: float
    tags: tuple[_Tag, ...]
    stats: CacheStats


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
        self._index: dict[_Tag, set[_Key]] = {}
        # The backend and method tags of each (backend, method), made once.
        self._tag_pairs: dict[tuple[str, str], tuple[_Tag, _Tag]] = {}
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
        found = self.find(backend, request_key(method, params), principal, now)
        return None if found is None else found[0]

    def find(
        self, backend: str, key: bytes, principal: str, now: float
    ) -> tuple[bytes, float] | None:
        """:meth:`lookup` by a key the caller made (``request_key``) once.

        Returns:
            The answer's bytes and its deadline on trio's clock, or None.
        """
        entries = self._entries
        public: _Key = (backend, key, "")
        for full in (public, (backend, key, principal)) if principal else (public,):
            entry = entries.get(full)
            if entry is None:
                continue
            if now >= entry.deadline:
                self._drop(full, evicted=False)
                continue
            entries.move_to_end(full)
            self.total.hits += 1
            entry.stats.hits += 1
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
            request_key(method, params),
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
        key: bytes,
        method: str,
        *,
        principal: str,
        ttl: float,
        scope: Literal["public", "private"],
        value: bytes,
        now: float,
        uri: str | None = None,
    ) -> bool:
        """:meth:`store` by a key the caller made (``request_key``) once."""
        size = len(value)
        if ttl <= 0 or size * _LARGEST_SHARE > self.max_bytes:
            return False
        if scope == "private":
            if not principal:
                return False
            full: _Key = (backend, key, principal)
        else:
            full = (backend, key, "")
        entries = self._entries
        if full in entries:
            self._drop(full, evicted=False)
        pair = self._tag_pairs.get((backend, method))
        if pair is None:
            pair = self._tag_pairs[(backend, method)] = (("b", backend), ("m", backend, method))
        tags: tuple[_Tag, ...] = pair if uri is None else (*pair, ("u", backend, uri))
        stats = self._stats(backend)
        entries[full] = _Entry(value, now + ttl, tags, stats)
        index = self._index
        for tag in tags:
            keys = index.get(tag)
            if keys is None:
                index[tag] = {full}
            else:
                keys.add(full)
        total = self.total
        total.bytes += size
        total.entries += 1
        stats.bytes += size
        stats.entries += 1
        while total.bytes > self.max_bytes:
            self._drop(next(iter(entries)), evicted=True)
        return True

    def _drop(self, key: _Key, *, evicted: bool) -> None:
        entry = self._entries.pop(key)
        index = self._index
        for tag in entry.tags:
            keys = index[tag]
            keys.discard(key)
            # A URI's set goes with its last entry (URIs are unbounded); a
            # backend's and a method's stay for the next answer.
            if not keys and tag[0] == "u":
                del index[tag]
        size = len(entry.value)
        total, stats = self.total, entry.stats
        total.bytes -= size
        total.entries -= 1
        stats.bytes -= size
        stats.entries -= 1
        if evicted:
            total.evictions += 1
            stats.evictions += 1

    def _drop_tagged(self, tag: _Tag) -> int:
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
