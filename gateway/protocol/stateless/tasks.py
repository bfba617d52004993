"""The tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663), sans-IO.

The gateway runs tasks itself: a ``tools/call`` of a tool whose backend
marks it ``execution.taskSupport`` becomes a task at the gateway when the
calling 2026-07-28 request declares the extension. The backend sees an
ordinary call, so every backend, handshake era included, gains tasks.
A 2026-07-28 backend that declares the extension runs the task itself
(``native_tasks``: the gateway routes by an id of its own).

Rules (``ext:`` tasks, sep-2663; ``../docs/eras.md``):

1. Only ``tools/call``, only for a tool whose ``execution.taskSupport`` is
   ``optional`` or ``required``, only when the request's envelope declares
   the extension under ``clientCapabilities.extensions``. ``required``
   without the declaration is -32021 naming the extension; ``optional``
   without it runs synchronously as before.
2. ``CreateTaskResult`` is flat: ``resultType: "task"``, ``taskId``,
   ``status``, ``createdAt``, ``lastUpdatedAt`` (ISO 8601), ``ttlMs`` (an
   integer), ``pollIntervalMs``; no ``result``, ``error``,
   ``inputRequests`` or ``requestState``. It is returned only once the task
   is in the table, so ``tasks/get`` resolves it at once.
3. ``tasks/get`` answers ``resultType: "complete"`` with the task: its
   ``result`` inlined once ``completed`` (a tool error is ``completed`` with
   ``isError: true``), its ``error`` (code, message, data) once ``failed``.
   ``tasks/cancel`` and ``tasks/update`` answer an empty ack, also on a
   finished task; cancel is cooperative (the backend call is cancelled and
   the task ends ``cancelled`` unless it already ended).
4. A backend's own request during a task (elicitation, sampling, roots)
   makes the task ``input_required`` with that request under a key unique
   over the task's life, in ``inputRequests`` on ``tasks/get``; the client
   answers with ``tasks/update``, in parts if it likes (unknown keys are
   ignored), and each answer goes to the backend at once. The task works
   again when nothing is pending. A capability the creating request did not
   declare is refused to the backend, as for any modern request.
5. ``taskId`` is unguessable (128 random bits) and bound to the principal
   that created it: for anyone else, as for an unknown id, it is -32602.
   A request that does not declare the extension gets -32021 for the three
   methods; ``tasks/result`` and ``tasks/list`` do not exist (-32601).
6. A finished task is kept for its ``ttlMs`` after it ended, then
   forgotten; the table holds at most ``max_tasks`` (running and finished);
   a full table refuses a new task with -32603 rather than forgetting one a
   client may still poll.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from gateway.errors import INVALID_PARAMS, LocalProtocolError
from gateway.protocol.stateless.task_states import (
    CANCELLED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    TERMINAL,
    TRANSITIONS,
    WORKING,
    TaskAction,
    TaskEvent,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

EXTENSION: Final = "io.modelcontextprotocol/tasks"
TASK_METHODS: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
# Encoded tool bytes mention this when a tool has an execution block worth reading.
TASK_SUPPORT_MARK: Final = b'"taskSupport"'


def task_support(tool: Mapping[str, Any]) -> str:
    """A tool's ``execution.taskSupport``: ``forbidden`` unless it says otherwise."""
    execution = tool.get("execution")
    support = execution.get("taskSupport") if isinstance(execution, dict) else None
    return support if support in ("optional", "required") else "forbidden"


def starts_task(method: str, params: object) -> bool:
    """Whether a request may start a task: a first ``tools/call``, not an MRTR retry.

    There is no way from MRTR into a task (sep-2663): a retry carrying
    ``requestState`` or ``inputResponses`` finishes as the call it retries.
    """
    return (
        method == "tools/call"
        and isinstance(params, dict)
        and "requestState" not in params
        and "inputResponses" not in params
    )


def declares_tasks(capabilities: Mapping[str, Any]) -> bool:
    """Whether a request's ``clientCapabilities`` declare the extension (rule 1)."""
    extensions = capabilities.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION), dict)


