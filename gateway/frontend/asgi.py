"""The gateway's ASGI application: the MCP endpoint plus operations paths.

``{mcp_path}`` serves the profile ``default``; ``{mcp_path}/{name}`` serves
each other configured profile (``catalog.profiles``). Any other path under
``{mcp_path}/`` is 404 with a JSON-RPC error body, so an MCP client sees a
JSON-RPC error rather than an HTML page or nothing.

``/sse`` and ``/messages`` serve hosts on the legacy HTTP+SSE transport.
``/healthz`` says the process answers; ``/readyz`` says whether every
backend marked ``required`` is up, and names the ones that are not;
``/metrics`` is the Prometheus exposition of the gateway's registry.
``/.well-known/oauth-protected-resource[/path]`` is the RFC 9728 metadata
of each MCP path.

``/metrics`` and ``/readyz``'s details name backends and tools. On a
loopback bind they are open; otherwise they are served by a separate
listener (``metrics: {host, port}``, :class:`OperationsApp`) or only to an
admin token, and ``/readyz`` here answers with its status alone.

Every HTTP request runs under ``rejection.answer``: the one place where a
refusal becomes its response and a failure becomes a logged, counted
JSON-RPC error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gateway.catalog.profiles import DEFAULT_PROFILE
from gateway.frontend import http_util as h
from gateway.frontend.origin import is_loopback_host
from gateway.frontend.rejection import Rejection, answer
from gateway.identity.metadata import metadata_document, metadata_paths, resource_paths
from gateway.telemetry import tracing

if TYPE_CHECKING:
    from collections.abc import Callable, Collection

    from gateway.frontend.sse_endpoint import LegacySseEndpoint
    from gateway.frontend.streamable.endpoint import McpEndpoint
    from gateway.identity.authenticator import AuthHolder
    from gateway.router.call_metrics import RequestObserver
    from gateway.telemetry.metrics import Metrics

#: Who may read ``/metrics`` and ``/readyz`` details on the main listener:
#: anyone (loopback bind), admin tokens only, or nobody (a separate listener).
OperationsAccess: TypeAlias = Literal["open", "admin", "elsewhere"]
Readiness: TypeAlias = "Callable[[], tuple[bool, dict[str, Any]]]"


class SubApp(Protocol):
    """An app mounted under a path of its own (the operator console, ``gateway.console``)."""

    def owns(self, path: str) -> bool:
        """Whether a request path is this app's."""
        ...

    async def __call__(self, scope: h.Scope, receive: h.Receive, send: h.Send) -> None:
        """Answer one request."""
        ...


class GatewayApp:
    """Routes HTTP paths; everything else is 404.

    Args:
        mcp_path: where the MCP endpoint lives (``/mcp``).
        endpoint: the MCP endpoint.
        readiness: returns (ready, details) for ``/readyz``.
        metrics: the metrics; their registry is served at ``/metrics``, and
            refusals and failures are counted on them.
        legacy: the legacy HTTP+SSE endpoints, when enabled.
        profiles: the names of the profiles served under ``mcp_path``
            (``default`` is always served at ``mcp_path`` itself).
        auth: the authenticator in force, for the resource metadata and the
            admin check.
        operations: who may read ``/metrics`` and ``/readyz`` details here.
        console: the operator console, when ``admin.enabled``.
        observer: told of each refused request (the console's recent
            errors), when the console is on.
        consent: the browser's paths of the consent flow (``/oauth/start/``
            and the callback), when a backend uses ``user_consent``.
    """

    def __init__(
        self,
        mcp_path: str,
        endpoint: McpEndpoint,
        readiness: Readiness,
        metrics: Metrics,
        legacy: LegacySseEndpoint | None = None,
        profiles: Collection[str] = (),
        *,
        auth: AuthHolder | None = None,
        operations: OperationsAccess = "open",
        console: SubApp | None = None,
        observer: RequestObserver | None = None,
        consent: SubApp | None = None,
    ) -> None:
        self.console = console
        self.consent = consent
        # Told of each refused request (the console's recent errors), when on.
        self.observer = observer
        self._mcp_path = mcp_path.rstrip("/") or "/"
        base = "" if self._mcp_path == "/" else self._mcp_path
        self._profile_base = base + "/"
        self._profiles = frozenset(profiles) - {DEFAULT_PROFILE}
        self._auth = auth
        self.operations = operations
        self._metadata = metadata_paths(
            resource_paths(mcp_path, [self._profile_base + name for name in sorted(self._profiles)])
        )
        self._endpoint = endpoint
        self._legacy = legacy
        self._readiness = readiness
        self._metrics = metrics

    async def __call__(self, scope: h.Scope, receive: h.Receive, send: h.Send) -> None:
        """The ASGI entry point."""
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if tracing.active is None:
            await answer(self._route, scope, receive, send, self._metrics, self.observer)
            return
        with tracing.incoming_http(scope["headers"]):  # a host's traceparent, continued
            await answer(self._route, scope, receive, send, self._metrics, self.observer)

    async def _route(self, scope: h.Scope, receive: h.Receive, send: h.Send) -> None:
        path = scope["path"].rstrip("/") or "/"
        if path == self._mcp_path:
            await self._endpoint(scope, receive, send)
        elif path.startswith(self._profile_base) and self._is_profile_path(path):
            name = path[len(self._profile_base) :]
            if name not in self._profiles:
                raise Rejection(404, f"no such profile: {name[:64]}")
            await self._endpoint(scope, receive, send, name)
        elif path == "/sse" and self._legacy is not None:
            await self._legacy.stream(scope, receive, send)
        elif path == "/messages" and self._legacy is not None:
            await self._legacy.post(scope, receive, send)
        elif path in self._metadata and self._auth is not None and self._auth.current.enabled:
            await self._resource_metadata(send, self._metadata[path])
        elif path in ("/healthz", "/readyz", "/metrics"):
            await serve_operations(
                path, send, self._readiness, self._metrics, detailed=self._may_see_details(scope)
            )
        elif self.consent is not None and self.consent.owns(path):
            await self.consent(scope, receive, send)
        elif self.console is not None and self.console.owns(path):
            await self.console(scope, receive, send)
        else:
            await h.respond_json(send, 404, {"error": f"no such path: {path[:100]}"})

    def _is_profile_path(self, path: str) -> bool:
        # One segment under the MCP path. With ``mcp_path`` "/", only names
        # of configured profiles are profile paths, so the operations paths
        # (/healthz, /metrics...) stay what they are.
        rest = path[len(self._profile_base) :]
        if not rest or "/" in rest:
            return False
        return self._mcp_path != "/" or rest in self._profiles

    def _may_see_details(self, scope: h.Scope) -> bool:
        if self.operations == "open":
            return True
        if self.operations == "elsewhere" or self._auth is None:
            return False
        return self._auth.current.is_admin(h.header(scope, b"authorization"))

    async def _resource_metadata(self, send: h.Send, resource_path: str) -> None:
        assert self._auth is not None
        auth = self._auth.current
        base = auth.resource_url
        # The main path's resource is the configured URL itself; another
        # path (a profile) is that URL's origin plus its own path.
        resource = base if resource_path == self._mcp_path else _origin(base) + resource_path
        document = metadata_document(
            resource, auth.metadata.authorization_servers, auth.metadata.scopes_supported
        )
        await h.respond_json(send, 200, document)


