"""The response cache on the request path: which answers are kept, for whom, how long.

Rules:

1. **Off costs nothing.** Without ``cache:`` (or with ``max_bytes: 0``) the
   router holds no ``RouterCache``: a read or a call pays one ``is None``.
2. **Reads.** A 2026-07-28 backend's ``resources/read`` is kept for its own
   ``ttlMs`` with its own ``cacheScope`` (read leniently: ``cache_hints``);
   ``ttlMs: 0`` keeps nothing. A 2025-11-25 backend promised nothing: its
   reads are kept only when ``backends[].cache`` says so, for its ``ttl``
   (or ``cache.default_ttl``) and scope.
3. **Tool calls** are kept only for tools the caller's profile names in
   ``profiles[].cache.tools`` (globs on public names), and of those only the
   ones their backend annotates ``readOnlyHint: true``, unless the profile
   sets ``allow_unannotated``. A result with ``isError: true`` is not kept.
4. **Never kept**: an MRTR retry (``inputResponses``/``requestState``), a
   result that is not ``complete`` (``input_required``, a task), an error.
5. **Scope.** ``private`` answers are kept per principal and only served to
   it; without a principal they are not kept (``cache.responses`` rule 2).
   An opt-in's ``scope: auto`` is ``private`` when the backend's sessions
   are per principal, else ``public``. A backend that is sent each caller's
   own credential (``auth.type`` ``user_consent`` or ``token_exchange``)
   answers as that person, so its answers are ``private`` whatever the
   opt-in or the backend's own hint says: one person's answer never
   reaches another. The item is resolved in the caller's
   effective view before the lookup, so a shared answer reaches only callers
   the access policy lets reach the item.
6. **Key**: the backend, the request in the backend's names (``_meta`` left
   out) and the host's protocol version, since answers are shaped per
   revision and era (a modern host gets ``resultType`` and hints, an older
   one does not).
7. **No answer outlives its deadline downstream**: a modern host's hit on a
   read carries the time left as ``ttlMs``, never the original figure.
8. **Invalidation** (``Router``): ``resources/updated`` drops the URI's
   reads, a ``list_changed`` the backend's entries of that kind, a backend
   going down or coming up all of its entries, a reload everything.
9. **Shared tier** (``cache.shared``, ``router.shared_cache``): a local
   miss asks the store before the backend and a store hit fills the local
   tier; what the local tier keeps is also written to the store; each drop
   of rule 8 also drops the backend's shared answers on every replica.
   Without it a local miss pays one ``is None`` and the hit path nothing.

One module past 450 lines because it is one idea: the decision, for each
answer on the request path, of whether it is served from, kept in or
dropped from the cache. The rules above are read together (a scope chosen
by rule 5 is the one rule 9 writes, the key of rule 6 the one rule 8
drops); the sans-IO store is ``cache.responses`` and the shared tier's
store traffic ``router.shared_cache``.
"""

from __future__ import annotations

import math
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec
import trio

from gateway.cache.responses import ResponseCache, request_key
from gateway.catalog.snapshot import Kind
from gateway.protocol import mcp
from gateway.protocol.stateless import backend_leg
from gateway.protocol.stateless.cache_hints import (
    COMPLETE,
    CacheHint,
    backend_hint,
    combined_hint,
    is_retry,
)
from gateway.router.context import ModernRequest
from gateway.telemetry.scrape import CacheSample

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable

    from gateway.backends.state import BackendView
    from gateway.catalog.snapshot import Snapshot
    from gateway.config.schema_backends import BackendConfig
    from gateway.config.schema_cache import BackendCache, CacheConfig, CacheScopeChoice, ToolCache
    from gateway.config.schema_profiles import ProfileConfig
    from gateway.router.context import Call
    from gateway.router.shared_cache import SharedCache, SharedHit

__all__ = ["READ", "TOOL_CALL", "RouterCache", "cache_for"]

READ: Final = "resources/read"
TOOL_CALL: Final = "tools/call"
#: Memo bounds: decisions per (profile, tool) and per tool description.
_MEMO_LIMIT: Final = 4096

Scope = Literal["public", "private"]
#: Backend notifications that drop some of its answers (rule 8).
_STALING: Final = frozenset(
    {
        "notifications/resources/updated",
        "notifications/resources/list_changed",
        "notifications/tools/list_changed",
    }
)


def cache_for(
    config: CacheConfig | None,
    backends: Iterable[BackendConfig],
    profiles: Iterable[ProfileConfig],
    clock: Callable[[], float] | None = None,
    shared: SharedCache | None = None,
) -> RouterCache | None:
    """The router's cache for this configuration; None when it is off (rule 1).

    ``clock``: freshness is measured on it; by default the clock of the trio
    run the cache is made in (``RouterCache``). ``shared``: the gateway's
    shared tier, used when ``cache.shared`` is on (rule 9).
    """

    if config is None or not config.enabled:
        return None
    return RouterCache(config, backends, profiles, clock, shared=shared if config.shared else None)


