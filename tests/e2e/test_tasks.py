"""Tasks the gateway runs for 2026-07-28 hosts, over a handshake-era backend.

The backend is the conformance backend (official SDK 1.x, low-level server):
it marks ``slow_compute``, ``confirm_delete`` and ``multi_input`` as
``taskSupport: optional`` and ``failing_job`` as ``required``, and otherwise
answers ordinary calls; every task is the gateway's (gateway/router/stateless/gateway_tasks.py).
The host is raw ``httpx`` with the 2026-07-28 envelope.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

import httpx
import msgspec
import trio

from gateway.config import parse
from tests.frontend.test_listen_http import SUB_ID, listen
from tests.frontend.test_modern_http import modern, send, sse_messages
from tests.harness import gateway_config, sdk_backend, start_gateway

if TYPE_CHECKING:
    from tests.harness import Running

EXT: Final = "io.modelcontextprotocol/tasks"
CAPS_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
WITH_TASKS: Final = {CAPS_KEY: {"elicitation": {"form": {}}, "extensions": {EXT: {}}}}
WAIT: Final = 15.0  # real processes on 2 shared cores
TOKENS: Final = {"alice": "alice-secret-token-0123456789", "bob": "bob-secret-token-0123456789"}


async def _start(
    nursery: trio.Nursery, policy: list[dict[str, Any]] | None = None, **sections: Any
) -> Running:
    backend = sdk_backend("conformance_backend", "c")
    config = gateway_config([backend], **sections)
    if policy is not None:  # a list: gateway_config merges only mappings
        document = json.loads(msgspec.json.encode(config))
        document["policy"] = policy
        config = parse(json.dumps(document), env={})
    return await start_gateway(nursery, config)


async def post_modern(
    running: Running,
    method: str,
    params: dict[str, Any],
    *,
    token: str | None = None,
    **meta: Any,
) -> httpx.Response:
    """One modern request on a client of its own (with ``token`` as its bearer)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(
        base_url=running.base_url, trust_env=False, timeout=WAIT, headers=headers
    ) as client:
        task_id = params.get("taskId")
        # A tasks/* request names its task in Mcp-Name (the routing headers).
        named = {"Mcp-Name": task_id} if isinstance(task_id, str) else {}
        return await send(client, modern(1, method, params, **meta), **named)


async def _ask(
    running: Running, method: str, params: dict[str, Any], token: str | None = None, **meta: Any
) -> dict[str, Any]:
    """One modern request; the JSON-RPC response (result or error)."""
    response = await post_modern(running, method, params, token=token, **meta)
    if response.headers["content-type"].startswith("text/event-stream"):
        return sse_messages(response)[-1]
    body: dict[str, Any] = response.json()
    return body


async def _until(running: Running, task_id: str, statuses: set[str], **kw: Any) -> dict[str, Any]:
    """Poll tasks/get until the task's status is one of ``statuses``."""
    with trio.fail_after(WAIT):
        while True:
            answer = await _ask(running, "tasks/get", {"taskId": task_id}, **kw, **WITH_TASKS)
            assert "result" in answer, answer
            got = answer["result"]
            if got["status"] in statuses:
                return got
            await trio.sleep(0.05)


async def test_a_task_tool_becomes_a_task_only_for_a_request_that_declares_the_extension(
    nursery: trio.Nursery,
) -> None:
    """discover advertises the extension; optional support: task with, sync without."""
    running = await _start(nursery)
    answer = await _ask(running, "server/discover", {})
    discovered = answer["result"]
    assert discovered["capabilities"]["extensions"] == {EXT: {}}
    call = {"name": "c__slow_compute", "arguments": {"seconds": 0.2, "label": "x"}}
    created = (await _ask(running, "tools/call", call, **WITH_TASKS))["result"]
    assert created["resultType"] == "task" and created["status"] == "working"
    assert isinstance(created["ttlMs"], int) and "result" not in created
    done = await _until(running, created["taskId"], {"completed"})
    assert done["result"]["content"][0]["text"] == "computed x after 0.2 s"
    plain = (await _ask(running, "tools/call", call))["result"]
    assert plain["resultType"] == "complete" and "taskId" not in plain


