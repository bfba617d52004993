"""The front door shared by every HTTP endpoint that carries MCP.

Before a request to ``/mcp``, ``/sse`` or ``/messages`` is looked at, it must
come from an allowed Origin and Host, carry no credentials in its URL, carry
valid credentials when auth is on, and stay within its credential's rate.
Each refusal has its own status and a JSON-RPC error body that says why.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final

import structlog
import trio

from gateway.errors import INVALID_REQUEST
from gateway.frontend import http_util as h
from gateway.frontend.auth import AuthError
from gateway.protocol import jsonrpc

if TYPE_CHECKING:
    from gateway.frontend.auth import Authenticator, Principal, RateLimiter
    from gateway.frontend.origin import OriginPolicy

logger = structlog.get_logger("gateway.frontend")

REFUSED: Final = object()


def error_body(message: str, msg_id: jsonrpc.RequestId | None = None) -> bytes:
    """A JSON-RPC error for a request refused at the HTTP level."""
    return jsonrpc.encode_error(msg_id, INVALID_REQUEST, message)


async def too_many(send: h.Send, wait: float) -> None:
    """429 with the seconds to wait (rounded up, at least 1)."""
    await h.respond(
        send,
        429,
        error_body("Too Many Requests: rate limit exceeded"),
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

    async def admit(self, scope: h.Scope, send: h.Send) -> Principal | object | None:
        """The request's principal (None when auth is off), or ``REFUSED``
        after the refusal has been sent."""
        refused = self._origin.check(scope)
        if refused is not None:
            logger.info("request.rejected", reason="origin", detail=refused)
            await h.respond(send, 403, error_body(f"Forbidden: {refused}"))
            return REFUSED
        if b"access_token=" in scope.get("query_string", b""):
            # Credentials in URLs end up in access logs and browser history
            # (robustness A39); the token itself is never logged.
            await h.respond(send, 400, error_body("credentials in the URL are not accepted"))
            return REFUSED
        if self._auth is None or not self._auth.enabled:
            return None
        try:
            principal = self._auth.authenticate(h.header(scope, b"authorization"))
        except AuthError as exc:
            await h.respond(
                send,
                401,
                error_body(f"Unauthorized: {exc}"),
                headers=[(b"www-authenticate", self._auth.challenge(str(exc)))],
            )
            return REFUSED
        if principal is not None and self._limiter is not None:
            wait = self._limiter.check(principal.key, trio.current_time())
            if wait:
                await too_many(send, wait)
                return REFUSED
        return principal
