"""The configuration schema: the response cache (``cache:``) and its opt-ins.

Three places say what the gateway may answer from memory:

- ``cache:`` at the top level turns the cache on and bounds it: absent, or
  ``max_bytes: 0``, means off (and then no request pays anything for it).
- ``backends[].cache`` lets reads (``resources/read``) of a 2025-11-25
  backend be kept, which carries no cache hints of its own; a 2026-07-28
  backend's reads follow its own ``ttlMs``/``cacheScope`` and need nothing.
- ``profiles[].cache`` lets some tools' calls be kept, by glob on the public
  names the profile's hosts use; only tools their backend annotates
  ``readOnlyHint: true``, unless ``allow_unannotated`` says otherwise.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal, TypeAlias

import msgspec
from msgspec import Meta

from gateway.config.schema import MIB, Base, Invalid, Positive

__all__ = ["DEFAULT_MAX_BYTES", "BackendCache", "CacheConfig", "CacheScopeChoice", "ToolCache"]

#: The bound when ``cache:`` is present without ``max_bytes``.
DEFAULT_MAX_BYTES: Final = 64 * MIB

#: Who an operator's opt-in answer is kept for: ``auto`` is ``private`` for a
#: backend whose sessions are per principal, ``public`` otherwise.
CacheScopeChoice: TypeAlias = Literal["auto", "public", "private"]


class CacheConfig(Base, frozen=True, kw_only=True):
    """The response cache (``gateway.cache.responses``), shared by every profile.

    Attributes:
        max_bytes: the bound on the kept answers' bytes, least recently used
            evicted first; 0 turns the cache off. One answer larger than an
            eighth of it is never kept.
        default_ttl: seconds an opt-in answer (``backends[].cache``,
            ``profiles[].cache``) stays fresh when the opt-in names no
            ``ttl`` of its own.
        shared: also keep answers in the state store, where every replica
            sharing it finds them (``gateway.router.shared_cache``); needs
            ``store.url`` (the embedded store serves one gateway only).
    """

    max_bytes: Annotated[int, Meta(ge=0, extra={"problem": "must be 0 (off) or more"})] = (
        DEFAULT_MAX_BYTES
    )
    default_ttl: Positive = 30.0
    shared: bool = False

    @property
    def enabled(self) -> bool:
        """Whether anything is kept at all."""
        return self.max_bytes > 0


class BackendCache(Base, frozen=True, kw_only=True):
    """A 2025-11-25 backend's reads kept although it sends no cache hints.

    Attributes:
        ttl: seconds a read stays fresh; unset, ``cache.default_ttl``.
        scope: ``public`` shares one answer between every caller,
            ``private`` keeps one per principal (and none without auth);
            ``auto`` is ``private`` when the backend's sessions are per
            principal, else ``public``.
    """

    ttl: Positive | None = None
    scope: CacheScopeChoice = "auto"


class ToolCache(Base, frozen=True, kw_only=True):
    """A profile's tools whose calls may be answered from the cache.

    Attributes:
        tools: globs (``fnmatchcase``) on the public tool names the
            profile's hosts call.
        ttl: seconds a call's answer stays fresh; unset,
            ``cache.default_ttl``.
        scope: as for ``backends[].cache``.
        allow_unannotated: also keep calls of matching tools whose backend
            does not annotate them ``readOnlyHint: true`` (the operator
            vouches that they have no effects).
    """

    tools: list[str] = msgspec.field(default_factory=list)
    ttl: Positive | None = None
    scope: CacheScopeChoice = "auto"
    allow_unannotated: bool = False

    def __post_init__(self) -> None:
        if not self.tools:
            raise Invalid(("tools", "name at least one glob of the tools to cache"))
