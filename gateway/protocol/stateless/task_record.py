"""A gateway task's record in the state store, and the rule for a dead owner (sans-IO).

A task runs on one replica (its owner, ``router/stateless/gateway_tasks``);
its record lets every other replica answer for it
(``router/stateless/task_records`` is the trio driver). Rules:

1. **One record per task** at ``tasks:<taskId>``: what ``tasks/get``
   shows (status, message, times, ttl, poll pace, the result or error once
   ended, the input requests while ``input_required``), whose it is (the
   creating principal's key: anyone else gets "unknown taskId" as on the
   owner) and which replica runs it. A replica answers from the record
   exactly what the owner answers from memory: both go through
   :meth:`~gateway.protocol.stateless.tasks.Task.detailed`.
2. **The store's expiry keeps it.** An ended task's record lives its
   ``ttlMs`` (the store's expiry); a live one lives :func:`record_ttl`,
   which the owner renews while the task runs.
3. **An owner proves it lives** by a heartbeat key ``tasks-owner:<replica>``
   whose expiry is ``store.task_owner_timeout``, renewed every third of it.
   A live record whose owner's heartbeat is gone is an orphan
   (:func:`orphaned`): the replica that finds it swaps it (atomically, so
   one replica wins) to :func:`owner_lost`, ``failed`` with a message that
   says the replica running it stopped. A task of a dead replica is thus
   ``failed`` within the timeout, never unknown.
4. **Cancel and update go to the owner.** Only the owner holds the call; a
   replica that is asked relays a :class:`TaskControl` on the owner's
   channel ``tasks-control:<replica>`` and waits for its
   :class:`TaskControlReply` on its own.
"""

from __future__ import annotations

import secrets
from typing import Any, Final

import msgspec

from gateway.errors import INTERNAL_ERROR
from gateway.protocol.stateless.tasks import FAILED, TERMINAL, Task, iso_now

__all__ = [
    "OWNER_LOST",
    "TaskControl",
    "TaskControlReply",
    "TaskRecord",
    "control_channel",
    "decode_control",
    "decode_record",
    "encode",
    "new_replica_id",
    "orphaned",
    "owner_key",
    "owner_lost",
    "record_key",
    "record_of",
    "record_ttl",
    "task_of",
]

#: The status message of a task whose replica stopped (rule 3).
OWNER_LOST: Final = (
    "the gateway replica running this task stopped before it ended; call the tool again"
)


