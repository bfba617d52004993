"""Client sessions: who is connected, on what revision, with what in flight.

A client session is created by a host's ``initialize`` and ends on DELETE,
on idle expiry, or when the gateway stops. It owns:

- the negotiated protocol revision and the host's declared capabilities;
- the cancel scopes of its requests in flight, so that ending the session
  (or a ``notifications/cancelled``) stops exactly its own calls;
- an outbox for messages the gateway starts on its own (list_changed),
  read by the session's GET stream. The outbox is a bounded ring with event
  ids so that a reconnecting stream can resume with ``Last-Event-ID``; when
  the ring is full the oldest message is dropped, never the gateway.
"""

from __future__ import annotations

import itertools
import secrets
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import trio

from gateway.catalog.profiles import DEFAULT_PROFILE
from gateway.errors import INTERNAL_ERROR, RemoteProtocolError
from gateway.frontend.stateless.listen_stream import DEFAULT_LISTEN_STREAMS, Listener, Listeners
from gateway.protocol import jsonrpc

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    import msgspec

    from gateway.backends.credentials.grants import CallerToken
    from gateway.identity.principal import Principal
    from gateway.protocol.jsonrpc import RequestId

# Messages kept for a GET stream that is slow or reconnecting. At ~200
# bytes a notification this bounds a session's outbox to tens of KiB.
OUTBOX_CAPACITY: Final = 128
SESSION_ID_BYTES: Final = 24  # 192 bits; token_urlsafe gives 32 visible ASCII chars
MAX_SESSION_ID_CHARS: Final = 128
ASKED_ELSEWHERE: Final = (
    "the host's session is held by another gateway replica; requests to the host "
    "(sampling, elicitation, roots) need the replica that opened it "
    "(route by Mcp-Session-Id, docs/operations.md)"
)


class Outbox:
    """A bounded ring of (event id, message) with a wakeup for readers.

    A list_changed reaches every session's outbox in one synchronous loop,
    10,000 of them at a time, so a put allocates nothing but the ring's
    entry: readers park on one ``ParkingLot`` that lives as long as the
    outbox (it was a new ``trio.Event`` per message: three objects a
    session per broadcast, for the cyclic collector to walk). A put with no
    reader parked wakes nobody; one with a reader parked makes it runnable,
    and the reader takes everything newer than what it has when it runs.
    """

    __slots__ = ("_next_id", "_readers", "_ring")

    def __init__(self, capacity: int = OUTBOX_CAPACITY) -> None:
        self._ring: deque[tuple[int, bytes]] = deque(maxlen=capacity)
        self._next_id = 1
        self._readers = trio.lowlevel.ParkingLot()

    def put_nowait(self, message: bytes) -> int:
        """Append a message; returns its event id. Never blocks."""
        event_id = self._next_id
        self._next_id += 1
        self._ring.append((event_id, message))
        if self._readers:
            self._readers.unpark_all()
        return event_id

    def after(self, last_id: int) -> list[tuple[int, bytes]]:
        """Messages with an id greater than ``last_id`` still in the ring."""
        if last_id >= self._next_id - 1:
            return []
        return [(i, m) for i, m in self._ring if i > last_id]

    @property
    def last_id(self) -> int:
        """The id of the newest message ever put (0 when none)."""
        return self._next_id - 1

    async def wait_after(self, last_id: int) -> list[tuple[int, bytes]]:
        """Wait until there is something newer than ``last_id``, then return it.

        Returns at once when there is (no checkpoint then: the reader's
        write that follows is one).
        """
        pending = self.after(last_id)
        while not pending:
            await self._readers.park()
            pending = self.after(last_id)
        return pending


@dataclass(eq=False, slots=True)
class _Asked:
    """A server-to-client request waiting for the host's answer."""

    done: trio.Event = field(default_factory=trio.Event)
    result: msgspec.Raw | None = None
    error: RemoteProtocolError | None = None


