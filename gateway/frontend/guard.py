"""The front door shared by every HTTP endpoint that carries MCP.

Before a request to ``/mcp``, ``/sse`` or ``/messages`` is looked at, it must
come from an allowed Origin and Host, carry no credentials in its URL, carry
valid credentials when auth is on, and stay within its credential's rate.
Each refusal is a :class:`~gateway.frontend.rejection.Rejection` with its
own status and a message that says why.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import structlog
import trio

from gateway.frontend import http_util as h
from gateway.frontend.auth import AuthError
from gateway.frontend.rejection import Rejection

if TYPE_CHECKING:
    from gateway.frontend.auth import Authenticator, Principal, RateLimiter
    from gateway.frontend.origin import OriginPolicy

logger = structlog.get_logger("gateway.frontend")


def too_many(wait: float) -> Rejection:
    """429 with the seconds to wait (rounded up, at least 1)."""
    return Rejection(
        429,
        "Too Many Requests: rate limit exceeded",
        headers=[(b"retry-after", str(max(1, math.ceil(wait))).encode())],
    )


class Guard:
    """Origin/Host, URL credentials, authentication and per-credential rate.

    Args:
        origin: which Origin and Host values are allowed.
        authenticator: checks credentials when auth is configured.
        principal_limiter: the per-credential token buckets.
    """

    def __init__(
        self,
        origin: OriginPolicy,
        authenticator: Authenticator | None = None,
        principal_limiter: RateLimiter | None = None,
    ) -> None:
        self._origin = origin
        self._auth = authenticator
        self._limiter = principal_limiter

    def admit(self, scope: h.Scope) -> Principal | None:
        """The request's principal (None when auth is off).

        Raises:
            Rejection: the request may not come in (403, 400, 401 or 429).
        """
        refused = self._origin.check(scope)
        if refused is not None:
            logger.info("request.rejected", reason="origin", detail=refused)
            raise Rejection(403, f"Forbidden: {refused}")
        if b"access_token=" in scope.get("query_string", b""):
            # Credentials in URLs end up in access logs and browser history
            # (robustness A39); the token itself is never logged.
            raise Rejection(400, "credentials in the URL are not accepted")
        if self._auth is None or not self._auth.enabled:
            return None
        try:
            principal = self._auth.authenticate(h.header(scope, b"authorization"))
        except AuthError as exc:
            raise Rejection(
                401,
                f"Unauthorized: {exc}",
                headers=[(b"www-authenticate", self._auth.challenge(str(exc)))],
            ) from None
        if principal is not None and self._limiter is not None:
            wait = self._limiter.check(principal.key, trio.current_time())
            if wait:
                raise too_many(wait)
        return principal
