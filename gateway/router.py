"""Where each message goes, in both directions.

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
   swap a public name, URI or progress token for the backend's, and results
   only when they carry URIs to namespace.
5. Backend errors pass through with their own code, message and data.
6. Progress reaches only the client whose request asked for it, under that
   client's own token, with ``progress`` strictly increasing, and never
   after the response (the session drops it once the answer is in).
7. A backend's own request (sampling, elicitation, roots) goes to the one
   client that owns it: the client of a per-client backend session, else the
   only client with calls in flight to that backend. No owner, several
   owners, or an owner without the capability: the backend gets an error at
   once, never a guess and never a hang.
8. Notifications fan out only to the clients they concern: list_changed to
   all, resources/updated to subscribers, log messages to clients whose
   level admits them.

Theory of operation: ``handle_request`` looks the method up in a table of
handlers. Each handler returns a Raw result or raises; ``handle_request``
turns every outcome into exactly one encoded response for the client's id.
A handler that forwards registers the call in ``Owners`` for its duration,
which is what rule 7 consults.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

import msgspec
import structlog
import trio

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
    GatewayError,
    LocalProtocolError,
    ProtocolError,
    RequestTimeout,
)
from gateway.protocol import jsonrpc, mcp, revisions
from gateway.protocol.tables import LOG_LEVELS, LogLevels, Owners, Subscriptions
from gateway.protocol.versions import resource_not_found_code

if TYPE_CHECKING:
    from gateway.backends.pool import Pool
    from gateway.catalog.cursor import CursorCodec
    from gateway.observability import Metrics
    from gateway.protocol.jsonrpc import Request

logger = structlog.get_logger("gateway.router")

SERVER_NAME: Final = "mcp-gateway"
# Server-to-client requests a backend may send, and the client capability
# each needs (spec: client features).
_CLIENT_FEATURES: Final = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}

# Sends a message on the related request's stream; False when it could not
# (stream gone or full), so the caller can fall back to the GET stream.
Emit = Callable[[bytes], bool]


class ClientPeer(Protocol):
    """What the router needs of a client session; the frontend provides it."""

    @property
    def session_id(self) -> str:
        """Opaque, unguessable id."""
        ...

    @property
    def protocol_version(self) -> str:
        """The revision negotiated with this client."""
        ...

    @property
    def capabilities(self) -> dict[str, Any]:
        """What the client declared in initialize."""
        ...

    def notify_nowait(self, message: bytes) -> None:
        """Queue an unsolicited message (its GET stream or stdio peer)."""
        ...

    async def request(
        self, method: str, params: msgspec.Raw | None, emit: Emit | None
    ) -> msgspec.Raw:
        """Ask the client something (server-to-client request) and wait for its answer.

        ``emit`` is the related request's stream, when there is one.

        Raises:
            RemoteProtocolError: the client answered with an error.
        """
        ...


@dataclass(eq=False, slots=True)
class Call:
    """One host request while the router handles it."""

    client: ClientPeer
    snapshot: Snapshot
    emit: Emit | None = None
    backend: str = ""


Handler = Callable[[Call, dict[str, Any]], Awaitable[msgspec.Raw]]


@dataclass(frozen=True, slots=True)
class _Target:
    backend: Backend
    original: str


def _unavailable(exc: BackendUnavailable) -> LocalProtocolError:
    return LocalProtocolError(
        str(exc), INTERNAL_ERROR, data={"reason": exc.kind, "backend": exc.backend}
    )


def _timed_out(exc: RequestTimeout) -> LocalProtocolError:
    return LocalProtocolError(
        f"backend {exc.backend!r} did not answer within {exc.seconds:.3g} s",
        REQUEST_TIMEOUT_CODE,
        data={"reason": "timeout", "backend": exc.backend, "seconds": round(exc.seconds, 3)},
    )


class _Progress:
    """Relays one call's progress to its client under the client's token."""

    def __init__(self, token: Any, emit: Emit) -> None:
        self._token = token
        self._emit = emit
        self._last: float | None = None

    def __call__(self, body: dict[str, Any]) -> None:
        progress = body.get("progress")
        if isinstance(progress, bool) or not isinstance(progress, int | float):
            return
        if self._last is not None and progress <= self._last:
            return  # spec: progress increases; a backend that goes back is dropped (D8)
        self._last = progress
        body["progressToken"] = self._token
        if not self._emit(jsonrpc.encode_notification("notifications/progress", mcp.encode(body))):
            logger.debug("progress.dropped", reason="stream full or gone")


class Router:
    """Routes host requests to backends and backend messages to hosts.

    Args:
        pool: the live backends and their catalog.
        cursors: signs and checks pagination cursors.
        page_size: items per list page; 0 means everything in one page.
        metrics: where request counts and latencies go.
        nursery: where follow-up work runs (renewing subscriptions and log
            levels when a backend comes back).
        separator: the naming separator, to recognise a down backend's names.
        log_requests: log each routed request at info level (else debug).
    """

    def __init__(
        self,
        pool: Pool,
        cursors: CursorCodec,
        page_size: int,
        metrics: Metrics | None = None,
        nursery: trio.Nursery | None = None,
        separator: str = "__",
        log_requests: bool = False,
    ) -> None:
        self._pool = pool
        self._nursery = nursery
        self._separator = separator
        self._log_request = logger.info if log_requests else logger.debug
        self._cursors = cursors
        self._page_size = page_size
        self._metrics = metrics
        self._clients: dict[str, ClientPeer] = {}
        self._owners: Owners[Call] = Owners()
        self._subscriptions = Subscriptions()
        self._log_levels = LogLevels()
        self._backend_levels: dict[str, str] = {}
        self._up: set[str] = set()
        self._tokens = itertools.count(1)
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
            "resources/unsubscribe": self._unsubscribe,
        }
        pool.request_handler = self.backend_request
        pool.on_notification(self.backend_notification)
        pool.on_state_change(self._backend_state_changed)

    def set_page_size(self, page_size: int) -> None:
        """Change the list page size (on reload); walks in progress stay exact."""
        self._page_size = page_size

    # -- clients -----------------------------------------------------------

    def client_opened(self, client: ClientPeer) -> None:
        """A client session was created."""
        self._clients[client.session_id] = client

    def client_closed(self, session_id: str, nursery: trio.Nursery) -> None:
        """A client session ended: release what it held at the backends.

        Its calls in flight are cancelled by the frontend; here its
        subscriptions, its log level and its per-client backend sessions go.
        Unsubscribes that must reach backends run in ``nursery``.
        """
        self._clients.pop(session_id, None)
        for backend_name, uri in self._subscriptions.drop_client(session_id):
            backend = self._pool.get(backend_name)
            if backend is not None:
                nursery.start_soon(self._forward_unsubscribe, backend, uri)
        self._log_levels.drop_client(session_id)
        nursery.start_soon(self._apply_log_levels)
        for backend in self._pool.backends.values():
            backend.close_client(session_id)

    async def client_notification(
        self, client: ClientPeer, method: str, params: msgspec.Raw | None
    ) -> None:
        """A notification from a host other than initialized/cancelled."""
        if method == "notifications/roots/list_changed":
            for backend in self._pool.backends.values():
                if backend.state is BackendState.UP:
                    await backend.notify(method, params, client=client.session_id)

    # -- initialize ------------------------------------------------------

    def server_capabilities(self) -> dict[str, Any]:
        """Capabilities to advertise to a host.

        tools, prompts and resources are always offered: backends come and go
        and the lists change with them (list_changed). The rest follow what
        the live backends offer at the time of the host's initialize.
        """
        live = [b for b in self._pool.backends.values() if b.state is BackendState.UP]
        resources: dict[str, Any] = {"listChanged": True}
        if any(_subscribable(b) for b in live):
            resources["subscribe"] = True
        caps: dict[str, Any] = {
            "tools": {"listChanged": True},
            "prompts": {"listChanged": True},
            "resources": resources,
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

    async def handle_request(
        self, client: ClientPeer, request: Request, emit: Emit | None = None
    ) -> bytes:
        """Answer one host request; always returns exactly one encoded response.

        Args:
            client: the client session it came from.
            request: the decoded request.
            emit: where messages related to this request go before its
                response (progress, server-to-client requests): the POST's
                SSE stream. None when there is no such stream.
        """
        started = time.perf_counter()
        handler = self._handlers.get(request.method)
        outcome = "ok"
        call = Call(client, self._pool.snapshot, emit)
        try:
            if handler is None:
                raise LocalProtocolError(f"method not found: {request.method}", METHOD_NOT_FOUND)
            params = mcp.decode_params(request.params)
            result = await handler(call, params)
            return jsonrpc.encode_response(request.id, result)
        except BackendUnavailable as exc:
            outcome = "unavailable"
            err: ProtocolError = _unavailable(exc)
        except RequestTimeout as exc:
            outcome = "timeout"
            err = _timed_out(exc)
            if self._metrics is not None:
                self._metrics.timeouts.labels(backend=exc.backend).inc()
                self._metrics.cancellations.labels(direction="timeout").inc()
        except ProtocolError as exc:
            outcome = "error"
            err = exc
        except trio.Cancelled:
            outcome = "cancelled"
            if self._metrics is not None:
                self._metrics.cancellations.labels(direction="client").inc()
            raise
        finally:
            elapsed = time.perf_counter() - started
            if self._metrics is not None:
                # Only methods the gateway knows become label values: a host
                # must not be able to mint time series (bounded labels).
                method = request.method if handler is not None else "other"
                self._metrics.observe_request(method, outcome, elapsed, call.backend)
            self._log_request(
                "request.routed",
                client_session=client.session_id[:8],
                method=request.method[:64],
                backend=call.backend or None,
                outcome=outcome,
                duration_ms=round(elapsed * 1000, 3),
            )
        return jsonrpc.encode_error(request.id, err.code, err.message, err.data)

    async def _forward(
        self,
        call: Call,
        backend: Backend,
        method: str,
        params: dict[str, Any],
    ) -> msgspec.Raw:
        """Send one request to a backend on behalf of a host request.

        Swaps the client's progress token for one unique on the backend's
        link, and records the call as in flight for rule 7.
        """
        progress: _Progress | None = None
        token: str | None = None
        meta = params.get("_meta")
        if isinstance(meta, dict) and "progressToken" in meta:
            client_token = meta["progressToken"]
            if call.emit is not None:
                token = f"gw-{next(self._tokens)}"
                progress = _Progress(client_token, call.emit)
                params["_meta"] = {**meta, "progressToken": token}
            else:
                params["_meta"] = {k: v for k, v in meta.items() if k != "progressToken"}
        client_id = call.client.session_id
        call.backend = backend.name
        self._owners.add(backend.name, client_id, call)
        try:
            return await backend.request(
                method,
                mcp.encode(params),
                client=client_id,
                progress_token=token,
                on_progress=progress,
            )
        finally:
            self._owners.remove(backend.name, client_id, call)

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

    async def _page(self, kind: Kind, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        cursor = params.get("cursor")
        try:
            position = None if cursor is None else self._cursors.decode(cursor, kind.value)
        except LocalProtocolError:
            if self._metrics is not None:
                self._metrics.invalid_cursors.inc()
            raise
        passthrough = self._passthrough(kind)
        plan = plan_page(
            kind.value, call.snapshot.view(kind), position, self._page_size, passthrough
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
        next_cursor = None if following is None else self._cursors.encode(following)
        if self._metrics is not None:
            self._metrics.pages_served.labels(kind=kind.value).inc()
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
                encoded.append(bytes(mcp.encode(item)))
        return encoded, backend_next

    async def _list_tools(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        return await self._page(Kind.TOOLS, call, params)

    async def _list_prompts(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        return await self._page(Kind.PROMPTS, call, params)

    async def _list_resources(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        return await self._page(Kind.RESOURCES, call, params)

    async def _list_templates(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        return await self._page(Kind.TEMPLATES, call, params)

    # -- calls -----------------------------------------------------------

    def _backend(self, name: str) -> Backend:
        backend = self._pool.get(name)
        if backend is None:  # the snapshot outlived a reload that removed it
            raise BackendUnavailable(name, "removed from the configuration")
        return backend

    def _named_target(self, kind: Kind, public: str, snap: Snapshot, what: str) -> _Target:
        entry = snap.resolve(kind, public)
        if entry is None:
            # A name under the prefix of a backend that is down is not
            # unknown: say the backend is unavailable, at once (A31).
            head, sep, _ = public.partition(self._separator)
            owner = snap.prefixes.get(head) if sep else None
            backend = self._pool.get(owner) if owner is not None else None
            if backend is not None and backend.state is not BackendState.UP:
                raise BackendUnavailable(backend.name, backend.reason)
            raise LocalProtocolError(f"Unknown {what}: {public}", INVALID_PARAMS)
        return _Target(self._backend(entry.backend), entry.original)

    def _uri_target(self, public: str, call: Call) -> _Target:
        resolved = call.snapshot.resolve_uri(public)
        if resolved is None:
            raise LocalProtocolError(
                f"Resource not found: {public}",
                resource_not_found_code(call.client.protocol_version),
                data={"uri": public},
            )
        backend_name, original = resolved
        return _Target(self._backend(backend_name), original)

    @staticmethod
    def _uri_mapper(backend: Backend) -> mcp.UriMap:
        prefix = backend.prefix
        return lambda uri: public_uri(prefix, uri)

    async def _call_tool(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        name = mcp.require_str(params, "name", "tool")
        arguments = params.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            raise LocalProtocolError(
                f"invalid params: tool arguments must be an object, not {type(arguments).__name__}",
                INVALID_PARAMS,
            )
        target = self._named_target(Kind.TOOLS, name, call.snapshot, "tool")
        params["name"] = target.original
        if self._metrics is not None:
            self._metrics.count_tool_call(target.backend.name, target.original)
        result = await self._forward(call, target.backend, "tools/call", params)
        result = mcp.rewrite_call_result(result, self._uri_mapper(target.backend))
        return _downgraded(result, call.client.protocol_version, revisions.call_result)

    async def _get_prompt(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        name = mcp.require_str(params, "name", "prompt")
        target = self._named_target(Kind.PROMPTS, name, call.snapshot, "prompt")
        params["name"] = target.original
        result = await self._forward(call, target.backend, "prompts/get", params)
        result = mcp.rewrite_prompt_result(result, self._uri_mapper(target.backend))
        return _downgraded(result, call.client.protocol_version, revisions.prompt_result)

    async def _read_resource(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        uri = mcp.require_str(params, "uri", "resource")
        target = self._uri_target(uri, call)
        params["uri"] = target.original
        result = await self._forward(call, target.backend, "resources/read", params)
        return mcp.rewrite_read_result(result, self._uri_mapper(target.backend))

    async def _complete(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        ref = params.get("ref")
        if not isinstance(ref, dict):
            raise LocalProtocolError("invalid params: completion 'ref' missing", INVALID_PARAMS)
        ref_type = ref.get("type")
        if ref_type == "ref/prompt":
            target = self._named_target(
                Kind.PROMPTS,
                mcp.require_str(ref, "name", "prompt reference"),
                call.snapshot,
                "prompt",
            )
            ref["name"] = target.original
        elif ref_type == "ref/resource":
            target = self._uri_target(mcp.require_str(ref, "uri", "resource reference"), call)
            ref["uri"] = target.original
        else:
            raise LocalProtocolError(
                f"invalid params: unknown completion reference type {ref_type!r}", INVALID_PARAMS
            )
        if not target.backend.offers("completions"):
            # Nothing to complete is an answer, not an error (spec: completion).
            return mcp.encode({"completion": {"values": [], "hasMore": False}})
        return await self._forward(call, target.backend, "completion/complete", params)

    async def _ping(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        return jsonrpc.EMPTY_OBJECT

    # -- logging ---------------------------------------------------------

    async def _set_level(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        level = params.get("level")
        if not isinstance(level, str) or level not in LOG_LEVELS:
            raise LocalProtocolError(
                f"invalid params: level must be one of {', '.join(LOG_LEVELS)}", INVALID_PARAMS
            )
        client_id = call.client.session_id
        self._log_levels.set(client_id, level)
        for backend in self._pool.backends.values():
            if backend.per_client and backend.has_link(client_id) and backend.offers("logging"):
                await self._send_level(backend, level, client_id)
        await self._apply_log_levels()
        return jsonrpc.EMPTY_OBJECT

    async def _apply_log_levels(self) -> None:
        """Set each shared backend to the most verbose level any client wants."""
        wanted = self._log_levels.most_verbose()
        if wanted is None:
            return
        for backend in self._pool.backends.values():
            if (
                backend.state is BackendState.UP
                and backend.offers("logging")
                and self._backend_levels.get(backend.name) != wanted
            ):
                self._backend_levels[backend.name] = wanted
                await self._send_level(backend, wanted, None)

    async def _send_level(self, backend: Backend, level: str, client: str | None) -> None:
        try:
            await backend.request("logging/setLevel", mcp.encode({"level": level}), client=client)
        except (GatewayError, ProtocolError) as exc:
            logger.warning("logging.set_level.failed", backend=backend.name, error=str(exc))

    # -- subscriptions ---------------------------------------------------

    def _subscription_target(self, call: Call, params: dict[str, Any]) -> _Target:
        target = self._uri_target(mcp.require_str(params, "uri", "resource"), call)
        if not _subscribable(target.backend):
            raise LocalProtocolError(
                f"backend {target.backend.name!r} does not offer resource subscriptions",
                METHOD_NOT_FOUND,
            )
        return target

    async def _subscribe(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        target = self._subscription_target(call, params)
        client_id = call.client.session_id
        if target.backend.per_client:
            return await self._forward(
                call, target.backend, "resources/subscribe", {"uri": target.original}
            )
        if self._subscriptions.subscribe(target.backend.name, target.original, client_id):
            try:
                await target.backend.request(
                    "resources/subscribe", mcp.encode({"uri": target.original})
                )
            except BaseException:
                self._subscriptions.unsubscribe(target.backend.name, target.original, client_id)
                raise
        return jsonrpc.EMPTY_OBJECT

    async def _unsubscribe(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        target = self._subscription_target(call, params)
        client_id = call.client.session_id
        if target.backend.per_client:
            return await self._forward(
                call, target.backend, "resources/unsubscribe", {"uri": target.original}
            )
        if self._subscriptions.unsubscribe(target.backend.name, target.original, client_id):
            await self._forward_unsubscribe(target.backend, target.original)
        return jsonrpc.EMPTY_OBJECT

    async def _forward_unsubscribe(self, backend: Backend, uri: str) -> None:
        try:
            await backend.request("resources/unsubscribe", mcp.encode({"uri": uri}))
        except (GatewayError, ProtocolError) as exc:
            logger.info("subscription.release_failed", backend=backend.name, error=str(exc))

    def _backend_state_changed(self, backend: Backend) -> None:
        if backend.state is not BackendState.UP:
            self._backend_levels.pop(backend.name, None)
            self._up.discard(backend.name)
            return
        if backend.name in self._up:
            return  # a listing refresh, not a new session
        self._up.add(backend.name)
        if self._nursery is not None:
            self._nursery.start_soon(self._renew, backend)

    async def _renew(self, backend: Backend) -> None:
        """A backend came (back) up: give it the subscriptions and log level it lost."""
        for uri in self._subscriptions.uris_of(backend.name):
            try:
                await backend.request("resources/subscribe", mcp.encode({"uri": uri}))
            except (GatewayError, ProtocolError) as exc:
                logger.warning("subscription.renew_failed", backend=backend.name, error=str(exc))
        await self._apply_log_levels()

    # -- from backends ---------------------------------------------------

    def backend_notification(
        self, backend: Backend, method: str, params: msgspec.Raw | None, client: str | None
    ) -> None:
        """Fan a backend's notification out to the clients it concerns."""
        if method == "notifications/resources/updated":
            self._resource_updated(backend, params, client)
        elif method == "notifications/message":
            self._log_message(backend, params, client)
        elif method == "notifications/cancelled":
            pass  # cancels of server-to-client requests are handled by their waiters' timeouts
        else:
            logger.debug("backend.notification.dropped", backend=backend.name, method=method)

    def _resource_updated(
        self, backend: Backend, params: msgspec.Raw | None, client: str | None
    ) -> None:
        try:
            body = mcp.decode_params(params)
        except LocalProtocolError:
            return
        uri = body.get("uri")
        if not isinstance(uri, str):
            return
        holders = (
            {client} if client is not None else self._subscriptions.subscribers(backend.name, uri)
        )
        body["uri"] = public_uri(backend.prefix, uri)
        message = jsonrpc.encode_notification("notifications/resources/updated", mcp.encode(body))
        for holder in holders:
            peer = self._clients.get(holder)
            if peer is not None:
                peer.notify_nowait(message)

    def _log_message(
        self, backend: Backend, params: msgspec.Raw | None, client: str | None
    ) -> None:
        try:
            body = mcp.decode_params(params)
        except LocalProtocolError:
            return
        level = body.get("level")
        source = body.get("logger")
        body["logger"] = (
            f"{backend.name}/{source}" if isinstance(source, str) and source else backend.name
        )
        message = jsonrpc.encode_notification("notifications/message", mcp.encode(body))
        targets = [client] if client is not None else list(self._clients)
        for target in targets:
            peer = self._clients.get(target)
            if peer is not None and self._log_levels.wants(target, level):
                peer.notify_nowait(message)

    async def backend_request(
        self, backend: Backend, method: str, params: msgspec.Raw | None, client: str | None
    ) -> msgspec.Raw:
        """Relay a backend's own request to the client that owns it (rule 7)."""
        feature = _CLIENT_FEATURES.get(method)
        if feature is None:
            raise LocalProtocolError(f"method not found: {method}", METHOD_NOT_FOUND)
        related: Call | None = None
        if client is None:
            owner = self._owners.sole_owner(backend.name)
            if owner is None:
                raise LocalProtocolError(
                    f"{method}: the gateway cannot tell which client this request is for "
                    "(no single client has a call in flight to this backend)",
                    INTERNAL_ERROR,
                )
            client, related = owner
        else:
            related = self._owners.latest(backend.name, client)
        peer = self._clients.get(client)
        if peer is None:
            raise LocalProtocolError(f"{method}: the client session has ended", INTERNAL_ERROR)
        if feature not in peer.capabilities:
            raise LocalProtocolError(
                f"{method}: the client did not declare the {feature!r} capability",
                METHOD_NOT_FOUND,
            )
        emit = related.emit if related is not None else None
        with trio.move_on_after(backend.config.timeouts.request) as scope:
            return await peer.request(method, params, emit)
        assert scope.cancelled_caught
        raise LocalProtocolError(
            f"{method}: the client did not answer within {backend.config.timeouts.request:g} s",
            REQUEST_TIMEOUT_CODE,
        )


def _decode_item(encoded: bytes) -> dict[str, Any]:
    return mcp.decode_object(msgspec.Raw(encoded)) or {}


def _downgraded(
    result: msgspec.Raw,
    version: str,
    adapt: Callable[[dict[str, Any], str], dict[str, Any]],
) -> msgspec.Raw:
    """The result as a host on an older revision may see it (revisions.py)."""
    if not revisions.needs_downgrade(version):
        return result
    body = mcp.decode_object(result)
    return result if body is None else mcp.encode(adapt(body, version))


def _subscribable(backend: Backend) -> bool:
    info = backend.info
    if info is None:
        return False
    resources = info.capabilities.get("resources")
    return isinstance(resources, dict) and resources.get("subscribe") is True
