"""The authenticator in force and the JWKS task behind it, across reloads.

:class:`IdentityService` is a service: ``run`` (started with
``nursery.start``) owns the nursery its JWKS tasks run in. ``apply`` builds
an :class:`~gateway.identity.authenticator.Authenticator` from an ``auth:``
section and swaps it into the holder the frontend reads. A JWKS source
whose settings did not change is kept (with its cached keys); one whose
settings changed is started anew (and its first fetch awaited) before the
swap, and the old one's task is cancelled after it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog
import trio

from gateway.identity.authenticator import Authenticator, AuthHolder
from gateway.identity.jwks import JwksSource, load_jwks_file
from gateway.identity.keys import KeySet

if TYPE_CHECKING:
    import httpx

    from gateway.config import AuthConfig, JwtConfig
    from gateway.telemetry.metrics import Metrics

logger = structlog.get_logger("gateway.identity")


def _jwks_settings(jwt: JwtConfig) -> tuple[object, ...]:
    return (
        jwt.jwks_url,
        tuple(jwt.algorithms),
        jwt.jwks_min_refresh,
        jwt.jwks_max_age,
        jwt.jwks_timeout,
    )


class IdentityService:
    """Builds authenticators and runs their JWKS fetches (in ``run``'s nursery).

    Args:
        metrics: JWKS fetch counts and the key gauge.
        transport: an httpx transport for JWKS fetches (tests).
    """

    def __init__(
        self,
        metrics: Metrics | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._nursery: trio.Nursery | None = None
        self._metrics = metrics
        self._transport = transport
        self._source: JwksSource | None = None
        self._source_scope: trio.CancelScope | None = None
        self._settings: tuple[object, ...] | None = None
        self.holder: AuthHolder | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the JWKS fetches until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                task_status.started()
                await trio.sleep_forever()
            finally:
                self._nursery = None

    async def apply(self, config: AuthConfig, resource_url: str) -> Authenticator:
        """Build the authenticator for ``config`` and put it in force.

        Raises:
            gateway.identity.keys.JwksError: ``jwt.jwks_file`` cannot be used
                (the authenticator in force stays).
        """
        jwt = config.jwt
        file_keys = load_jwks_file(jwt.jwks_file, jwt.algorithms) if jwt.jwks_file else KeySet()
        old_scope = None
        if not jwt.jwks_url:
            old_scope, self._source, self._settings = self._source_scope, None, None
        elif self._settings != _jwks_settings(jwt):
            old_scope = self._source_scope
            self._source = JwksSource(
                jwt.jwks_url,
                jwt.algorithms,
                min_refresh=jwt.jwks_min_refresh,
                default_max_age=jwt.jwks_max_age,
                timeout=jwt.jwks_timeout,
                metrics=self._metrics,
                transport=self._transport,
            )
            self._source_scope = trio.CancelScope()
            if self._nursery is None:
                raise RuntimeError("IdentityService.run is not running")
            await self._nursery.start(self._run_source, self._source, self._source_scope)
            self._settings = _jwks_settings(jwt)
        authenticator = Authenticator(config, resource_url, jwks=self._source, file_keys=file_keys)
        if self.holder is None:
            self.holder = AuthHolder(authenticator)
        else:
            self.holder.current = authenticator
        if old_scope is not None:
            old_scope.cancel()
        if not jwt.jwks_url:
            self._source_scope = None
        return authenticator

    @staticmethod
    async def _run_source(
        source: JwksSource,
        scope: trio.CancelScope,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        with scope:
            await source.run(task_status=task_status)
