"""list_changed to hosts: coalesced in time, and per profile.

A backend that sends a thousand list_changed a second must reach hosts as a
trickle (issue 5, robustness D16), and a change reaches only the clients of
the profiles whose view it changed (issue 15), and under an access policy
only the clients whose *effective* view it changed (issue 16): a change is
then noted with the tag of that view, and only clients of that tag hear it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from gateway.catalog.profiles import DEFAULT_PROFILE
from gateway.protocol import jsonrpc

if TYPE_CHECKING:
    from collections.abc import Callable

    from gateway.catalog.snapshot import Kind
    from gateway.frontend.clients import ClientRegistry, ClientSession
    from gateway.frontend.stateless.listen_stream import Listener
    from gateway.telemetry.metrics import Metrics


class ListChangedCoalescer:
    """Turns bursts of catalog changes into at most one list_changed per kind per window.

    A backend that sends a thousand list_changed a second must reach hosts
    as a trickle (issue 5, robustness D16): kinds changed during a window are
    collected and sent once when it closes.
    """

    def __init__(
        self,
        clients: ClientRegistry,
        metrics: Metrics,
        window: float,
        tag_of: Callable[[ClientSession | Listener], str] | None = None,
    ) -> None:
        self._clients = clients
        self._metrics = metrics
        self.window = window
        # The tag of a client's effective view now (router.access); only
        # consulted for changes noted with a tag.
        self._tag_of = tag_of
        # (profile, view tag or "", session id or "", list_changed method):
        # each profile's clients hear of their own view; "" is every client
        # of the profile.
        self._pending: set[tuple[str, str, str, str]] = set()
        self._wake = trio.Event()
        # Set after each pass has sent what was pending, then replaced.
        self._sent = trio.Event()

    def add(
        self,
        kinds: frozenset[Kind],
        profile: str = DEFAULT_PROFILE,
        tag: str | None = None,
        session: str | None = None,
    ) -> None:
        """Note that these kinds of ``profile``'s view changed; sent at the end of the window.

        ``tag`` limits it to the clients of that effective view, ``session``
        to that one client (a reloaded policy changed its view); None: all
        of the profile's clients.
        """
        self._pending.update((profile, tag or "", session or "", k.list_changed) for k in kinds)
        self._wake.set()

    def _accept(self, tag: str, session: str) -> Callable[[ClientSession | Listener], bool] | None:
        if session:
            return lambda peer: peer.session_id == session
        tag_of = self._tag_of
        if not tag or tag_of is None:
            return None
        return lambda peer: tag_of(peer) == tag

    async def drained(self) -> None:
        """Wait until every change noted so far has been sent.

        Whoever must tell a later change from an earlier one (a client that
        arrives after start-up and must not hear of the backends coming up)
        waits here first: sending happens in one pass, so nothing noted
        before this returns can reach a client that registers after.
        """
        while self._pending:
            await self._sent.wait()

    def apply(self, window: float) -> None:
        """A reload's ``notifications.debounce``: the window from the next one on."""
        self.window = window

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Send what is pending, then wait out the window, forever."""
        task_status.started()
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            pending, self._pending = sorted(self._pending), set()
            for profile, tag, session, method in pending:
                sent = self._clients.broadcast(
                    jsonrpc.encode_notification(method), profile, self._accept(tag, session)
                )
                self._metrics.notifications_sent.labels(kind=method).inc(sent)
            self._sent.set()
            self._sent = trio.Event()
            await trio.sleep(self.window)
