"""The guarded walk over a backend's paged list, as a pure step function.

Rules:

1. A walk asks for one page at a time: the first without a cursor, each
   next one with the ``nextCursor`` of the page before. It ends when a page
   has no ``nextCursor``.
2. Three guards end it early and keep what came so far (robustness D15): a
   cursor the backend already gave (``cursor_repeated``), ``max_list_pages``
   pages asked for (``max_pages``), ``max_list_items`` items received
   (``max_items``, the excess dropped). The tripped guard is part of the
   result so the caller can count and log it.
3. An error answer to any page fails the whole list; the other lists of the
   backend are not affected (that is the caller's choice).

Theory of operation: this module does no I/O, in the manner of h11. The
caller holds a ``PageRequest``, sends ``request.method`` with
``request.params``, and hands the answer (the result, or the
``ProtocolError`` it got) to ``step``, which returns the next
``PageRequest``, the finished ``Listed``, or ``Failed``::

    walk = begin(Kind.TOOLS, max_pages=100, max_items=100_000)
    while isinstance(walk, PageRequest):
        walk = step(walk, await send(walk.method, walk.params))

Timeouts and broken links are the caller's: they never reach ``step``.
The helpers below the walk (``guard_report``, ``wanted``, ``filtered``,
``merged``) are the pure rest of turning a backend's lists into its
catalog listing.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.catalog.snapshot import BackendListing, Kind
from gateway.errors import ProtocolError
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.stateless.cache_hints import NO_CACHE, CacheHint, hint_of, merge_hints
from gateway.protocol.stateless.routing_headers import DroppedTool, tools_to_drop

if TYPE_CHECKING:
    from collections.abc import Mapping

    import msgspec

    from gateway.config import BackendConfig

Items = tuple[dict[str, Any], ...]


class Guard(enum.Enum):
    """Why a walk stopped before the backend's last page; values are metric labels."""

    MAX_ITEMS = "max_items"
    CURSOR_REPEATED = "cursor_repeated"
    MAX_PAGES = "max_pages"


@dataclass(frozen=True, slots=True, kw_only=True)
class PageRequest:
    """A walk in progress: the page to ask for next and what came before it."""

    kind: Kind
    max_pages: int
    max_items: int
    cursor: str | None = None
    pages: int = 0
    items: Items = ()
    seen: frozenset[str] = frozenset()
    hints: tuple[CacheHint, ...] = ()

    @property
    def method(self) -> str:
        """The list method to send."""
        return self.kind.list_method

    @property
    def params(self) -> msgspec.Raw | None:
        """The request's params: the cursor, when there is one."""
        return jsonrpc.to_raw({"cursor": self.cursor}) if self.cursor is not None else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Listed:
    """A finished walk.

    Attributes:
        kind: the list walked.
        items: the items kept (at most ``max_items``), unfiltered.
        pages: pages received.
        received: items received, before the ``max_items`` cut.
        guard: the guard that ended the walk early, if one did.
        hint: the pages' ``ttlMs``/``cacheScope`` merged (shortest, private
            if any page was); what a 2026-07-28 backend promised.
    """

    kind: Kind
    items: Items
    pages: int
    received: int
    guard: Guard | None = None
    hint: CacheHint = NO_CACHE


@dataclass(frozen=True, slots=True, kw_only=True)
class Failed:
    """A walk that got an error answer; the list counts as empty."""

    kind: Kind
    error: ProtocolError


def begin(kind: Kind, *, max_pages: int, max_items: int) -> PageRequest:
    """Start a walk: the request for its first page.

    Raises:
        ValueError: a limit below one (config refuses those before this).
    """
    if max_pages < 1 or max_items < 1:
        raise ValueError(f"list limits must be positive (pages {max_pages}, items {max_items})")
    return PageRequest(kind=kind, max_pages=max_pages, max_items=max_items)


Step = PageRequest | Listed | Failed


