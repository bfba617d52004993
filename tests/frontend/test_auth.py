"""The authenticator's JWT checks against an injected clock (no I/O, no real time)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any, Final

import pytest

from gateway.config import AuthConfig, JwtConfig
from gateway.frontend.auth import Authenticator, AuthError

SECRET: Final = "jwt-shared-secret"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _bearer(claims: dict[str, Any]) -> bytes:
    head = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = _b64(json.dumps(claims).encode())
    sig = hmac.new(SECRET.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"Bearer {head}.{body}.{_b64(sig)}".encode()


def _authenticator() -> Authenticator:
    return Authenticator(AuthConfig(jwt=JwtConfig(secret=SECRET, leeway=0)))


def test_a_clock_reading_of_zero_is_a_time_not_a_missing_clock() -> None:
    """Gateway choice: ``now=0`` is checked as the epoch; a token that expired at 10
    is valid at 0, and one not valid before 10 is refused at 0."""
    auth = _authenticator()
    principal = auth.authenticate(_bearer({"sub": "ada", "exp": 10}), now=0)
    assert principal is not None
    assert principal.key == "jwt:ada"
    with pytest.raises(AuthError, match="not valid yet"):
        auth.authenticate(_bearer({"sub": "ada", "exp": 20, "nbf": 10}), now=0)


def test_without_a_clock_reading_the_wall_clock_is_used() -> None:
    """Gateway choice: ``now`` left out means the current time, so an old token is refused."""
    with pytest.raises(AuthError, match="expired"):
        _authenticator().authenticate(_bearer({"sub": "ada", "exp": 10}))
