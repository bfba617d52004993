"""A handshake-era backend's own task behind a modern task call (``router/backend_tasks``).

The sans-IO reading of the backend's answers first, then the router with a
fake backend in virtual time: the question before ``CreateTaskResult`` is a
round, the backend's task becomes the gateway's, its pace is followed,
``tasks/cancel`` reaches it, and faults (the table full, the backend gone)
end the gateway's task with an error instead of a hang.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

import msgspec
import pytest
import trio
import trio.testing

from gateway.backends.state import BackendState, ServerInfo
from gateway.catalog.cursor import CursorCodec
from gateway.config.schema_gateway import TasksConfig
from gateway.errors import RemoteProtocolError
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.stateless.envelope import Envelope
from gateway.router import Router
from gateway.router.context import ModernRequest
from gateway.router.stateless.backend_tasks import (
    MAX_POLL,
    MIN_POLL,
    RELATED_TASK,
    augmented,
    created_task,
    ended_without_result,
    poll_interval,
    runs_tasks,
    task_outcome,
)
from tests.router.fakes import FakeBackend, FakePool, decoded, started

EXT: Final = "io.modelcontextprotocol/tasks"
TASK_CAPS: Final = {"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}, "cancel": {}}}
TOOL: Final = {
    "name": "job",
    "inputSchema": {"type": "object"},
    "execution": {"taskSupport": "required"},
}
BACKEND_TASK: Final = {"taskId": "backend-7", "status": "working", "pollInterval": 2000}


def _info(capabilities: dict[str, Any], *, modern: bool = False) -> ServerInfo:
    return ServerInfo("2025-11-25", capabilities, None, "b", "1", modern=modern)


def _reply(result: dict[str, Any]) -> bytes:
    return jsonrpc.encode_response(1, mcp.encode(result))


# -- sans-IO -------------------------------------------------------------------


def test_only_a_handshake_era_backend_declaring_task_augmented_tools_call_runs_tasks() -> None:
    """Rule 1: ``tasks.requests.tools.call`` decides; a modern backend never does."""
    assert runs_tasks(_info(TASK_CAPS))
    assert not runs_tasks(_info(TASK_CAPS, modern=True))
    assert not runs_tasks(None)
    assert not runs_tasks(_info({"tools": {}}))
    assert not runs_tasks(_info({"tasks": {"requests": {"tools": {}}}}))
    assert not runs_tasks(_info({"tasks": {"requests": {"tools": {"call": True}}}}))
    assert not runs_tasks(_info({"tasks": ["requests"]}))


def test_augmenting_leaves_the_callers_params_alone() -> None:
    params = {"name": "job", "arguments": {}}
    assert augmented(params, 5000) == {"name": "job", "arguments": {}, "task": {"ttl": 5000}}
    assert "task" not in params


def test_a_create_task_result_is_told_from_every_other_answer() -> None:
    """Rules 3 and 5: only ``{task: {taskId}}`` without content is the backend's task."""
    assert created_task(_reply({"task": BACKEND_TASK})) == BACKEND_TASK
    assert created_task(_reply({"content": [], "task": BACKEND_TASK})) is None
    assert created_task(_reply({"content": [{"type": "text", "text": "x"}]})) is None
    assert created_task(_reply({"task": {"status": "working"}})) is None
    assert created_task(_reply({"task": {"taskId": ""}})) is None
    assert created_task(_reply({"task": "backend-7"})) is None
    assert created_task(jsonrpc.encode_error(1, -32603, "broke")) is None
    assert created_task(b"not json") is None


def test_the_backends_pace_is_followed_within_bounds() -> None:
    assert poll_interval({"pollInterval": 2000}) == 2.0
    assert poll_interval({"pollInterval": 1}) == MIN_POLL
    assert poll_interval({"pollInterval": 10**9}) == MAX_POLL
    for odd in (
        None,
        {},
        {"pollInterval": "5"},
        {"pollInterval": True},
        {"pollInterval": 1e400 * 0},
    ):
        assert poll_interval(odd) == 1.0


