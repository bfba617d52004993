"""Handshake-era client sessions in the shared store, so any replica serves their plain requests.

Rules:

1. **Never the raw id.** A record's key is ``sessions:<sha256 of the
   Mcp-Session-Id>``: whoever reads the store learns no id to present.
2. **The record is who and what, not where.** It holds the principal's key,
   the profile, the negotiated revision, the host's info and capabilities
   and its log level. A replica that loads it still authenticates the
   request and compares: another principal or another profile's path is
   "Session not found" (404), exactly as for an unknown id.
3. **No store traffic per request.** The replica that opens a session
   writes its record before answering ``initialize``, and again when its
   log level changes; otherwise a keeper pass every ``refresh`` seconds
   rewrites the records of the sessions used since the last pass (ttl: the
   session idle timeout), so a busy session costs one write a pass, and a
   request to a session this replica holds reads nothing from the store.
4. **A copy held elsewhere serves what needs no stream back.** A replica
   that receives a POST for a session it does not hold loads the record and
   keeps a copy (:attr:`ClientSession.owner_elsewhere`): lists, calls,
   reads, prompts, completions, ``ping`` and ``logging/setLevel`` (which
   rewrites the record) are served; what needs the replica holding the
   host's GET stream is refused with a specific error (module
   ``streamable.endpoint``, docs/operations.md "What still needs affinity").
5. **DELETE ends it everywhere.** It leaves a tombstone (ttl: the idle
   timeout, so a late copy cannot revive it) and publishes the key's digest
   on the ``sessions`` channel; every replica closes its copy when it hears
   it, or at its next keeper pass when the message was lost. A
   ``notifications/cancelled`` for a request this replica does not run is
   published the same way, and the replica running it cancels it (best
   effort: a lost message leaves the call to finish, as the spec allows).
6. **The store failing takes down no session.** The replica that holds a
   session serves it as before and writes its record at the first keeper
   pass the store answers; another replica answers 404 as it did without
   a store; each outage is logged once.

The record (:class:`SessionRecord`) and its key are sans-IO; the
:class:`SessionRecords` driver does the store's I/O.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Final

import msgspec
import structlog
import trio

from gateway.store.api import StoreUnavailable

if TYPE_CHECKING:
    from collections.abc import Callable

    from gateway.frontend.clients import ClientRegistry, ClientSession
    from gateway.store.api import Store

logger = structlog.get_logger("gateway.frontend")

NAMESPACE: Final = "sessions"
#: Where DELETEs and cancels are announced to the other replicas (:class:`SessionNews`).
CHANNEL: Final = "sessions"
#: What a DELETEd session's key holds until its ttl runs out (rule 5).
ENDED: Final = b"ended"
#: The longest time between two rewrites of a used session's record (rule 3).
REFRESH_INTERVAL: Final = 30.0


class SessionRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What another replica needs to serve a session's plain requests (rule 2).

    Attributes:
        principal: the key of the principal that opened it (None: auth off).
        profile: the profile whose path it was opened on.
        version: the negotiated protocol revision.
        client_info: the host's ``clientInfo``.
        capabilities: the host's declared capabilities.
        log_level: the level the host asked for with ``logging/setLevel``.
    """

    principal: str | None
    profile: str
    version: str
    client_info: dict[str, Any] = {}
    capabilities: dict[str, Any] = {}
    log_level: str | None = None


_decoder: Final = msgspec.json.Decoder(SessionRecord)


class SessionNews(msgspec.Struct, frozen=True, kw_only=True):
    """What one replica tells the others about a session (rule 5).

    Attributes:
        session: the digest of the session id (never the id).
        cancel: the id of a request to cancel; None: the session was DELETEd.
    """

    session: str
    cancel: int | str | None = None


_news_decoder: Final = msgspec.json.Decoder(SessionNews)


def decode_news(message: bytes) -> SessionNews | None:
    """A message of the ``sessions`` channel, or None when it is none."""
    try:
        return _news_decoder.decode(message)
    except msgspec.DecodeError:
        return None


def digest(session_id: str) -> str:
    """The hex SHA-256 of a session id: what the store and the channel carry (rule 1)."""
    return hashlib.sha256(session_id.encode("ascii", "replace")).hexdigest()


