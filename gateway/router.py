"""Where each message from a host goes, and what comes back.

Rules:

1. Every public name or URI is resolved through one catalog snapshot, taken
   at the start of the request; a refresh in the middle changes nothing for
   that request.
2. A request for something the catalog does not know is answered by the
   gateway (-32602, or -32002 for resources/read on revisions that use it)
   and never reaches a backend.
3. A request for an item of a backend that is down fails at once with
   -32603 and ``data.reason = "backend_unavailable"`` naming the backend.
4. Payloads are forwarded as Raw bytes; the router decodes params only to
   swap a public name or URI for the original, and results only when they
   carry URIs to namespace.
5. Backend errors pass through with their own code, message and data: the
   host should see what the server said.

Theory of operation: ``handle_request`` looks the method up in a table of
handlers. Each handler returns a Raw result or raises; ``handle_request``
turns every outcome into exactly one encoded response for the client's id.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

import msgspec
import structlog

from gateway import __version__
from gateway.backends.backend import Backend, BackendState
from gateway.catalog.naming import public_uri
from gateway.catalog.pages import after_passthrough, plan_page, render_page
from gateway.catalog.snapshot import Kind, Snapshot
from gateway.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    REQUEST_TIMEOUT_CODE,
    BackendUnavailable,
    LocalProtocolError,
    ProtocolError,
    RequestTimeout,
)
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.versions import resource_not_found_code

if TYPE_CHECKING:
    from gateway.backends.pool import Pool
    from gateway.catalog.cursor import CursorCodec
    from gateway.protocol.jsonrpc import Request

logger = structlog.get_logger("gateway.router")

SERVER_NAME: Final = "mcp-gateway"
LOG_LEVELS: Final = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)


class ClientPeer(Protocol):
    """What the router needs of a client session; the frontend provides it."""

    @property
    def session_id(self) -> str:
        """Opaque id, for logs only."""
        ...

    @property
    def protocol_version(self) -> str:
        """The revision negotiated with this client."""
        ...


Handler = Callable[[ClientPeer, dict[str, Any], Snapshot], Awaitable[msgspec.Raw]]


@dataclass(frozen=True, slots=True)
class _Target:
    backend: Backend
    original: str


def _unavailable(exc: BackendUnavailable) -> LocalProtocolError:
    return LocalProtocolError(
        str(exc), INTERNAL_ERROR, data={"reason": "backend_unavailable", "backend": exc.backend}
    )


def _timed_out(exc: RequestTimeout) -> LocalProtocolError:
    return LocalProtocolError(
        str(exc),
        REQUEST_TIMEOUT_CODE,
        data={"reason": "timeout", "backend": exc.backend, "seconds": exc.seconds},
    )


class Router:
    """Routes host requests to backends through the catalog.

    Args:
        pool: the live backends and their catalog.
        cursors: signs and checks pagination cursors.
        page_size: items per list page; 0 means everything in one page.
    """

    def __init__(self, pool: Pool, cursors: CursorCodec, page_size: int) -> None:
        self._pool = pool
        self._cursors = cursors
        self._page_size = page_size
        self._handlers: dict[str, Handler] = {
            "ping": self._ping,
            "tools/list": self._list_tools,
            "prompts/list": self._list_prompts,
            "resources/list": self._list_resources,
            "resources/templates/list": self._list_templates,
            "tools/call": self._call_tool,
            "prompts/get": self._get_prompt,
            "resources/read": self._read_resource,
            "completion/complete": self._complete,
            "logging/setLevel": self._set_level,
            "resources/subscribe": self._subscribe,
            "resources/unsubscribe": self._subscribe,
        }

    # -- initialize ------------------------------------------------------

    def server_capabilities(self) -> dict[str, Any]:
        """Capabilities to advertise to a host.

        tools, prompts and resources are always offered: backends come and go
        and the lists change with them (list_changed). The rest follow what
        the live backends offer at the time of the host's initialize.
        """
        live = [b for b in self._pool.backends.values() if b.state is BackendState.UP]
        caps: dict[str, Any] = {
            "tools": {"listChanged": True},
            "prompts": {"listChanged": True},
            "resources": {"listChanged": True},
        }
        if any(b.offers("completions") for b in live):
            caps["completions"] = {}
        if any(b.offers("logging") for b in live):
            caps["logging"] = {}
        return caps

    def instructions(self) -> str | None:
        """The backends' own instructions, each under its prefix."""
        parts = []
        for name in sorted(self._pool.backends):
            backend = self._pool.backends[name]
            info = backend.info
            if info is not None and info.instructions:
                label = backend.prefix or backend.name
                parts.append(f"## {label}\n{info.instructions.strip()}")
        return "\n\n".join(parts) or None

    def initialize_result(self, version: str) -> msgspec.Raw:
        """The InitializeResult for a host that negotiated ``version``."""
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": self.server_capabilities(),
            "serverInfo": {"name": SERVER_NAME, "version": __version__},
        }
        instructions = self.instructions()
        if instructions:
            result["instructions"] = instructions
        return mcp.encode(result)

    # -- dispatch --------------------------------------------------------

    async def handle_request(self, client: ClientPeer, request: Request) -> bytes:
        """Answer one host request; always returns exactly one encoded response."""
        started = time.perf_counter()
        handler = self._handlers.get(request.method)
        outcome = "ok"
        try:
            if handler is None:
                raise LocalProtocolError(f"method not found: {request.method}", METHOD_NOT_FOUND)
            params = mcp.decode_params(request.params)
            result = await handler(client, params, self._pool.snapshot)
            return jsonrpc.encode_response(request.id, result)
        except BackendUnavailable as exc:
            outcome = "unavailable"
            err: ProtocolError = _unavailable(exc)
        except RequestTimeout as exc:
            outcome = "timeout"
            err = _timed_out(exc)
        except ProtocolError as exc:
            outcome = "error"
            err = exc
        finally:
            logger.debug(
                "request.routed",
                client_session=client.session_id[:8],
                method=request.method,
                outcome=outcome,
                duration_ms=round((time.perf_counter() - started) * 1000, 3),
            )
        return jsonrpc.encode_error(request.id, err.code, err.message, err.data)

    # -- lists -----------------------------------------------------------

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

    async def _page(self, kind: Kind, params: dict[str, Any], snapshot: Snapshot) -> msgspec.Raw:
        cursor = params.get("cursor")
        position = None if cursor is None else self._cursors.decode(cursor, kind.value)
        passthrough = self._passthrough(kind)
        plan = plan_page(kind.value, snapshot.view(kind), position, self._page_size, passthrough)
        items = [entry.encoded for entry in plan.entries]
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
        next_cursor = None if following is None else self._cursors.encode(following)
        return render_page(kind.value, items, next_cursor, unavailable)

    async def _fetch_passthrough(
        self, backend: Backend, cursor: str | None
    ) -> tuple[list[bytes], str | None]:
        params = None if cursor is None else mcp.encode({"cursor": cursor})
        result = await backend.request("resources/list", params)
        page, backend_next = mcp.list_items(result, Kind.RESOURCES.value)
        rules = backend.config.resources
        encoded = []
        for item in page:
            uri = item.get("uri")
            if isinstance(uri, str) and rules.allows(uri):
                item["uri"] = public_uri(backend.prefix, uri)
                encoded.append(mcp.encode(item))
        return [bytes(raw) for raw in encoded], backend_next

    async def _list_tools(
        self, client: ClientPeer, params: dict[str, Any], snap: Snapshot
    ) -> msgspec.Raw:
        return await self._page(Kind.TOOLS, params, snap)

    async def _list_prompts(
        self, client: ClientPeer, params: dict[str, Any], snap: Snapshot
    ) -> msgspec.Raw:
        return await self._page(Kind.PROMPTS, params, snap)

    async def _list_resources(
        self, client: ClientPeer, params: dict[str, Any], snap: Snapshot
    ) -> msgspec.Raw:
        return await self._page(Kind.RESOURCES, params, snap)

    async def _list_templates(
        self, client: ClientPeer, params: dict[str, Any], snap: Snapshot
    ) -> msgspec.Raw:
        return await self._page(Kind.TEMPLATES, params, snap)

    # -- calls -----------------------------------------------------------

    def _backend(self, name: str) -> Backend:
        backend = self._pool.get(name)
        if backend is None:  # the snapshot outlived a reload that removed it
            raise BackendUnavailable(name, "removed from the configuration")
        return backend

    def _named_target(self, kind: Kind, public: str, snap: Snapshot, what: str) -> _Target:
        entry = snap.resolve(kind, public)
        if entry is None:
            raise LocalProtocolError(f"Unknown {what}: {public}", INVALID_PARAMS)
        return _Target(self._backend(entry.backend), entry.original)

    def _uri_target(self, public: str, snap: Snapshot, client: ClientPeer) -> _Target:
        resolved = snap.resolve_uri(public)
        if resolved is None:
            raise LocalProtocolError(
                f"Resource not found: {public}",
                resource_not_found_code(client.protocol_version),
                data={"uri": public},
            )
        backend_name, original = resolved
        return _Target(self._backend(backend_name), original)

    def _uri_mapper(self, backend: Backend) -> mcp.UriMap:
        prefix = backend.prefix
        return lambda uri: public_uri(prefix, uri)

    async def _call_tool(
        self, client: ClientPeer, params: dict[str, Any], snap: Snapshot
    ) -> msgspec.Raw:
        name = mcp.require_str(params, "name", "tool")
        arguments = params.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            raise LocalProtocolError(
                f"invalid params: tool arguments must be an object, not {type(arguments).__name__}",
                INVALID_PARAMS,
            )
        target = self._named_target(Kind.TOOLS, name, snap, "tool")
        params["name"] = target.original
        result = await target.backend.request("tools/call", mcp.encode(params))
        return mcp.rewrite_call_result(result, self._uri_mapper(target.backend))

    async def _get_prompt(
        self, client: ClientPeer, params: dict[str, Any], snap: Snapshot
    ) -> msgspec.Raw:
        name = mcp.require_str(params, "name", "prompt")
        target = self._named_target(Kind.PROMPTS, name, snap, "prompt")
        params["name"] = target.original
        result = await target.backend.request("prompts/get", mcp.encode(params))
        return mcp.rewrite_prompt_result(result, self._uri_mapper(target.backend))

    async def _read_resource(
        self, client: ClientPeer, params: dict[str, Any], snap: Snapshot
    ) -> msgspec.Raw:
        uri = mcp.require_str(params, "uri", "resource")
        target = self._uri_target(uri, snap, client)
        params["uri"] = target.original
        result = await target.backend.request("resources/read", mcp.encode(params))
        return mcp.rewrite_read_result(result, self._uri_mapper(target.backend))

    async def _complete(
        self, client: ClientPeer, params: dict[str, Any], snap: Snapshot
    ) -> msgspec.Raw:
        ref = params.get("ref")
        if not isinstance(ref, dict):
            raise LocalProtocolError("invalid params: completion 'ref' missing", INVALID_PARAMS)
        ref_type = ref.get("type")
        if ref_type == "ref/prompt":
            target = self._named_target(
                Kind.PROMPTS, mcp.require_str(ref, "name", "prompt reference"), snap, "prompt"
            )
            ref["name"] = target.original
        elif ref_type == "ref/resource":
            target = self._uri_target(
                mcp.require_str(ref, "uri", "resource reference"), snap, client
            )
            ref["uri"] = target.original
        else:
            raise LocalProtocolError(
                f"invalid params: unknown completion reference type {ref_type!r}", INVALID_PARAMS
            )
        if not target.backend.offers("completions"):
            # Nothing to complete is an answer, not an error (spec: completion).
            return mcp.encode({"completion": {"values": [], "hasMore": False}})
        return await target.backend.request("completion/complete", mcp.encode(params))

    async def _set_level(
        self, client: ClientPeer, params: dict[str, Any], snap: Snapshot
    ) -> msgspec.Raw:
        level = params.get("level")
        if level not in LOG_LEVELS:
            raise LocalProtocolError(
                f"invalid params: level must be one of {', '.join(LOG_LEVELS)}", INVALID_PARAMS
            )
        for backend in self._pool.backends.values():
            if backend.state is BackendState.UP and backend.offers("logging"):
                try:
                    await backend.request("logging/setLevel", mcp.encode({"level": level}))
                except (BackendUnavailable, RequestTimeout, ProtocolError) as exc:
                    logger.warning("logging.set_level.failed", backend=backend.name, error=str(exc))
        return jsonrpc.EMPTY_OBJECT

    async def _subscribe(
        self, client: ClientPeer, params: dict[str, Any], snap: Snapshot
    ) -> msgspec.Raw:
        raise LocalProtocolError("resource subscriptions are not offered", METHOD_NOT_FOUND)

    async def _ping(
        self, client: ClientPeer, params: dict[str, Any], snap: Snapshot
    ) -> msgspec.Raw:
        return jsonrpc.EMPTY_OBJECT
