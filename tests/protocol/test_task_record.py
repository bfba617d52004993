"""A gateway task's store record as data: the owner's answers from bytes, the dead-owner rule."""

from __future__ import annotations

import msgspec
import pytest

from gateway.protocol.stateless.task_record import (
    OWNER_LOST,
    TaskControl,
    TaskControlReply,
    decode_control,
    decode_record,
    encode,
    orphaned,
    owner_lost,
    record_of,
    record_ttl,
    task_of,
)
from gateway.protocol.stateless.task_states import TaskEvent
from gateway.protocol.stateless.tasks import Task


def task() -> Task:
    """A new working task of alice."""
    return Task("t" * 22, "alice", "c__slow", ttl_ms=30_000, poll_interval_ms=500)


def ended(event: TaskEvent, **outcome: object) -> Task:
    """A task that asked once, then ended by ``event``."""
    subject = task()
    subject.waits_for("k1", {"method": "elicitation/create", "params": {}})
    subject.feed(event, 2.0, **outcome)
    return subject


@pytest.mark.parametrize(
    "subject",
    [
        task(),
        ended(TaskEvent.CALL_COMPLETED, result={"content": [], "isError": False}),
        ended(TaskEvent.CALL_FAILED, error={"code": -32603, "message": "broke"}),
        ended(TaskEvent.CALL_CANCELLED, message="cancelled by tasks/cancel"),
    ],
    ids=["working", "completed", "failed", "cancelled"],
)
def test_a_replica_answers_from_the_record_exactly_what_the_owner_answers(subject: Task) -> None:
    """Gateway choice (rule 1): tasks/get from the stored bytes equals the owner's from memory."""
    stored = decode_record(encode(record_of(subject, "replica-a")))
    assert stored is not None and stored.owner == "replica-a" and stored.principal == "alice"
    assert task_of(stored).detailed() == subject.detailed()


def test_an_input_required_task_keeps_its_input_requests_in_the_record() -> None:
    """spec: ext tasks (rule 4): inputRequests are shown by whichever replica answers."""
    subject = task()
    subject.waits_for("k1", {"method": "elicitation/create", "params": {"message": "sure?"}})
    stored = decode_record(encode(record_of(subject, "a")))
    assert stored is not None
    answer = task_of(stored).detailed()
    assert answer["status"] == "input_required"
    assert answer["inputRequests"] == {
        "k1": {"method": "elicitation/create", "params": {"message": "sure?"}}
    }


def test_an_ended_record_lives_its_ttl_and_a_live_one_the_ttl_plus_the_owner_timeout() -> None:
    """Gateway choice (rule 2): a dead owner's live task is still found to be failed."""
    live = record_of(task(), "a")
    done = record_of(ended(TaskEvent.CALL_COMPLETED, result={}), "a")
    assert record_ttl(live, 60.0) == 90.0
    assert record_ttl(done, 60.0) == 30.0


def test_only_a_live_task_without_its_owners_heartbeat_is_an_orphan() -> None:
    """Gateway choice (rule 3): an ended task is never failed afterwards."""
    live = record_of(task(), "a")
    done = record_of(ended(TaskEvent.CALL_COMPLETED, result={}), "a")
    assert orphaned(live, owner_alive=False)
    assert not orphaned(live, owner_alive=True)
    assert not orphaned(done, owner_alive=False)


def test_an_orphan_ends_failed_with_a_message_that_says_its_replica_stopped() -> None:
    """Gateway choice (rule 3): failed, never unknown; the error says why."""
    subject = task()
    subject.waits_for("k1", {"method": "elicitation/create", "params": {}})
    lost = owner_lost(record_of(subject, "a"))
    answer = task_of(lost).detailed()
    assert answer["status"] == "failed" and answer["statusMessage"] == OWNER_LOST
    assert answer["error"] == {"code": -32603, "message": OWNER_LOST}
    assert "inputRequests" not in answer and "replica" in OWNER_LOST


def test_control_messages_and_replies_are_told_apart_and_foreign_bytes_are_ignored() -> None:
    """Gateway choice (rule 4): a relay, its reply, and anything else on the channel."""
    control = TaskControl(
        method="tasks/cancel", task_id="x", principal=None, params={}, reply_to="b", nonce="n"
    )
    reply = TaskControlReply(nonce="n", code=-32602, message="bad")
    assert decode_control(encode(control)) == control
    assert decode_control(encode(reply)) == reply
    assert decode_control(b"not json") is None
    assert decode_record(b'{"taskId": 1}') is None
    assert decode_record(msgspec.json.encode(["x"])) is None
