"""Client authentication and rate limits for the HTTP frontend (no I/O).

Credentials are checked before anything else touches a request, and never
go further: backends receive only their own configured headers, never a
host's ``Authorization`` or cookies (robustness A40).

Static bearer tokens are compared in constant time. JWTs signed with a
shared secret (HS256) are checked for signature, ``exp``/``nbf`` (with
leeway), ``aud`` and ``iss``; the standard library suffices for that.
Asymmetric JWTs (RS256 against a JWKS) need a crypto library and are not
built yet (see the issue notes).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.config import AuthConfig


class AuthError(Exception):
    """The request carries no acceptable credential; ``str()`` says why."""


def _b64decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request is from: a stable, non-secret key for rate limits and logs."""

    key: str
    kind: str


class Authenticator:
    """Checks the ``Authorization`` header against the auth config."""

    def __init__(self, config: AuthConfig) -> None:
        self._tokens = [t.encode() for t in config.bearer_tokens if t]
        self._jwt = config.jwt
        self.enabled = config.enabled
        self.resource_metadata = config.resource_metadata

    def challenge(self, reason: str) -> bytes:
        """The ``WWW-Authenticate`` header value for a 401."""
        parts = ['Bearer realm="mcp-gateway"']
        if self.resource_metadata:
            parts.append(f'resource_metadata="{self.resource_metadata}"')
        parts.append('error="invalid_token"')
        safe = reason.replace('"', "'")[:120]
        parts.append(f'error_description="{safe}"')
        return ", ".join(parts).encode("latin-1", "replace")

    def authenticate(
        self, authorization: bytes | None, now: float | None = None
    ) -> Principal | None:
        """The principal of a request, None when auth is off.

        Raises:
            AuthError: auth is on and the credential is missing or bad.
        """
        if not self.enabled:
            return None
        if authorization is None:
            raise AuthError("missing bearer token")
        scheme, _, token = authorization.partition(b" ")
        if scheme.lower() != b"bearer" or not token.strip():
            raise AuthError("expected 'Authorization: Bearer <token>'")
        token = token.strip()
        digest = hashlib.sha256(token).hexdigest()[:16]
        matched = False
        for known in self._tokens:
            matched |= hmac.compare_digest(known, token)
        if matched:
            return Principal(f"token:{digest}", "static")
        if self._jwt.secret and token.count(b".") == 2:
            when = time.time() if now is None else now
            claims = self._verify_jwt(token.decode("ascii", "replace"), when)
            subject = claims.get("sub")
            return Principal(f"jwt:{subject if isinstance(subject, str) else digest}", "jwt")
        raise AuthError("unknown token")

    def _verify_jwt(self, token: str, now: float) -> dict[str, Any]:
        header_part, payload_part, signature_part = token.split(".")
        try:
            header = json.loads(_b64decode(header_part))
            claims = json.loads(_b64decode(payload_part))
            signature = _b64decode(signature_part)
        except (ValueError, binascii.Error) as exc:
            raise AuthError("malformed JWT") from exc
        if not isinstance(header, dict) or header.get("alg") != "HS256":
            raise AuthError("JWT must be signed with HS256")
        expected = hmac.new(
            self._jwt.secret.encode(), f"{header_part}.{payload_part}".encode(), hashlib.sha256
        ).digest()
        if not hmac.compare_digest(expected, signature):
            raise AuthError("JWT signature does not verify")
        if not isinstance(claims, dict):
            raise AuthError("JWT claims are not an object")
        leeway = self._jwt.leeway
        exp = claims.get("exp")
        if not isinstance(exp, int | float) or now > exp + leeway:
            raise AuthError("JWT expired or without exp")
        nbf = claims.get("nbf")
        if isinstance(nbf, int | float) and now + leeway < nbf:
            raise AuthError("JWT not valid yet")
        if self._jwt.audience:
            aud = claims.get("aud")
            audiences = aud if isinstance(aud, list) else [aud]
            if self._jwt.audience not in audiences:
                raise AuthError("JWT audience is not this gateway")
        if self._jwt.issuer and claims.get("iss") != self._jwt.issuer:
            raise AuthError("JWT issuer not accepted")
        return claims


class TokenBucket:
    """A token bucket over an injected clock (pure: callers pass ``now``)."""

    __slots__ = ("_burst", "_level", "_rate", "_stamp")

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self._rate = rate
        self._burst = max(burst, 1.0)
        self._level = self._burst
        self._stamp = now

    def take(self, now: float) -> float:
        """Take one token; returns 0 when allowed, else seconds until one is due."""
        self._level = min(self._burst, self._level + (now - self._stamp) * self._rate)
        self._stamp = now
        if self._level >= 1.0:
            self._level -= 1.0
            return 0.0
        return (1.0 - self._level) / self._rate


class RateLimiter:
    """Buckets by key (a session id or a principal), created on first use."""

    def __init__(self, rate: float, burst: float, max_keys: int = 100_000) -> None:
        self.rate = rate
        self._burst = burst
        self._buckets: dict[str, TokenBucket] = {}
        self._max_keys = max_keys

    def check(self, key: str, now: float) -> float:
        """0 when the request may go ahead, else the seconds to wait (Retry-After)."""
        if self.rate <= 0:
            return 0.0
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= self._max_keys:
                self._buckets.clear()  # bounded memory beats exactness under a key flood
            bucket = self._buckets[key] = TokenBucket(self.rate, self._burst, now)
        return bucket.take(now)

    def forget(self, key: str) -> None:
        """Drop a key's bucket (its session ended)."""
        self._buckets.pop(key, None)