#: Backend credentials that are each caller's own (rule 5).
PERSONAL_AUTH: Final = frozenset({"user_consent", "token_exchange"})


def _personal(backend: BackendView) -> bool:
    """Whether the backend is sent each caller's own credential (rule 5)."""
    auth = getattr(backend.config, "auth", None)
    return auth is not None and auth.type in PERSONAL_AUTH


def _scope(choice: CacheScopeChoice, backend: BackendView, principal: str) -> Scope:
    """An opt-in's scope with ``auto`` resolved (rule 5)."""
    if _personal(backend):
        return "private"
    if choice != "auto":
        return choice
    per_principal = backend.config.effective_session(bool(principal)) == "per_principal"
    return "private" if per_principal else "public"


class _Outcome(msgspec.Struct):
    """The two members of a tool's result that decide whether it is kept (rules 3-4).

    Read through a Struct that names only them, so the result's content is
    skipped rather than built into dicts and strings; the result itself is
    never re-encoded from it (STYLE rule 5 is about rewriting).
    """

    is_error: Any = msgspec.field(default=None, name="isError")
    result_type: Any = msgspec.field(default=COMPLETE, name="resultType")


_outcome_decoder: Final = msgspec.json.Decoder(_Outcome)


def _keepable(result: msgspec.Raw) -> bool:
    """Whether a tool's result may be kept: an object, complete, no error (rules 3-4)."""
    try:
        outcome = _outcome_decoder.decode(result)
    except msgspec.ValidationError:  # not an object
        return False
    except msgspec.DecodeError:  # what only the lenient reader reads (``mcp.decode_object``)
        body = mcp.decode_object(result)
        if body is None:
            return False
        outcome = _Outcome(
            is_error=body.get("isError"), result_type=body.get("resultType", COMPLETE)
        )
    return outcome.is_error is not True and outcome.result_type == COMPLETE


def _run_clock() -> Callable[[], float]:
    """The current trio run's clock, read without ``trio.current_time``'s two calls.

    Outside a run (a cache made by a test that passes no clock and never
    reads one) ``trio.current_time``, which says why it cannot answer.
    """
    try:
        return trio.lowlevel.current_clock().current_time
    except RuntimeError:
        return trio.current_time


def _read_only(encoded: bytes) -> bool:
    """Whether a tool's listed description says ``readOnlyHint: true``."""
    try:
        tool = msgspec.json.decode(encoded)
    except msgspec.DecodeError:
        return False
    annotations = tool.get("annotations") if isinstance(tool, dict) else None
    return isinstance(annotations, dict) and annotations.get("readOnlyHint") is True


