"""A handshake-era backend's own tasks behind a 2026-07-28 host's task call.

The backend is ``tests/servers/task_backend.py`` (official SDK 1.x,
experimental tasks: ``enable_tasks``, ``run_task``), which declares
``tasks.requests.tools.call``; next to it the conformance backend, whose
task tools the gateway runs itself. The host is raw ``httpx`` with the
2026-07-28 envelope (the helpers of ``test_tasks``). What is checked is
``router/backend_tasks``: MRTR rounds first, then the task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import trio

from tests.e2e.test_tasks import WAIT, WITH_TASKS, _ask, _until
from tests.harness import gateway_config, python_server_command, sdk_backend, start_gateway
from tests.harness import stdio_backend as _stdio

if TYPE_CHECKING:
    from pathlib import Path

    from tests.harness import Running


async def _start(nursery: trio.Nursery, log: Path) -> Running:
    own = _stdio("t", [*python_server_command("task_backend"), "--log", str(log)])
    config = gateway_config([own, sdk_backend("conformance_backend", "c")])
    return await start_gateway(nursery, config)


def _events(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


async def _first_round(running: Running, arguments: dict[str, Any]) -> dict[str, Any]:
    call = {"name": "t__test_tool_with_task", "arguments": arguments}
    answer = await _ask(running, "tools/call", call, **WITH_TASKS)
    assert "result" in answer, answer
    first: dict[str, Any] = answer["result"]
    return first


async def _second_round(
    running: Running, first: dict[str, Any], arguments: dict[str, Any]
) -> dict[str, Any]:
    retry = {
        "name": "t__test_tool_with_task",
        "arguments": arguments,
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}}},
        "requestState": first["requestState"],
    }
    answer = await _ask(running, "tools/call", retry, **WITH_TASKS)
    assert "result" in answer, answer
    second: dict[str, Any] = answer["result"]
    return second


async def test_the_question_is_a_round_and_the_backends_task_becomes_the_gateways(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Rules 1-3: input_required without a task, then a task with the answer in its result."""
    log = tmp_path / "events"
    running = await _start(nursery, log)
    first = await _first_round(running, {})
    assert first["resultType"] == "input_required" and "taskId" not in first
    assert list(first["inputRequests"]) == ["user_name"]
    assert first["inputRequests"]["user_name"]["method"] == "elicitation/create"
    assert "task started" not in _events(log)  # no task before the answer
    created = await _second_round(running, first, {})
    assert created["resultType"] == "task" and created["status"] == "working"
    assert "requestState" not in created and "inputRequests" not in created
    done = await _until(running, created["taskId"], {"completed", "failed", "cancelled"})
    assert done["status"] == "completed", done
    assert done["result"]["content"][0]["text"] == "Hello, Alice!"
    assert "_meta" not in done["result"]  # the backend's related-task id stays here
    assert _events(log) == ["asked", "task started"]


