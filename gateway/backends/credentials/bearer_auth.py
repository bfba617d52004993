"""The ``httpx.Auth`` that puts a backend's token on every request of its HTTP client.

Apart from :mod:`gateway.backends.credentials.provider` because it subclasses
``httpx.Auth``, which needs httpx at import: only HTTP backends load it,
and a gateway with stdio backends alone starts without httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Awaitable, Callable


class BearerAuth(httpx.Auth):
    """Puts a bearer token on every request; on a 401, one retry with a fresh one (rule 3).

    Args:
        source: returns the token to send (cached or fetched).
        refused: told the token a backend refused, to drop it.
        retry: whether a 401 is worth a retry (not for a static token).
    """

    def __init__(
        self,
        source: Callable[[], Awaitable[str]],
        refused: Callable[[str], None],
        *,
        retry: bool = True,
    ) -> None:
        self._source = source
        self._refused = refused
        self._retry = retry

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        """Send ``request`` with the token; once more with a new one after a 401."""
        token = await self._source()
        request.headers["authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code != 401 or not self._retry:
            return
        self._refused(token)
        request.headers["authorization"] = f"Bearer {await self._source()}"
        yield request
