"""Caching hints and ``resultType`` on modern results (sans-IO; dict in, dict out).

Rules, from 2026-07-28 ``S/server/utilities/caching.mdx`` unless noted:

- ``ttlMs`` (an integer ≥ 0) and ``cacheScope`` (``public``/``private``) are
  REQUIRED on *complete* results of ``server/discover``, the four lists and
  ``resources/read``; ``input_required`` results carry none (§Cacheable
  Results).
- Reading a backend's hint: an absent, negative or non-numeric ``ttlMs``
  counts as 0 (§Time-to-Live). A fractional one is floored (schema.ts types
  it ``number``, this page says integer; we emit integers).
- A missing or unknown ``cacheScope`` counts as ``private``: sep-2549 says
  the field "defaults to public", but it is now required, and a legacy
  backend cannot have promised its list is the same for every user. Gateway
  choice, the safe side of the contradiction.
- Merging several backends (a merged list, discover): the shortest
  ``ttlMs`` and ``private`` when any input is private. With no input at all
  (nothing to merge) the hint is ``{0, private}``.
- What a backend contributes (:func:`backend_hint`): a handshake-era
  backend promised nothing, so ``{0, private}`` whatever its result holds;
  a 2026-07-28 backend its own hint, read as above.
- A merged view that depends on who asks (an access policy in force) is
  ``private`` whatever the backends said (:func:`combined_hint`): a shared
  cache must not hand one principal's view to another (§Cache Scope).
- Results of an MRTR retry (params with ``inputResponses`` or
  ``requestState``) MUST NOT be cached (§Cache Key); the spec still asks
  for hints on complete results, so they get ``{0, private}``.
- ``resultType`` is REQUIRED on every result; an absent one from an older
  server means ``complete`` (``S/basic/index.mdx`` §ResultType).
- Pages of one list share one scope (§Interaction with Pagination): the
  caller passes the same merged hint to every page.

Unknown fields always survive; inputs are never mutated.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

CACHEABLE_METHODS: Final = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)
COMPLETE: Final = "complete"
INPUT_REQUIRED: Final = "input_required"

Scope = Literal["public", "private"]


class CacheHint(msgspec.Struct, frozen=True, kw_only=True):
    """A freshness hint: how long and for whom a result may be reused.

    Attributes:
        ttl_ms: milliseconds the result stays fresh; 0 means stale at once.
        scope: ``public`` (shareable across users) or ``private``.
    """

    ttl_ms: int = 0
    scope: Scope = "private"

    def as_fields(self) -> dict[str, Any]:
        """The hint as the result fields ``ttlMs`` and ``cacheScope``."""
        return {"ttlMs": self.ttl_ms, "cacheScope": self.scope}


NO_CACHE: Final = CacheHint()


def hint_of(result: Mapping[str, Any]) -> CacheHint:
    """The hint a backend's result carries, read leniently (rules above)."""
    ttl = result.get("ttlMs")
    ms = 0
    if isinstance(ttl, int | float) and not isinstance(ttl, bool) and math.isfinite(ttl):
        ms = max(0, math.floor(ttl))
    scope: Scope = "public" if result.get("cacheScope") == "public" else "private"
    return CacheHint(ttl_ms=ms, scope=scope)


def merge_hints(hints: Iterable[CacheHint]) -> CacheHint:
    """One hint for a result built from several: shortest ttl, private if any is."""
    items = list(hints)
    if not items:
        return NO_CACHE
    scope: Scope = "private" if any(h.scope == "private" for h in items) else "public"
    return CacheHint(ttl_ms=min(h.ttl_ms for h in items), scope=scope)


def backend_hint(modern: bool, result: Mapping[str, Any] | None) -> CacheHint:
    """What one backend's answer contributes: its own hint if modern, else none.

    Args:
        modern: whether the backend speaks 2026-07-28 (discover found it).
        result: the backend's result (its DiscoverResult, list page or
            ReadResourceResult); ``None`` when it gave none.
    """
    if not modern or result is None:
        return NO_CACHE
    return hint_of(result)


def combined_hint(hints: Iterable[CacheHint], *, per_principal: bool) -> CacheHint:
    """The hint of a result built from ``hints``, for whom it may be reused.

    Args:
        hints: what each contributing backend gave (:func:`backend_hint`).
        per_principal: whether the result depends on who asks (a policy
            narrows views per principal): then it is ``private``.
    """
    merged = merge_hints(hints)
    if per_principal and merged.scope != "private":
        return CacheHint(ttl_ms=merged.ttl_ms, scope="private")
    return merged


def is_retry(params: Mapping[str, Any] | None) -> bool:
    """Whether a request is an MRTR retry, whose result must not be cached."""
    if not params:
        return False
    return "inputResponses" in params or "requestState" in params


def result_type(result: Mapping[str, Any]) -> str:
    """The result's type; absent means ``complete`` (an older server)."""
    value = result.get("resultType", COMPLETE)
    return value if isinstance(value, str) else COMPLETE


def finish_result(
    method: str,
    result: Mapping[str, Any],
    hint: CacheHint | None = None,
    params: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A copy of ``result`` with ``resultType`` and, where required, cache hints.

    Args:
        method: the request's method.
        result: the result as built or forwarded; an existing ``resultType``
            is kept, hints on a cacheable complete result are replaced.
        hint: the merged hint; ``None`` reads the result's own.
        params: the request's params, to spot an MRTR retry.

    Returns:
        A new dict; ``input_required`` and other non-complete results get no
        hints (and lose any the backend sent).
    """
    out = dict(result)
    out.setdefault("resultType", COMPLETE)
    kind = result_type(out)
    if kind == "task":
        return out  # its ttlMs is the task's lifetime, not a cache hint
    if kind != COMPLETE:
        out.pop("ttlMs", None)
        out.pop("cacheScope", None)
        return out
    if method in CACHEABLE_METHODS:
        chosen = NO_CACHE if is_retry(params) else (hint or hint_of(result))
        out.update(chosen.as_fields())
    return out
