"""How a failure reads in a backend's state reason and in a log line.

A backend's contexts are nested nurseries, so its failures arrive wrapped in
exception groups; the supervisor and the per-client links both unwrap them
the same way and describe the first leaf, which is the condition that ended
the session.
"""

from __future__ import annotations

from typing import Any, Final

import trio

from gateway.errors import GatewayError, ProtocolError

# What ends an attempt or a link without being a bug: anything else propagates.
EXPECTED: Final = (GatewayError, trio.TooSlowError)


def first_leaf(group: BaseExceptionGroup[Any]) -> BaseException:
    """The first exception in a (nested) group: the one that ended the block."""
    first: BaseException = group.exceptions[0]
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first


def condition(exc: BaseException) -> BaseException:
    """The exception itself, or a group's first leaf."""
    return first_leaf(exc) if isinstance(exc, BaseExceptionGroup) else exc


def describe(exc: BaseException) -> str:
    """Short human text for a state reason or a log field."""
    exc = condition(exc)
    if isinstance(exc, trio.TooSlowError):
        return "timed out"
    if isinstance(exc, ProtocolError):
        return f"error {exc.code}: {exc.message}"
    return str(exc) or type(exc).__name__
