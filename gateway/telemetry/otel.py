"""The tracer behind :mod:`gateway.telemetry.tracing`, on the official OpenTelemetry SDK.

Imported only when ``tracing.enabled`` is true (``gateway.telemetry.tracing`` rule 1),
so the ``[otel]`` extra is needed only then.

Names and attributes follow the OpenTelemetry semantic conventions for MCP
(``gen-ai/mcp.md``, status Development): span name ``{mcp.method.name}
{target}`` with the tool or prompt name as target, kind SERVER for the
host's request and CLIENT for the backend's; ``mcp.method.name``,
``mcp.protocol.version``, ``gen_ai.tool.name`` / ``gen_ai.prompt.name`` /
``mcp.resource.uri``, ``rpc.response.status_code`` and ``error.type`` on
failure (``tool_error`` for a tool result with ``isError: true``). What
the conventions do not cover is under ``mcp_gateway.*``: ``backend``,
``era`` (``modern``: 2026-07-28, ``legacy``: the handshake), ``outcome``
(the ``outcome`` label of ``mcp_gateway_requests_total``), ``profile``.
Session ids are never recorded (docs/security.md: no full session id leaves
the gateway).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Protocol

import trio
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway import __version__
from gateway.errors import BackendUnavailable, ProtocolError, RequestTimeout
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.stateless.envelope import MODERN_VERSIONS

if TYPE_CHECKING:
    from collections.abc import Mapping

    import msgspec


class TracingSettings(Protocol):
    """The ``tracing:`` config block as read here (``config.schema_tracing.TracingConfig``)."""

    @property
    def enabled(self) -> bool:
        """Whether spans are made at all."""
        ...

    @property
    def exporter(self) -> str:
        """``otlp`` or ``console``."""
        ...

    @property
    def endpoint(self) -> str:
        """The OTLP/HTTP traces URL; empty for the SDK's default."""
        ...

    @property
    def service_name(self) -> str:
        """The ``service.name`` resource attribute."""
        ...

    @property
    def sample_ratio(self) -> float:
        """Share of new traces kept; a continued trace follows its parent's choice."""
        ...

    @property
    def headers(self) -> Mapping[str, str]:
        """Extra headers on each OTLP export (a collector's API key)."""
        ...


INSTRUMENTATION: Final = "mcp-gateway"
_PROPAGATOR: Final = TraceContextTextMapPropagator()
# What a request's item is, per method: the attribute and whether it names the span.
_ITEMS: Final = {
    "tools/call": ("name", "gen_ai.tool.name", True),
    "prompts/get": ("name", "gen_ai.prompt.name", True),
    "resources/read": ("uri", "mcp.resource.uri", False),
    "resources/subscribe": ("uri", "mcp.resource.uri", False),
    "resources/unsubscribe": ("uri", "mcp.resource.uri", False),
}
_MAX_ATTRIBUTE: Final = 256


def _era(version: str | None) -> str | None:
    if version is None:
        return None
    return "modern" if version in MODERN_VERSIONS else "legacy"


def _start_attributes(
    method: str, body: Mapping[str, Any], version: str | None
) -> tuple[str, dict[str, Any]]:
    """The span name and first attributes of a request (semantic conventions for MCP)."""
    attributes: dict[str, Any] = {"mcp.method.name": method}
    name = method
    item = _ITEMS.get(method)
    if item is not None:
        key, attribute, names_span = item
        value = body.get(key)
        if isinstance(value, str):
            attributes[attribute] = value[:_MAX_ATTRIBUTE]
            if names_span:
                name = f"{method} {value[:_MAX_ATTRIBUTE]}"
    if method == "tools/call":
        attributes["gen_ai.operation.name"] = "execute_tool"
    era = _era(version)
    if version is not None and era is not None:
        attributes["mcp.protocol.version"] = version
        attributes["mcp_gateway.era"] = era
    return name, attributes


def _fail(span: trace.Span, error_type: str, code: int | None = None) -> None:
    span.set_attribute("error.type", error_type)
    if code is not None:
        span.set_attribute("rpc.response.status_code", str(code))
    span.set_status(Status(StatusCode.ERROR))


class _ServerSpan:
    """A host request's span, current (attached) until ``finish``."""

    __slots__ = ("_span", "_token")

    def __init__(self, span: trace.Span, token: object) -> None:
        self._span = span
        self._token = token

    def finish(self, outcome: str, backend: str, code: int | None) -> None:
        """End it with the request's outcome, backend and error code."""
        span = self._span
        span.set_attribute("mcp_gateway.outcome", outcome)
        if backend:
            span.set_attribute("mcp_gateway.backend", backend)
        if code is not None:
            _fail(span, str(code), code)
        elif outcome == "cancelled":
            _fail(span, "cancelled")
        otel_context.detach(self._token)  # type: ignore[arg-type]  # the token attach gave
        span.end()

    def event(self, name: str, attributes: Mapping[str, str | int | bool]) -> None:
        """Record an event on it (a listen stream's notification)."""
        self._span.add_event(name, dict(attributes))

    def annotate(self, key: str, value: str | int | bool) -> None:
        """Set one more attribute."""
        self._span.set_attribute(key, value)