class TaskRecord(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the store keeps of one task (rule 1).

    Attributes:
        task_id: the public id.
        principal: the creating principal's key (None: auth off).
        owner: the id of the replica running the task.
        tool: the public tool name (logs, the console).
        status: what ``tasks/get`` shows.
        status_message: ``statusMessage``.
        created_at: ``createdAt`` (ISO 8601).
        last_updated_at: ``lastUpdatedAt``.
        ttl_ms: ``ttlMs``.
        poll_interval_ms: ``pollIntervalMs``.
        result: the inlined result, once ``completed``.
        error: the error, once ``failed``.
        input_requests: ``inputRequests``, while ``input_required``.
    """

    task_id: str
    principal: str | None
    owner: str
    tool: str
    status: str
    created_at: str
    last_updated_at: str
    ttl_ms: int
    poll_interval_ms: int
    status_message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, dict[str, Any]] | None = None


class TaskControl(msgspec.Struct, frozen=True, kw_only=True):
    """A ``tasks/cancel`` or ``tasks/update`` relayed to the task's owner (rule 4).

    Attributes:
        method: ``tasks/cancel`` or ``tasks/update``.
        task_id: the task.
        principal: who asked (the owner checks it as for its own requests).
        params: the request's params (``inputResponses`` for an update).
        reply_to: the asking replica's id.
        nonce: matches the reply to the waiting request.
    """

    method: str
    task_id: str
    principal: str | None
    params: dict[str, Any]
    reply_to: str
    nonce: str


class TaskControlReply(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the owner did with a :class:`TaskControl`: done, or the error it raised.

    Attributes:
        nonce: the control's nonce.
        code: 0 when done, else the JSON-RPC error code the owner answered.
        message: the error's message.
    """

    nonce: str
    code: int = 0
    message: str = ""


_record_decoder: Final = msgspec.json.Decoder(TaskRecord)
_control_decoder: Final = msgspec.json.Decoder(TaskControl)
_reply_decoder: Final = msgspec.json.Decoder(TaskControlReply)
_encoder: Final = msgspec.json.Encoder()


def new_replica_id() -> str:
    """A fresh id for this process's replica (unguessable, short)."""
    return secrets.token_urlsafe(9)


def record_key(task_id: str) -> str:
    """The store key of a task's record (rule 1)."""
    return "tasks:" + task_id


def owner_key(replica: str) -> str:
    """The store key of a replica's heartbeat (rule 3)."""
    return "tasks-owner:" + replica


def control_channel(replica: str) -> str:
    """The channel a replica hears cancels, updates and their replies on (rule 4)."""
    return "tasks-control:" + replica


def record_of(task: Task, owner: str) -> TaskRecord:
    """The record of ``task`` as it is now, run by replica ``owner`` (rule 1)."""
    return TaskRecord(
        task_id=task.task_id,
        principal=task.principal,
        owner=owner,
        tool=task.tool,
        status=task.status,
        status_message=task.status_message,
        created_at=task.created_at,
        last_updated_at=task.last_updated_at,
        ttl_ms=task.ttl_ms,
        poll_interval_ms=task.poll_interval_ms,
        result=task.result,
        error=task.error,
        input_requests=dict(task.input_requests) or None,
    )


def task_of(record: TaskRecord) -> Task:
    """A read-only :class:`Task` of ``record``, so its answers are the owner's (rule 1)."""
    return Task(
        record.task_id,
        record.principal,
        record.tool,
        record.ttl_ms,
        record.poll_interval_ms,
        status=record.status,
        status_message=record.status_message,
        created_at=record.created_at,
        last_updated_at=record.last_updated_at,
        result=record.result,
        error=record.error,
        input_requests=dict(record.input_requests or {}),
    )


def record_ttl(record: TaskRecord, owner_timeout: float) -> float:
    """Seconds the store keeps ``record`` from now (rule 2).

    An ended task is kept its ``ttlMs``; a live one that long plus the owner
    timeout, so that a task whose owner died is still found (and failed)
    after the timeout. The owner renews a live record each half of this.
    """
    ttl = record.ttl_ms / 1000
    return ttl if record.status in TERMINAL else ttl + owner_timeout


def orphaned(record: TaskRecord, owner_alive: bool) -> bool:
    """Whether ``record`` is a live task whose owner stopped (rule 3)."""
    return record.status not in TERMINAL and not owner_alive


def owner_lost(record: TaskRecord) -> TaskRecord:
    """``record`` ended ``failed`` because its replica stopped (rule 3)."""
    return msgspec.structs.replace(
        record,
        status=FAILED,
        status_message=OWNER_LOST,
        last_updated_at=iso_now(),
        result=None,
        error={"code": INTERNAL_ERROR, "message": OWNER_LOST},
        input_requests=None,
    )


def encode(value: TaskRecord | TaskControl | TaskControlReply) -> bytes:
    """JSON bytes of a record or a control message."""
    return _encoder.encode(value)


def decode_record(data: bytes) -> TaskRecord | None:
    """The record in ``data``; None for bytes that are not one (a foreign key)."""
    try:
        return _record_decoder.decode(data)
    except msgspec.DecodeError:
        return None


def decode_control(data: bytes) -> TaskControl | TaskControlReply | None:
    """A control message or a reply (rule 4); None for anything else."""
    for decoder in (_control_decoder, _reply_decoder):
        try:
            message: TaskControl | TaskControlReply = decoder.decode(data)
        except msgspec.DecodeError:
            continue
        return message
    return None