def iso_now() -> str:
    """The wall-clock time as the spec's ISO 8601 timestamps want it."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(eq=False, slots=True)
class Task:
    """One task the gateway runs (rules 2, 3).

    Attributes:
        task_id: the public id (rule 5).
        principal: the key of whoever created it (None: auth off).
        tool: the public tool name, for logs and the console.
        ttl_ms: how long it is kept after it ended.
        poll_interval_ms: the polling pace suggested to the client.
        ended_at: the monotonic time it ended (None while working).
    """

    task_id: str
    principal: str | None
    tool: str
    ttl_ms: int
    poll_interval_ms: int
    status: str = WORKING
    status_message: str | None = None
    created_at: str = field(default_factory=iso_now)
    last_updated_at: str = ""
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    ended_at: float | None = None
    # key -> inputRequests entry, while the task waits for the client.
    input_requests: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.last_updated_at:
            self.last_updated_at = self.created_at

    def _base(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.last_updated_at,
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": self.poll_interval_ms,
        }
        if self.status_message is not None:
            out["statusMessage"] = self.status_message
        return out

    def created(self) -> dict[str, Any]:
        """The flat ``CreateTaskResult`` (rule 2)."""
        return {"resultType": "task", **self._base()}

    def detailed(self) -> dict[str, Any]:
        """The ``tasks/get`` answer (rule 3)."""
        out = {"resultType": "complete", **self._base()}
        if self.status == INPUT_REQUIRED and self.input_requests:
            out["inputRequests"] = dict(self.input_requests)
        if self.status == COMPLETED and self.result is not None:
            out["result"] = self.result
        elif self.status == FAILED and self.error is not None:
            out["error"] = self.error
        return out

    def feed(
        self, event: TaskEvent, now: float | None = None, **outcome: Any
    ) -> tuple[TaskAction, ...]:
        """Move by ``event`` (``task_states``); the actions left for the driver.

        The task applies ``TOUCH`` and ``RECORD`` (``outcome``: ``result``,
        ``error``, ``message``; ``now``: when it ended) to itself.
        """
        row = TRANSITIONS[self.status, event]
        self.status = row.status
        if TaskAction.RECORD in row.actions:
            self.input_requests = {}
            self.result = outcome.get("result")
            self.error = outcome.get("error")
            self.status_message = outcome.get("message")
            self.ended_at = now
        if TaskAction.TOUCH in row.actions or TaskAction.RECORD in row.actions:
            self.last_updated_at = iso_now()
        return tuple(a for a in row.actions if a not in _APPLIED)

    def waits_for(self, key: str, entry: dict[str, Any]) -> tuple[TaskAction, ...]:
        """The task asks the client (``input_required`` until every key is answered)."""
        if self.status not in TERMINAL:
            self.input_requests[key] = entry
        return self.feed(TaskEvent.ASKED)

    def answered(self, key: str) -> tuple[TaskAction, ...]:
        """One input arrived; the task works again once none is pending."""
        self.input_requests.pop(key, None)
        return self.feed(TaskEvent.ANSWERED if self.input_requests else TaskEvent.ANSWERED_LAST)

    def finish(self, status: str, now: float, **outcome: Any) -> bool:
        """End the task once; False when it had already ended (a late cancel)."""
        ended = self.status not in TERMINAL
        self.feed(_END_OF[status], now, **outcome)
        return ended


_APPLIED: Final = frozenset({TaskAction.TOUCH, TaskAction.RECORD})
_END_OF: Final = {
    COMPLETED: TaskEvent.CALL_COMPLETED,
    FAILED: TaskEvent.CALL_FAILED,
    CANCELLED: TaskEvent.CALL_CANCELLED,
}


def unknown_task(task_id: object) -> LocalProtocolError:
    """The -32602 for a task id that is unknown, expired or someone else's (rule 5)."""
    shown = task_id[:64] if isinstance(task_id, str) else repr(task_id)[:64]
    return LocalProtocolError(f"unknown taskId: {shown}", INVALID_PARAMS)


class TaskTableFull(LocalProtocolError):
    """No room for another task (rule 6)."""


class TaskTable:
    """The gateway's tasks by id, bounded in count and kept for their ttl (rules 5, 6)."""

    def __init__(self, max_tasks: int = 1024) -> None:
        self.max_tasks = max_tasks  # a reload may change it; kept tasks stay
        self._tasks: dict[str, Task] = {}

    def __len__(self) -> int:
        return len(self._tasks)

    def new(
        self,
        principal: str | None,
        tool: str,
        now: float,
        *,
        ttl_ms: int,
        poll_interval_ms: int,
    ) -> Task:
        """Make and keep a task (rules 2, 6).

        Raises:
            TaskTableFull: ``max_tasks`` tasks are kept already.
        """
        self.prune(now)
        if len(self._tasks) >= self.max_tasks:
            raise TaskTableFull(
                f"the gateway holds {self.max_tasks} tasks already; try again later or "
                "call without the tasks extension",
            )
        task = Task(secrets.token_urlsafe(16), principal, tool, ttl_ms, poll_interval_ms)
        self._tasks[task.task_id] = task
        return task

    def find(self, task_id: object, principal: str | None, now: float) -> Task:
        """The caller's task ``task_id`` (rule 5).

        Raises:
            LocalProtocolError: -32602, unknown, expired or someone else's.
        """
        self.prune(now)
        task = self._tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None or task.principal != principal:
            raise unknown_task(task_id)
        return task

    def kept(self) -> list[Task]:
        """Every task held now, running and ended (written again to a store that lost them)."""
        return list(self._tasks.values())

    def forget(self, task_id: str) -> bool:
        """Drop a task whose record another replica ended; True when it was here."""
        return self._tasks.pop(task_id, None) is not None

    def prune(self, now: float) -> None:
        """Forget finished tasks whose ttl has run out (rule 6)."""
        gone = [
            task_id
            for task_id, task in self._tasks.items()
            if task.ended_at is not None and now - task.ended_at >= task.ttl_ms / 1000
        ]
        for task_id in gone:
            del self._tasks[task_id]


__all__ = [
    "CANCELLED",
    "COMPLETED",
    "EXTENSION",
    "FAILED",
    "INPUT_REQUIRED",
    "TASK_METHODS",
    "TASK_SUPPORT_MARK",
    "TERMINAL",
    "WORKING",
    "Task",
    "TaskTable",
    "TaskTableFull",
    "declares_tasks",
    "iso_now",
    "starts_task",
    "task_support",
    "unknown_task",
]
