"""OpenTelemetry traces across the hop: the hooks, and their no-op fast path.

A host request becomes a *server* span; each request the gateway sends a
backend for it becomes a *client* span under it; the backend receives the
client span's W3C ``traceparent`` (HTTP header on HTTP backends, and
``params._meta.traceparent`` on every backend, as SEP-414 lays out for
2026-07-28 and as a harmless unprefixed key before it). An incoming
``traceparent`` is continued: from ``params._meta`` first (the request's own,
any era), else from the HTTP request's header.

Rules:

1. **Off costs one check.** :data:`active` is ``None`` unless the config's
   ``tracing.enabled`` is true; every hook on the request path reads it once
   and does nothing else when it is ``None``. The OpenTelemetry packages are
   imported by :mod:`gateway.telemetry.otel` only, and that module only by
   :func:`configure` when tracing is on: a gateway with tracing off never
   imports them (measured: benchmarks/tracing_overhead.py).
2. **On, the work stays off the event loop.** Spans are exported in batches
   by the SDK's own thread; the request path only creates and ends spans.
3. **One process, one tracer.** :func:`configure` replaces the previous one
   (after flushing it), so tests can install an in-memory exporter.
4. The contexts the hooks pass between layers are context variables, which
   trio copies into every task a request spawns: the HTTP headers of the
   request being routed (:func:`incoming_http`) and the ``traceparent`` the
   backend request being sent carries (:func:`outgoing_http_headers`).
5. What the frontend answers itself (``initialize``, ``server/discover``,
   ``subscriptions/listen``) is a server span too, opened by
   :func:`answered` with the router's attributes. A listen stream is *one*
   span for the stream's life, with an event per notification it carries:
   a span per notification would be a trace per keep-alive.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, Protocol

import trio

from gateway.errors import INTERNAL_ERROR, ConfigError, ProtocolError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping

    #: What a span attribute or event attribute may hold here.
    Attribute = str | int | bool

    import msgspec

    from gateway.telemetry.otel import TracingSettings

#: The trace-context keys read from ``_meta`` and headers (W3C Trace Context, Baggage).
TRACE_HEADERS: Final = ("traceparent", "tracestate")
_HEADER_BYTES: Final = {name.encode(): name for name in TRACE_HEADERS}
OTEL_EXTRA_HINT: Final = "pip install 'trio-mcp-gateway[otel]'"


class ServerSpan(Protocol):
    """A host request's span while it is routed."""

    def finish(self, outcome: str, backend: str, code: int | None) -> None:
        """End it with the request's outcome, the backend that served it, its error code."""
        ...

    def event(self, name: str, attributes: Mapping[str, Attribute]) -> None:
        """Record something that happened while it is open (a listen's notification)."""
        ...

    def annotate(self, key: str, value: Attribute) -> None:
        """Set one more attribute before it finishes."""
        ...


class ClientSpan(Protocol):
    """One backend request's span while it is sent."""

    @property
    def params(self) -> msgspec.Raw | None:
        """The params to send: the caller's, with this span's trace context in ``_meta``."""
        ...

    @property
    def carrier(self) -> dict[str, str]:
        """This span's trace headers (``traceparent``...), for :func:`outgoing`."""
        ...

    def finish(self, result: msgspec.Raw | None, error: BaseException | None) -> None:
        """End it with the result, or the exception the request ended with."""
        ...


class Tracer(Protocol):
    """What the hooks call; :class:`gateway.telemetry.otel.OtelTracer` is the one in use."""

    def server_span(
        self,
        method: str,
        params: dict[str, Any],
        *,
        version: str | None,
        profile: str,
        incoming: Mapping[str, str] | None,
    ) -> ServerSpan:
        """Start a host request's span (the current one until it finishes).

        Its parent is ``params._meta``'s trace context, else ``incoming``'s
        (the HTTP request's headers), else none: a new trace.
        """
        ...

    def client_span(
        self, backend: str, method: str, params: msgspec.Raw | None, *, version: str | None
    ) -> ClientSpan:
        """Start a backend request's span under the current one."""
        ...

    def shutdown(self) -> None:
        """Export what is buffered and stop the exporter."""
        ...


#: The tracer in force, or None when tracing is off (rule 1).
active: Tracer | None = None

_incoming: ContextVar[dict[str, str] | None] = ContextVar("mcp_gateway_trace_in", default=None)
_outgoing: ContextVar[dict[str, str] | None] = ContextVar("mcp_gateway_trace_out", default=None)