def key_of(session_id: str) -> str:
    """The store key of a session's record."""
    return f"{NAMESPACE}:{digest(session_id)}"


def record_of(session: ClientSession, log_level: str | None) -> SessionRecord:
    """The record of a session as this replica knows it."""
    return SessionRecord(
        principal=session.principal,
        profile=session.profile,
        version=session.protocol_version,
        client_info=session.client_info,
        capabilities=session.capabilities,
        log_level=log_level,
    )


def encode(record: SessionRecord) -> bytes:
    """A record as the store keeps it (JSON)."""
    return msgspec.json.encode(record)


def decode(value: bytes) -> SessionRecord | None:
    """A stored record, or None for a tombstone or bytes that are no record."""
    if value == ENDED:
        return None
    try:
        return _decoder.decode(value)
    except msgspec.DecodeError:
        return None


class SessionRecords:
    """Writes, loads and ends session records in the shared store (module rules).

    Args:
        store: the shared store.
        clients: this replica's sessions.
        idle_timeout: the session idle timeout now (a reload may change it):
            every record's ttl.
        level_of: the log level a session asked for on this replica.
        set_level: gives a session the log level its record holds.
        refresh: seconds between keeper passes (None: the smaller of
            :data:`REFRESH_INTERVAL` and a quarter of the idle timeout).
    """

    def __init__(
        self,
        store: Store,
        clients: ClientRegistry,
        idle_timeout: Callable[[], float],
        level_of: Callable[[str], str | None],
        set_level: Callable[[str, str], None],
        *,
        refresh: float | None = None,
    ) -> None:
        self._store = store
        self._clients = clients
        self._idle = idle_timeout
        self._level_of = level_of
        self._set_level = set_level
        self._refresh = refresh
        # Per session id with a record: when it was written and what it holds.
        self._written: dict[str, tuple[float, bytes]] = {}
        self._by_digest: dict[str, str] = {}
        self._unavailable = False
        #: Set once the channel's subscription is open (tests wait for it).
        self.listening = trio.Event()

    def _interval(self) -> float:
        if self._refresh is not None:
            return self._refresh
        return min(REFRESH_INTERVAL, self._idle() / 4)

    def _down(self, exc: StoreUnavailable, step: str) -> None:
        if not self._unavailable:
            self._unavailable = True
            logger.warning("session.record.unavailable", reason=exc.reason, step=step)

    def _up(self) -> None:
        if self._unavailable:
            self._unavailable = False
            logger.info("session.record.restored")

    def _note(self, session: ClientSession, value: bytes) -> None:
        self._written[session.session_id] = (trio.current_time(), value)
        self._by_digest[digest(session.session_id)] = session.session_id

    async def save(self, session: ClientSession) -> None:
        """Write a session's record now (``initialize``, a new log level); best effort."""
        value = encode(record_of(session, self._level_of(session.session_id)))
        try:
            await self._store.put(key_of(session.session_id), value, ttl=self._idle())
        except StoreUnavailable as exc:
            self._down(exc, "save")
            self._note(session, b"")  # the keeper writes it once the store answers
            return
        self._up()
        self._note(session, value)

    async def level_changed(self, session: ClientSession) -> None:
        """A ``logging/setLevel`` was served: rewrite the record when the level is new."""
        written = self._written.get(session.session_id)
        level = self._level_of(session.session_id)
        if written is None and not session.owner_elsewhere:
            return  # never had a record (the store was down at its initialize)
        if written is not None and decode(written[1]) == record_of(session, level):
            return
        await self.save(session)

    async def fetch(self, session_id: str) -> tuple[SessionRecord, bytes] | None:
        """The record of a session this replica does not hold; None: unknown, ended, store down.

        The caller compares the principal and profile (rule 2) before it
        :meth:`adopt` s the session.
        """
        try:
            value = await self._store.get(key_of(session_id))
        except StoreUnavailable as exc:
            self._down(exc, "load")
            return None
        self._up()
        record = None if value is None else decode(value)
        return None if value is None or record is None else (record, value)

    def adopt(self, session_id: str, record: SessionRecord, value: bytes) -> ClientSession:
        """Keep a copy of a session from its record (rule 4), with its log level."""
        session = self._clients.adopt(
            session_id,
            record.version,
            record.client_info,
            record.capabilities,
            record.profile,
            record.principal,
        )
        if record.log_level is not None:
            self._set_level(session_id, record.log_level)
        self._note(session, value)
        logger.info(
            "client.session.loaded",
            client_session=session_id[:8],
            protocol_version=record.version,
            profile=record.profile,
        )
        return session

    async def end(self, session: ClientSession) -> None:
        """A DELETE: tombstone the record and tell the other replicas (rule 5); best effort."""
        self.forget(session)
        hashed = digest(session.session_id)
        try:
            await self._store.put(f"{NAMESPACE}:{hashed}", ENDED, ttl=self._idle())
            await self._store.publish(CHANNEL, msgspec.json.encode(SessionNews(session=hashed)))
        except StoreUnavailable as exc:
            self._down(exc, "end")

    async def cancel_elsewhere(self, session: ClientSession, request_id: int | str) -> None:
        """Tell the replica running a request of this session to cancel it (rule 5); best effort."""
        news = SessionNews(session=digest(session.session_id), cancel=request_id)
        try:
            await self._store.publish(CHANNEL, msgspec.json.encode(news))
        except StoreUnavailable as exc:
            self._down(exc, "cancel")

    def forget(self, session: ClientSession) -> None:
        """A session closed here (however): stop refreshing its record; the record stays."""
        self.forget_id(session.session_id)

    def _heard(self, message: bytes) -> None:
        news = decode_news(message)
        if news is None:
            return
        if news.cancel is None:
            self._ended(news.session, "deleted_elsewhere")
            return
        session = self._clients.get(self._by_digest.get(news.session, ""))
        scope = None if session is None else session.inflight.get(news.cancel)
        if scope is not None:
            scope.cancel()

    def _ended(self, hashed: str, how: str) -> None:
        session = self._clients.get(self._by_digest.get(hashed, ""))
        if session is None:
            return
        self._clients.close(session)
        logger.info("client.session.closed", client_session=session.session_id[:8], reason=how)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hear DELETEs of other replicas and keep used sessions' records alive, until cancelled."""
        task_status.started()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._follow)
            while True:
                await trio.sleep(self._interval())
                await self.keep()

    async def _follow(self) -> None:
        while True:
            try:
                async with self._store.subscribe(CHANNEL) as messages:
                    self.listening.set()
                    async for message in messages:
                        self._heard(message)
            except (StoreUnavailable, trio.BrokenResourceError) as exc:
                reason = exc.reason if isinstance(exc, StoreUnavailable) else "subscription ended"
                self._down(StoreUnavailable("subscribe", reason), "follow")
            await trio.sleep(self._interval())

    async def keep(self) -> None:
        """One keeper pass (rules 3 and 5): rewrite used sessions' records, close ended ones.

        A record another replica changed (its log level) is taken in; the
        rewrite is a compare-and-set, so a change made meanwhile is never
        overwritten (it is taken in at the next pass).
        """
        for session_id, (written_at, value) in list(self._written.items()):
            session = self._clients.get(session_id)
            if session is None:
                self.forget_id(session_id)
                continue
            if session.last_seen <= written_at and not session.stream_open:
                continue
            try:
                await self._keep_one(session, value)
            except StoreUnavailable as exc:
                self._down(exc, "keep")
                return
            self._up()

    async def _keep_one(self, session: ClientSession, written: bytes) -> None:
        key = key_of(session.session_id)
        stored = await self._store.get(key)
        if stored == ENDED:
            self._ended(digest(session.session_id), "deleted_elsewhere")
            return
        level = self._level_of(session.session_id)
        theirs = None if stored is None else decode(stored)
        if theirs is not None and stored != written and theirs.log_level != level:
            if theirs.log_level is not None:
                self._set_level(session.session_id, theirs.log_level)
            level = theirs.log_level
        value = encode(record_of(session, level))
        if await self._store.swap(key, stored, value, ttl=self._idle()):
            self._note(session, value)

    def forget_id(self, session_id: str) -> None:
        """Stop refreshing a record by its session id (the session is gone here)."""
        if self._written.pop(session_id, None) is not None:
            self._by_digest.pop(digest(session_id), None)
