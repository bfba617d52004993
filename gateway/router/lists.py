"""The list methods: pages of the catalog, then passthrough backends' own pages.

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
5. An item of a ``user_consent`` backend the caller has not consented to
   is listed all the same, marked ``_meta["dev.mcp-gateway/consent"] =
   {"required": true, "backend": NAME}`` (calling it starts the sign-in);
   such a list is per principal in its cache hint. A ``user_consent``
   backend that cannot be listed without a person's token (it refused the
   catalog session with HTTP 401) has no items in the catalog; a caller
   who has not signed in there finds it named in the page's
   ``_meta["dev.mcp-gateway/consent"] = {"required": true, "unlisted":
   [NAME, ...]}``, so the list is never silently shorter; every other
   backend is listed as before.
6. Such a backend is listed per principal once that principal has
   consented: its tools (prompts) are asked for on the caller's own
   session there, with the caller's token (``backends.backend`` rule 3),
   named under the backend's prefix as usual, and added to the last page
   of that caller's list only; the list is per principal in its cache
   hint, and nothing of it is kept, so a revoked consent or a
   ``list_changed`` shows at the next list. A listing that fails names
   the backend in ``_meta["dev.mcp-gateway/unavailable"]``. Each item
   meets the rules a catalog item meets, by its public name: the
   caller's profile must select the backend and the name (a search-mode
   profile lists only its pinned tools) and the access policy must admit
   it there (``router.access.PersonalView``); what they leave out is not
   listed, and a profile that does not select the backend shows nothing
   of it. A backend without a prefix is named ``unlisted``: its names
   could not be routed back.
7. ``skills/list`` pages carry ``ttlMs``/``cacheScope`` for hosts of every
   era (gateway choice: the extension's result schema requires them; a
   2025-11-25 host's SDK rejects a page without them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
import structlog
from msgspec.structs import replace

from gateway.backends.state import BackendState
from gateway.catalog.kindview import Entry
from gateway.catalog.naming import public_uri
from gateway.catalog.pages import after_passthrough, plan_page, render_page
from gateway.catalog.profiles import DEFAULT_PROFILE
from gateway.catalog.snapshot import Kind
from gateway.errors import BackendUnavailable, LocalProtocolError, ProtocolError, RequestTimeout
from gateway.protocol import mcp, revisions
from gateway.protocol.stateless.cache_hints import combined_hint
from gateway.router.context import ModernRequest
from gateway.router.filtering import filter_list

if TYPE_CHECKING:
    from gateway.backends.state import BackendView
    from gateway.catalog.cursor import CursorCodec
    from gateway.catalog.snapshot import Snapshot
    from gateway.config.schema_filters import FilterConfig
    from gateway.guardrails.chains import Guardrails
    from gateway.router.call_metrics import RouterMetrics
    from gateway.router.consent_gate import ConsentDesk
    from gateway.router.context import Call
    from gateway.router.neighbours import PoolView

logger = structlog.get_logger("gateway.router")

#: The ``_meta`` key marking an item whose backend needs the caller's sign-in (rule 5).
CONSENT_META_KEY = "dev.mcp-gateway/consent"
#: The most pages of one backend's list walked for one caller (rule 6).
PERSONAL_PAGES = 100


def _in_view(snap: Snapshot, backend: BackendView) -> bool:
    """Whether a backend belongs to the view (a profile's), by its place in the prefix table."""
    if backend.prefix:
        return snap.prefixes.get(backend.prefix) == backend.name
    return backend.name in snap.unprefixed or snap.admits_uri is None


def _decode_item(encoded: bytes) -> dict[str, Any]:
    return mcp.decode_object(msgspec.Raw(encoded)) or {}


def _naming_unlisted(page: msgspec.Raw, names: list[str]) -> msgspec.Raw:
    """Rule 5: the page's ``_meta`` names the backends the caller must sign in to for
    them to be listed at all."""
    body = mcp.decode_object(page)
    if body is None:  # pragma: no cover - render_page always builds an object
        return page
    meta = body.get("_meta")
    meta = dict(meta) if isinstance(meta, dict) else {}
    meta[CONSENT_META_KEY] = {"required": True, "unlisted": names}
    body["_meta"] = meta
    return mcp.encode(body)


def _marked(encoded: bytes, backend: str) -> bytes:
    """An item marked as needing its person's sign-in at ``backend`` (rule 5)."""
    item = _decode_item(encoded)
    meta = item.get("_meta")
    item["_meta"] = {
        **(meta if isinstance(meta, dict) else {}),
        CONSENT_META_KEY: {"required": True, "backend": backend},
    }
    return bytes(mcp.encode(item))


class Lists:
    """Answers tools/list, prompts/list, resources/list and resources/templates/list.

    Args:
        pool: the backends (for passthrough and for ``_meta.unavailable``).
        cursors: signs and checks pagination cursors.
        page_size: items per page; 0 means everything in one page.
        metrics: where pages and invalid cursors are counted.
        guard: the guardrail chains; a ``lists`` filter sees each tool
            definition of a page (``router.filtering`` rule 3).
    """

    def __init__(
        self,
        pool: PoolView,
        cursors: CursorCodec,
        page_size: int,
        metrics: RouterMetrics,
        guard: Guardrails | None = None,
    ) -> None:
        self._pool = pool
        self._cursors = cursors
        self.page_size = page_size
        self._metrics = metrics
        self.guard = guard
        self.consent: ConsentDesk | None = None
        """The consent flow, to mark items needing a sign-in (rule 5)."""
        self.separator = "__"
        """The naming separator, for items listed per principal (rule 6)."""

    def filters_of(self, backend: str) -> list[FilterConfig]:
        """A backend's configured guardrail filters, by its name (none once it is gone)."""
        view = self._pool.get(backend)
        return [] if view is None else view.config.filters

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

    async def list_skills(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        """``skills/list`` (SEP-2640): every skills backend's entries, URIs namespaced."""
        return await self.page(Kind.SKILLS, call, params)

    def _unavailable_backends(self, snap: Snapshot) -> list[str]:
        return sorted(
            b.name
            for b in self._pool.backends.values()
            if b.state is not BackendState.UP and _in_view(snap, b)
        )

    def _passthrough(self, kind: Kind, snap: Snapshot) -> list[str]:
        if kind is not Kind.RESOURCES:
            return []
        return sorted(
            b.name
            for b in self._pool.backends.values()
            if b.config.resources.list_mode == "passthrough" and _in_view(snap, b)
        )

    async def page(self, kind: Kind, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        """One page of a list, at the position the request's cursor names.

        Raises:
            LocalProtocolError: -32602, a cursor we did not issue for this list.
        """
        cursor = params.get("cursor")
        # The main endpoint's cursors name no profile, as before profiles.
        profile = "" if call.client.profile == DEFAULT_PROFILE else call.client.profile
        if call.view_tag:
            # One effective view's cursor is -32602 on another (router.access).
            profile = f"{profile}#{call.view_tag}"
        try:
            position = (
                None
                if cursor is None
                else self._cursors.decode(cursor, kind.value, profile, call.client.principal)
            )
        except LocalProtocolError:
            self._metrics.invalid_cursors.inc()
            raise
        passthrough = self._passthrough(kind, call.snapshot)
        plan = plan_page(
            kind.value, call.snapshot.listed(kind), position, self.page_size, passthrough
        )
        items = [entry.encoded for entry in plan.entries]
        if self.guard is not None and kind is Kind.TOOLS:
            items = await filter_list(self.guard, call, plan.entries, items, self.filters_of)
        version = call.client.protocol_version
        if revisions.needs_downgrade(version):
            items = [
                bytes(mcp.encode(revisions.list_item(kind.value, _decode_item(item), version)))
                for item in items
            ]
        awaiting, personal = await self._awaiting_consent(call)
        if awaiting:
            items = [
                _marked(item, entry.backend) if entry.backend in awaiting else item
                for entry, item in zip(plan.entries, items, strict=True)
            ]
        unlisted = sorted(
            name
            for name in awaiting
            if (backend := self._pool.get(name)) is not None and backend.refused_listing
        )
        unavailable = self._unavailable_backends(call.snapshot)
        if personal and plan.next is None and not plan.fetch:
            # The last page of the walk: the caller's own listings (rule 6).
            mine, listed, hidden, failed = await self._listed_for(kind, call, awaiting)
            items.extend(mine)
            unlisted = sorted({*unlisted, *hidden})
            unavailable = sorted({*(n for n in unavailable if n not in listed), *failed})
        following = plan.next
        fetch, fetch_cursor = plan.fetch, plan.fetch_cursor
        while fetch:
            backend = self._pool.get(fetch)
            if backend is None or backend.state is not BackendState.UP:
                # Down or removed mid-walk: skip it, say so in _meta.
                following = after_passthrough(kind.value, fetch, None, passthrough)
            else:
                page, backend_next = await self._fetch_passthrough(
                    backend, fetch_cursor, call.snapshot
                )
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
            None
            if following is None
            else self._cursors.encode(replace(following, profile=profile), call.client.principal)
        )
        self._metrics.pages_served.labels(kind=kind.value).inc()
        rendered = render_page(kind.value, items, next_cursor, unavailable)
        if unlisted:
            rendered = _naming_unlisted(rendered, unlisted)
        if isinstance(call.client, ModernRequest) or kind is Kind.SKILLS:
            return self._with_hint(kind, rendered, per_principal=call.per_principal or personal)
        return rendered

    async def _awaiting_consent(self, call: Call) -> tuple[set[str], bool]:
        """The ``user_consent`` backends in view the caller has no token at, and whether
        any is in view (rule 5)."""
        desk = self.consent
        principal = call.client.principal
        if desk is None or principal is None:
            return set(), False
        names = [
            backend.name
            for backend in self._pool.backends.values()
            if desk.acts_for_people(backend.name) and _in_view(call.snapshot, backend)
        ]
        awaiting = {name for name in names if not await desk.has_consent(principal, name)}
        return awaiting, bool(names)

    async def _listed_for(
        self, kind: Kind, call: Call, awaiting: set[str]
    ) -> tuple[list[bytes], set[str], list[str], list[str]]:
        """Rule 6: the caller's own listing of each backend it alone may list.

        Returns:
            (the encoded public items, the backends they came from, the
            backends the caller's view keeps it from listing this way, the
            backends whose listing failed).
        """
        items: list[bytes] = []
        listed: set[str] = set()
        hidden: list[str] = []
        failed: list[str] = []
        desk = self.consent
        if desk is None or kind not in (Kind.TOOLS, Kind.PROMPTS):
            return items, listed, hidden, failed
        for backend in sorted(self._pool.backends.values(), key=lambda b: b.name):
            if (
                backend.name in awaiting
                or not backend.refused_listing
                or not backend.per_client
                or not desk.acts_for_people(backend.name)
                or not _in_view(call.snapshot, backend)
            ):
                continue
            if not backend.prefix:
                hidden.append(backend.name)  # its names could not be routed back
                continue
            try:
                found = await self._walk(backend, kind, call.client.session_id)
            except (BackendUnavailable, RequestTimeout, ProtocolError) as exc:
                logger.info("backend.list.personal_failed", backend=backend.name, error=str(exc))
                failed.append(backend.name)
                continue
            entries = []
            for item in found:
                original = item.get("name")
                if not isinstance(original, str):
                    continue
                public = f"{backend.prefix}{self.separator}{original}"
                if not call.admits_personal(kind, public, backend.name, listed=True):
                    continue  # the caller's profile or policy leaves it out
                item["name"] = public
                entries.append(Entry(public, backend.name, original, bytes(mcp.encode(item))))
            encoded = [entry.encoded for entry in entries]
            if self.guard is not None and kind is Kind.TOOLS:
                encoded = await filter_list(self.guard, call, entries, encoded, self.filters_of)
            version = call.client.protocol_version
            if revisions.needs_downgrade(version):
                encoded = [
                    bytes(mcp.encode(revisions.list_item(kind.value, _decode_item(e), version)))
                    for e in encoded
                ]
            items.extend(encoded)
            listed.add(backend.name)
        return items, listed, hidden, failed

    @staticmethod
    async def _walk(backend: BackendView, kind: Kind, client: str) -> list[dict[str, Any]]:
        """Every page of a backend's list, on the client's own session there (rule 6)."""
        found: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(PERSONAL_PAGES):
            params = None if cursor is None else mcp.encode({"cursor": cursor})
            result = await backend.request(kind.list_method, params, client=client)
            page, following = mcp.list_items(result, kind.value)
            found.extend(page)
            if following is None or following == cursor:
                break
            cursor = following
        return found

    def _with_hint(self, kind: Kind, page: msgspec.Raw, *, per_principal: bool) -> msgspec.Raw:
        """A modern host's page with the merged hint of the backends behind the list.

        Every backend up that offers the list contributes (``caching.mdx``
        §Interaction with Pagination: every page carries the same hint):
        the shortest ``ttlMs``, ``private`` if any is; a handshake-era
        backend counts as ``{0, private}``, so one of them makes the list
        uncacheable, and so does an empty set of contributors. Under an
        access policy the list depends on who asks: ``private``, so no
        shared cache hands one principal's list to another (even a
        principal that sees everything sees more than others may).
        """
        hints = [
            backend.list_hint(kind)
            for backend in self._pool.backends.values()
            if backend.state is BackendState.UP and backend.offers(kind.capability)
        ]
        body = mcp.decode_object(page)
        if body is None:  # pragma: no cover - render_page always builds an object
            return page
        body.update(combined_hint(hints, per_principal=per_principal).as_fields())
        return mcp.encode(body)

    async def _fetch_passthrough(
        self, backend: BackendView, cursor: str | None, snap: Snapshot
    ) -> tuple[list[bytes], str | None]:
        params = None if cursor is None else mcp.encode({"cursor": cursor})
        result = await backend.request(Kind.RESOURCES.list_method, params)
        page, backend_next = mcp.list_items(result, Kind.RESOURCES.value)
        rules = backend.config.resources
        encoded = []
        for item in page:
            uri = item.get("uri")
            if not isinstance(uri, str) or not rules.allows(uri):
                continue
            public = public_uri(backend.prefix, uri)
            if snap.admits_uri is None or snap.admits_uri(public, backend.name):
                item["uri"] = public
                encoded.append(bytes(mcp.encode(item)))
        return encoded, backend_next
