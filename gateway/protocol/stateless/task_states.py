"""The life of a gateway-run task as one table: status x event -> new status + actions (sans-IO).

A task (``protocol/stateless/tasks``, rules there) is a ``tools/call`` the
gateway runs in the background for a 2026-07-28 host. Its status is what
``tasks/get`` shows; every way it can change is a row of
:data:`TRANSITIONS`, and :meth:`~gateway.protocol.stateless.tasks.Task.feed`
applies a row to the task's own fields (``TOUCH``, ``RECORD``) and returns
the rest for the trio driver (``router/stateless/gateway_tasks``): write
the task's record to the state store (``SAVE``), tell the listen streams
(``NOTIFY``), hand answers to the backend (``DELIVER``),
cancel the call (``CANCEL_CALL``).

Rules of the table:

1. ``working`` and ``input_required`` are live; ``completed``, ``failed`` and
   ``cancelled`` are final: no event moves a final task, and ``tasks/cancel``
   or ``tasks/update`` on one is acknowledged and does nothing (rule 3).
2. A backend request (``ASKED``) makes a live task ``input_required``; the
   last pending answer (``ANSWERED_LAST``) makes it ``working`` again; each
   of these is told to the listen streams (rule 4).
3. ``tasks/cancel`` on a live task cancels its call; the task ends
   ``cancelled`` when the call does (``CALL_CANCELLED``), unless it ended
   otherwise first (cooperative cancel, rule 3).
4. The call's answer ends the task once: a result is ``completed``, an error
   (or no answer) ``failed``; the outcome is recorded, saved and told.
5. Whatever a replica answering from the store must see (a status, the
   input requests, the outcome) is ``SAVE``d before it is told (``NOTIFY``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

WORKING: Final = "working"
INPUT_REQUIRED: Final = "input_required"
COMPLETED: Final = "completed"
FAILED: Final = "failed"
CANCELLED: Final = "cancelled"
TERMINAL: Final = frozenset({COMPLETED, FAILED, CANCELLED})


class TaskEvent(enum.Enum):
    """What can happen to a task."""

    ASKED = "asked"  # its call sent the client a request
    ANSWERED = "answered"  # one request answered; others still pending
    ANSWERED_LAST = "answered_last"  # the last pending request answered
    UPDATE = "update"  # tasks/update came
    CANCEL = "cancel"  # tasks/cancel came
    CALL_COMPLETED = "call_completed"  # the call answered a result
    CALL_FAILED = "call_failed"  # the call answered an error, or nothing
    CALL_CANCELLED = "call_cancelled"  # the call ended by tasks/cancel


class TaskAction(enum.Enum):
    """What a transition does."""

    TOUCH = "touch"  # lastUpdatedAt: now (applied by the task itself)
    RECORD = "record"  # keep the outcome and when it ended (applied by the task itself)
    SAVE = "save"  # write the task's record to the state store (protocol/stateless/task_record)
    NOTIFY = "notify"  # notifications/tasks to the streams that follow it
    DELIVER = "deliver"  # hand tasks/update's answers to the waiting backend requests
    CANCEL_CALL = "cancel_call"  # cancel the task's call


@dataclass(frozen=True)
class Transition:
    """One row's outcome: the status after and the actions, in order."""

    status: str
    actions: tuple[TaskAction, ...] = ()


E, A, T = TaskEvent, TaskAction, Transition
_ENDS: Final = {
    E.CALL_COMPLETED: COMPLETED,
    E.CALL_FAILED: FAILED,
    E.CALL_CANCELLED: CANCELLED,
}


def _rows() -> dict[tuple[str, TaskEvent], Transition]:
    rows: dict[tuple[str, TaskEvent], Transition] = {}
    for live in (WORKING, INPUT_REQUIRED):
        rows[live, E.ASKED] = T(INPUT_REQUIRED, (A.TOUCH, A.SAVE, A.NOTIFY))  # rule 2
        rows[live, E.ANSWERED] = T(live, (A.SAVE, A.NOTIFY))
        rows[live, E.UPDATE] = T(live, (A.DELIVER,))
        rows[live, E.CANCEL] = T(live, (A.CANCEL_CALL,))  # rule 3
        for event, status in _ENDS.items():  # rule 4
            rows[live, event] = T(status, (A.RECORD, A.SAVE, A.NOTIFY))
    rows[INPUT_REQUIRED, E.ANSWERED_LAST] = T(WORKING, (A.TOUCH, A.SAVE, A.NOTIFY))
    rows[WORKING, E.ANSWERED_LAST] = T(WORKING, (A.SAVE, A.NOTIFY))
    for final in TERMINAL:  # rule 1: nothing moves a final task
        for event in TaskEvent:
            rows[final, event] = T(final)
    return rows


#: Every transition of a task (the rules above); total over status x event.
TRANSITIONS: Final[dict[tuple[str, TaskEvent], Transition]] = _rows()


__all__ = [
    "CANCELLED",
    "COMPLETED",
    "FAILED",
    "INPUT_REQUIRED",
    "TERMINAL",
    "TRANSITIONS",
    "WORKING",
    "TaskAction",
    "TaskEvent",
    "Transition",
]