def test_the_result_loses_the_backends_task_id_and_gets_public_uris() -> None:
    raw = mcp.encode(
        {
            "content": [{"type": "resource_link", "uri": "file:///a", "name": "a"}],
            "_meta": {RELATED_TASK: {"taskId": "backend-7"}, "other": 1},
        }
    )
    body = decoded(task_outcome(raw, "b"))
    assert body["_meta"] == {"other": 1}
    assert body["content"][0]["uri"] != "file:///a"  # namespaced under the backend
    only = decoded(task_outcome(mcp.encode({"content": [], "_meta": {RELATED_TASK: {}}}), ""))
    assert only == {"content": []}


def test_an_ended_task_without_content_is_a_failure_with_the_backends_reason() -> None:
    empty = mcp.encode({"_meta": {RELATED_TASK: {"taskId": "x"}}})
    failed = {"status": "failed", "statusMessage": "disk full"}
    assert ended_without_result(failed, empty) == "the backend's task ended failed: disk full"
    assert "cancelled: no reason given" in str(ended_without_result({"status": "cancelled"}, empty))
    tool_error = mcp.encode({"content": [], "isError": True})
    assert ended_without_result(failed, tool_error) is None
    assert ended_without_result({"status": "completed"}, empty) is None


# -- through the router, in virtual time ---------------------------------------


class TaskBackend(FakeBackend):
    """A backend running its own tasks: ``tools/call`` answers ``CreateTaskResult``."""

    def __init__(self, *, runs: bool = True, working_polls: int = 2) -> None:
        super().__init__("b", capabilities=TASK_CAPS if runs else {"tools": {}})
        self.working_polls = working_polls
        self.get_times: list[float] = []
        self.answers["tools/call"] = self._call
        self.answers["tasks/get"] = self._get
        self.answers["tasks/result"] = self._result

    async def _call(self, params: dict[str, Any], client: str | None) -> msgspec.Raw:
        if "task" not in params:
            return mcp.encode({"content": [{"type": "text", "text": "sync"}]})
        return mcp.encode({"task": BACKEND_TASK})

    async def _get(self, params: dict[str, Any], client: str | None) -> msgspec.Raw:
        self.get_times.append(trio.current_time())
        done = len(self.get_times) > self.working_polls
        return mcp.encode({**BACKEND_TASK, "status": "completed" if done else "working"})

    async def _result(self, params: dict[str, Any], client: str | None) -> msgspec.Raw:
        text = {"type": "text", "text": f"done {params['taskId']}"}
        return mcp.encode({"content": [text], "_meta": {RELATED_TASK: {"taskId": "backend-7"}}})


async def _router(nursery: trio.Nursery, backend: FakeBackend, max_tasks: int = 8) -> Router:
    pool = FakePool()
    pool.add(backend, tools=(TOOL,))
    tasks = TasksConfig(max_tasks=max_tasks, ttl=60.0, poll_interval=1.0)
    return await started(nursery, Router(pool, CursorCodec("test"), 0, tasks=tasks))


def _request() -> ModernRequest:
    caps = {"elicitation": {}, "extensions": {EXT: {}}}
    return ModernRequest(envelope=Envelope(protocol_version="2026-07-28", client_capabilities=caps))


async def _modern(router: Router, method: str, params: dict[str, Any]) -> Any:
    message = jsonrpc.Request(3, method, jsonrpc.to_raw(params))
    return decoded(await router.handle_modern(_request(), message, params))


async def _call(router: Router) -> dict[str, Any]:
    answer = await _modern(router, "tools/call", {"name": "b__job", "arguments": {}})
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


async def _get(router: Router, task_id: str) -> dict[str, Any]:
    answer = await _modern(router, "tasks/get", {"taskId": task_id})
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


