"""Specification tests for ``gateway.errors``: one tree, translated to the wire in one place."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import gateway
from gateway import errors
from gateway.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    REQUEST_TIMEOUT_CODE,
    BackendUnavailable,
    GatewayError,
    LocalProtocolError,
    RequestTimeout,
    TransportBroken,
    http_status_for,
    to_protocol_error,
)
from gateway.protocol.signing import BadSignature
from gateway.protocol.stateless.error_codes import HeaderMismatch


def exception_classes() -> list[type[BaseException]]:
    """Every exception class a gateway module defines."""
    found: list[type[BaseException]] = []
    for info in pkgutil.walk_packages(gateway.__path__, "gateway."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        found.extend(
            value
            for value in vars(module).values()
            if inspect.isclass(value)
            and issubclass(value, BaseException)
            and value.__module__ == module.__name__
        )
    return found


def test_every_exception_of_the_gateway_is_a_gateway_error_drawn_in_the_tree() -> None:
    """Gateway choice (docs/style.md rule 6): one tree under GatewayError, drawn in errors.py."""
    classes = exception_classes()
    assert len(classes) > 30  # the walk found the packages' classes, not only errors.py's
    outside = [c.__qualname__ for c in classes if not issubclass(c, GatewayError)]
    assert outside == []
    tree = errors.__doc__ or ""
    undrawn = [c.__qualname__ for c in classes if c.__qualname__ not in tree]
    assert undrawn == []


def test_a_protocol_error_is_its_own_answer() -> None:
    """Gateway choice: a ProtocolError carries its code; the translation returns it as is."""
    exc = HeaderMismatch("Mcp-Method disagrees with the body")
    assert to_protocol_error(exc) is exc


def test_an_unavailable_backend_is_minus_32603_naming_it() -> None:
    """Gateway choice (docs/protocol.md, errors): data.reason and data.backend."""
    err = to_protocol_error(BackendUnavailable("files", "starting", kind="overloaded"))
    assert (err.code, err.data) == (INTERNAL_ERROR, {"reason": "overloaded", "backend": "files"})
    assert "files" in err.message


def test_a_timeout_is_minus_32001_with_the_seconds_waited() -> None:
    """Gateway choice (docs/protocol.md, errors): -32001, data names backend and seconds."""
    err = to_protocol_error(RequestTimeout("slow", 1.23456))
    assert err.code == REQUEST_TIMEOUT_CODE
    assert err.data == {"reason": "timeout", "backend": "slow", "seconds": 1.235}
    assert err.message == "backend 'slow' did not answer within 1.23 s"


@pytest.mark.parametrize("exc", [TransportBroken("eof"), BadSignature("x")])
def test_any_other_gateway_error_is_an_internal_error_that_says_nothing_inside(
    exc: GatewayError,
) -> None:
    """Gateway choice: a host learns nothing of the gateway's insides from a stray error."""
    err = to_protocol_error(exc)
    assert isinstance(err, LocalProtocolError)
    assert (err.code, err.message, err.data) == (INTERNAL_ERROR, "internal error", None)


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (-32700, 400),
        (-32600, 400),
        (INVALID_PARAMS, 400),
        (-32020, 400),
        (-32021, 400),
        (-32022, 400),
        (-32601, 404),
        (INTERNAL_ERROR, 200),
        (REQUEST_TIMEOUT_CODE, 200),
    ],
)
def test_each_code_travels_with_its_http_status(code: int, status: int) -> None:
    """Spec (2026-07-28 transports/streamable-http.mdx): 400 for the envelope and
    -32020/21/22, 404 for -32601, 200 for everything else."""
    assert http_status_for(code) == status
