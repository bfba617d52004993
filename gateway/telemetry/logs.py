"""The log pipeline: structlog's processors, JSON lines, and the level gate.

structlog is configured once, by the command line, with the processors
below: context variables first (so ``client_session=`` and ``backend=``
bound by an owning task reach every line its children write), JSON lines
unless on a terminal.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Final, TextIO

import structlog

_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


# The least severe level written; set_log_level changes it (a reload). Public
# so a hot path can skip building an event the gate would drop, without a
# call: ``if level >= threshold["level"]`` (the router's ``request.routed``).
threshold = {"level": logging.INFO}
_METHOD_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "msg": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
    "critical": logging.CRITICAL,
    "fatal": logging.CRITICAL,
}


def _level_gate(_logger: object, method_name: str, event_dict: Any) -> Any:
    if _METHOD_LEVELS.get(method_name, logging.INFO) < threshold["level"]:
        raise structlog.DropEvent
    return event_dict


def set_log_level(level: str) -> None:
    """Change the least severe level written, for every logger at once (a reload)."""
    threshold["level"] = _LEVELS.get(level, logging.INFO)


def configure_logging(level: str = "info", fmt: str = "auto", stream: TextIO | None = None) -> None:
    """Set up structlog for the process.

    Args:
        level: lowest level written.
        fmt: ``json``, ``console``, or ``auto`` (console on a TTY).
        stream: where lines go; stderr by default (stdout belongs to MCP in
            stdio mode).
    """
    set_log_level(level)
    out = stream or sys.stderr
    use_console = fmt == "console" or (fmt == "auto" and out.isatty())
    renderer: Any = (
        structlog.dev.ConsoleRenderer(colors=False)
        if use_console
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            _level_gate,
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        # Loggers are cached on first use, so the level a reload changes is
        # checked by _level_gate, not baked into the cached wrapper.
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=True,
    )


__all__ = ["configure_logging", "set_log_level", "threshold"]