def configure(settings: TracingSettings, exporter: object | None = None) -> None:
    """Install the tracer the config asks for, or none (rule 3).

    Args:
        settings: the ``tracing:`` block.
        exporter: a span exporter to use instead of the configured one,
            with spans exported as they end (tests: an in-memory exporter).

    Raises:
        ConfigError: tracing is enabled but the ``[otel]`` extra is missing.
    """
    global active  # rule 1: one module-level check on the hot path
    shutdown()
    if not settings.enabled:
        return
    try:
        from gateway.telemetry import (
            otel as tracing_otel,
        )  # rule 1: imported only when tracing is on
    except ImportError as exc:
        raise ConfigError(
            [f"tracing.enabled: needs the OpenTelemetry packages ({OTEL_EXTRA_HINT}): {exc}"]
        ) from None
    active = tracing_otel.OtelTracer(settings, exporter)


def shutdown() -> None:
    """Flush and remove the tracer in force, if any (the process is stopping)."""
    global active
    tracer, active = active, None
    if tracer is not None:
        tracer.shutdown()


@contextmanager
def incoming_http(headers: Iterable[tuple[bytes, bytes]]) -> Iterator[None]:
    """Make an HTTP request's trace headers the ones a server span continues.

    Called by the frontend only while tracing is on, around one request.
    """
    found = {
        _HEADER_BYTES[name.lower()]: value.decode("latin-1")
        for name, value in headers
        if name.lower() in _HEADER_BYTES
    }
    token = _incoming.set(found or None)
    try:
        yield
    finally:
        _incoming.reset(token)


def incoming_headers() -> dict[str, str] | None:
    """The trace headers of the HTTP request being routed, if it had any."""
    return _incoming.get()


@contextmanager
def outgoing(carrier: dict[str, str]) -> Iterator[None]:
    """Make ``carrier`` the trace headers of the backend request being sent."""
    token = _outgoing.set(carrier)
    try:
        yield
    finally:
        _outgoing.reset(token)


@contextmanager
def answered(
    method: str,
    params: dict[str, Any],
    *,
    version: str | None,
    profile: str,
    cancelled: str = "cancelled",
) -> Iterator[ServerSpan | None]:
    """A server span around a request the frontend answers itself (rule 5).

    Yields None when tracing is off. The span ends with the block: ``ok``,
    ``error`` with the JSON-RPC code of a ``ProtocolError`` (-32603 for any
    other exception, as the host is answered), or ``cancelled`` when the
    block is cancelled (``cancelled="ok"`` where a cancellation is how the
    request normally ends, a listen stream the host closes).

    Args:
        method: the MCP method.
        params: the request's params (their ``_meta`` trace context is continued).
        version: the revision the host speaks.
        profile: the profile endpoint it came in on.
        cancelled: the outcome a cancellation counts as.
    """
    tracer = active
    if tracer is None:
        yield None
        return
    span = tracer.server_span(
        method, params, version=version, profile=profile, incoming=incoming_headers()
    )
    outcome, code = "ok", None
    try:
        yield span
    except ProtocolError as exc:
        outcome, code = "error", exc.code
        raise
    except trio.Cancelled:
        outcome = cancelled
        raise
    except Exception:
        outcome, code = "error", INTERNAL_ERROR
        raise
    finally:
        span.finish(outcome, "", code)


async def traced(
    tracer: Tracer,
    backend: str,
    method: str,
    params: msgspec.Raw | None,
    version: str | None,
    send: Callable[[msgspec.Raw | None], Awaitable[msgspec.Raw]],
) -> msgspec.Raw:
    """Send one backend request under a client span (tracing on).

    Args:
        tracer: the tracer in force.
        backend: the backend's name.
        method: the MCP method.
        params: the params as the caller would send them.
        version: the revision the backend speaks (None before its handshake).
        send: sends the params it is given (the span's, with ``_meta``'s
            trace context) and returns the result.
    """
    span = tracer.client_span(backend, method, params, version=version)
    try:
        with outgoing(span.carrier):
            result = await send(span.params)
    except BaseException as exc:
        span.finish(None, exc)
        raise
    span.finish(result, None)
    return result


def outgoing_http_headers() -> dict[str, str] | None:
    """The trace headers an HTTP backend transport adds to this request (None: none)."""
    return _outgoing.get()
