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
from gateway.frontend.rejection import Rejection
from gateway.frontend.shared_limits import SharedLimiter
from gateway.identity.authenticator import InsufficientScope, Unauthenticated

if TYPE_CHECKING:
    from gateway.frontend.origin import OriginPolicy
    from gateway.frontend.rate_limits import RateLimiter
    from gateway.identity.authenticator import AuthHolder
    from gateway.identity.principal import Principal
    from gateway.telemetry.series import FeatureSeries

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
        auth: holds the authenticator in force (a reload swaps it).
        principal_limiter: the per-credential token buckets (in the shared
            store when there is one: ``frontend.shared_limits``).
        resource_path: the MCP path whose metadata a challenge names.
        metrics: where each authentication decision is counted (none: nowhere).
    """

    def __init__(
        self,
        origin: OriginPolicy,
        auth: AuthHolder | None = None,
        principal_limiter: RateLimiter | SharedLimiter | None = None,
        resource_path: str = "/mcp",
        metrics: FeatureSeries | None = None,
    ) -> None:
        self.origin = origin
        self._auth = auth
        self._limiter = principal_limiter
        self._resource_path = resource_path
        self._metrics = metrics

    def apply(self, origin: OriginPolicy) -> None:
        """A reload's allowed origins and hosts, for every request from now on."""
        self.origin = origin

    async def admit(self, scope: h.Scope, headers: h.McpHeaders | None = None) -> Principal | None:
        """The request's principal (None when auth is off).

        ``headers`` are the request's, when the caller has already read them
        (``h.mcp_headers``); read here otherwise.

        Raises:
            Rejection: the request may not come in (403, 400, 401 or 429).
        """
        if headers is None:
            headers = h.mcp_headers(scope)
        refused = self.origin.check(headers.host, headers.origin)
        if refused is not None:
            logger.info("request.rejected", reason="origin", detail=refused)
            raise Rejection(403, f"Forbidden: {refused}")
        if b"access_token=" in scope.get("query_string", b""):
            # Credentials in URLs end up in access logs and browser history
            # (robustness A39); the token itself is never logged.
            raise Rejection(400, "credentials in the URL are not accepted")
        if self._auth is None or not self._auth.current.enabled:
            return None
        auth = self._auth.current
        try:
            principal = await auth.authenticate(headers.authorization)
        except Unauthenticated as exc:
            logger.info("auth.refused", reason=str(exc), token_sent=exc.token_sent)
            if self._metrics is not None:
                self._metrics.count_auth(False, exc.kind, token_sent=exc.token_sent)
            raise Rejection(
                401,
                f"Unauthorized: {exc}",
                headers=[(b"www-authenticate", auth.challenge(self._resource_path, exc))],
            ) from None
        except InsufficientScope as exc:
            logger.info("auth.insufficient_scope", missing=exc.missing)
            if self._metrics is not None:
                self._metrics.count_auth(False, "insufficient_scope")
            raise Rejection(
                403,
                f"Forbidden: {exc}",
                headers=[(b"www-authenticate", auth.challenge(self._resource_path, exc))],
            ) from None
        if principal is not None and self._metrics is not None:
            self._metrics.count_auth(True, principal.kind)  # static or jwt
        if principal is not None and self._limiter is not None:
            now = trio.current_time()
            if isinstance(self._limiter, SharedLimiter):
                wait = await self._limiter.check(principal.key, now)
            else:
                wait = self._limiter.check(principal.key, now)
            if wait:
                raise too_many(wait)
        return principal