def operations_access(bind_host: str, metrics_port: int) -> OperationsAccess:
    """Who may read ``/metrics`` and ``/readyz`` details on the MCP listener.

    Open on a loopback bind (only this machine can ask); on any other bind,
    nobody when a separate operations listener is configured, else admin
    tokens only.
    """
    if is_loopback_host(bind_host):
        return "open"
    return "elsewhere" if metrics_port else "admin"


def _origin(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}"


async def serve_operations(
    path: str, send: h.Send, readiness: Readiness, metrics: Metrics, *, detailed: bool
) -> None:
    """Answer ``/healthz``, ``/readyz`` or ``/metrics``.

    Args:
        path: one of the three.
        send: the ASGI send.
        readiness: returns (ready, details).
        metrics: the registry served at ``/metrics``.
        detailed: whether this caller may see what names backends and tools.

    Raises:
        Rejection: ``/metrics`` asked for by a caller who may not see it (403).
    """
    if path == "/healthz":
        await h.respond_json(send, 200, {"status": "ok"})
    elif path == "/readyz":
        ready, details = readiness()
        body = {"ready": ready, **details} if detailed else {"ready": ready}
        await h.respond_json(send, 200 if ready else 503, body)
    elif not detailed:
        raise Rejection(
            403,
            "Forbidden: /metrics on a non-loopback bind needs an admin token "
            "(auth.admin_tokens) or is served on the metrics listener (metrics.port)",
        )
    else:
        await h.respond(
            send,
            200,
            generate_latest(metrics.registry),
            content_type=CONTENT_TYPE_LATEST.encode(),
        )


class OperationsApp:
    """The separate operations listener (``metrics: {host, port}``): three paths, all open.

    Args:
        readiness: returns (ready, details).
        metrics: the registry served at ``/metrics``.
    """

    def __init__(self, readiness: Readiness, metrics: Metrics) -> None:
        self._readiness = readiness
        self._metrics = metrics

    async def __call__(self, scope: h.Scope, receive: h.Receive, send: h.Send) -> None:
        """The ASGI entry point."""
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        await answer(self._route, scope, receive, send, self._metrics)

    async def _route(self, scope: h.Scope, receive: h.Receive, send: h.Send) -> None:
        path = scope["path"].rstrip("/") or "/"
        if path in ("/healthz", "/readyz", "/metrics"):
            await serve_operations(path, send, self._readiness, self._metrics, detailed=True)
        else:
            await h.respond_json(send, 404, {"error": f"no such path: {path[:100]}"})


async def _lifespan(receive: h.Receive, send: h.Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