async def test_required_support_without_the_extension_and_tasks_methods_without_it_are_32021(
    nursery: trio.Nursery,
) -> None:
    """Rules 1, 5: -32021 naming the extension; an unknown id is -32602."""
    running = await _start(nursery)
    refused = await _ask(running, "tools/call", {"name": "c__failing_job", "arguments": {}})
    assert refused["error"]["code"] == -32021
    assert refused["error"]["data"] == {"requiredCapabilities": {"extensions": {EXT: {}}}}
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        answer = await _ask(running, method, {"taskId": "nope", "inputResponses": {}})
        assert answer["error"]["code"] == -32021, method
    unknown = await _ask(running, "tasks/get", {"taskId": "nope"}, **WITH_TASKS)
    assert unknown["error"]["code"] == -32602
    gone = await _ask(running, "tasks/result", {"taskId": "nope"}, **WITH_TASKS)
    assert gone["error"]["code"] == -32601


async def test_tool_errors_complete_and_protocol_errors_fail(nursery: trio.Nursery) -> None:
    """Rule 3: isError is a completed task; a JSON-RPC error a failed one, no result."""
    running = await _start(nursery)
    failing = (
        await _ask(running, "tools/call", {"name": "c__failing_job", "arguments": {}}, **WITH_TASKS)
    )["result"]
    done = await _until(running, failing["taskId"], {"completed", "failed"})
    assert done["status"] == "completed" and done["result"]["isError"] is True
    broken = (
        await _ask(
            running, "tools/call", {"name": "c__protocol_error_job", "arguments": {}}, **WITH_TASKS
        )
    )["result"]
    ended = await _until(running, broken["taskId"], {"completed", "failed"})
    assert ended["status"] == "failed" and "result" not in ended
    assert (
        ended["error"]["code"] == -32603 and "protocol_error_job broke" in ended["error"]["message"]
    )


async def test_cancel_stops_the_backend_call_and_is_acked_again_once_ended(
    nursery: trio.Nursery,
) -> None:
    """Rule 3: the empty ack twice; the task settles cancelled long before its 60 s."""
    running = await _start(nursery)
    call = {"name": "c__slow_compute", "arguments": {"seconds": 60}}
    task_id = (await _ask(running, "tools/call", call, **WITH_TASKS))["result"]["taskId"]
    for _ in range(2):
        ack = await _ask(running, "tasks/cancel", {"taskId": task_id}, **WITH_TASKS)
        assert ack["result"] == {"resultType": "complete"}
        ended = await _until(running, task_id, {"cancelled", "completed", "failed"})
        assert ended["status"] == "cancelled"
    assert running.gateway.pool.backends["c"].in_flight == 0


async def test_a_task_that_asks_waits_input_required_and_resumes_on_update(
    nursery: trio.Nursery,
) -> None:
    """Rule 4: two questions at once; one answer keeps it waiting; both complete it."""
    running = await _start(nursery)
    call = {"name": "c__multi_input", "arguments": {}}
    task_id = (await _ask(running, "tools/call", call, **WITH_TASKS))["result"]["taskId"]
    with trio.fail_after(WAIT):
        while True:
            waiting = await _until(running, task_id, {"input_required"})
            if len(waiting["inputRequests"]) == 2:
                break
    first, second = sorted(waiting["inputRequests"])
    assert waiting["inputRequests"][first]["method"] == "elicitation/create"
    answer = {"action": "accept", "content": {"confirm": True, "name": "one"}}
    ack = await _ask(
        running,
        "tasks/update",
        {"taskId": task_id, "inputResponses": {first: answer, "stray": answer}},
        **WITH_TASKS,
    )
    assert ack["result"] == {"resultType": "complete"}
    still = await _until(running, task_id, {"input_required", "working"})
    assert list(still.get("inputRequests", {})) == [second]
    await _ask(
        running,
        "tasks/update",
        {"taskId": task_id, "inputResponses": {second: {**answer, "content": {"name": "two"}}}},
        **WITH_TASKS,
    )
    done = await _until(running, task_id, {"completed"})
    text = done["result"]["content"][0]["text"]
    assert '"name": "one"' in text and '"name": "two"' in text