async def test_the_conformance_backends_task_tools_stay_gateway_tasks(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """A backend without task support: the task at once, the question inside it."""
    running = await _start(nursery, tmp_path / "events")
    call = {"name": "c__confirm_delete", "arguments": {"filename": "a.txt"}}
    created = (await _ask(running, "tools/call", call, **WITH_TASKS))["result"]
    assert created["resultType"] == "task"
    asking = await _until(running, created["taskId"], {"input_required"})
    assert len(asking["inputRequests"]) == 1


async def test_cancelling_the_gateways_task_cancels_the_backends(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Rule 4: tasks/cancel reaches the backend's tasks/cancel; the task ends cancelled."""
    log = tmp_path / "events"
    running = await _start(nursery, log)
    slow = {"seconds": 50}
    created = await _second_round(running, await _first_round(running, slow), slow)
    task_id = created["taskId"]
    ack = await _ask(running, "tasks/cancel", {"taskId": task_id}, **WITH_TASKS)
    assert ack["result"] == {"resultType": "complete"}
    ended = await _until(running, task_id, {"completed", "failed", "cancelled"})
    assert ended["status"] == "cancelled"
    with trio.fail_after(WAIT):
        while True:
            cancels = [e for e in _events(log) if e.startswith("cancelled ")]
            if cancels:
                break
            await trio.sleep(0.05)
    # The backend's own id, never the host's: the gateway mapped it.
    assert len(cancels) == 1 and cancels[0].split()[1] != task_id


async def test_a_question_inside_the_backends_task_parks_ours_until_tasks_update(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Rule 6: the SDK's task.elicit reaches the host as our task's input_required."""
    log = tmp_path / "events"
    running = await _start(nursery, log)
    call = {"name": "t__ask_in_task", "arguments": {}}
    created = (await _ask(running, "tools/call", call, **WITH_TASKS))["result"]
    assert created["resultType"] == "task"
    asking = await _until(running, created["taskId"], {"input_required", "failed", "completed"})
    assert asking["status"] == "input_required", asking
    ((key, entry),) = asking["inputRequests"].items()
    assert entry["method"] == "elicitation/create"
    assert entry["params"]["message"] == "Who confirms?"
    answer = {"action": "accept", "content": {"name": "Bea"}}
    update = {"taskId": created["taskId"], "inputResponses": {key: answer}}
    assert (await _ask(running, "tasks/update", update, **WITH_TASKS))["result"] == {
        "resultType": "complete"
    }
    done = await _until(running, created["taskId"], {"completed", "failed", "cancelled"})
    assert done["status"] == "completed", done
    assert done["result"]["content"][0]["text"] == "Confirmed: Bea"
    assert _events(log) == ["task started", "asked in task"]


async def test_a_failed_backend_task_fails_the_gateways(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Rule 3: a backend task failed with no result fails the gateway's, with its reason."""
    running = await _start(nursery, tmp_path / "events")
    call = {"name": "t__backend_task_fails", "arguments": {}}
    created = (await _ask(running, "tools/call", call, **WITH_TASKS))["result"]
    assert created["resultType"] == "task"
    ended = await _until(running, created["taskId"], {"completed", "failed", "cancelled"})
    assert ended["status"] == "failed" and "result" not in ended, ended
    assert ended["error"]["code"] == -32603
    assert "backend_task_fails failed, as it always does" in ended["error"]["message"]


# The SDK 1.x client's task API warns that mcp 2.0 drops it (tasks became an
# extension); it is still what speaks 2025-11-25 tasks to this peer.
@pytest.mark.filterwarnings("ignore:The experimental tasks API is deprecated:DeprecationWarning")
async def test_control_the_fixture_itself_asks_first_then_runs_a_task(tmp_path: Path) -> None:
    """The peer alone, with the SDK 1.x client: what the gateway relies on holds.

    A failure here points at ``task_backend.py`` or the SDK, not at the gateway.
    """
    from mcp import ClientSession, StdioServerParameters, types
    from mcp.client.stdio import stdio_client

    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Alice"})

    argv = python_server_command("task_backend")
    server = StdioServerParameters(command=argv[0], args=argv[1:])
    async with (
        stdio_client(server) as (read, write),
        ClientSession(read, write, elicitation_callback=elicit) as session,
    ):
        init = await session.initialize()
        tasks = init.capabilities.tasks
        assert tasks is not None and tasks.requests is not None
        assert tasks.requests.tools is not None and tasks.requests.tools.call is not None
        created = await session.experimental.call_tool_as_task("test_tool_with_task", {})
        assert asked == ["What is your name?"]  # asked before the task existed
        with trio.fail_after(WAIT):
            async for status in session.experimental.poll_task(created.task.taskId):
                if status.status in ("completed", "failed", "cancelled"):
                    break
        result = await session.experimental.get_task_result(
            created.task.taskId, types.CallToolResult
        )
    assert status.status == "completed"
    block = result.content[0]
    assert isinstance(block, types.TextContent) and block.text == "Hello, Alice!"


async def test_the_same_on_a_stdio_host(nursery: trio.Nursery, tmp_path: Path) -> None:
    """stdio mode routes through the same modern entry: round, task, result."""
    from tests.frontend.test_modern_http import modern
    from tests.frontend.test_stdio_modern import serve

    host = await serve(nursery, await _start(nursery, tmp_path / "events"))
    call = {"name": "t__test_tool_with_task", "arguments": {}}
    first = (await host.ask(modern(1, "tools/call", call, **WITH_TASKS)))["result"]
    assert first["resultType"] == "input_required" and "taskId" not in first
    retry = {
        **call,
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}}},
        "requestState": first["requestState"],
    }
    created = (await host.ask(modern(2, "tools/call", retry, **WITH_TASKS)))["result"]
    assert created["resultType"] == "task"
    get = {"taskId": created["taskId"]}
    with trio.fail_after(WAIT):
        for msg_id in range(3, 10**6):
            got = (await host.ask(modern(msg_id, "tasks/get", get, **WITH_TASKS)))["result"]
            if got["status"] != "working":
                break
            await trio.sleep(0.05)
    assert got["status"] == "completed"
    assert got["result"]["content"][0]["text"] == "Hello, Alice!"