def step(walk: PageRequest, answer: msgspec.Raw | ProtocolError) -> Step:
    """Take one page's answer; return what to do next (rule order as in the docstring)."""
    if isinstance(answer, ProtocolError):
        return Failed(kind=walk.kind, error=answer)
    page, cursor = mcp.list_items(answer, walk.kind.value)
    items = (*walk.items, *page)
    pages = walk.pages + 1
    hints = (*walk.hints, hint_of(mcp.decode_object(answer) or {}))
    done = Listed(
        kind=walk.kind, items=items, pages=pages, received=len(items), hint=merge_hints(hints)
    )
    if len(items) >= walk.max_items:
        return _replace(done, items=items[: walk.max_items], guard=Guard.MAX_ITEMS)
    if cursor is None:
        return done
    if cursor in walk.seen:
        return _replace(done, guard=Guard.CURSOR_REPEATED)
    if pages >= walk.max_pages:
        return _replace(done, guard=Guard.MAX_PAGES)
    return PageRequest(
        kind=walk.kind,
        max_pages=walk.max_pages,
        max_items=walk.max_items,
        cursor=cursor,
        pages=pages,
        items=items,
        seen=walk.seen | {cursor},
        hints=hints,
    )


def _replace(done: Listed, *, items: Items | None = None, guard: Guard) -> Listed:
    return Listed(
        kind=done.kind,
        items=done.items if items is None else items,
        pages=done.pages,
        received=done.received,
        guard=guard,
        hint=done.hint,
    )


def guard_report(done: Listed, config: BackendConfig) -> tuple[str, dict[str, Any]]:
    """The warning a tripped guard is logged with: event name and fields.

    The events are ``backend.list.max_items``, ``backend.list.cursor_repeated``
    and ``backend.list.max_pages`` (operators alert on them).
    """
    assert done.guard is not None
    fields: dict[str, Any] = {"method": done.kind.list_method}
    if done.guard is Guard.MAX_PAGES:
        fields["pages"] = config.max_list_pages
    else:
        fields["items"] = done.received
    if done.guard is Guard.MAX_ITEMS:
        fields["limit"] = config.max_list_items
    return f"backend.list.{done.guard.value}", fields


def wanted(kind: Kind, capabilities: Mapping[str, Any], config: BackendConfig) -> bool:
    """Whether the gateway lists this kind at all.

    Not when the backend does not offer it, and not resources in
    ``passthrough`` mode, which the router fetches page by page during each
    host's own walk.
    """
    if not kind.offered_by(capabilities):
        return False
    return not (kind is Kind.RESOURCES and config.resources.list_mode == "passthrough")


def filtered(kind: Kind, items: Items, config: BackendConfig) -> Items:
    """The items the backend's include/exclude rules let through."""
    rules = {
        Kind.TOOLS: config.tools,
        Kind.PROMPTS: config.prompts,
        Kind.RESOURCES: config.resources,
        Kind.TEMPLATES: config.resources,
        # A skill is its files' resources: the resource rules match its URI.
        Kind.SKILLS: config.resources,
    }[kind]
    key = kind.identity_key
    return tuple(item for item in items if rules.allows(str(item.get(key, ""))))


def usable_tools(tools: Items) -> tuple[Items, list[DroppedTool]]:
    """The tools a client may keep, and those it must drop (``x-mcp-header``).

    SEP-2243 (``S/server/tools.mdx``): a client leaves out a tool whose
    ``x-mcp-header`` annotations are invalid (empty, not a primitive, a
    duplicate, bad characters), and never calls it. Towards a 2026-07-28
    backend the gateway is such a client: the tool does not enter the
    catalog, so no host of either era sees or calls it. A handshake-era
    backend's tools are kept (that leg has no headers; modern hosts still
    get them filtered out of ``tools/list``).
    """
    dropped = tools_to_drop(tools)
    if not dropped:
        return tools, []
    names = {d.name for d in dropped}
    return tuple(t for t in tools if t.get("name") not in names), dropped


def merged(
    config: BackendConfig, fresh: Mapping[Kind, Items], old: BackendListing | None
) -> BackendListing:
    """The backend's listing: the kinds in ``fresh`` replaced, the others kept from ``old``."""

    def items(kind: Kind) -> Items:
        if kind in fresh:
            return fresh[kind]
        return old.items(kind) if old is not None else ()

    return BackendListing(
        backend=config.name,
        prefix=config.public_prefix,
        tools=items(Kind.TOOLS),
        prompts=items(Kind.PROMPTS),
        resources=items(Kind.RESOURCES),
        templates=items(Kind.TEMPLATES),
        skills=items(Kind.SKILLS),
        on_collision=config.on_collision,
    )