async def test_a_task_belongs_to_the_principal_that_created_it(nursery: trio.Nursery) -> None:
    """Rule 5: bob gets -32602 for alice's task id, exactly as for an unknown one."""
    running = await _start(nursery, auth={"tokens": TOKENS})
    call = {"name": "c__slow_compute", "arguments": {"seconds": 0}}
    created = await _ask(running, "tools/call", call, token=TOKENS["alice"], **WITH_TASKS)
    task_id = created["result"]["taskId"]
    bob = await _ask(running, "tasks/get", {"taskId": task_id}, token=TOKENS["bob"], **WITH_TASKS)
    assert bob["error"]["code"] == -32602
    assert bob["error"]["message"] == f"unknown taskId: {task_id}"
    alice = await _until(running, task_id, {"completed"}, token=TOKENS["alice"])
    assert alice["taskId"] == task_id


async def test_a_tool_the_policy_hides_starts_no_task(nursery: trio.Nursery) -> None:
    """Under a policy the task tools are the caller's: hidden is -32602, as unknown."""
    policy = [
        {"tokens": ["alice"], "profiles": ["*"]},
        {"tokens": ["bob"], "profiles": ["*"], "tools": {"deny": ["c__slow_compute"]}},
    ]
    running = await _start(nursery, policy, auth={"tokens": TOKENS})
    call = {"name": "c__slow_compute", "arguments": {"seconds": 0}}
    alice = await _ask(running, "tools/call", call, token=TOKENS["alice"], **WITH_TASKS)
    assert alice["result"]["resultType"] == "task"
    bob = await _ask(running, "tools/call", call, token=TOKENS["bob"], **WITH_TASKS)
    unknown = {**call, "name": "c__no_such_tool"}
    nobody = await _ask(running, "tools/call", unknown, token=TOKENS["bob"], **WITH_TASKS)
    assert bob["error"]["code"] == nobody["error"]["code"] == -32602
    assert bob["error"]["message"].replace("slow_compute", "X") == nobody["error"][
        "message"
    ].replace("no_such_tool", "X")


async def test_a_listen_stream_naming_a_task_hears_each_change_of_its_status(
    nursery: trio.Nursery,
) -> None:
    """notifications/tasks: only the caller's known tasks are honoured; each change of
    status arrives tagged, the last with the inlined result."""
    running = await _start(nursery)
    call = {"name": "c__confirm_delete", "arguments": {"filename": "x.txt"}}
    task_id = (await _ask(running, "tools/call", call, **WITH_TASKS))["result"]["taskId"]
    waiting = await _until(running, task_id, {"input_required"})
    (key,) = waiting["inputRequests"]
    async with (
        httpx.AsyncClient(base_url=running.base_url, trust_env=False, timeout=WAIT) as client,
        listen(client, "T1", {"taskIds": [task_id, "not-a-task"]}) as stream,
    ):
        with trio.fail_after(WAIT):
            ack = await stream.next()
        assert ack["params"]["notifications"] == {"taskIds": [task_id]}
        answer = {"action": "accept", "content": {"confirm": True}}
        update = {"taskId": task_id, "inputResponses": {key: answer}}
        await _ask(running, "tasks/update", update, **WITH_TASKS)
        seen: list[dict[str, Any]] = []
        with trio.fail_after(WAIT):
            while not seen or seen[-1]["params"]["status"] != "completed":
                seen.append(await stream.next())
    assert {m["method"] for m in seen} == {"notifications/tasks"}
    assert [m["params"]["status"] for m in seen] == ["working", "completed"]
    assert all(m["params"]["taskId"] == task_id for m in seen)
    assert all(m["params"]["_meta"] == {SUB_ID: "T1"} for m in seen)
    assert "confirm" in seen[-1]["params"]["result"]["content"][0]["text"]
