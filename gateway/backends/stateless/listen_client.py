"""The gateway's own ``subscriptions/listen`` towards a 2026-07-28 backend.

A handshake-era backend pushes ``list_changed`` on its session unasked and
takes ``resources/subscribe``; a 2026-07-28 backend has neither: it says
nothing unless a client holds a listen stream open and named what it wants
(``subscriptions.mdx``). Without one the catalog would go stale until the
backend restarts, and no host could subscribe to its resources. So the
shared session of every modern backend keeps one standing listen.

Rules:

1. Ask only for what the backend declares: ``listChanged: true`` under
   ``tools``, ``prompts`` or ``resources``, and ``resourceSubscriptions``
   (the URIs the gateway's clients subscribed to, backend-side) when it
   declares ``resources.subscribe``. Nothing declared and nothing
   subscribed: no listen at all.
2. The notifications arrive on the session like any other: ``list_changed``
   reaches the supervisor's re-listing, ``resources/updated`` the router's
   subscription table, as for a handshake-era backend. A standing request
   does not count as in flight, so the liveness pings go on.
3. The connect waits for the first acknowledgement before it takes the
   first listing, so a change made in between is not lost; at most
   ``LISTEN_ACK_TIMEOUT``, since a backend that acknowledges at all does it
   at once. A first stream that is refused, ends or stays unacknowledged
   that long is a failure of the backend's 2026-07-28 leg, named in
   ``start_problem``: under ``protocol: auto`` it ends the attempt
   (``StatelessLegFailed``, see ``era_fallback``); otherwise the session
   goes on without it, as rule 5 says.
4. ``resources/subscribe`` and ``unsubscribe`` towards a modern backend are
   bridged here: the URI set changes, and a new stream with the new filter
   is opened, acknowledged, and only then is the old one closed, so no
   notification falls between them (two at once is allowed by the spec).
   A subscription succeeds when the new stream's ack honours its URI;
   otherwise it fails with the backend's refusal. One switch at a time.
5. A stream that ends by itself (the backend's final result, an error
   answer, a dropped HTTP stream) is opened again after a jittered backoff,
   and every list it covers is re-listed: a change may have been missed
   while no stream was open. -32601 means the backend has no listen; it is
   not asked again on this session (logged once), and a subscription
   through it fails with that error.
6. The session ending ends every stream; nothing here outlives it. The URI
   set belongs to the supervisor and survives reconnects: the next
   session's first stream asks for all of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import trio

from gateway.backends.handshake import StatelessLegFailed
from gateway.backends.supervision.backoff import Backoff
from gateway.catalog.snapshot import Kind
from gateway.errors import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    ProtocolError,
    RemoteProtocolError,
    TransportError,
)
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.stateless.listen import LISTEN, SUBSCRIPTION_ID_KEY

if TYPE_CHECKING:
    import random
    from collections.abc import Callable, Mapping

    import msgspec
    import structlog

    from gateway.protocol.jsonrpc import RequestId
    from gateway.session.peer import Peer

# Capability section -> (listen filter field, the lists a change of it re-lists).
_FIELDS: Final[dict[str, tuple[str, tuple[Kind, ...]]]] = {
    "tools": ("toolsListChanged", (Kind.TOOLS,)),
    "prompts": ("promptsListChanged", (Kind.PROMPTS,)),
    # Skills are resources: their changes come as resources/list_changed (SEP-2640).
    "resources": ("resourcesListChanged", (Kind.RESOURCES, Kind.TEMPLATES, Kind.SKILLS)),
}
URIS_FIELD: Final = "resourceSubscriptions"
# The two handshake-era methods bridged onto the listen filter (rule 4).
BRIDGED: Final = frozenset({"resources/subscribe", "resources/unsubscribe"})
# Re-listen delays (rule 5): quick at first, never a tight loop.
RELISTEN: Final = Backoff(initial=0.5, maximum=30.0, multiplier=2.0)
# A stream that stayed open this long was healthy: the backoff starts over.
HEALTHY_STREAM: Final = 60.0
# How long a start waits for the first stream's acknowledgement (rule 3).
# A server writes it first thing, so this is a round trip on a busy
# machine, not a server's start-up (that is ``timeouts.probe``).
LISTEN_ACK_TIMEOUT: Final = 3.0


def listen_filter(
    capabilities: Mapping[str, Any], uris: frozenset[str] = frozenset()
) -> tuple[dict[str, Any], tuple[Kind, ...]]:
    """The ``notifications`` filter to ask a backend for, and the lists it covers (rule 1).

    Args:
        capabilities: the backend's declared server capabilities.
        uris: backend-side resource URIs the gateway's clients subscribed to.

    Returns:
        The filter (empty when there is nothing to listen for) and the lists
        a dropped stream must re-list.
    """
    wanted: dict[str, Any] = {}
    kinds: list[Kind] = []
    for section, (name, covered) in _FIELDS.items():
        declared = capabilities.get(section)
        if isinstance(declared, dict) and declared.get("listChanged") is True:
            wanted[name] = True
            kinds.extend(covered)
    resources = capabilities.get("resources")
    if uris and isinstance(resources, dict) and resources.get("subscribe") is True:
        wanted[URIS_FIELD] = sorted(uris)
    return wanted, tuple(kinds)


@dataclass(eq=False, slots=True)
class _Stream:
    """One listen request and what became of it."""

    request_id: RequestId | None = None
    acked: trio.Event = field(default_factory=trio.Event)
    honoured: frozenset[str] = frozenset()
    ended: trio.Event = field(default_factory=trio.Event)
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    # Why the backend ended it (None: a final result, or we closed it).
    failure: ProtocolError | TransportError | None = None
    opened_at: float = 0.0


class UpstreamListen:
    """One backend session's standing listen (rules 2-6)."""

    def __init__(
        self,
        capabilities: Mapping[str, Any],
        uris: set[str],
        mark_changed: Callable[[tuple[Kind, ...]], None],
        log: structlog.typing.FilteringBoundLogger,
        rng: random.Random | None = None,
    ) -> None:
        self._capabilities = capabilities
        self._uris = uris  # the supervisor's, shared across sessions (rule 6)
        self._mark_changed = mark_changed
        self._log = log
        self._rng = rng
        self._peer: Peer | None = None
        self._nursery: trio.Nursery | None = None
        self._current: _Stream | None = None
        self._switching = trio.Lock()
        self._wake = trio.Event()  # the current stream changed
        self._unsupported: RemoteProtocolError | None = None
        # Set once the first stream is acknowledged, refused or given up on.
        self.ready = trio.Event()
        # Why the first stream ended before its acknowledgement (rule 3).
        self.start_problem: str | None = None
        self.streams_opened = 0

    @property
    def wanted(self) -> bool:
        """Whether the backend declares anything to listen for (lists or subscriptions)."""
        resources = self._capabilities.get("resources")
        subscribe = isinstance(resources, dict) and resources.get("subscribe") is True
        return subscribe or bool(listen_filter(self._capabilities)[0])

    def acknowledged(self, params: msgspec.Raw | None) -> None:
        """An ack reached the session: mark the stream it names (by subscription id)."""
        try:
            body = mcp.decode_params(params)
        except ProtocolError:
            return
        meta = body.get("_meta")
        stream_id = meta.get(SUBSCRIPTION_ID_KEY) if isinstance(meta, dict) else None
        stream = self._current
        if stream is None or stream_id is None or stream.request_id != stream_id:
            return  # a late ack of a stream already replaced
        honoured = body.get("notifications")
        uris = honoured.get(URIS_FIELD) if isinstance(honoured, dict) else None
        if isinstance(uris, list):
            stream.honoured = frozenset(u for u in uris if isinstance(u, str))
        stream.acked.set()
        self.ready.set()

    async def run(self, peer: Peer) -> None:
        """Keep a listen open on ``peer`` until the session ends (rules 3, 5, 6)."""
        _, kinds = listen_filter(self._capabilities)
        attempt = 0
        try:
            async with trio.open_nursery() as nursery:
                self._peer, self._nursery = peer, nursery
                first = await self._switch()
                if first is not None and not first.acked.is_set():
                    self.start_problem = _start_problem(first.failure, self._capabilities)
                    self.ready.set()
                while True:
                    stream = self._current
                    if stream is None:  # nothing to listen for, until a subscription
                        await self._wake.wait()
                        self._wake = trio.Event()
                        continue
                    await stream.ended.wait()
                    if stream is not self._current:
                        continue  # replaced by a subscription change
                    failure = stream.failure
                    if isinstance(failure, TransportError):
                        return  # the session is over; the supervisor reconnects
                    if _no_listen(failure):
                        assert isinstance(failure, RemoteProtocolError)
                        self._unsupported = failure
                        self._log.info("backend.listen.unsupported", error=failure.message)
                        return
                    if trio.current_time() - stream.opened_at >= HEALTHY_STREAM:
                        attempt = 0
                    delay = RELISTEN.delay(attempt, self._rng)
                    attempt += 1
                    self._log.info(
                        "backend.listen.ended",
                        reason=failure.message if isinstance(failure, ProtocolError) else "ended",
                        retry_in=round(delay, 3),
                    )
                    await trio.sleep(delay)
                    self._mark_changed(kinds)
                    await self._switch()
        finally:
            self.ready.set()
            self._peer = self._nursery = None
            if self._current is not None:
                self._current.scope.cancel()

    async def bridge(self, method: str, params: msgspec.Raw | None) -> msgspec.Raw:
        """``resources/subscribe`` or ``unsubscribe`` as a change of the URI set (rule 4).

        Raises:
            RemoteProtocolError: the backend has no listen, did not honour
                the URI, or its new stream failed.
            TransportError: the session is over.
        """
        uri = mcp.require_str(mcp.decode_params(params), "uri", "resource")
        if self._unsupported is not None:
            raise self._unsupported
        if method == "resources/unsubscribe":
            if uri in self._uris:
                self._uris.discard(uri)
                await self._switch()
            return jsonrpc.EMPTY_OBJECT
        current = self._current
        if uri in self._uris and current is not None and uri in current.honoured:
            return jsonrpc.EMPTY_OBJECT
        self._uris.add(uri)
        try:
            stream = await self._switch()
        except BaseException:
            self._uris.discard(uri)
            raise
        if stream is not None and uri in stream.honoured:
            return jsonrpc.EMPTY_OBJECT
        self._uris.discard(uri)
        if stream is not None and stream.failure is not None:
            raise stream.failure
        raise RemoteProtocolError(
            f"the backend did not honour a subscription to {uri}", INVALID_PARAMS
        )

    async def _switch(self) -> _Stream | None:
        """Open a stream with the current filter; once it is acked, retire the old one.

        Returns the new stream once acknowledged, or ended (the backend
        refused it: the old stream, if any, stays current), or None when there
        is nothing to listen for. Cancelled before the ack, the new stream is
        dropped and the old one kept.
        """
        async with self._switching:
            peer, nursery = self._peer, self._nursery
            if peer is None or nursery is None:
                raise TransportError("the backend session is over")
            wanted, _ = listen_filter(self._capabilities, frozenset(self._uris))
            old = self._current
            if not wanted:
                self._current = None
                if old is not None:
                    old.scope.cancel()
                self.ready.set()
                return None
            stream = self._current = _Stream(opened_at=trio.current_time())
            self.streams_opened += 1
            self._wake.set()
            nursery.start_soon(self._hold, peer, stream, jsonrpc.to_raw({"notifications": wanted}))
            try:
                await _first_of(stream.acked, stream.ended)
            finally:
                keep_new = stream.acked.is_set() or old is None or old.ended.is_set()
                if keep_new:
                    if old is not None:
                        old.scope.cancel()
                else:
                    stream.scope.cancel()
                    self._current = old
            return stream

    async def _hold(self, peer: Peer, stream: _Stream, params: msgspec.Raw) -> None:
        """The stream's request, open until the backend ends it or we replace it."""

        def sent(request_id: RequestId) -> None:
            stream.request_id = request_id

        try:
            with stream.scope:
                await peer.request(LISTEN, params, standing=True, on_sent=sent)
        except (ProtocolError, TransportError) as exc:
            stream.failure = exc
        finally:
            stream.ended.set()


