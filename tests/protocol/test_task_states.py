"""The task transition table, tested as data: events in, status and actions out (no clock)."""

from __future__ import annotations

import pytest

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
from gateway.protocol.stateless.tasks import Task

A, E = TaskAction, TaskEvent


def task() -> Task:
    """A new working task."""
    return Task("t" * 22, None, "tool", ttl_ms=1000, poll_interval_ms=100)


def play(subject: Task, steps: list[tuple[TaskEvent, str, tuple[TaskAction, ...]]]) -> None:
    """Feed each event; check the status after it and the actions left for the driver."""
    for event, status, actions in steps:
        assert (event, subject.feed(event, 1.0), subject.status) == (event, actions, status)


def test_a_backend_request_parks_the_task_until_the_last_answer() -> None:
    """spec: ext tasks (rule 4): input_required until nothing is pending; each change told."""
    play(
        task(),
        [
            (E.ASKED, INPUT_REQUIRED, (A.SAVE, A.NOTIFY)),
            (E.ASKED, INPUT_REQUIRED, (A.SAVE, A.NOTIFY)),
            (E.UPDATE, INPUT_REQUIRED, (A.DELIVER,)),
            (E.ANSWERED, INPUT_REQUIRED, (A.SAVE, A.NOTIFY)),
            (E.ANSWERED_LAST, WORKING, (A.SAVE, A.NOTIFY)),
        ],
    )


def test_cancel_is_cooperative_and_the_call_ending_first_wins() -> None:
    """spec: ext tasks (rule 3): cancel cancels the call; the task ends as the call does."""
    play(
        task(),
        [
            (E.CANCEL, WORKING, (A.CANCEL_CALL,)),
            (E.CALL_COMPLETED, COMPLETED, (A.SAVE, A.NOTIFY)),
            (E.CALL_CANCELLED, COMPLETED, ()),
        ],
    )
    play(
        task(),
        [
            (E.CANCEL, WORKING, (A.CANCEL_CALL,)),
            (E.CALL_CANCELLED, CANCELLED, (A.SAVE, A.NOTIFY)),
        ],
    )


@pytest.mark.parametrize(
    ("event", "status"),
    [(E.CALL_COMPLETED, COMPLETED), (E.CALL_FAILED, FAILED), (E.CALL_CANCELLED, CANCELLED)],
)
def test_the_calls_end_records_the_outcome_once(event: TaskEvent, status: str) -> None:
    """spec: ext tasks (rule 3): a result is completed, an error failed; recorded and told."""
    subject = task()
    subject.feed(E.ASKED)
    assert subject.feed(event, 2.0, error={"code": 1, "message": "x"}) == (A.SAVE, A.NOTIFY)
    assert subject.status == status and subject.ended_at == 2.0
    assert subject.input_requests == {}


@pytest.mark.parametrize("final", sorted(TERMINAL))
@pytest.mark.parametrize("event", list(TaskEvent))
def test_nothing_moves_a_final_task(final: str, event: TaskEvent) -> None:
    """spec: ext tasks (rule 3): cancel and update on a finished task ack and do nothing."""
    assert TRANSITIONS[final, event].status == final
    assert TRANSITIONS[final, event].actions == ()


@pytest.mark.parametrize("status", [WORKING, INPUT_REQUIRED, *sorted(TERMINAL)])
def test_the_table_has_a_row_for_every_status_and_event(status: str) -> None:
    """gateway choice: the table is total, so no event a driver feeds is a defect."""
    assert all((status, event) in TRANSITIONS for event in TaskEvent)
