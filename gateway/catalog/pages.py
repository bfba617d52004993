"""Pages of the merged lists: which items go on a page, and what comes next.

The promise (README, "Pagination"): during one walk, every item present for
the whole walk is returned exactly once, in order, and no item is ever
returned twice, while backends come, go and change between pages.

How: cached items are served in public-key order, and a cursor names the
key of the last item served (keyset, not offset). The next page starts
strictly after that key in whatever snapshot is current. Items that appear
behind the walk's position are not returned (they were not present for the
whole walk); items that disappear are simply not there; nothing can come
twice because keys only grow within a walk.

Backends in passthrough mode come after the cached items, one backend at a
time in name order, each page being that backend's own page; the cursor then
carries the backend's cursor. This module only plans; the router fetches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import msgspec

from gateway.catalog.cursor import CursorPayload

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gateway.catalog.snapshot import Entry, KindView

# Vendor-prefixed _meta key naming backends whose items are missing from a
# list result because they are down (README, "Pagination").
UNAVAILABLE_META_KEY: Final = "dev.mcp-gateway/unavailable"

_encoder: Final = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class PagePlan:
    """What one list page consists of.

    Attributes:
        entries: cached items to serve, in order.
        fetch: a passthrough backend whose page must be fetched and appended
            (with ``fetch_cursor``), or "" for none.
        next: where the walk continues after this page, or None at the end.
            When ``fetch`` is set, the router decides ``next`` from the
            backend's answer (``after_passthrough``).
    """

    entries: Sequence[Entry]
    fetch: str = ""
    fetch_cursor: str | None = None
    next: CursorPayload | None = None


def next_passthrough(after: str, passthrough: Sequence[str]) -> str:
    """The first passthrough backend named after ``after`` ("" for the first), or ""."""
    for name in sorted(passthrough):
        if name > after:
            return name
    return ""


def plan_page(
    kind: str,
    view: KindView,
    position: CursorPayload | None,
    page_size: int,
    passthrough: Sequence[str] = (),
) -> PagePlan:
    """Plan the page that starts at ``position`` (None: the first page).

    Args:
        kind: the list kind (result key), recorded in next cursors.
        view: the current snapshot's view of that kind.
        position: the decoded cursor, if any.
        page_size: cached items per page; 0 means all of them.
        passthrough: names of backends whose items of this kind are not
            cached (only ever non-empty for resources).
    """
    if position is not None and position.backend:
        return PagePlan((), fetch=position.backend, fetch_cursor=position.backend_cursor)
    start = view.after(position.after if position is not None else None)
    stop = len(view) if page_size == 0 else start + page_size
    entries = view.slice(start, stop)
    if stop < len(view):
        return PagePlan(entries, next=CursorPayload(kind=kind, after=entries[-1].key))
    first = next_passthrough("", passthrough)
    if not first:
        return PagePlan(entries)
    if not entries:
        return PagePlan((), fetch=first)
    return PagePlan(entries, next=CursorPayload(kind=kind, backend=first))


def after_passthrough(
    kind: str, backend: str, backend_next: str | None, passthrough: Sequence[str]
) -> CursorPayload | None:
    """Where the walk goes after one page of a passthrough backend."""
    if backend_next is not None:
        return CursorPayload(kind=kind, backend=backend, backend_cursor=backend_next)
    following = next_passthrough(backend, passthrough)
    return CursorPayload(kind=kind, backend=following) if following else None


def render_page(
    kind: str,
    items: Sequence[bytes],
    next_cursor: str | None,
    unavailable: Sequence[str] = (),
) -> msgspec.Raw:
    """The list result: pre-encoded items joined, plus nextCursor and _meta."""
    out = b'{"' + kind.encode() + b'":[' + b",".join(items) + b"]"
    if next_cursor is not None:
        out += b',"nextCursor":' + _encoder.encode(next_cursor)
    if unavailable:
        meta: dict[str, Any] = {UNAVAILABLE_META_KEY: sorted(unavailable)}
        out += b',"_meta":' + _encoder.encode(meta)
    return msgspec.Raw(out + b"}")
