"""gateway.protocol.stateless.tasks: the shapes, the table and its bounds, without I/O."""

from __future__ import annotations

import re

import pytest

from gateway.errors import INVALID_PARAMS, LocalProtocolError
from gateway.protocol.stateless.tasks import (
    CANCELLED,
    COMPLETED,
    EXTENSION,
    FAILED,
    INPUT_REQUIRED,
    WORKING,
    TaskTable,
    TaskTableFull,
    declares_tasks,
    starts_task,
    task_support,
)

ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def _table(max_tasks: int = 4) -> TaskTable:
    return TaskTable(max_tasks)


def test_task_support_is_forbidden_unless_the_tool_says_optional_or_required() -> None:
    """Rule 1: only the two values the spec names make a tool a task tool."""
    assert task_support({"execution": {"taskSupport": "optional"}}) == "optional"
    assert task_support({"execution": {"taskSupport": "required"}}) == "required"
    for tool in ({}, {"execution": None}, {"execution": {"taskSupport": "always"}}):
        assert task_support(tool) == "forbidden"


def test_the_extension_is_declared_only_as_an_object_under_extensions() -> None:
    """Rule 1: ``clientCapabilities.extensions[EXTENSION]`` must be an object."""
    assert declares_tasks({"extensions": {EXTENSION: {}}})
    assert not declares_tasks({})
    assert not declares_tasks({"extensions": {EXTENSION: True}})
    assert not declares_tasks({"tasks": {}})  # the v1 slot is not the extension


def test_only_a_first_tools_call_may_start_a_task() -> None:
    """An MRTR retry finishes as the call it retries (no way from MRTR into a task)."""
    assert starts_task("tools/call", {"name": "x"})
    assert not starts_task("tools/call", {"name": "x", "requestState": "s"})
    assert not starts_task("tools/call", {"name": "x", "inputResponses": {}})
    assert not starts_task("prompts/get", {"name": "x"})


def test_create_task_result_is_flat_and_carries_nothing_of_the_outcome() -> None:
    """Rule 2: resultType task, ISO timestamps, integer ttlMs and pollIntervalMs."""
    task = _table().new("p", "b__slow", 0.0, ttl_ms=300_000, poll_interval_ms=1000)
    created = task.created()
    assert created["resultType"] == "task" and created["status"] == WORKING
    assert ISO.match(created["createdAt"]) and ISO.match(created["lastUpdatedAt"])
    assert created["ttlMs"] == 300_000 and created["pollIntervalMs"] == 1000
    for absent in ("result", "error", "inputRequests", "requestState", "task", "ttl"):
        assert absent not in created
    assert len(task.task_id) >= 22  # 128 random bits, url-safe


def test_tasks_get_inlines_the_outcome_of_each_status() -> None:
    """Rule 3: result once completed, error once failed, inputRequests while waiting."""
    table = _table()
    done = table.new(None, "t", 0.0, ttl_ms=1000, poll_interval_ms=100)
    assert "result" not in done.detailed()
    done.finish(COMPLETED, 1.0, result={"content": [], "isError": True})
    got = done.detailed()
    assert got["resultType"] == "complete" and got["status"] == COMPLETED
    assert got["result"] == {"content": [], "isError": True} and "error" not in got

    failed = table.new(None, "t", 0.0, ttl_ms=1000, poll_interval_ms=100)
    failed.finish(FAILED, 1.0, error={"code": -32603, "message": "broke"})
    got = failed.detailed()
    assert got["error"] == {"code": -32603, "message": "broke"} and "result" not in got

    asking = table.new(None, "t", 0.0, ttl_ms=1000, poll_interval_ms=100)
    asking.waits_for("1", {"method": "elicitation/create", "params": {}})
    asking.waits_for("2", {"method": "elicitation/create", "params": {}})
    assert asking.detailed()["status"] == INPUT_REQUIRED
    asking.answered("1")
    assert list(asking.detailed()["inputRequests"]) == ["2"]  # partial fulfillment
    asking.answered("2")
    assert asking.status == WORKING and "inputRequests" not in asking.detailed()


def test_a_task_ends_once_and_a_late_cancel_does_not_change_it() -> None:
    """Rule 3: cancel is cooperative; a finished task keeps its outcome."""
    task = _table().new(None, "t", 0.0, ttl_ms=1000, poll_interval_ms=100)
    assert task.finish(COMPLETED, 1.0, result={"content": []})
    assert not task.finish(CANCELLED, 2.0)
    assert task.status == COMPLETED and task.ended_at == 1.0
    task.waits_for("k", {"method": "roots/list"})  # after the end: ignored
    assert task.status == COMPLETED


def test_a_task_is_only_found_by_its_creator() -> None:
    """Rule 5: someone else's task and an unknown id are the same -32602."""
    table = _table()
    task = table.new("jwt:iss|alice", "t", 0.0, ttl_ms=1000, poll_interval_ms=100)
    assert table.find(task.task_id, "jwt:iss|alice", 0.0) is task
    for task_id, who in ((task.task_id, "jwt:iss|bob"), (task.task_id, None), ("nope", "x")):
        with pytest.raises(LocalProtocolError) as refused:
            table.find(task_id, who, 0.0)
        assert refused.value.code == INVALID_PARAMS
        assert "unknown taskId" in refused.value.message
    with pytest.raises(LocalProtocolError):
        table.find(42, "jwt:iss|alice", 0.0)


def test_finished_tasks_are_kept_for_their_ttl_and_running_ones_forever() -> None:
    """Rule 6: readable until ended_at + ttl, then forgotten; a running task stays."""
    table = _table()
    running = table.new(None, "t", 0.0, ttl_ms=1000, poll_interval_ms=100)
    ended = table.new(None, "t", 0.0, ttl_ms=1000, poll_interval_ms=100)
    ended.finish(COMPLETED, 10.0, result={})
    assert table.find(ended.task_id, None, 10.999) is ended
    with pytest.raises(LocalProtocolError):
        table.find(ended.task_id, None, 11.0)
    assert table.find(running.task_id, None, 1e9) is running
    assert len(table) == 1


def test_a_full_table_refuses_a_new_task_rather_than_forget_one() -> None:
    """Rule 6: max_tasks kept; room comes back as finished tasks expire."""
    table = _table(max_tasks=2)
    first = table.new(None, "t", 0.0, ttl_ms=1000, poll_interval_ms=100)
    table.new(None, "t", 0.0, ttl_ms=1000, poll_interval_ms=100)
    with pytest.raises(TaskTableFull) as full:
        table.new(None, "t", 0.0, ttl_ms=1000, poll_interval_ms=100)
    assert full.value.code == -32603 and "2 tasks" in full.value.message
    first.finish(COMPLETED, 5.0, result={})
    table.new(None, "t", 6.0, ttl_ms=1000, poll_interval_ms=100)
    assert len(table) == 2
