"""Liveness probes of a backend session: a ping after each quiet spell.

A peer that talks is alive, so a probe is only sent once the session has
been silent for ``health.ping_interval`` and no call is in flight (a
standing listen does not count: ``Peer.in_flight``). 2026-07-28 has no
``ping``; ``server/discover`` is its cheapest request. A probe without an
answer in ``health.ping_timeout`` ends the session; an error answer is still
an answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from gateway.errors import ProtocolError, TransportBroken

if TYPE_CHECKING:
    from gateway.config import HealthConfig
    from gateway.session.peer import Peer


async def ping_when_quiet(peer: Peer, health: HealthConfig) -> None:
    """Probe ``peer`` after each quiet spell, for as long as the session lives.

    Raises:
        TransportBroken: a probe went unanswered; raised into the session's
            nursery, it ends the session and the supervisor restarts the
            backend like after any other failure.
    """
    while True:
        quiet = trio.current_time() - peer.last_heard
        if quiet < health.ping_interval or peer.in_flight:
            await trio.sleep(max(health.ping_interval - quiet, 0.001))
            continue
        try:
            with trio.fail_after(health.ping_timeout):
                await peer.request("server/discover" if peer.modern else "ping")
        except trio.TooSlowError:
            raise TransportBroken(f"no answer to ping within {health.ping_timeout:g} s") from None
        except ProtocolError:
            pass  # an error answer is still an answer: the backend is alive


__all__ = ["ping_when_quiet"]