async def test_the_backends_task_becomes_the_gateways_and_is_followed_at_its_pace(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Rules 1 and 3: task-augmented call, the gateway's ids, tasks/get every 2 s, result."""
    backend = TaskBackend()
    router = await _router(nursery, backend)
    created = await _call(router)
    assert created["resultType"] == "task" and created["taskId"] != "backend-7"
    (call,) = [s for s in backend.sent if s.method == "tools/call"]
    assert call.params["task"] == {"ttl": 60_000}
    await trio.sleep(10)
    done = await _get(router, created["taskId"])
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "done backend-7"
    assert "_meta" not in done["result"]
    start = backend.get_times[0]
    assert [t - start for t in backend.get_times] == [0.0, 2.0, 4.0]
    assert backend.methods()[-1] == "tasks/result"


async def test_a_backend_without_task_support_keeps_the_gateways_own_task(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Rule 1: no capability, no augmentation: the gateway runs the call as its task."""
    backend = TaskBackend(runs=False)
    router = await _router(nursery, backend)
    created = await _call(router)
    await trio.sleep(1)
    done = await _get(router, created["taskId"])
    assert done["result"]["content"][0]["text"] == "sync"
    assert backend.methods() == ["tools/call"]
    assert "task" not in backend.sent[0].params


async def test_a_backend_on_per_client_sessions_keeps_the_gateways_own_task(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Rule 1: the call's session closes with the request; the task could not be followed."""
    backend = TaskBackend()
    backend.per_client = True
    router = await _router(nursery, backend)
    created = await _call(router)
    await trio.sleep(1)
    done = await _get(router, created["taskId"])
    assert done["result"]["content"][0]["text"] == "sync"
    assert "task" not in backend.sent[0].params


async def test_a_backend_answering_at_once_answers_the_call_itself(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Rule 5: a plain result to a task-augmented call is the call's own answer."""
    backend = TaskBackend()

    async def plain(params: dict[str, Any], client: str | None) -> msgspec.Raw:
        return mcp.encode({"content": [{"type": "text", "text": "at once"}]})

    backend.answers["tools/call"] = plain
    result = await _call(backend_router := await _router(nursery, backend))
    assert result["content"][0]["text"] == "at once" and "taskId" not in result
    assert backend_router.tasks.sample().created == 0


async def test_cancel_reaches_the_backends_task(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Rule 4: tasks/cancel of ours is tasks/cancel of the backend's id."""
    backend = TaskBackend(working_polls=10**6)
    router = await _router(nursery, backend)
    created = await _call(router)
    await trio.sleep(5)
    ack = await _modern(router, "tasks/cancel", {"taskId": created["taskId"]})
    assert ack["result"] == {"resultType": "complete"}
    await trio.sleep(1)
    assert (await _get(router, created["taskId"]))["status"] == "cancelled"
    cancels = [s.params for s in backend.sent if s.method == "tasks/cancel"]
    assert cancels == [{"taskId": "backend-7"}]


async def test_no_room_for_our_task_cancels_the_backends_and_answers_32603(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """A fault: the table is full when the backend's task arrives."""
    backend = TaskBackend(working_polls=10**6)
    router = await _router(nursery, backend, max_tasks=1)
    await _call(router)
    answer = await _modern(router, "tools/call", {"name": "b__job", "arguments": {}})
    assert answer["error"]["code"] == -32603
    assert [s.params for s in backend.sent if s.method == "tasks/cancel"] == [
        {"taskId": "backend-7"}
    ]


async def test_the_backend_going_down_fails_our_task(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """A fault: the backend down mid-task; the task fails, naming it, never hangs."""
    backend = TaskBackend(working_polls=10**6)
    router = await _router(nursery, backend)
    created = await _call(router)
    await trio.sleep(3)
    backend.state = BackendState.DOWN
    await trio.sleep(5)
    failed = await _get(router, created["taskId"])
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == -32603 and "backend b" in failed["error"]["message"]


@pytest.mark.parametrize("answer", ["input", "decline"])
async def test_a_question_before_the_task_is_a_round_of_the_call(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, answer: str
) -> None:
    """Rule 2: the question is input_required with no task; the retry gets our task."""
    backend = TaskBackend()
    router = await _router(nursery, backend)

    async def ask_then_task(params: dict[str, Any], client: str | None) -> msgspec.Raw:
        asked = mcp.encode({"message": "Name?", "requestedSchema": {"type": "object"}})
        reply = decoded(await router.backend_request(backend, "elicitation/create", asked, client))
        backend.answers["tasks/result"] = _echo(reply)
        return mcp.encode({"task": BACKEND_TASK})

    backend.answers["tools/call"] = ask_then_task
    first = await _call(router)
    assert first["resultType"] == "input_required" and "taskId" not in first
    ((key, entry),) = first["inputRequests"].items()
    assert entry["method"] == "elicitation/create"
    response = {"action": "accept", "content": {"name": "Ada"}} if answer == "input" else {}
    if answer == "decline":
        response = {"action": "decline"}
    retry = {
        "name": "b__job",
        "arguments": {},
        "inputResponses": {key: response},
        "requestState": first["requestState"],
    }
    created = (await _modern(router, "tools/call", retry))["result"]
    assert created["resultType"] == "task" and "requestState" not in created
    await trio.sleep(10)
    done = await _get(router, created["taskId"])
    assert done["status"] == "completed"
    assert decoded(done["result"]["content"][0]["text"].encode()) == response


def _echo(reply: Any) -> Any:
    async def result(params: dict[str, Any], client: str | None) -> msgspec.Raw:
        text = msgspec.json.encode(reply).decode()
        return mcp.encode({"content": [{"type": "text", "text": text}]})

    return result


def test_fixture_info_is_a_handshake_era_backend() -> None:
    """The fake's info is what rule 1 reads (guards the tests above)."""
    info = TaskBackend().info
    assert info is not None and runs_tasks(info)
    assert not runs_tasks(replace(info, modern=True))


async def test_a_question_inside_the_backends_task_parks_ours_until_tasks_update(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Rule 6: ``input_required`` at the backend: tasks/result brings the question,
    our task asks it, tasks/update's answer goes back, and the result follows."""
    backend = TaskBackend()
    router = await _router(nursery, backend)
    states = iter(["working", "input_required", "completed"])

    async def status(params: dict[str, Any], client: str | None) -> msgspec.Raw:
        return mcp.encode({**BACKEND_TASK, "status": next(states)})

    async def result_after_asking(params: dict[str, Any], client: str | None) -> msgspec.Raw:
        asked = mcp.encode({"message": "Sure?", "requestedSchema": {"type": "object"}})
        reply = decoded(await router.backend_request(backend, "elicitation/create", asked, None))
        return await _echo(reply)(params, client)

    backend.answers["tasks/get"] = status
    backend.answers["tasks/result"] = result_after_asking
    created = await _call(router)
    await trio.sleep(5)
    asking = await _get(router, created["taskId"])
    assert asking["status"] == "input_required"
    ((key, entry),) = asking["inputRequests"].items()
    assert entry["method"] == "elicitation/create" and entry["params"]["message"] == "Sure?"
    answer = {"action": "accept", "content": {"sure": True}}
    update = {"taskId": created["taskId"], "inputResponses": {key: answer}}
    assert (await _modern(router, "tasks/update", update))["result"] == {"resultType": "complete"}
    await trio.sleep(1)
    done = await _get(router, created["taskId"])
    assert done["status"] == "completed", done
    assert decoded(done["result"]["content"][0]["text"].encode()) == answer
    assert "tasks/cancel" not in backend.methods()


async def test_a_question_inside_the_task_nobody_answers_fails_at_the_backends_timeout(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Rule 6's bound: tasks/result waits at most the backend's request timeout."""
    backend = TaskBackend()
    router = await _router(nursery, backend)

    async def asking(params: dict[str, Any], client: str | None) -> msgspec.Raw:
        return mcp.encode({**BACKEND_TASK, "status": "input_required"})

    backend.answers["tasks/get"] = asking
    backend.hang_until_timeout("tasks/result")
    created = await _call(router)
    await trio.sleep(backend.request_timeout + 5)
    failed = await _get(router, created["taskId"])
    assert failed["status"] == "failed" and "backend b" in failed["error"]["message"]
    assert [s.params for s in backend.sent if s.method == "tasks/cancel"] == [
        {"taskId": "backend-7"}
    ]


async def test_an_error_from_the_backends_tasks_get_fails_ours_with_it(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """A fault: the backend forgot its task; its own error ends ours, code and message kept."""
    backend = TaskBackend()

    async def forgotten(params: dict[str, Any], client: str | None) -> msgspec.Raw:
        raise RemoteProtocolError("Task not found: backend-7", -32602)

    backend.answers["tasks/get"] = forgotten
    router = await _router(nursery, backend)
    created = await _call(router)
    await trio.sleep(1)
    failed = await _get(router, created["taskId"])
    assert failed["status"] == "failed"
    assert failed["error"] == {"code": -32602, "message": "Task not found: backend-7"}
