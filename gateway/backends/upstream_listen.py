"""The gateway's own ``subscriptions/listen`` towards a 2026-07-28 backend.

A handshake-era backend pushes ``list_changed`` on its session unasked; a
2026-07-28 backend says nothing unless a client holds a listen stream open
and asked for those notifications by name (``subscriptions.mdx``). Without
one the catalog would go stale until the backend restarts, so the shared
session of every modern backend keeps one standing listen.

Rules:

1. Ask only for what the backend declares: ``listChanged: true`` under
   ``tools``, ``prompts`` or ``resources``. A backend that declares none gets
   no listen at all.
2. The notifications arrive on the session like any other and reach the
   supervisor's re-listing through ``Kind.changed_by``; this module only
   keeps the stream open. It does not count as a request in flight, so the
   liveness pings go on.
3. The connect waits (bounded) for the acknowledgement before it takes the
   first listing, so a change made between the listing and the listen is
   not lost.
4. A stream that ends (the backend's final result, an error answer, a
   dropped HTTP stream) is opened again after a jittered backoff, and every
   list it covers is re-listed: a change may have been missed while no
   stream was open (``SPEC``: "re-listen with backoff, push list_changed,
   and invalidate caches"). A backend that answers -32601 does not support
   listen; it is not asked again on this session, and it is logged once.
5. The session ending ends the listen; nothing here outlives it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import trio

from gateway.backends.backoff import Backoff
from gateway.catalog.snapshot import Kind
from gateway.errors import METHOD_NOT_FOUND, ProtocolError, TransportError
from gateway.protocol import jsonrpc
from gateway.protocol.listen import LISTEN

if TYPE_CHECKING:
    import random
    from collections.abc import Callable, Mapping

    import structlog

    from gateway.session import Peer

# Capability section -> (listen filter field, the lists a change of it re-lists).
_FIELDS: Final[dict[str, tuple[str, tuple[Kind, ...]]]] = {
    "tools": ("toolsListChanged", (Kind.TOOLS,)),
    "prompts": ("promptsListChanged", (Kind.PROMPTS,)),
    "resources": ("resourcesListChanged", (Kind.RESOURCES, Kind.TEMPLATES)),
}
# Re-listen delays (rule 4): quick at first, never a tight loop.
RELISTEN: Final = Backoff(initial=0.5, maximum=30.0, multiplier=2.0)
# A stream that stayed open this long was healthy: the backoff starts over.
HEALTHY_STREAM: Final = 60.0


def listen_filter(capabilities: Mapping[str, Any]) -> tuple[dict[str, bool], tuple[Kind, ...]]:
    """The ``notifications`` filter to ask a backend for, and the kinds it covers (rule 1).

    Args:
        capabilities: the backend's declared server capabilities.

    Returns:
        The filter (empty when the backend declares no ``listChanged``) and
        the lists a dropped stream must re-list.
    """
    wanted: dict[str, bool] = {}
    kinds: list[Kind] = []
    for section, (field, covered) in _FIELDS.items():
        declared = capabilities.get(section)
        if isinstance(declared, dict) and declared.get("listChanged") is True:
            wanted[field] = True
            kinds.extend(covered)
    return wanted, tuple(kinds)


class UpstreamListen:
    """One backend session's standing listen stream (rules 2-5)."""

    def __init__(
        self,
        capabilities: Mapping[str, Any],
        mark_changed: Callable[[tuple[Kind, ...]], None],
        log: structlog.typing.FilteringBoundLogger,
        rng: random.Random | None = None,
    ) -> None:
        self._filter, self._kinds = listen_filter(capabilities)
        self._mark_changed = mark_changed
        self._log = log
        self._rng = rng
        # Set once the first stream is acknowledged, refused or given up on.
        self.ready = trio.Event()
        self.streams_opened = 0

    @property
    def wanted(self) -> bool:
        """Whether the backend declares anything worth listening for."""
        return bool(self._filter)

    def acknowledged(self) -> None:
        """The backend acknowledged our listen (its ack reached the session)."""
        self.ready.set()

    async def run(self, peer: Peer) -> None:
        """Keep a listen open on ``peer`` until the session ends (rules 4, 5)."""
        if not self._filter:
            self.ready.set()
            return
        params = jsonrpc.to_raw({"notifications": self._filter})
        attempt = 0
        while True:
            self.streams_opened += 1
            opened_at = trio.current_time()
            try:
                await peer.request(LISTEN, params, standing=True)
                ending = "the backend ended the stream"
            except ProtocolError as exc:
                if exc.code == METHOD_NOT_FOUND:
                    self._log.info("backend.listen.unsupported", error=exc.message)
                    self.ready.set()
                    return
                ending = f"the backend refused: {exc.message}"
            except TransportError:
                return  # the session is over; the supervisor reconnects
            finally:
                self.ready.set()
            if trio.current_time() - opened_at >= HEALTHY_STREAM:
                attempt = 0
            delay = RELISTEN.delay(attempt, self._rng)
            attempt += 1
            self._log.info("backend.listen.ended", reason=ending, retry_in=round(delay, 3))
            await trio.sleep(delay)
            self._mark_changed(self._kinds)


__all__ = ["HEALTHY_STREAM", "RELISTEN", "UpstreamListen", "listen_filter"]