class _ClientSpan:
    """One backend request's span; its context travels in ``params`` and ``carrier``."""

    __slots__ = ("_method", "_span", "carrier", "params")

    def __init__(
        self, span: trace.Span, method: str, params: msgspec.Raw | None, carrier: dict[str, str]
    ) -> None:
        self._span = span
        self._method = method
        self.params = params
        self.carrier = carrier

    def finish(self, result: msgspec.Raw | None, error: BaseException | None) -> None:
        """End it with the outcome of the request."""
        span = self._span
        outcome = "ok"
        if isinstance(error, BackendUnavailable):
            outcome = "unavailable"
            _fail(span, "backend_unavailable")
        elif isinstance(error, RequestTimeout):
            outcome = "timeout"
            _fail(span, "timeout")
        elif isinstance(error, ProtocolError):
            outcome = "error"
            _fail(span, str(error.code), error.code)
        elif isinstance(error, trio.Cancelled):
            outcome = "cancelled"
            _fail(span, "cancelled")
        elif error is not None:
            outcome = "error"
            _fail(span, type(error).__qualname__)
        elif self._method == "tools/call" and result is not None:
            body = mcp.decode_object(result)
            if body is not None and body.get("isError") is True:
                outcome = "tool_error"
                _fail(span, "tool_error")
        span.set_attribute("mcp_gateway.outcome", outcome)
        span.end()


def _exporter(settings: TracingSettings) -> SpanExporter:
    if settings.exporter == "console":
        return ConsoleSpanExporter()
    # Only the otlp exporter needs it: protobuf and requests load here.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=settings.endpoint or None, headers=dict(settings.headers))


class OtelTracer:
    """Spans on a tracer provider of its own (never the process-global one).

    Args:
        settings: the ``tracing:`` block.
        exporter: an exporter to use instead of the configured one, with
            spans exported as they end (an in-memory one in tests).
    """

    def __init__(self, settings: TracingSettings, exporter: object | None = None) -> None:
        resource = Resource.create(
            {"service.name": settings.service_name, "service.version": __version__}
        )
        sampler = ParentBased(TraceIdRatioBased(settings.sample_ratio))
        self._provider = TracerProvider(resource=resource, sampler=sampler)
        if exporter is not None:
            assert isinstance(exporter, SpanExporter)
            self._provider.add_span_processor(SimpleSpanProcessor(exporter))
        else:
            # Exports run on the processor's own thread (gateway.telemetry.tracing rule 2).
            self._provider.add_span_processor(BatchSpanProcessor(_exporter(settings)))
        self._tracer = self._provider.get_tracer(INSTRUMENTATION, __version__)

    def server_span(
        self,
        method: str,
        params: dict[str, Any],
        *,
        version: str | None,
        profile: str,
        incoming: Mapping[str, str] | None,
    ) -> _ServerSpan:
        """Start a host request's span, continuing ``_meta``'s or the HTTP headers' trace."""
        meta = params.get("_meta")
        carrier: Mapping[str, str] = {}
        if isinstance(meta, dict) and isinstance(meta.get("traceparent"), str):
            carrier = {k: v for k, v in meta.items() if k in ("traceparent", "tracestate")}
        elif incoming:
            carrier = incoming
        parent = _PROPAGATOR.extract(carrier)
        name, attributes = _start_attributes(method, params, version)
        attributes["mcp_gateway.profile"] = profile
        span = self._tracer.start_span(
            name, context=parent, kind=SpanKind.SERVER, attributes=attributes
        )
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        return _ServerSpan(span, token)

    def client_span(
        self, backend: str, method: str, params: msgspec.Raw | None, *, version: str | None
    ) -> _ClientSpan:
        """Start a backend request's span under the current one; put its context in ``_meta``."""
        body = mcp.decode_object(params) if params is not None else {}
        name, attributes = _start_attributes(method, body or {}, version)
        attributes["mcp_gateway.backend"] = backend
        span = self._tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes)
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span))
        if body is not None and carrier:
            meta = body.get("_meta")
            body["_meta"] = {**(meta if isinstance(meta, dict) else {}), **carrier}
            params = jsonrpc.to_raw(body)
        return _ClientSpan(span, method, params, carrier)

    def shutdown(self) -> None:
        """Export what is buffered and stop the exporter."""
        self._provider.shutdown()
