"""The configuration schema: the ``tracing:`` block (OpenTelemetry, issue 18).

Off by default. On, it needs the ``[otel]`` extra; the gateway refuses to
start without it rather than run untraced while the operator thinks it is
traced (``gateway.telemetry.tracing.configure``).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from gateway.config.schema import Base


class TracingConfig(Base, frozen=True, kw_only=True):
    """Traces across the hop: a span per host request, a child per backend request.

    Attributes:
        enabled: make spans at all; off costs nothing on the request path.
        exporter: ``otlp`` (OTLP over HTTP/protobuf, to a collector) or
            ``console`` (each span as JSON on stdout; for trying it out).
        endpoint: the OTLP traces URL, e.g.
            ``http://collector:4318/v1/traces``; empty means the SDK's
            default (``$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, else
            ``http://localhost:4318/v1/traces``).
        service_name: the ``service.name`` the spans carry.
        sample_ratio: share of new traces kept (0 to 1); a trace continued
            from a host keeps the host's sampling decision.
        headers: extra headers on every export (a collector's API key).
    """

    enabled: bool = False
    exporter: Literal["otlp", "console"] = "otlp"
    endpoint: str = ""
    service_name: str = "mcp-gateway"
    sample_ratio: Annotated[float, Meta(ge=0.0, le=1.0)] = 1.0
    headers: dict[str, str] = msgspec.field(default_factory=dict)