class RouterCache:
    """The cache's decisions for the router, around one ``ResponseCache``.

    Args:
        config: the ``cache:`` section (on).
        backends: the backends' configs, for their ``cache`` opt-ins.
        profiles: the profiles' configs, for their ``cache.tools``.
        clock: freshness is measured on it; None: the clock of the trio run
            the cache is made in (trio's, or a test's ``MockClock``).
        shared: the store tier (rule 9); None keeps answers in this process only.
    """

    def __init__(
        self,
        config: CacheConfig,
        backends: Iterable[BackendConfig],
        profiles: Iterable[ProfileConfig],
        clock: Callable[[], float] | None = None,
        *,
        shared: SharedCache | None = None,
    ) -> None:
        self.config = config
        self.responses = ResponseCache(config.max_bytes)
        self.shared = shared
        #: Local misses answered by the shared tier, per backend (rule 9).
        self.shared_hits: dict[str, int] = {}
        if shared is not None:
            shared.attach(self.responses.invalidate_backend)
        self._clock = clock if clock is not None else _run_clock()
        self._reads: dict[str, BackendCache] = {
            b.name: b.cache for b in backends if b.cache is not None
        }
        self._tools: dict[str, ToolCache] = {
            p.name: p.cache for p in profiles if p.cache is not None
        }
        self._tool_rules: dict[tuple[str, str], ToolCache | None] = {}
        self._read_only: dict[bytes, bool] = {}

    # -- rules ---------------------------------------------------------------

    def tool_rule(self, profile: str, public: str, snapshot: Snapshot) -> ToolCache | None:
        """The profile's opt-in covering the tool ``public`` (rule 3), or None.

        Args:
            profile: the caller's profile.
            public: the tool's public name as the caller called it.
            snapshot: the request's catalog, where the tool's description
                as listed (for its annotations) is looked up, only when an
                opt-in covers the tool and asks for the annotation.
        """
        key = (profile, public)
        try:
            rule = self._tool_rules[key]
        except KeyError:
            chosen = self._tools.get(profile)
            if chosen is not None and not any(fnmatchcase(public, g) for g in chosen.tools):
                chosen = None
            if len(self._tool_rules) >= _MEMO_LIMIT:
                self._tool_rules.clear()
            rule = self._tool_rules[key] = chosen
        if rule is None or rule.allow_unannotated:
            return rule
        entry = snapshot.resolve(Kind.TOOLS, public)
        if entry is None:
            return None
        encoded = entry.encoded
        read_only = self._read_only.get(encoded)
        if read_only is None:
            if len(self._read_only) >= _MEMO_LIMIT:
                self._read_only.clear()
            read_only = self._read_only[encoded] = _read_only(encoded)
        return rule if read_only else None

    # -- the two cached paths ------------------------------------------------

    async def read(
        self,
        call: Call,
        backend: BackendView,
        params: dict[str, Any],
        fetch: Callable[[], Awaitable[msgspec.Raw]],
    ) -> msgspec.Raw:
        """``resources/read`` through the cache (rules 2, 4-7).

        Args:
            call: the host's request.
            backend: the resource's backend.
            params: the request's params in the backend's names.
            fetch: forwards the read; its result carries the backend's own
                fields (modern hints included), with public content URIs.
        """
        client = call.client
        modern_host = isinstance(client, ModernRequest)
        if is_retry(params):
            return self._for_host(await fetch(), backend, call, modern_host)[0]
        principal = client.principal or ""
        key = request_key(READ, params, client.protocol_version)
        found = self.responses.find(backend.name, key, principal, self._clock())
        if found is not None:
            call.backend = backend.name
            value, deadline = found
            return self._served_read(value, deadline) if modern_host else msgspec.Raw(value)
        shared = self.shared
        generation = None
        if shared is not None:
            hit, generation = await shared.find(backend.name, key, principal)
            if hit is not None:
                call.backend = backend.name
                uri = params.get("uri")
                deadline = self._filled(backend.name, key, READ, principal, hit, uri)
                if modern_host:
                    return self._served_read(hit.value, deadline)
                return msgspec.Raw(hit.value)
        result = await fetch()
        shaped, ttl, scope = self._for_host(result, backend, call, modern_host)
        if ttl > 0:
            uri = params.get("uri")
            self._keep(
                backend.name,
                key,
                READ,
                principal,
                ttl,
                scope,
                bytes(shaped),
                generation,
                uri if isinstance(uri, str) else None,
            )
        return shaped

    def _keep(
        self,
        backend: str,
        key: bytes,
        method: str,
        principal: str,
        ttl: float,
        scope: Scope,
        value: bytes,
        generation: int | None,
        uri: str | None = None,
    ) -> None:
        """Keep an answer here and, when the local tier kept it, in the store (rule 9).

        ``generation`` is the backend's shared generation the lookup saw;
        None (no shared tier, or a drop not yet in the store) writes nothing.
        """
        kept = self.responses.keep(
            backend,
            key,
            method,
            principal=principal,
            ttl=ttl,
            scope=scope,
            value=value,
            now=self._clock(),
            uri=uri,
        )
        shared = self.shared
        if kept and shared is not None and generation is not None:
            shared.keep(backend, key, principal, scope, value, ttl, generation)

    def _filled(
        self, backend: str, key: bytes, method: str, principal: str, hit: SharedHit, uri: Any
    ) -> float:
        """A shared hit kept in the local tier for its time left; its local deadline."""
        self.shared_hits[backend] = self.shared_hits.get(backend, 0) + 1
        now = self._clock()
        self.responses.keep(
            backend,
            key,
            method,
            principal=principal,
            ttl=hit.left,
            scope=hit.scope,
            value=hit.value,
            now=now,
            uri=uri if isinstance(uri, str) else None,
        )
        return now + hit.left

    def _for_host(
        self, result: msgspec.Raw, backend: BackendView, call: Call, modern_host: bool
    ) -> tuple[msgspec.Raw, float, Scope]:
        """The read as this host gets it, and how long and for whom to keep it."""
        body = mcp.decode_object(result)
        if body is None:
            return result, 0.0, "private"
        info = backend.info
        modern = info is not None and info.modern
        complete = body.get("resultType", COMPLETE) == COMPLETE
        ttl: float = 0.0
        scope: Scope = "private"
        if complete:
            own = backend_hint(modern, body)
            ttl, scope = self._read_rule(backend, modern, own, call.client.principal or "")
            if modern_host:
                hint = combined_hint([own], per_principal=call.per_principal)
                body.update(hint.as_fields())
                return mcp.encode(body), ttl, scope
        if modern and not modern_host and any(k in body for k in backend_leg.MODERN_ONLY_FIELDS):
            return mcp.encode(backend_leg.for_legacy_host(body)), ttl, scope
        return result, ttl, scope

    def _read_rule(
        self, backend: BackendView, modern: bool, own: CacheHint, principal: str
    ) -> tuple[float, Scope]:
        """How long and for whom a complete read is kept (rule 2)."""
        if modern:
            return own.ttl_ms / 1000, "private" if _personal(backend) else own.scope
        opt_in = self._reads.get(backend.name)
        if opt_in is None:
            return 0.0, "private"
        ttl = opt_in.ttl if opt_in.ttl is not None else self.config.default_ttl
        return ttl, _scope(opt_in.scope, backend, principal)

    def _served_read(self, value: bytes, deadline: float) -> msgspec.Raw:
        """A kept read for a modern host, its ``ttlMs`` cut to the time left (rule 7)."""
        body = mcp.decode_object(msgspec.Raw(value))
        if body is None:
            return msgspec.Raw(value)
        ttl = body.get("ttlMs")
        if isinstance(ttl, int) and ttl > 0:
            left = math.floor((deadline - self._clock()) * 1000)
            body["ttlMs"] = max(0, min(ttl, left))
        return mcp.encode(body)

    async def call_tool(
        self,
        call: Call,
        backend: BackendView,
        params: dict[str, Any],
        rule: ToolCache,
        fetch: Callable[[], Awaitable[msgspec.Raw]],
    ) -> msgspec.Raw:
        """An opted-in ``tools/call`` through the cache (rules 3-6).

        Args:
            call: the host's request.
            backend: the tool's backend.
            params: the request's params in the backend's names.
            rule: the profile's opt-in that covers the tool.
            fetch: forwards the call; its result is the host's answer.
        """
        if is_retry(params):
            return await fetch()
        client = call.client
        principal = client.principal or ""
        key = request_key(TOOL_CALL, params, client.protocol_version)
        found = self.responses.find(backend.name, key, principal, self._clock())
        if found is not None:
            call.backend = backend.name
            return msgspec.Raw(found[0])
        shared = self.shared
        generation = None
        if shared is not None:
            hit, generation = await shared.find(backend.name, key, principal)
            if hit is not None:
                call.backend = backend.name
                self._filled(backend.name, key, TOOL_CALL, principal, hit, None)
                return msgspec.Raw(hit.value)
        result = await fetch()
        if not _keepable(result):
            return result
        ttl = rule.ttl if rule.ttl is not None else self.config.default_ttl
        scope = _scope(rule.scope, backend, principal)
        self._keep(backend.name, key, TOOL_CALL, principal, ttl, scope, bytes(result), generation)
        return result

    # -- invalidation (rule 8) ---------------------------------------------

    def backend_notified(self, backend: str, method: str, params: msgspec.Raw | None) -> None:
        """A backend's notification: drop what it makes stale (here, and shared: rule 9)."""
        shared = self.shared
        if shared is not None and method in _STALING:
            shared.invalidate(backend)
        if method == "notifications/resources/updated":
            body = None if params is None else mcp.decode_object(params)
            uri = None if body is None else body.get("uri")
            if isinstance(uri, str):
                self.responses.invalidate_uri(backend, uri)
            else:
                self.responses.invalidate_methods(backend, frozenset({READ}))
        elif method == "notifications/resources/list_changed":
            self.responses.invalidate_methods(backend, frozenset({READ}))
        elif method == "notifications/tools/list_changed":
            self.responses.invalidate_methods(backend, frozenset({TOOL_CALL}))

    def samples(self) -> list[CacheSample]:
        """Each backend's counters, for the metrics (read at scrape time)."""
        sharing = self.shared is not None
        out = []
        for name in self.responses.backends():
            stats = self.responses.stats(name)
            shared = self.shared_hits.get(name, 0)
            # A local miss the store answered is a shared hit, not a miss.
            out.append(
                CacheSample(
                    name,
                    stats.hits,
                    stats.misses - shared,
                    stats.evictions,
                    stats.bytes,
                    shared if sharing else None,
                )
            )
        return out

    def backend_restarted(self, backend: str) -> None:
        """A backend went down or came (back) up: nothing it said still holds."""
        self.responses.invalidate_backend(backend)
        if self.shared is not None:
            self.shared.invalidate(backend)

    def renewed(self, backends: Iterable[str]) -> None:
        """A reload made this cache: the backends' shared answers go too (rule 9)."""
        if self.shared is not None:
            for backend in backends:
                self.shared.invalidate(backend)
