"""list_changed to hosts: coalesced in time, and per profile.

A backend that sends a thousand list_changed a second must reach hosts as a
trickle (issue 5, robustness D16), and a change reaches only the clients of
the profiles whose view it changed (issue 15).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from gateway.catalog.profiles import DEFAULT_PROFILE
from gateway.protocol import jsonrpc

if TYPE_CHECKING:
    from gateway.catalog.snapshot import Kind
    from gateway.frontend.clients import ClientRegistry
    from gateway.observability import Metrics


class ListChangedCoalescer:
    """Turns bursts of catalog changes into at most one list_changed per kind per window.

    A backend that sends a thousand list_changed a second must reach hosts
    as a trickle (issue 5, robustness D16): kinds changed during a window are
    collected and sent once when it closes.
    """

    def __init__(self, clients: ClientRegistry, metrics: Metrics, window: float) -> None:
        self._clients = clients
        self._metrics = metrics
        self.window = window
        # (profile, list_changed method): each profile's clients hear of their own view.
        self._pending: set[tuple[str, str]] = set()
        self._wake = trio.Event()

    def add(self, kinds: frozenset[Kind], profile: str = DEFAULT_PROFILE) -> None:
        """Note that these kinds of ``profile``'s view changed; sent at the end of the window."""
        self._pending.update((profile, k.list_changed) for k in kinds)
        self._wake.set()

    async def run(self) -> None:
        """Send what is pending, then wait out the window, forever."""
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            pending, self._pending = sorted(self._pending), set()
            for profile, method in pending:
                sent = self._clients.broadcast(jsonrpc.encode_notification(method), profile)
                self._metrics.notifications_sent.labels(kind=method).inc(sent)
            await trio.sleep(self.window)