def _start_problem(failure: BaseException | None, capabilities: Mapping[str, Any]) -> str:
    """What a first stream that ended before its acknowledgement says (rule 3)."""
    if _no_listen(failure):
        assert isinstance(failure, RemoteProtocolError)
        wanted, _ = listen_filter(capabilities)
        declared = ", ".join(sorted(wanted)) or "resources.subscribe"
        return (
            f"server/discover declared {declared} but subscriptions/listen answered "
            f"{failure.code}: {failure.message}"
        )
    if isinstance(failure, ProtocolError):
        return f"subscriptions/listen answered {failure.code}: {failure.message}"
    if failure is not None:
        return f"subscriptions/listen failed: {failure}"
    return "subscriptions/listen ended before its acknowledgement"


def _no_listen(failure: BaseException | None) -> bool:
    """Whether the backend answered that it has no ``subscriptions/listen`` (rule 5)."""
    return isinstance(failure, RemoteProtocolError) and failure.code == METHOD_NOT_FOUND


async def start_upstream_listen(
    listen: UpstreamListen,
    peer: Peer,
    nursery: trio.Nursery,
    ack_timeout: float,
    *,
    strict: bool,
) -> None:
    """Run ``listen`` on ``peer`` in ``nursery``; wait (bounded) for its ack (rule 3).

    Called before the first listing, so that a change made in between is
    heard. ``listen`` must be where the session's acknowledgements are
    delivered before this starts.

    Args:
        listen: the session's standing listen.
        peer: the session.
        nursery: the session's nursery, where the listen runs.
        ack_timeout: how long to wait for the first acknowledgement.
        strict: whether a first stream that fails ends the attempt.

    Raises:
        StatelessLegFailed: ``strict``, and the first stream was refused,
            ended, or not acknowledged within ``ack_timeout``.
    """
    if not listen.wanted:
        return
    nursery.start_soon(listen.run, peer)
    with trio.move_on_after(ack_timeout):
        await listen.ready.wait()
    problem = listen.start_problem
    if problem is None and not listen.ready.is_set():
        problem = f"no acknowledgement of subscriptions/listen within {ack_timeout:g} s"
        if not strict:
            listen._log.warning("backend.listen.unacknowledged", problem=problem)
    if problem is not None and strict:
        raise StatelessLegFailed(problem)


async def _first_of(*events: trio.Event) -> None:
    """Return once any of ``events`` is set."""
    async with trio.open_nursery() as nursery:

        async def wait(event: trio.Event) -> None:
            await event.wait()
            nursery.cancel_scope.cancel()

        for event in events:
            nursery.start_soon(wait, event)


__all__ = [
    "BRIDGED",
    "HEALTHY_STREAM",
    "LISTEN_ACK_TIMEOUT",
    "RELISTEN",
    "UpstreamListen",
    "listen_filter",
    "start_upstream_listen",
]
