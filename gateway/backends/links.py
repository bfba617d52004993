"""A backend's own sessions for principals or clients (``per_principal``, ``per_client``).

Rules:

1. A call from a client goes to a backend session of the client's key
   (``link_keys``): its own in ``per_client``, its principal's, declared
   capabilities' and roots' in ``per_principal``. The key is fixed at the
   client's first call and kept until its roots change
   (``roots_changed``, ``rekey``).
2. One key may have several sessions ("lanes"). A call takes a lane on which
   no other client has a call in flight, preferring the first; when there is
   none it opens another. So at any moment every call in flight on a lane is
   one client's, and a backend's question on that lane (sampling,
   elicitation, roots) has exactly one asker, whatever the transport.
   Requests that only change session state (subscribe, unsubscribe,
   setLevel) always take the first lane, where that state lives.
3. A lane opens on first use as a task in the backend's session nursery
   (``attach``), so it never outlives the shared session: when that ends,
   every lane ends too (``close_all``). It closes after
   ``sessions.idle_timeout`` without a call unless it holds a subscription;
   ``sessions.max`` bounds the lanes open at once, and a call past it fails
   with ``SessionLimitReached`` naming the setting.
4. A lane declares the host's own client capabilities in its
   ``initialize``; every client sharing it declared the same. A lane that
   opens while its key has a log level acknowledged on another lane
   (``logging/setLevel``) is set to it before its first call, so a
   principal's second session logs as its first does.
5. What the backend sends on a lane reaches only clients of that lane's key:
   a request goes to the client whose call is in flight there (with none,
   ``roots/list`` goes to any client of the key); log messages go to the
   key's clients; ``resources/updated`` to those that subscribed on it; a
   URL elicitation's completion to the client that was asked.
6. When a host's roots change (``notifications/roots/list_changed``), a
   lane that is the host's alone hears the notification (its backend asks
   again and gets the new roots) and follows the host to its new key; a
   lane shared with other hosts does not (their roots did not change): the
   host leaves it at once, and its next call takes a lane of its new key.
7. A failure to open a lane goes to the call that asked for it, as
   ``BackendUnavailable`` carrying the condition; after it opened, a broken
   lane just ends. One client's broken session never takes the backend down.

The module is one idea, the life of these sessions and who may use them,
which is why it runs past 450 lines; the pure key rules are in
``link_keys``.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

import trio

from gateway.backends.failure_reasons import EXPECTED, condition, describe
from gateway.backends.handshake import effective_protocol
from gateway.backends.link_keys import LinkMode, declared, link_key
from gateway.errors import INTERNAL_ERROR, BackendUnavailable, GatewayError, LocalProtocolError
from gateway.protocol import mcp
from gateway.session.peer import Peer, open_session
from gateway.transports.base import schemas_for

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import msgspec

    from gateway.backends.channel import ChannelOpener
    from gateway.backends.handshake import Handshake
    from gateway.backends.state import ServerInfo
    from gateway.config import BackendConfig
    from gateway.transports.base import ToolSchemas

#: Requests that change a session's state rather than do work: they go to
#: the key's first lane, where that state lives (rule 2).
HOME_METHODS: Final = frozenset(
    {"resources/subscribe", "resources/unsubscribe", "logging/setLevel", "ping"}
)

HostFacts = tuple[str | None, dict[str, Any], str | None]
"""A client session's principal key (None: auth off), declared capabilities and
the digest of its roots (None: none known; ``link_keys.roots_digest``)."""


class SessionLimitReached(BackendUnavailable):
    """A call would open one backend session more than ``sessions.max`` allows."""

    def __init__(self, backend: str, limit: int) -> None:
        super().__init__(
            backend,
            f"{limit} backend sessions are open (backends[].sessions.max); raise "
            "sessions.max or lower sessions.idle_timeout",
            kind="session_limit",
        )


class SessionRequestHandler(Protocol):
    """Answers a request a backend session sent, knowing whose session it is."""

    def __call__(
        self, method: str, params: msgspec.Raw | None, *, client: str | None = None
    ) -> Awaitable[msgspec.Raw]:
        """``client`` is None on the shared session."""
        ...


class SessionNotificationHandler(Protocol):
    """Takes a notification a backend session sent, knowing whose session it is."""

    def __call__(
        self, method: str, params: msgspec.Raw | None, *, client: str | None = None
    ) -> None:
        """``client`` is None on the shared session."""
        ...


@dataclass(eq=False)
class Lane:
    """One backend session of a key, and who is using it."""

    key: str
    capabilities: dict[str, Any]
    label: str
    peer: Peer | None = None
    ready: trio.Event = field(default_factory=trio.Event)
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    members: set[str] = field(default_factory=set)
    calls: collections.Counter[str] = field(default_factory=collections.Counter)
    subscriptions: dict[str, set[str]] = field(default_factory=dict)
    elicitations: dict[str, str] = field(default_factory=dict)
    used: float = 0.0
    failure: BackendUnavailable | None = None

    def free_for(self, client: str) -> bool:
        """Whether no other client has a call in flight here (rule 2)."""
        return all(owner == client for owner, n in self.calls.items() if n > 0)

    def busy(self) -> list[str]:
        """The clients with calls in flight here."""
        return [owner for owner, n in self.calls.items() if n > 0]


class Links:
    """The per-principal or per-client backend sessions of one backend.

    Args:
        config: the backend's config.
        connect: opens the transport.
        handshake: runs ``initialize`` on each new session.
        on_request: answers the backend's requests on a lane.
        on_notification: takes the backend's notifications on a lane.
        log: the backend's bound logger.
        mode: the session mode in force (it follows a reload of ``auth``).
        hosts: a client session's principal and declared capabilities.
        tool_schema: the backend's own ``inputSchema`` by tool name, for a
            modern HTTP link's ``Mcp-Param-*`` headers.
        shared_info: what the shared session learnt; a link speaks the same
            era without probing again (one round trip less per client).
        connect_client: opens one client's transport, when that differs by
            client (a ``token_exchange`` credential); else ``connect``.
    """

    def __init__(
        self,
        config: BackendConfig,
        *,
        connect: ChannelOpener,
        handshake: Handshake,
        on_request: SessionRequestHandler,
        on_notification: SessionNotificationHandler,
        log: Any,
        mode: Callable[[], LinkMode] | None = None,
        hosts: Callable[[str], HostFacts | None] | None = None,
        tool_schema: ToolSchemas | None = None,
        shared_info: Callable[[], ServerInfo | None] | None = None,
        connect_client: Callable[[str], ChannelOpener] | None = None,
    ) -> None:
        self._config = config
        self._connect_client = connect_client
        self._tool_schema = tool_schema
        self._shared_info = shared_info
        self._name = config.name
        self._connect = connect
        self._handshake = handshake
        self._on_request = on_request
        self._on_notification = on_notification
        self._log = log
        self._mode = mode or (lambda: "per_client")
        self._hosts = hosts or (lambda _client: None)
        self._nursery: trio.Nursery | None = None
        self._lanes: dict[str, list[Lane]] = {}
        self._keys: dict[str, tuple[str, dict[str, Any]]] = {}
        # The last logging/setLevel params a lane of each key acknowledged (rule 4).
        self._levels: dict[str, msgspec.Raw | None] = {}

    def _protocol(self) -> str:
        """The era for a new link: the shared session's, else the configured probe."""
        info = self._shared_info() if self._shared_info is not None else None
        if info is None:
            return effective_protocol(self._config)
        return "modern" if info.modern else "legacy"

    def attach(self, nursery: trio.Nursery) -> None:
        """Run links in ``nursery`` (the shared session's) from now on."""
        self._nursery = nursery

    def detach(self) -> None:
        """The shared session is ending: open no more links."""
        self._nursery = None

    def close_all(self) -> None:
        """End every link (the shared session ended)."""
        for lanes in list(self._lanes.values()):
            for lane in lanes:
                lane.scope.cancel()
        self._lanes.clear()
        self._levels.clear()

    @property
    def open_count(self) -> int:
        """Backend sessions of this kind open or opening (a metric, ``sessions.max``)."""
        return sum(len(lanes) for lanes in self._lanes.values())

    def __contains__(self, client: object) -> bool:
        return isinstance(client, str) and self._home(client) is not None

    def _key_of(self, client: str) -> tuple[str, dict[str, Any]]:
        """The client's key and the capabilities its lanes declare (rule 1)."""
        known = self._keys.get(client)
        if known is None:
            known = self._keys[client] = self._fresh_key(client)
        return known

    def _fresh_key(self, client: str) -> tuple[str, dict[str, Any]]:
        """The client's key from what is known of its host now (rule 1)."""
        facts = self._hosts(client)
        principal, capabilities, roots = facts if facts is not None else (None, {}, None)
        mode = self._mode() if facts is not None else "per_client"
        return link_key(mode, client, principal, capabilities, roots), declared(capabilities)

    def rekey(self, client: str) -> None:
        """The client's roots are known anew: its key follows them (rules 1, 6).

        Lanes that are the client's alone move to the new key with it; the
        client leaves lanes it shares. Nothing happens when the key is the
        same (``per_client``, or the same roots).
        """
        known = self._keys.get(client)
        if known is None:
            return
        fresh = self._fresh_key(client)
        if fresh[0] == known[0]:
            return
        self._keys[client] = fresh
        if known[0] in self._levels:
            self._levels.setdefault(fresh[0], self._levels[known[0]])
        lanes = self._lanes.pop(known[0], [])
        kept = [lane for lane in lanes if not self._alone(lane, client)]
        for lane in lanes:
            if lane in kept:
                self._discard(lane, client)
            else:
                lane.key = fresh[0]
                self._lanes.setdefault(fresh[0], []).append(lane)
        if kept:
            self._lanes[known[0]] = kept

    def roots_changed(self, client: str) -> Peer | None:
        """The host says its roots changed: the session that should hear it (rule 6).

        The client's first lane when it is the client's alone (its backend
        asks again); else the client leaves the lanes it shares, forgets its
        key (its next call's key takes the new roots), and None.
        """
        home = self._home(client)
        if home is not None and self._alone(home, client):
            return home.peer
        known = self._keys.pop(client, None)
        if known is not None:
            for lane in self._lanes.get(known[0], []):
                if not self._alone(lane, client):
                    self._discard(lane, client)
        return None

    @staticmethod
    def _alone(lane: Lane, client: str) -> bool:
        """Whether ``lane`` serves ``client`` and no other client."""
        return lane.members <= {client} and lane.free_for(client)

    @staticmethod
    def _discard(lane: Lane, client: str) -> None:
        """``client`` no longer uses ``lane``: its membership and subscriptions there go."""
        lane.members.discard(client)
        for holders in lane.subscriptions.values():
            holders.discard(client)
        lane.subscriptions = {uri: h for uri, h in lane.subscriptions.items() if h}

    def _home(self, client: str) -> Lane | None:
        known = self._keys.get(client)
        lanes = self._lanes.get(known[0]) if known is not None else None
        return lanes[0] if lanes else None

    def peer_of(self, client: str) -> Peer | None:
        """The client's first open session, if any; never opens one."""
        lane = self._home(client)
        return lane.peer if lane is not None else None

    def close(self, client: str) -> None:
        """The client session ended: it leaves its lanes; its own (``per_client``) close."""
        known = self._keys.pop(client, None)
        if known is None:
            return
        key = known[0]
        lanes = self._lanes.get(key, [])
        for lane in lanes:
            lane.members.discard(client)
            for holders in lane.subscriptions.values():
                holders.discard(client)
            lane.subscriptions = {uri: h for uri, h in lane.subscriptions.items() if h}
        if all(other[0] != key for other in self._keys.values()):
            self._levels.pop(key, None)  # no client of the key is left
        if key == client:  # per_client: the session was this client's alone
            for lane in self._lanes.pop(key, []):
                lane.scope.cancel()
                lane.ready.set()

    async def acquire(self, client: str, method: str) -> Lane:
        """A lane of the client's key for one request, opened if need be (rules 2, 3).

        The caller gives it back with ``release``. Only called while the
        backend is up, which is when a nursery is attached.

        Raises:
            SessionLimitReached: ``sessions.max`` lanes are open already.
            BackendUnavailable: the session could not be opened, or closed.
        """
        key, capabilities = self._key_of(client)
        lanes = self._lanes.setdefault(key, [])
        if method in HOME_METHODS and lanes:
            lane = lanes[0]
        else:
            lane = next((ln for ln in lanes if ln.free_for(client)), None) or self._new(
                key, capabilities, lanes
            )
        lane.members.add(client)
        lane.calls[client] += 1
        try:
            await lane.ready.wait()
            if lane.peer is None:
                raise lane.failure or BackendUnavailable(
                    self._name, "the client's backend session closed"
                )
        except BaseException:
            self.release(lane, client)
            raise
        return lane

    def release(self, lane: Lane, client: str) -> None:
        """A request on ``lane`` ended: the lane's idle time starts over."""
        lane.calls[client] -= 1
        if lane.calls[client] <= 0:
            del lane.calls[client]
        lane.used = trio.current_time()

    def _new(self, key: str, capabilities: dict[str, Any], lanes: list[Lane]) -> Lane:
        """Start opening one more lane of ``key``; its outcome arrives on ``ready``."""
        limit = self._config.sessions.max
        if limit and self.open_count >= limit:
            raise SessionLimitReached(self._name, limit)
        label = f"{self._name}/{key[:24]}/{len(lanes)}"
        lane = Lane(key, capabilities, label, used=trio.current_time())
        lanes.append(lane)
        assert self._nursery is not None  # attached whenever the backend is up
        self._nursery.start_soon(self._run, lane, name=f"link:{label}")
        return lane

    # -- bookkeeping of session state on a lane (rule 2) ---------------------

    def before(self, lane: Lane, client: str, method: str, params: msgspec.Raw | None) -> bool:
        """Whether the request goes to the backend; an unsubscribe another holds does not."""
        if method != "resources/unsubscribe":
            return True
        uri = _uri(params)
        holders = lane.subscriptions.get(uri or "", set())
        holders.discard(client)
        if holders:
            return False  # another client of the key still holds it
        lane.subscriptions.pop(uri or "", None)
        return True

    def after(self, lane: Lane, client: str, method: str, params: msgspec.Raw | None) -> None:
        """Note a subscription or a log level the backend accepted on ``lane``."""
        if method == "logging/setLevel":
            self._levels[lane.key] = params  # rule 4: the key's next lanes get it
        elif method == "resources/subscribe":
            uri = _uri(params)
            if uri is not None:
                lane.subscriptions.setdefault(uri, set()).add(client)

    # -- what the backend sends on a lane (rule 5) ---------------------------

    def asker(self, lane: Lane, method: str) -> str:
        """The client a backend's request on ``lane`` goes to.

        Raises:
            LocalProtocolError: nobody's call is in flight and it is not ``roots/list``.
        """
        busy = lane.busy()
        if len(busy) == 1:
            return busy[0]
        if not busy and method == "roots/list" and lane.members:
            return min(lane.members)  # every client of the key declared the same roots capability
        raise LocalProtocolError(
            f"{method}: the gateway cannot tell which client this request is for "
            f"({'no call' if not busy else 'calls of several clients'} in flight on this "
            "backend session)",
            INTERNAL_ERROR,
        )

    async def _request(self, lane: Lane, method: str, params: msgspec.Raw | None) -> msgspec.Raw:
        client = self.asker(lane, method)
        if method == "elicitation/create" and params is not None:
            body = mcp.decode_object(params) or {}
            if body.get("mode") == "url" and isinstance(body.get("elicitationId"), str):
                lane.elicitations[body["elicitationId"]] = client
        return await self._on_request(method, params, client=client)

    def _notification(self, lane: Lane, method: str, params: msgspec.Raw | None) -> None:
        if method == "notifications/resources/updated":
            targets: set[str] | list[str] = lane.subscriptions.get(_uri(params) or "", set())
        elif method == "notifications/elicitation/complete":
            body = _body(params)
            asked = lane.elicitations.pop(str(body.get("elicitationId")), None)
            targets = [asked] if asked is not None else []
        else:
            targets = sorted(lane.members)
        for client in list(targets):
            self._on_notification(method, params, client=client)

    # -- the lane's life (rules 3, 7) ------------------------------------------

    async def _run(self, lane: Lane) -> None:
        """One backend session of a key; a failure to open goes to its callers."""
        log = self._log.bind(link=lane.label)
        try:
            with lane.scope:
                connect = (
                    self._connect_client(min(lane.members))
                    if self._connect_client is not None and lane.members
                    else self._connect
                )
                async with (
                    connect(self._config) as channel,
                    open_session(
                        channel,
                        name=lane.label,
                        on_request=lambda m, p: self._request(lane, m, p),
                        on_notification=lambda m, p: self._notification(lane, m, p),
                    ) as peer,
                ):
                    schemas_for(channel, self._tool_schema)
                    info = await self._handshake(
                        peer,
                        self._protocol(),
                        self._config.timeouts,
                        capabilities=lane.capabilities,
                    )
                    if not info.modern:
                        await peer.notify("notifications/initialized")
                    if lane.key in self._levels:
                        await self._set_level(peer, self._levels[lane.key], log)
                    lane.peer = peer
                    lane.ready.set()
                    log.info("backend.client_session.opened")
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._expire_when_idle, lane, log)
                        await peer.closed.wait()
                        nursery.cancel_scope.cancel()
        except (*EXPECTED, BaseExceptionGroup) as exc:
            if isinstance(exc, BaseExceptionGroup):
                _, rest = exc.split(EXPECTED)
                if rest is not None:
                    raise
            if lane.peer is None:
                self._failed_to_open(lane, exc)
            else:
                log.info("backend.client_session.failed", error=describe(exc))
        except Exception as exc:
            if lane.peer is not None:
                raise
            # Not open yet: the calls waiting for it get the failure (rule 7),
            # never the shared session's nursery.
            self._failed_to_open(lane, exc)
            log.warning("backend.client_session.open_failed", error=describe(exc))
        finally:
            lane.peer = None
            lane.ready.set()
            lanes = self._lanes.get(lane.key)
            if lanes is not None and lane in lanes:
                lanes.remove(lane)
                if not lanes:
                    del self._lanes[lane.key]
            log.info("backend.client_session.closed")

    async def _set_level(self, peer: Peer, params: msgspec.Raw | None, log: Any) -> None:
        """Set a new lane to its key's log level (rule 4); a failure only logs."""
        with trio.move_on_after(self._config.timeouts.request) as scope:
            try:
                await peer.request("logging/setLevel", params)
            except GatewayError as exc:
                log.warning("backend.client_session.set_level_failed", error=describe(exc))
        if scope.cancelled_caught:
            log.warning("backend.client_session.set_level_failed", error="timed out")

    def _failed_to_open(self, lane: Lane, exc: BaseException) -> None:
        """Tell the calls waiting for ``lane`` why it never opened (rule 7)."""
        lane.failure = BackendUnavailable(
            self._name,
            f"cannot open a session for this client: {describe(exc)}",
            cause=condition(exc),
        )

    async def _expire_when_idle(self, lane: Lane, log: Any) -> None:
        """Close ``lane`` after ``sessions.idle_timeout`` without a call (rule 3)."""
        idle = self._config.sessions.idle_timeout
        if not idle:
            return
        while True:
            await trio.sleep_until(lane.used + idle)
            if lane.busy() or lane.subscriptions:
                lane.used = max(lane.used, trio.current_time())
                continue
            if trio.current_time() >= lane.used + idle:
                log.info("backend.client_session.idle", seconds=idle)
                lane.scope.cancel()
                return


def _body(params: msgspec.Raw | None) -> dict[str, Any]:
    """Params as an object; ``{}`` when absent or not one."""
    return (mcp.decode_object(params) or {}) if params is not None else {}


def _uri(params: msgspec.Raw | None) -> str | None:
    """The ``uri`` of a subscribe, unsubscribe or updated notification."""
    uri = _body(params).get("uri")
    return uri if isinstance(uri, str) else None


__all__ = ["HOME_METHODS", "HostFacts", "Lane", "Links", "SessionLimitReached"]
