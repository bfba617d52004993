"""Which era a dual-era backend's next connection speaks once its 2026-07-28 leg failed.

A backend with ``protocol: auto`` whose probe finds 2026-07-28 is served in
that era. When that leg does not work (``StatelessLegFailed``: no answer to
``server/discover``, a listen answered with something that is not an event
stream, an acknowledgement not seen within ``LISTEN_ACK_TIMEOUT``, a
capability declared in discover and then refused), waiting on it would cost
the backend's whole start; so the gateway serves it in the handshake era
instead, and tries the 2026-07-28 leg again later.

Rules:

1. Only ``auto`` falls back. ``legacy`` never probes; ``modern`` keeps its
   2026-07-28 session with the failing part tolerated (a listen that does
   not work is retried by ``listen_client``'s own backoff).
2. After a failure the next connection opens at once, in the handshake era
   (``initialize``, never a second probe: a new connection, so no server
   that chose 2026-07-28 for the old one is asked to ``initialize``). The
   failure is said once, as one warning (``backend.era.fallback``) naming
   what was wrong, and stays in the backend's status (``era_reason``)
   while the fallback lasts.
3. The 2026-07-28 leg is tried again after a jittered backoff (``RETRY``),
   on a connection of its own beside the working session, so no call is
   disturbed by the try: the probe and the listen's acknowledgement, as at
   a start. When it holds, the session is reopened in 2026-07-28
   (``backend.era.restored``); when not, the next try waits longer (an
   info line: the warning was said once).
4. A backend that refuses the handshake era too (its ``initialize`` fails
   during the fallback) is served in 2026-07-28 again, with the failing
   part tolerated as under ``modern``; no further fallback for it until
   the gateway restarts.

The decisions are the pure ``EraFallback``; the one I/O step, the try on a
connection of its own, is ``try_stateless_leg``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import trio

from gateway.backends.failure_reasons import EXPECTED, describe
from gateway.backends.stateless.listen_client import (
    LISTEN_ACK_TIMEOUT,
    UpstreamListen,
    start_upstream_listen,
)
from gateway.backends.supervision.backoff import Backoff
from gateway.errors import METHOD_NOT_FOUND, GatewayError, LocalProtocolError
from gateway.protocol.stateless.listen import ACKNOWLEDGED
from gateway.session.peer import open_session

if TYPE_CHECKING:
    import random

    import msgspec

    from gateway.backends.channel import ChannelOpener
    from gateway.backends.handshake import Handshake
    from gateway.catalog.snapshot import Kind
    from gateway.config import BackendConfig

# When the 2026-07-28 leg is tried again (rule 3): not before half a minute
# (a machine busy starting many backends has settled by then), doubling to
# an hour, so a backend whose leg stays broken costs one try an hour.
RETRY: Final = Backoff(initial=30.0, maximum=3600.0, multiplier=2.0)


class EraRestored(GatewayError):
    """The 2026-07-28 leg works again: the handshake-era session ends to reopen in it."""


@dataclass(slots=True)
class EraFallback:
    """One backend's era choice across its connections (rules 1-4)."""

    configured: str
    failures: int = 0
    why: str | None = None
    retry_at: float = math.inf
    handshake_refused: bool = False

    @property
    def falling_back(self) -> bool:
        """Whether the next connection speaks the handshake era because of a failure."""
        return self.configured == "auto" and self.why is not None and not self.handshake_refused

    @property
    def strict(self) -> bool:
        """Whether a failing 2026-07-28 leg ends the attempt (else it is tolerated)."""
        return self.configured == "auto" and not self.handshake_refused

    def protocol(self) -> str:
        """The ``protocol`` the next connection opens with."""
        return "legacy" if self.falling_back else self.configured

    def leg_failed(self, why: str, now: float, rng: random.Random | None = None) -> float:
        """The 2026-07-28 leg failed (at a start or a try): when to try again, from now."""
        self.why = why
        delay = RETRY.delay(self.failures, rng)
        self.failures += 1
        self.retry_at = now + delay
        return delay

    def handshake_failed(self) -> None:
        """The handshake era failed during the fallback: back to 2026-07-28, tolerant (rule 4)."""
        self.handshake_refused = True

    def restored(self) -> None:
        """A try found the 2026-07-28 leg working: the next connection probes again."""
        self.why = None
        self.failures = 0
        self.retry_at = math.inf

    def reason(self) -> str | None:
        """What the backend's status says about its era while it falls back (rule 2)."""
        if not self.falling_back:
            return None
        return f"handshake era: the 2026-07-28 leg failed ({self.why}); retried with backoff"


async def _no_requests_on_a_try(method: str, params: msgspec.Raw | None) -> msgspec.Raw:
    """A try's connection serves no backend request (nobody to ask)."""
    raise LocalProtocolError(f"method not found: {method}", METHOD_NOT_FOUND)


async def try_stateless_leg(
    config: BackendConfig, connect: ChannelOpener, handshake: Handshake, log: Any
) -> str | None:
    """Probe and listen on a connection of its own (rule 3); None when both hold.

    Returns:
        What was wrong, as the fallback's warning would name it.
    """
    listen: UpstreamListen | None = None

    def on_notification(method: str, params: msgspec.Raw | None) -> None:
        """The try's acknowledgement reaches its listen; nothing else is kept."""
        if method == ACKNOWLEDGED and listen is not None:
            listen.acknowledged(params)

    def changed(kinds: tuple[Kind, ...]) -> None:
        """A try keeps no listing: a change is heard by the session it replaces."""

    timeouts = config.timeouts
    try:
        async with (
            connect(config) as channel,
            open_session(
                channel,
                name=f"{config.name}/era-try",
                on_request=_no_requests_on_a_try,
                on_notification=on_notification,
            ) as peer,
            trio.open_nursery() as nursery,
        ):
            info = await handshake(peer, "modern", timeouts)
            listen = UpstreamListen(info.capabilities, set(), changed, log)
            ack_timeout = min(LISTEN_ACK_TIMEOUT, timeouts.initialize)
            await start_upstream_listen(listen, peer, nursery, ack_timeout, strict=True)
            nursery.cancel_scope.cancel()
    except EXPECTED as exc:
        return describe(exc)
    except BaseExceptionGroup as group:
        expected, rest = group.split(EXPECTED)
        if rest is not None or expected is None:
            raise
        return describe(expected)
    return None


__all__ = ["RETRY", "EraFallback", "EraRestored", "try_stateless_leg"]