@dataclass(eq=False)
class ClientSession:
    """One host's session with the gateway (the router's ``ClientPeer``)."""

    session_id: str
    protocol_version: str
    profile: str = DEFAULT_PROFILE
    client_info: dict[str, Any] = field(default_factory=dict)
    capabilities: dict[str, Any] = field(default_factory=dict)
    initialized: bool = False
    last_seen: float = 0.0
    outbox: Outbox = field(default_factory=Outbox)
    inflight: dict[RequestId, trio.CancelScope] = field(default_factory=dict)
    stream_open: bool = False
    closed: bool = False
    # The key of the principal that opened the session (None: auth off).
    principal: str | None = None
    # That principal itself, for the access policy (refreshed on each request).
    caller: Principal | None = None
    # When it opened (trio clock) and how many requests it sent: the console's sessions page.
    opened_at: float = 0.0
    calls: int = 0
    # A copy loaded from the shared store: another replica opened the session
    # and holds its GET stream (session_records.py rule 4).
    owner_elsewhere: bool = False
    _asked: dict[str, _Asked] = field(default_factory=dict)
    _ask_ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def cancel_all(self) -> None:
        """Cancel every request this session has in flight, and every question to it."""
        for scope in self.inflight.values():
            scope.cancel()
        for asked in self._asked.values():
            asked.error = RemoteProtocolError("the client session ended", INTERNAL_ERROR)
            asked.done.set()

    def notify_nowait(self, message: bytes) -> None:
        """Queue an unsolicited message for the GET stream."""
        if not self.closed:
            self.outbox.put_nowait(message)

    async def request(
        self,
        method: str,
        params: msgspec.Raw | None,
        emit: Callable[[bytes], bool] | None,
    ) -> msgspec.Raw:
        """Ask the host something on a backend's behalf and wait for the answer.

        The id is the gateway's own (``s-<n>``, never confused with the
        host's ids or another backend's). The question travels on the
        related request's stream when there is one, else on the GET stream.
        If the waiter is cancelled, the host is told with
        ``notifications/cancelled``.

        Raises:
            RemoteProtocolError: the host answered with an error, or the
                session ended first.
        """
        if self.closed:
            raise RemoteProtocolError("the client session has ended", INTERNAL_ERROR)
        if self.owner_elsewhere:
            # The host's answer would be POSTed to any replica, and only the
            # asking one could take it: refused at once, never left to time out.
            raise RemoteProtocolError(ASKED_ELSEWHERE, INTERNAL_ERROR)
        ask_id = f"s-{next(self._ask_ids)}"
        asked = _Asked()
        self._asked[ask_id] = asked
        message = jsonrpc.encode_request(ask_id, method, params)
        try:
            if emit is None or not emit(message):
                self.outbox.put_nowait(message)
            await asked.done.wait()
        except trio.Cancelled:
            if not asked.done.is_set():
                self.notify_nowait(
                    jsonrpc.encode_notification(
                        "notifications/cancelled", jsonrpc.to_raw({"requestId": ask_id})
                    )
                )
            raise
        finally:
            self._asked.pop(ask_id, None)
        if asked.error is not None:
            raise asked.error
        assert asked.result is not None
        return asked.result

    def answer(self, message: jsonrpc.Response | jsonrpc.ErrorResponse) -> bool:
        """Deliver the host's answer to a question; False if nobody is waiting.

        Answers to ids the gateway never used, or already answered, are
        dropped (robustness A35).
        """
        if not isinstance(message.id, str):
            return False
        asked = self._asked.get(message.id)
        if asked is None or asked.done.is_set():
            return False
        if isinstance(message, jsonrpc.Response):
            asked.result = message.result
        else:
            asked.error = RemoteProtocolError(message.message, message.code, message.data)
        asked.done.set()
        return True


