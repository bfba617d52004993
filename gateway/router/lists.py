"""The four list methods: pages of the catalog, then passthrough backends' own pages.

Rules:

1. A page is planned from the request's snapshot and the cursor alone
   (``catalog.pages``); the cursor is signed, so a host can neither forge a
   position nor read another kind's walk with it (-32602).
2. Backends listed in passthrough mode are walked after the cached items,
   one backend page per host page; a backend that is down or removed
   mid-walk is skipped and named in ``_meta``, never an error.
3. An empty page from one passthrough backend is not handed to the host:
   the walk goes straight on to the next backend.
4. A backend that returns the cursor it was given ends its part of the walk
   (a loop otherwise).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
import structlog

from gateway.backends.backend import BackendState
from gateway.catalog.naming import public_uri
from gateway.catalog.pages import after_passthrough, plan_page, render_page
from gateway.catalog.snapshot import Kind
from gateway.errors import LocalProtocolError
from gateway.protocol import mcp, revisions

if TYPE_CHECKING:
    from gateway.catalog.cursor import CursorCodec
    from gateway.router.calls import Call
    from gateway.router.metrics import RouterMetrics
    from gateway.router.views import BackendView, PoolView

logger = structlog.get_logger("gateway.router")


def _decode_item(encoded: bytes) -> dict[str, Any]:
    return mcp.decode_object(msgspec.Raw(encoded)) or {}


class Lists:
    """Answers tools/list, prompts/list, resources/list and resources/templates/list.

    Args:
        pool: the backends (for passthrough and for ``_meta.unavailable``).
        cursors: signs and checks pagination cursors.
        page_size: items per page; 0 means everything in one page.
        metrics: where pages and invalid cursors are counted.
    """

    def __init__(
        self, pool: PoolView, cursors: CursorCodec, page_size: int, metrics: RouterMetrics
    ) -> None:
        self._pool = pool
        self._cursors = cursors
        self.page_size = page_size
        self._metrics = metrics

    async def list_tools(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        """``tools/list``."""
        return await self.page(Kind.TOOLS, call, params)

    async def list_prompts(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        """``prompts/list``."""
        return await self.page(Kind.PROMPTS, call, params)

    async def list_resources(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        """``resources/list`` (cached items, then passthrough backends)."""
        return await self.page(Kind.RESOURCES, call, params)

    async def list_templates(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        """``resources/templates/list``."""
        return await self.page(Kind.TEMPLATES, call, params)

    def _unavailable_backends(self) -> list[str]:
        return sorted(
            b.name for b in self._pool.backends.values() if b.state is not BackendState.UP
        )

    def _passthrough(self, kind: Kind) -> list[str]:
        if kind is not Kind.RESOURCES:
            return []
        return sorted(
            b.name
            for b in self._pool.backends.values()
            if b.config.resources.list_mode == "passthrough"
        )

    async def page(self, kind: Kind, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        """One page of a list, at the position the request's cursor names.

        Raises:
            LocalProtocolError: -32602, a cursor we did not issue for this list.
        """
        cursor = params.get("cursor")
        try:
            position = (
                None
                if cursor is None
                else self._cursors.decode(cursor, kind.value, call.client.principal)
            )
        except LocalProtocolError:
            self._metrics.invalid_cursors.inc()
            raise
        passthrough = self._passthrough(kind)
        plan = plan_page(
            kind.value, call.snapshot.view(kind), position, self.page_size, passthrough
        )
        items = [entry.encoded for entry in plan.entries]
        version = call.client.protocol_version
        if revisions.needs_downgrade(version):
            items = [
                bytes(mcp.encode(revisions.list_item(kind.value, _decode_item(item), version)))
                for item in items
            ]
        unavailable = self._unavailable_backends()
        following = plan.next
        fetch, fetch_cursor = plan.fetch, plan.fetch_cursor
        while fetch:
            backend = self._pool.get(fetch)
            if backend is None or backend.state is not BackendState.UP:
                # Down or removed mid-walk: skip it, say so in _meta.
                following = after_passthrough(kind.value, fetch, None, passthrough)
            else:
                page, backend_next = await self._fetch_passthrough(backend, fetch_cursor)
                items.extend(page)
                if backend_next == fetch_cursor and backend_next is not None:
                    logger.warning("backend.list.cursor_repeated", backend=fetch, passthrough=True)
                    backend_next = None
                following = after_passthrough(kind.value, fetch, backend_next, passthrough)
            if items or following is None:
                break
            # An empty page from one backend: go straight on to the next
            # rather than hand the host an empty page.
            fetch, fetch_cursor = following.backend, following.backend_cursor
        next_cursor = (
            None if following is None else self._cursors.encode(following, call.client.principal)
        )
        self._metrics.pages_served.labels(kind=kind.value).inc()
        return render_page(kind.value, items, next_cursor, unavailable)

    async def _fetch_passthrough(
        self, backend: BackendView, cursor: str | None
    ) -> tuple[list[bytes], str | None]:
        params = None if cursor is None else mcp.encode({"cursor": cursor})
        result = await backend.request(Kind.RESOURCES.list_method, params)
        page, backend_next = mcp.list_items(result, Kind.RESOURCES.value)
        rules = backend.config.resources
        encoded = []
        for item in page:
            uri = item.get("uri")
            if isinstance(uri, str) and rules.allows(uri):
                item["uri"] = public_uri(backend.prefix, uri)
                encoded.append(bytes(mcp.encode(item)))
        return encoded, backend_next
