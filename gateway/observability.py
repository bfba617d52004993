"""The log pipeline and the metric objects.

structlog is configured once, by the command line, with the processors
below: context variables first (so ``client_session=`` and ``backend=``
bound by an owning task reach every line its children write), JSON lines
unless on a terminal. Metrics live on an injected ``CollectorRegistry`` so
each test gets its own.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Final, TextIO

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

PREFIX: Final = "mcp_gateway_"
# Sub-millisecond (a catalog page) to minutes (a long tool call).
LATENCY_BUCKETS: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
)
_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def configure_logging(level: str = "info", fmt: str = "auto", stream: TextIO | None = None) -> None:
    """Set up structlog for the process.

    Args:
        level: lowest level written.
        fmt: ``json``, ``console``, or ``auto`` (console on a TTY).
        stream: where lines go; stderr by default (stdout belongs to MCP in
            stdio mode).
    """
    out = stream or sys.stderr
    use_console = fmt == "console" or (fmt == "auto" and out.isatty())
    renderer: Any = (
        structlog.dev.ConsoleRenderer(colors=False)
        if use_console
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=True,
    )


class Metrics:
    """Every metric the gateway exports, on one registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            PREFIX + "requests_total",
            "Requests from hosts, by backend, method and outcome.",
            ["backend", "method", "outcome"],
            registry=r,
        )
        self.request_duration = Histogram(
            PREFIX + "request_duration_seconds",
            "Time to answer a host request.",
            ["backend", "method"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.backend_up = Gauge(
            PREFIX + "backend_up", "1 when the backend is serving, else 0.", ["backend"], registry=r
        )
        self.backend_restarts = Counter(
            PREFIX + "backend_restarts_total",
            "Backend sessions lost and restarted.",
            ["backend"],
            registry=r,
        )
        self.client_sessions_open = Gauge(
            PREFIX + "client_sessions_open", "Client sessions currently open.", registry=r
        )
        self.client_sessions_opened = Counter(
            PREFIX + "client_sessions_opened_total", "Client sessions ever opened.", registry=r
        )
        self.catalog_items = Gauge(
            PREFIX + "catalog_items",
            "Items in the merged catalog, by backend and kind.",
            ["backend", "kind"],
            registry=r,
        )
        self.notifications_sent = Counter(
            PREFIX + "notifications_fanned_out_total",
            "Notifications queued to client sessions.",
            ["kind"],
            registry=r,
        )
        self.rejected = Counter(
            PREFIX + "rejected_requests_total",
            "Requests refused before routing, by reason.",
            ["reason"],
            registry=r,
        )