class ClientRegistry:
    """All open client sessions, by id.

    Args:
        max_sessions: beyond this many, new sessions are refused (503).
        on_open: called with each new session.
        on_close: called once with each session that ends, however it ends.

    Attributes:
        listeners: the modern ``subscriptions/listen`` streams, which hear
            the same list_changed broadcasts as sessions.
    """

    def __init__(
        self,
        max_sessions: int = 10_000,
        *,
        listen_streams_per_principal: int = DEFAULT_LISTEN_STREAMS,
        on_open: Callable[[ClientSession], None] | None = None,
        on_close: Callable[[ClientSession], None] | None = None,
    ) -> None:
        self._sessions: dict[str, ClientSession] = {}
        self.max_sessions = max_sessions
        self._on_open = on_open
        self._on_close = on_close
        self.listeners = Listeners(listen_streams_per_principal)
        # The latest raw token each principal presented, for token exchange
        # towards backends (never logged: CallerToken hides itself), and how
        # many open sessions each principal has, to forget it with the last.
        self._caller_tokens: dict[str, CallerToken] = {}
        self._sessions_of: dict[str, int] = {}
        # The principal of each modern request being served, by its id.
        self._modern: dict[str, str] = {}

    def apply(self, max_sessions: int) -> None:
        """A reload's ``server.max_sessions``: open sessions stay; new ones count against it."""
        self.max_sessions = max_sessions

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[ClientSession]:
        return iter(list(self._sessions.values()))

    def open(
        self,
        protocol_version: str,
        client_info: dict[str, Any],
        capabilities: dict[str, Any],
        profile: str = DEFAULT_PROFILE,
        principal: str | None = None,
    ) -> ClientSession:
        """Create a session with a fresh, unguessable id, bound to one profile and ``principal``."""
        session = ClientSession(
            session_id=secrets.token_urlsafe(SESSION_ID_BYTES),
            protocol_version=protocol_version,
            profile=profile,
            client_info=client_info,
            capabilities=capabilities,
            last_seen=trio.current_time(),
            principal=principal,
        )
        session.opened_at = session.last_seen
        self._add(session)
        return session

    def adopt(
        self,
        session_id: str,
        protocol_version: str,
        client_info: dict[str, Any],
        capabilities: dict[str, Any],
        profile: str,
        principal: str | None,
    ) -> ClientSession:
        """Keep a copy of a session another replica opened (its record in the shared store).

        The copy is initialized (the host did that on the other replica),
        counts like any session here, and ends on idle or DELETE like one.
        """
        session = ClientSession(
            session_id=session_id,
            protocol_version=protocol_version,
            profile=profile,
            client_info=client_info,
            capabilities=capabilities,
            initialized=True,
            last_seen=trio.current_time(),
            principal=principal,
            owner_elsewhere=True,
        )
        session.opened_at = session.last_seen
        self._add(session)
        return session

    def _add(self, session: ClientSession) -> None:
        self._sessions[session.session_id] = session
        principal = session.principal
        if principal is not None:
            self._sessions_of[principal] = self._sessions_of.get(principal, 0) + 1
        if self._on_open is not None:
            self._on_open(session)

    def get(self, session_id: str) -> ClientSession | None:
        """The session for a header value, or None (unknown, expired, malformed)."""
        if len(session_id) > MAX_SESSION_ID_CHARS:
            return None
        return self._sessions.get(session_id)

    def close(self, session: ClientSession) -> None:
        """End a session: cancel its calls and forget it."""
        if session.closed:
            return
        session.closed = True
        session.cancel_all()
        self._sessions.pop(session.session_id, None)
        owner = session.principal
        if owner is not None:
            left = self._sessions_of.get(owner, 1) - 1
            if left > 0:
                self._sessions_of[owner] = left
            else:
                self._sessions_of.pop(owner, None)
                self._caller_tokens.pop(owner, None)
        if self._on_close is not None:
            self._on_close(session)
        # Wake a GET stream waiting on the outbox so it notices the close.
        session.outbox.put_nowait(b"")

    def note_caller(self, principal: Principal | None) -> None:
        """Keep the token ``principal`` just authenticated with, as its latest.

        A ``token_exchange`` backend exchanges it for the principal's client
        sessions, so a host that refreshes its token keeps working. Tokens of
        principals with no open session are forgotten once there are more
        than ``max_sessions`` of them (bounded memory under a token flood).
        """
        if principal is None or principal.token is None:
            return
        self._caller_tokens.pop(principal.key, None)
        self._caller_tokens[principal.key] = principal.token
        if len(self._caller_tokens) > self.max_sessions:
            idle = [k for k in self._caller_tokens if k not in self._sessions_of]
            for key in idle:
                if key != principal.key:  # the caller of the request at hand stays
                    del self._caller_tokens[key]

    @contextmanager
    def modern_caller(self, request_id: str, principal: str | None) -> Iterator[None]:
        """Name ``principal`` the caller of a modern request while it is served.

        A modern (2026-07-28) request has no session, only an id of its own
        for the router's tables (``ModernRequest.session_id``);
        :meth:`subject_of` finds its caller through this.
        """
        if principal is None:
            yield
            return
        self._modern[request_id] = principal
        try:
            yield
        finally:
            self._modern.pop(request_id, None)

    def subject_of(self, session_id: str) -> tuple[str, CallerToken] | None:
        """The principal key and latest raw token of a session's owner; None without one.

        ``session_id`` is a client session's, or a modern request's id.
        """
        session = self._sessions.get(session_id)
        owner = session.principal if session is not None else self._modern.get(session_id)
        token = self._caller_tokens.get(owner) if owner is not None else None
        return None if owner is None or token is None else (owner, token)

    def peers(self) -> list[ClientSession | Listener]:
        """Every initialized session and open listen stream (who can hear list_changed)."""
        return [s for s in self._sessions.values() if s.initialized] + list(self.listeners)

    def broadcast(
        self,
        message: bytes,
        profile: str | None = None,
        accept: Callable[[ClientSession | Listener], bool] | None = None,
    ) -> int:
        """Queue a message for every initialized session and listen stream; returns how many.

        Args:
            message: the encoded notification.
            profile: only the clients of this profile (None: everyone).
            accept: only the clients it accepts (None: all of them); the
                access policy's per-view list_changed uses it.
        """
        count = self.listeners.broadcast(message, profile, accept)
        for session in self._sessions.values():
            if (
                session.initialized
                and profile in (None, session.profile)
                and (accept is None or accept(session))
            ):
                session.outbox.put_nowait(message)
                count += 1
        return count

    def expire_idle(self, now: float, idle_timeout: float) -> list[ClientSession]:
        """Close sessions idle longer than ``idle_timeout`` with no open stream."""
        expired = [
            s
            for s in self._sessions.values()
            if not s.stream_open and not s.inflight and now - s.last_seen > idle_timeout
        ]
        for session in expired:
            self.close(session)
        return expired
