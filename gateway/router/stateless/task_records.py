"""Gateway tasks kept in the state store, so every replica answers for them (the trio driver).

The record and the dead-owner rule are sans-IO
(``protocol/stateless/task_record``, rules 1-4 there); this module does
their I/O for one replica, a service (``run``) with three loops:

1. **Writer.** A task whose table row says ``SAVE`` is marked
   (:meth:`TaskRecords.changed`); one loop writes the marked records in
   order, each a compare-and-set on the bytes this replica wrote last, so a
   record another replica failed (its owner looked dead) is never
   overwritten: the owner takes that ending instead (``taken``). A record
   that vanished (a store restarted empty) is written afresh. A new task's
   ``CreateTaskResult`` waits for its first write (:meth:`flush`), so any
   replica resolves the id at once.
2. **Heartbeat.** ``tasks-owner:<replica>`` with ``store.task_owner_timeout``
   of expiry, renewed every third of it; live records are renewed before
   half their expiry has passed. A heartbeat found gone (the store restarted
   empty, or an outage outlasted it) makes the replica write every record
   it holds again, ended ones included. A replica that stops (not one that
   crashes) fails its live tasks itself, at once, and removes its heartbeat.
3. **Control.** Cancels and updates other replicas relay to a task this
   replica runs arrive on its channel and are applied as if asked here
   (``apply``); the replies to this replica's own relays arrive there too.

The store down: the owner keeps its tasks in memory and answers for them
as before, logs once, and writes the records when the store is back
(retried each :data:`RETRY` seconds); another replica cannot read the
record and answers -32603 ``data.reason = "store_unavailable"``
(:class:`TaskRecordUnavailable`). An owner that does not answer a relay
within :data:`RELAY_TIMEOUT` while its heartbeat lives is -32603
``owner_unreachable``; one whose heartbeat is gone fails the task (rule 3).
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any, Final

import structlog
import trio

from gateway.errors import INTERNAL_ERROR, LocalProtocolError
from gateway.protocol.stateless.task_record import (
    TaskControl,
    TaskControlReply,
    TaskRecord,
    control_channel,
    decode_control,
    decode_record,
    encode,
    new_replica_id,
    orphaned,
    owner_key,
    owner_lost,
    record_key,
    record_of,
    record_ttl,
)
from gateway.protocol.stateless.tasks import TERMINAL, unknown_task
from gateway.store.api import StoreUnavailable

if TYPE_CHECKING:
    from collections.abc import Callable

    from gateway.protocol.stateless.tasks import Task
    from gateway.store.api import Store

__all__ = ["RELAY_TIMEOUT", "RETRY", "TaskRecordUnavailable", "TaskRecords"]

logger = structlog.get_logger("gateway.tasks")

#: Seconds a relayed cancel or update waits for the owner's reply.
RELAY_TIMEOUT: Final = 5.0
#: Seconds between two attempts to write records while the store is down.
RETRY: Final = 1.0
#: Seconds a new task's CreateTaskResult waits at most for its first write.
FLUSH_BOUND: Final = 5.0


class TaskRecordUnavailable(LocalProtocolError):
    """A task another replica runs cannot be answered for: its record or owner is out of reach.

    -32603 with ``data.reason``: ``store_unavailable`` (the store does not
    answer) or ``owner_unreachable`` (a live owner did not answer a relay).
    """

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message, INTERNAL_ERROR, data={"reason": reason})
        self.reason = reason


class TaskRecords:
    """One replica's side of the task records (module rules).

    Args:
        store: the state store.
        owner_timeout: ``store.task_owner_timeout``: seconds after its
            replica's last heartbeat that a live task counts as orphaned.
        replica: this replica's id (tests); None: a fresh one.

    Attributes:
        apply: applies a relayed cancel or update to a task run here (the
            runner's); raises ``LocalProtocolError`` to refuse it.
        taken: another replica ended a task run here (it thought the owner
            dead): the runner ends its task as the record says.
        kept: the tasks this replica holds, running and ended (the runner's
            table), written again when the store lost them.
        listening: set once the control channel is subscribed (tests).
    """

    def __init__(self, store: Store, owner_timeout: float = 60.0, *, replica: str | None = None):
        self.replica = replica if replica is not None else new_replica_id()
        self.owner_timeout = owner_timeout
        self.apply: Callable[[TaskControl], None] = _refuse
        self.taken: Callable[[str, TaskRecord], None] = lambda _id, _record: None
        self.kept: Callable[[], list[Task]] = list
        self.listening = trio.Event()
        self._store = store
        # Tasks marked for writing, and the batch being written now.
        self._dirty: dict[str, Task] = {}
        self._writing: dict[str, Task] = {}
        self._wake = trio.Event()
        self._progress = trio.Event()
        self._failing = False
        self._stopped = False
        # task id -> (the bytes last written, when, the task): live records this replica owns.
        self._live: dict[str, tuple[bytes, float, Task]] = {}
        # nonce -> where the owner's reply to a relay goes.
        self._waiting: dict[str, trio.MemorySendChannel[TaskControlReply]] = {}

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Write records, beat and hear relays until cancelled (module rules 1-3).

        Cancelled (the gateway stops), it fails the live tasks it runs at
        once rather than a timeout later (:meth:`_abandon`).
        """
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write_loop)
                nursery.start_soon(self._heartbeat_loop)
                nursery.start_soon(self._control_loop)
                task_status.started()
        finally:
            with trio.CancelScope(shield=True):
                await self.stop()

    async def stop(self) -> None:
        """This replica stops: its live tasks end failed now, its heartbeat goes (once).

        Called at the end of a drain, while the store still answers (a
        cancelled Redis client may not), and again, harmlessly, when
        ``run`` is cancelled. Bounded by :data:`FLUSH_BOUND`.
        """
        if self._stopped:
            return
        self._stopped = True
        with trio.move_on_after(FLUSH_BOUND):
            await self._abandon()

    async def _abandon(self) -> None:
        """What is marked is written, then the live tasks end failed and the heartbeat goes."""
        try:
            for task in list(self._dirty.values()) + list(self._writing.values()):
                await self._write(task)
            for task_id, (data, _written, _task) in list(self._live.items()):
                record = decode_record(data)
                if record is not None:
                    ended = owner_lost(record)
                    ttl = record_ttl(ended, 0)
                    await self._store.swap(record_key(task_id), data, encode(ended), ttl=ttl)
                del self._live[task_id]
            await self._store.delete(owner_key(self.replica))
        except StoreUnavailable as exc:
            logger.warning("tasks.store_unavailable", reason=exc.reason, step="stop")

    # -- the owner's side -------------------------------------------------

    def changed(self, task: Task) -> None:
        """Mark ``task``'s record for writing (its row said ``SAVE``, or it is new)."""
        self._dirty[task.task_id] = task
        self._wake.set()

    async def flush(self) -> None:
        """Wait until the records marked so far are written (or the store failed a round)."""
        with trio.move_on_after(FLUSH_BOUND):
            while (self._dirty or self._writing) and not self._failing:
                await self._progress.wait()

    async def _write_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            self._writing, self._dirty = self._dirty, {}
            failed = False
            for task_id, task in self._writing.items():
                try:
                    await self._write(task)
                except StoreUnavailable as exc:
                    failed = True
                    self._dirty.setdefault(task_id, task)
                    self._down(exc)
            self._writing = {}
            self._failing = failed
            self._progress.set()
            self._progress = trio.Event()
            if failed:
                await trio.sleep(RETRY)
                self._wake.set()

    async def _write(self, task: Task) -> None:
        record = record_of(task, self.replica)
        data = encode(record)
        key = record_key(task.task_id)
        last = self._live.get(task.task_id)
        ttl = record_ttl(record, self.owner_timeout)
        if not await self._store.swap(key, last[0] if last else None, data, ttl=ttl):
            current = await self._store.get(key)
            found = decode_record(current) if current is not None and current != data else None
            if found is not None and found.status in TERMINAL:
                # Another replica ended it (the owner looked dead): its ending stands.
                self._live.pop(task.task_id, None)
                logger.warning("tasks.record_taken", task=task.task_id[:8])
                self.taken(task.task_id, found)
                return
            if current != data:
                # Gone (a store restarted empty) or changed under us: this replica's is the truth.
                await self._store.put(key, data, ttl=ttl)
        if self._failing:
            self._failing = False
            logger.info("tasks.store_restored")
        if record.status in TERMINAL:
            self._live.pop(task.task_id, None)
        else:
            self._live[task.task_id] = (data, trio.current_time(), task)

    async def _heartbeat_loop(self) -> None:
        beat = self.owner_timeout / 3
        key = owner_key(self.replica)
        while not self._stopped:
            try:
                # Renewed only if still there: a heartbeat that is gone means
                # the store lost this replica's keys (restarted empty) or
                # expired them (an outage past the timeout).
                if not await self._store.swap(key, b"1", b"1", ttl=self.owner_timeout):
                    await self._store.put(key, b"1", ttl=self.owner_timeout)
                    for task in self.kept():
                        self.changed(task)  # every record it holds, written again
            except StoreUnavailable as exc:
                self._down(exc)
            now = trio.current_time()
            for _data, written, task in list(self._live.values()):
                half = (task.ttl_ms / 1000 + self.owner_timeout) / 2
                if now - written >= half - beat:
                    self.changed(task)  # renewed before the store forgets it (rule 2)
            await trio.sleep(beat)

    def _down(self, exc: StoreUnavailable) -> None:
        if not self._failing:
            self._failing = True
            logger.warning("tasks.store_unavailable", reason=exc.reason)

    # -- the other replicas' side ---------------------------------------

    async def find(self, task_id: str, principal: str | None) -> TaskRecord:
        """The record of ``task_id`` for ``principal``, an orphan failed first (rule 3).

        Raises:
            LocalProtocolError: -32602, unknown, expired or someone else's.
            TaskRecordUnavailable: the store does not answer.
        """
        key = record_key(task_id)
        try:
            data = await self._store.get(key)
            record = decode_record(data) if data is not None else None
            if record is None or record.principal != principal:
                raise unknown_task(task_id)
            if record.status in TERMINAL or record.owner == self.replica:
                return record
            alive = await self._store.get(owner_key(record.owner)) is not None
            if not orphaned(record, alive):
                return record
            assert data is not None
            return await self._fail_orphan(record, data)
        except StoreUnavailable as exc:
            raise TaskRecordUnavailable(
                f"the state store does not answer ({exc.reason}), so task {task_id[:64]} "
                "run by another replica cannot be read; try again",
                "store_unavailable",
            ) from None

    async def _fail_orphan(self, record: TaskRecord, data: bytes) -> TaskRecord:
        ended = owner_lost(record)
        key = record_key(record.task_id)
        if await self._store.swap(key, data, encode(ended), ttl=record_ttl(ended, 0)):
            logger.warning("tasks.owner_lost", task=record.task_id[:8], owner=record.owner)
            return ended
        # Another replica (or the owner) moved it first: its version stands.
        current = await self._store.get(key)
        found = decode_record(current) if current is not None else None
        if found is None:
            raise unknown_task(record.task_id)
        return found

    async def relay(
        self, method: str, record: TaskRecord, principal: str | None, params: dict[str, Any]
    ) -> None:
        """Have the owner of ``record`` do ``method`` (rule 4); returns once it did.

        Raises:
            LocalProtocolError: what the owner answered instead (-32602 for bad
                ``inputResponses``, ...).
            TaskRecordUnavailable: the store or a live owner did not answer.
        """
        nonce = secrets.token_urlsafe(9)
        send, receive = trio.open_memory_channel[TaskControlReply](1)
        self._waiting[nonce] = send
        control = TaskControl(
            method=method,
            task_id=record.task_id,
            principal=principal,
            params=params,
            reply_to=self.replica,
            nonce=nonce,
        )
        reply: TaskControlReply | None = None
        try:
            with trio.move_on_after(RELAY_TIMEOUT):
                await self._store.publish(control_channel(record.owner), encode(control))
                reply = await receive.receive()
            if reply is None:
                # Silence: a dead owner's task fails (and the ack stands); a live one is an error.
                current = await self.find(record.task_id, principal)
                if current.status not in TERMINAL:
                    raise TaskRecordUnavailable(
                        f"the replica running task {record.task_id[:64]} did not answer "
                        f"{method} within {RELAY_TIMEOUT:g} s; try again",
                        "owner_unreachable",
                    )
                return
        except StoreUnavailable as exc:
            raise TaskRecordUnavailable(
                f"the state store does not answer ({exc.reason}), so {method} cannot reach "
                "the replica running the task; try again",
                "store_unavailable",
            ) from None
        finally:
            del self._waiting[nonce]
        if reply.code:
            raise LocalProtocolError(reply.message, reply.code)

    async def _control_loop(self) -> None:
        while True:
            try:
                async with self._store.subscribe(control_channel(self.replica)) as messages:
                    self.listening.set()
                    async for data in messages:
                        await self._heard(data)
            except (StoreUnavailable, trio.BrokenResourceError) as exc:
                reason = exc.reason if isinstance(exc, StoreUnavailable) else "subscription ended"
                logger.warning("tasks.control_unavailable", reason=reason)
            await trio.sleep(RETRY)

    async def _heard(self, data: bytes) -> None:
        message = decode_control(data)
        if isinstance(message, TaskControlReply):
            waiting = self._waiting.get(message.nonce)
            if waiting is not None:
                waiting.send_nowait(message)
            return
        if message is None:
            return
        try:
            self.apply(message)
        except LocalProtocolError as exc:
            reply = TaskControlReply(nonce=message.nonce, code=exc.code, message=exc.message)
        else:
            reply = TaskControlReply(nonce=message.nonce)
        try:
            await self._store.publish(control_channel(message.reply_to), encode(reply))
        except StoreUnavailable as exc:
            logger.warning("tasks.control_unavailable", reason=exc.reason)


def _refuse(control: TaskControl) -> None:
    raise unknown_task(control.task_id)
