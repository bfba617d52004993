"""Keeping an identity provider's JWK Set current: the one place identity does I/O.

A :class:`JwksSource` is run as a task in the gateway's nursery. It fetches
the set with httpx at start, again when the ``Cache-Control: max-age`` of
the last answer runs out, and early when a token names a ``kid`` it does not
know (key rotation), but never more often than once per ``min_refresh``, so
a flood of tokens with made-up ``kid`` values cannot make the gateway hammer
its identity provider. When a fetch fails, the last good set stays in use.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Final

import structlog
import trio

from gateway.identity.keys import JwksError, KeySet

if TYPE_CHECKING:
    from collections.abc import Iterable

    import httpx

    from gateway.telemetry.metrics import Metrics

logger = structlog.get_logger("gateway.identity")

_MAX_AGE: Final = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?(\d+)", re.IGNORECASE)
# A max-age beyond this is capped: a key revoked at the IdP must stop
# working within a day even if the IdP asked for more.
MAX_CACHE_SECONDS: Final = 86400.0
# The largest JWK Set read; real ones are a few KiB.
MAX_JWKS_BYTES: Final = 1024 * 1024


def cache_lifetime(cache_control: str | None, default: float, floor: float) -> float:
    """Seconds a fetched set stays fresh, from its ``Cache-Control`` header.

    Args:
        cache_control: the header value, if any.
        default: used when there is no ``max-age`` (or ``no-cache``/``no-store``
            would mean refetching per token, which the floor forbids anyway).
        floor: the shortest lifetime (``jwks_min_refresh``).

    Returns:
        The lifetime, between ``floor`` and a day.
    """
    seconds = default
    if cache_control:
        match = _MAX_AGE.search(cache_control)
        if match:
            seconds = float(match.group(1))
    return min(max(seconds, floor), MAX_CACHE_SECONDS)


def load_jwks_file(path: str, allowed: Iterable[str]) -> KeySet:
    """Read a JWK Set from a file (``auth.jwt.jwks_file``).

    Raises:
        JwksError: the file cannot be read or is not a JWK Set.
    """
    try:
        document = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise JwksError(f"cannot read JWK Set file {path!r}: {exc}") from None
    return KeySet.from_jwks(document, allowed)


class JwksSource:
    """The current keys from a JWKS URL, refreshed in the background.

    Args:
        url: the JWKS URL.
        allowed: the configured algorithms.
        min_refresh: the least time between two fetches, seconds.
        default_max_age: how long a set without ``max-age`` stays fresh.
        timeout: seconds for one fetch.
        metrics: where fetches and the key count are recorded.
        transport: an httpx transport (tests); the default is the network.
    """

    def __init__(
        self,
        url: str,
        allowed: Iterable[str],
        *,
        min_refresh: float = 60.0,
        default_max_age: float = 3600.0,
        timeout: float = 10.0,
        metrics: Metrics | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url
        self.keys = KeySet()
        self._allowed = tuple(allowed)
        self._min_refresh = min_refresh
        self._default_max_age = default_max_age
        self._timeout = timeout
        self._metrics = metrics
        self._transport = transport
        self._last_attempt = -math.inf
        self._due = -math.inf
        self._wake = trio.Event()
        self._attempted = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fetch now, then whenever the set goes stale or a refresh is asked for; forever.

        Started with ``nursery.start``: returns control once the first fetch
        has been tried (good or not), so the first tokens find keys.
        """
        import httpx  # here, not at the top: a start-up cost only a JWKS URL needs

        async with httpx.AsyncClient(
            transport=self._transport, timeout=self._timeout, follow_redirects=False
        ) as client:
            await self._fetch(client)
            task_status.started()
            while True:
                with trio.move_on_at(self._due):
                    await self._wake.wait()
                self._wake = trio.Event()
                # Never two fetches closer than min_refresh, whoever asks.
                await trio.sleep_until(self._last_attempt + self._min_refresh)
                await self._fetch(client)

    async def refresh_for_unknown_kid(self) -> bool:
        """Ask for a refetch because a token named an unknown key, and wait for it.

        Returns:
            True when a fetch was made (the caller may look the key up again);
            False when the last one was too recent to allow another.
        """
        if trio.current_time() - self._last_attempt < self._min_refresh:
            return False
        attempted = self._attempted
        self._wake.set()
        with trio.move_on_after(self._timeout + 1):
            await attempted.wait()
        return attempted.is_set()

    async def _get(self, client: httpx.AsyncClient) -> tuple[int, bytes | None, str | None]:
        """(status, body or None when over the size limit, Cache-Control), read in chunks."""
        async with client.stream("GET", self.url, headers={"accept": "application/json"}) as reply:
            body = b""
            if reply.status_code == 200:
                async for chunk in reply.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_JWKS_BYTES:
                        return reply.status_code, None, None
            return reply.status_code, body, reply.headers.get("cache-control")

    async def _fetch(self, client: httpx.AsyncClient) -> None:
        import httpx  # loaded by run() already: a dict lookup

        self._last_attempt = trio.current_time()
        outcome = "ok"
        finished = False
        try:
            status, body, cache_control = await self._get(client)
            if status != 200:
                outcome = "http_error"
                raise JwksError(f"HTTP {status}")
            if body is None:
                outcome = "invalid"
                raise JwksError(f"JWK Set larger than {MAX_JWKS_BYTES} bytes")
            try:
                document = json.loads(body)
            except ValueError:
                outcome = "invalid"
                raise JwksError("not JSON") from None
            try:
                keys = KeySet.from_jwks(document, self._allowed)
            except JwksError:
                outcome = "invalid"
                raise
            self.keys = keys
            lifetime = cache_lifetime(cache_control, self._default_max_age, self._min_refresh)
            self._due = self._last_attempt + lifetime
            logger.info("auth.jwks.refreshed", url=self.url, keys=len(keys), fresh_for=lifetime)
            finished = True
        except (httpx.HTTPError, JwksError) as exc:
            if outcome == "ok":
                outcome = "unreachable"
            # Keep the last good set; try again after the floor.
            self._due = self._last_attempt + self._min_refresh
            logger.warning(
                "auth.jwks.refresh_failed",
                url=self.url,
                outcome=outcome,
                error=str(exc)[:200] or type(exc).__name__,
                keys_kept=len(self.keys),
            )
            finished = True
        finally:
            if finished and self._metrics is not None:
                self._metrics.jwks_refreshes.labels(outcome=outcome).inc()
                self._metrics.jwks_keys.set(len(self.keys))
            self._attempted.set()
            self._attempted = trio.Event()
