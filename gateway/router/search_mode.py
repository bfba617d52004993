"""Search mode: the gateway's own ``search_tools`` and ``call_tool`` (issue 15, step 4).

Rules:

1. The two gateway tools exist only on a profile in search mode (its view
   has ``listed_tools``); anywhere else their names are unknown tools, like
   any name no backend offers (the prefix ``gateway`` is reserved).
2. ``search_tools`` ranks with the one shared ``ToolIndex`` and keeps only
   the profile's tools (``within``), with the profile's overridden tools
   indexed under the text the profile shows (``catalog.search`` rule 5).
   The gateway calls :meth:`SearchMode.follow` from its catalog-changed
   hook, where snapshots swap, so the index is rewritten there (only the
   backends whose tools changed, ``catalog.search.sync_index``) and never
   on a search. A search checks, by identity, that the index follows its
   snapshot and syncs only if not (a router without the hook, as in unit
   tests). Without a search-mode profile nothing is indexed.
3. ``call_tool`` is ``tools/call`` with the name and arguments unwrapped:
   the same handler routes it, so progress (the request's ``_meta`` is
   kept), cancellation, MRTR and a backend's errors behave exactly as on a
   direct call.
4. Gateway choice: bad arguments to either gateway tool, and a name that is
   unknown *or outside the profile*, are an ``isError: true`` tool result,
   not -32602. The reader is a model, which can correct a tool result but
   not a protocol error (spec 2025-11-25, tools: input validation errors are
   tool execution errors). The text is the same for unknown and
   out-of-profile names, so it hints at nothing. A backend that is down or
   slow still fails the call as ``tools/call`` would (-32603, -32001).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

from gateway.catalog.profiles import SEARCH
from gateway.catalog.search import (
    MAX_LIMIT,
    MIN_LIMIT,
    SearchHit,
    ToolIndex,
    sync_index,
    sync_overrides,
)
from gateway.catalog.search_tools import (
    CALL_TOOL_NAME,
    SEARCH_TOOLS_NAME,
    gateway_tool_name,
    search_tools_result,
)
from gateway.catalog.snapshot import EMPTY_SNAPSHOT, Kind
from gateway.errors import INVALID_PARAMS, LocalProtocolError
from gateway.protocol import mcp, revisions
from gateway.router.call_metrics import NO_METRICS
from gateway.router.calls import downgraded
from gateway.router.filtering import filter_definition

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Container, Mapping, Sequence

    from gateway.catalog.profiles import ProfileViews
    from gateway.catalog.snapshot import Snapshot
    from gateway.config.schema_filters import FilterConfig
    from gateway.guardrails.chains import Guardrails
    from gateway.router.call_metrics import RouterMetrics
    from gateway.router.context import Call

_decoder: Final = msgspec.json.Decoder(dict[str, Any])
_SEARCH_HINT: Final = "Use {search} to find the tools this endpoint offers."


class _Within:
    """The catalog names of a profile's tools it shows as the catalog does.

    An overridden tool is left out: the profile's own row (indexed with its
    text) stands for it, so the replaced name and description match nothing.
    """

    def __init__(self, tools: Container[str], overridden: Mapping[str, str]) -> None:
        self._tools = tools
        self._overridden = overridden

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._tools and name not in self._overridden


def _tool_error(text: str) -> msgspec.Raw:
    return mcp.encode({"content": [{"type": "text", "text": text}], "isError": True})


class SearchMode:
    """Answers ``tools/call`` for every profile, taking the gateway's tools in search mode.

    Args:
        current: returns the current shared snapshot (what the index follows).
        call_tool: the ordinary ``tools/call`` handler.
        separator: the naming separator (``gateway{sep}search_tools``).
        profiles: the served profiles, whose search-mode views
            :meth:`follow` indexes the overrides of; none when not given.
        metrics: searches by profile and result.
        on_hidden: told when ``gateway__call_tool`` names a tool outside
            the caller's effective view (the router's audit line).
    """

    def __init__(
        self,
        current: Callable[[], Snapshot],
        call_tool: Callable[[Call, dict[str, Any]], Awaitable[msgspec.Raw]],
        separator: str,
        profiles: ProfileViews | None = None,
        *,
        metrics: RouterMetrics = NO_METRICS,
        on_hidden: Callable[[Call, str], None] | None = None,
    ) -> None:
        self._current = current
        self._profiles = profiles
        self._call_tool = call_tool
        self._separator = separator
        self.search_name = gateway_tool_name(SEARCH_TOOLS_NAME, separator)
        self.call_name = gateway_tool_name(CALL_TOOL_NAME, separator)
        self._index: ToolIndex | None = None
        self._indexed: Snapshot = EMPTY_SNAPSHOT
        # Per profile, the view whose overrides the index holds.
        self._views: dict[str, Snapshot] = {}
        # The router's guardrail chains, and a backend's configured filters by
        # its name (what a search's hits go through); none by default.
        self.guard: Guardrails | None = None
        self.filters_of: Callable[[str], Sequence[FilterConfig]] = lambda _backend: ()
        # Told when gateway__call_tool names a tool outside the caller's
        # effective view (the router's audit line); nothing by default.
        self.on_hidden = on_hidden
        # Searches by profile and result.
        self.metrics = metrics

    @property
    def indexed(self) -> Snapshot:
        """The shared snapshot the index holds the tools of."""
        return self._indexed

    def follow(self, snapshot: Snapshot) -> None:
        """Bring the index up to a snapshot just swapped in (rule 2).

        Only the backends whose tools changed, and each search-mode
        profile's overrides whose JSON changed, are rewritten. Nothing is
        indexed while no profile is in search mode.
        """
        profiles = self._profiles
        if profiles is None or not profiles.searching:
            return
        index = self._sync(snapshot)
        for name in profiles.names:
            selected = profiles.profile(name)
            if selected is not None and selected.mode == SEARCH:
                self._sync_profile(index, name, profiles.view(name, snapshot))

    def index(self) -> ToolIndex:
        """The shared index, brought up to the current snapshot if the hook has not yet."""
        return self._sync(self._current())

    def _sync(self, snapshot: Snapshot) -> ToolIndex:
        if self._index is None:
            self._index = ToolIndex(separator=self._separator)
        if snapshot is not self._indexed:
            sync_index(self._index, self._indexed, snapshot)
            self._indexed = snapshot
        return self._index

    def _sync_profile(self, index: ToolIndex, profile: str, view: Snapshot) -> None:
        if self._views.get(profile) is not view:
            sync_overrides(index, profile, view)
            self._views[profile] = view

    def close(self) -> None:
        """Free the index (the router is going away)."""
        if self._index is not None:
            self._index.close()
            self._index = None
            self._indexed = EMPTY_SNAPSHOT
            self._views = {}

    async def call_tool(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        """``tools/call``: a gateway tool in search mode, else the ordinary handler."""
        name = params.get("name")
        if call.snapshot.listed_tools is None or name not in (self.search_name, self.call_name):
            return await self._call_tool(call, params)
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return _tool_error(f"{name}: arguments must be an object")
        if name == self.search_name:
            return await self._counted_search(call, arguments)
        return await self._call(call, params, arguments)

    async def _counted_search(self, call: Call, arguments: dict[str, Any]) -> msgspec.Raw:
        """``_search``, counted by profile and result (hit, miss, invalid)."""
        result, hits = await self._search(call, arguments)
        self.metrics.count_tool_search(call.client.profile, hits)
        return result

    async def _search(
        self, call: Call, arguments: dict[str, Any]
    ) -> tuple[msgspec.Raw, int | None]:
        """The search's result and how many tools it found (None: bad arguments)."""
        query = arguments.get("query")
        limit = arguments.get("limit", 8)
        if not isinstance(query, str) or not query.strip():
            return _tool_error(f"{self.search_name}: 'query' must be a non-empty string"), None
        if isinstance(limit, bool) or not isinstance(limit, int):
            return _tool_error(f"{self.search_name}: 'limit' must be an integer"), None
        if not MIN_LIMIT <= limit <= MAX_LIMIT:
            return _tool_error(
                f"{self.search_name}: 'limit' must be between {MIN_LIMIT} and {MAX_LIMIT}"
            ), None
        view = call.snapshot
        profile = call.client.profile
        tools = view.view(Kind.TOOLS)
        index = self.index()
        # The index holds the profile's overrides, not one caller's: the
        # effective view only narrows which hits come back (``within``).
        profiles = self._profiles
        base = view if profiles is None else profiles.view(profile, self._current())
        self._sync_profile(index, profile, base)
        # Catalog rows of the tools the profile shows unchanged, and the
        # profile's own rows for the ones it overrides (catalog.search rule 5);
        # each hit is answered with the view's entry (its name, its text).
        within = _Within(tools, view.overridden_tools)
        found = [
            (hit, entry)
            for hit in index.search(query, limit, within=within, scope=profile)
            if (entry := tools.get(hit.name)) is not None
        ]
        hits = []
        for hit, entry in found:
            encoded: bytes | None = entry.encoded
            if self.guard is not None:  # the lists chain sees each hit (router.filtering rule 3)
                encoded = await filter_definition(
                    self.guard, call, entry, entry.encoded, self.filters_of
                )
            if encoded is not None:
                hits.append(SearchHit(hit.name, hit.score, _decoder.decode(encoded)))
        result = mcp.encode(search_tools_result(hits))
        return downgraded(result, call.client.protocol_version, revisions.call_result), len(hits)

    async def _call(
        self, call: Call, params: dict[str, Any], arguments: dict[str, Any]
    ) -> msgspec.Raw:
        target = arguments.get("name")
        inner = arguments.get("arguments")
        if not isinstance(target, str) or not target:
            return _tool_error(f"{self.call_name}: 'name' must be a tool name from search_tools")
        if inner is not None and not isinstance(inner, dict):
            return _tool_error(f"{self.call_name}: 'arguments' must be an object")
        routed: dict[str, Any] = {"name": target, "arguments": inner or {}}
        if "_meta" in params:
            routed["_meta"] = params["_meta"]  # progress token, trace context (rule 3)
        if target in (self.search_name, self.call_name):
            return _tool_error(self._unknown(target))
        try:
            return await self._call_tool(call, routed)
        except LocalProtocolError as exc:
            if exc.code != INVALID_PARAMS:
                raise
            # Unknown, outside the profile, or bad arguments: the same text
            # for unknown and outside (rule 4).
            text = exc.message if target in call.snapshot.view(Kind.TOOLS) else None
            if text is None and self.on_hidden is not None:
                self.on_hidden(call, target)
            return _tool_error(text or self._unknown(target))

    def _unknown(self, target: str) -> str:
        return f"Unknown tool: {target}. " + _SEARCH_HINT.format(search=self.search_name)
