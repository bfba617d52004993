"""A 2026-07-28 backend's own tasks routed through the gateway's ids (issue 26 item 2).

The backend is ``tests/servers/modern_tasks.py``: the official SDK 2.x
``MCPServer`` with a tasks extension of its own (neither SDK serves the
extension yet); its tasks advance per ``tasks/get``, not per second, and
it records what reached it. The host is raw ``httpx`` with the 2026-07-28
envelope. Rules: ``gateway/protocol/stateless/native_tasks.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec
import pytest
import trio

from gateway.config import StoreConfig, parse
from gateway.store.redis_store import open_redis_store
from tests.e2e.test_tasks import CAPS_KEY, EXT, TOKENS, WITH_TASKS, _ask
from tests.harness import NEEDS_SDK2, SDK2_PYTHON, gateway_config, start_gateway, stdio_backend
from tests.redis_server import RedisServer
from tests.subprocess_servers import free_port, run_server

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.harness import Running


SERVER: Final = Path(__file__).resolve().parents[2] / "tests" / "servers" / "modern_tasks.py"
COUNTDOWN: Final = {"name": "t__countdown", "arguments": {"polls": 1}}

pytestmark = NEEDS_SDK2


def _backend(record: Path, **extra: Any) -> dict[str, Any]:
    return stdio_backend(
        "t", [str(SDK2_PYTHON), str(SERVER)], env={"MODERN_TASKS_RECORD": str(record)}, **extra
    )


def _record(path: Path) -> list[dict[str, Any]]:
    """What reached the backend, in order."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _no_backend_id(answer: dict[str, Any]) -> None:
    assert "backend-task" not in json.dumps(answer), answer


async def test_a_backends_task_is_created_polled_and_completed_under_the_gateways_id(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 26: the backend runs the task (the extension declared to it); the host sees
    only the gateway's id, working then completed with the result inlined."""
    record = tmp_path / "record.jsonl"
    running = await start_gateway(nursery, gateway_config([_backend(record)]))
    created = (await _ask(running, "tools/call", COUNTDOWN, **WITH_TASKS))["result"]
    assert created["resultType"] == "task"
    assert created["status"] == "working"
    assert created["ttlMs"] == 60_000
    task_id = created["taskId"]
    assert task_id.startswith("n.")
    _no_backend_id(created)
    first = (await _ask(running, "tasks/get", {"taskId": task_id}, **WITH_TASKS))["result"]
    assert (first["resultType"], first["taskId"], first["status"]) == (
        "complete",
        task_id,
        "working",
    )
    second = (await _ask(running, "tasks/get", {"taskId": task_id}, **WITH_TASKS))["result"]
    assert second["status"] == "completed"
    assert second["result"]["content"][0]["text"].startswith("done: ")
    seen = _record(record)
    assert [(e["method"], e["declared"]) for e in seen] == [
        ("tools/call", True),
        ("tasks/get", True),
        ("tasks/get", True),
    ]
    # The same backend id throughout: the gateway's id routed every poll to it.
    assert len({e["taskId"] for e in seen}) == 1


async def test_the_inlined_result_is_the_backends_own_and_nothing_else_leaks(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 26: the backend's task id appears in no answer the host gets, errors included."""
    record = tmp_path / "record.jsonl"
    running = await start_gateway(nursery, gateway_config([_backend(record)]))
    created = (await _ask(running, "tools/call", {**COUNTDOWN}, **WITH_TASKS))["result"]
    task_id = created["taskId"]
    done = (await _ask(running, "tasks/get", {"taskId": task_id}, **WITH_TASKS))["result"]
    done = (await _ask(running, "tasks/get", {"taskId": task_id}, **WITH_TASKS))["result"]
    backend_id = _record(record)[0]["taskId"]
    # The result is the backend's text, which names its own id: content, not an id field.
    assert done["result"]["content"][0]["text"] == f"done: {backend_id}"
    assert done["taskId"] == task_id and created["taskId"] == task_id
    unknown = await _ask(running, "tasks/get", {"taskId": "n.nothing-here"}, **WITH_TASKS)
    assert unknown["error"] == {"code": -32602, "message": "unknown taskId: n.nothing-here"}


async def test_cancel_reaches_the_backend_and_the_task_ends_cancelled(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """ext tasks: tasks/cancel goes to the owning backend with its id; an empty ack."""
    record = tmp_path / "record.jsonl"
    running = await start_gateway(nursery, gateway_config([_backend(record)]))
    call = {"name": "t__countdown", "arguments": {"polls": 100}}
    task_id = (await _ask(running, "tools/call", call, **WITH_TASKS))["result"]["taskId"]
    ack = await _ask(running, "tasks/cancel", {"taskId": task_id}, **WITH_TASKS)
    assert ack["result"] == {"resultType": "complete"}
    after = (await _ask(running, "tasks/get", {"taskId": task_id}, **WITH_TASKS))["result"]
    assert (after["taskId"], after["status"]) == (task_id, "cancelled")
    seen = _record(record)
    assert [e["method"] for e in seen] == ["tools/call", "tasks/cancel", "tasks/get"]
    assert seen[1]["taskId"] == seen[0]["taskId"]


async def test_an_input_required_round_inside_the_backends_task(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """ext tasks: the backend's inputRequests reach the host on tasks/get; tasks/update
    carries the host's answer to the backend, which completes with it."""
    record = tmp_path / "record.jsonl"
    running = await start_gateway(nursery, gateway_config([_backend(record)]))
    call = {"name": "t__confirm", "arguments": {}}
    created = (await _ask(running, "tools/call", call, **WITH_TASKS))["result"]
    task_id = created["taskId"]
    assert created["status"] == "input_required"
    asking = (await _ask(running, "tasks/get", {"taskId": task_id}, **WITH_TASKS))["result"]
    assert asking["status"] == "input_required"
    assert asking["inputRequests"]["confirm"]["method"] == "elicitation/create"
    answer = {"action": "accept", "content": {"ok": True}}
    update = {"taskId": task_id, "inputResponses": {"confirm": answer}}
    ack = await _ask(running, "tasks/update", update, **WITH_TASKS)
    assert ack["result"] == {"resultType": "complete"}
    done = (await _ask(running, "tasks/get", {"taskId": task_id}, **WITH_TASKS))["result"]
    assert done["status"] == "completed"
    assert json.loads(done["result"]["content"][0]["text"]) == {"answer": answer}
    updates = [e for e in _record(record) if e["method"] == "tasks/update"]
    assert updates[0]["inputResponses"] == {"confirm": answer}


async def test_a_backend_asking_for_what_the_creating_call_did_not_declare_is_its_fault(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """mrtr.mdx: the host is never asked for an undeclared capability: -32603 naming it."""
    record = tmp_path / "record.jsonl"
    running = await start_gateway(nursery, gateway_config([_backend(record)]))
    bare = {CAPS_KEY: {"extensions": {EXT: {}}}}  # no elicitation
    call = {"name": "t__confirm", "arguments": {}}
    task_id = (await _ask(running, "tools/call", call, **bare))["result"]["taskId"]
    refused = await _ask(running, "tasks/get", {"taskId": task_id}, **bare)
    assert refused["error"]["code"] == -32603
    assert "elicitation" in refused["error"]["message"]


async def test_a_host_that_does_not_declare_the_extension_gets_an_ordinary_call(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """ext tasks: no extension on the request, none towards the backend: a plain result."""
    record = tmp_path / "record.jsonl"
    running = await start_gateway(nursery, gateway_config([_backend(record)]))
    plain = (await _ask(running, "tools/call", COUNTDOWN))["result"]
    assert plain["resultType"] == "complete"
    assert plain["content"][0]["text"] == "done at once (1)"
    assert _record(record) == [
        {"method": "tools/call", "taskId": None, "declared": False, "name": "countdown"}
    ]


async def test_another_principals_poll_is_refused_as_an_unknown_id(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Rule 4: bob gets -32602 for alice's task, exactly as for an unknown id, and the
    backend is not asked."""
    record = tmp_path / "record.jsonl"
    running = await start_gateway(
        nursery, gateway_config([_backend(record)], auth={"tokens": TOKENS})
    )
    created = await _ask(running, "tools/call", COUNTDOWN, token=TOKENS["alice"], **WITH_TASKS)
    task_id = created["result"]["taskId"]
    for method in ("tasks/get", "tasks/cancel"):
        bob = await _ask(running, method, {"taskId": task_id}, token=TOKENS["bob"], **WITH_TASKS)
        assert bob["error"] == {"code": -32602, "message": f"unknown taskId: {task_id}"}
    assert [e["method"] for e in _record(record)] == ["tools/call"]
    alice = await _ask(
        running, "tasks/get", {"taskId": task_id}, token=TOKENS["alice"], **WITH_TASKS
    )
    assert alice["result"]["status"] == "working"


@pytest.fixture(name="tasks_http")
def _tasks_http(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The tasks backend over Streamable HTTP: one process both replicas reach."""
    record = tmp_path / "record.jsonl"
    port = free_port()
    argv = [str(SDK2_PYTHON), str(SERVER), "http", str(port)]
    with run_server(argv, port, env={"MODERN_TASKS_RECORD": str(record)}) as server:
        yield server.url("/mcp"), record


async def _replica(nursery: trio.Nursery, url: str, redis_server: RedisServer) -> Running:
    backend = {"name": "t", "transport": "http", "url": url}
    store = {"url": redis_server.url, "key_prefix": "native-tasks:"}
    return await start_gateway(nursery, gateway_config([backend], store=store))


async def test_a_task_created_through_one_replica_is_polled_and_cancelled_through_another(
    nursery: trio.Nursery, redis_server: RedisServer, tasks_http: tuple[str, Path]
) -> None:
    """Issue 26 item 2: the route is in the shared store, so replica B reaches the
    backend's task that replica A created, with nothing of it in B's memory."""
    url, record = tasks_http
    redis_server.flush()
    a = await _replica(nursery, url, redis_server)
    b = await _replica(nursery, url, redis_server)
    call = {"name": "t__countdown", "arguments": {"polls": 2}}
    task_id = (await _ask(a, "tools/call", call, **WITH_TASKS))["result"]["taskId"]
    polled = (await _ask(b, "tasks/get", {"taskId": task_id}, **WITH_TASKS))["result"]
    assert (polled["taskId"], polled["status"]) == (task_id, "working")
    ack = await _ask(b, "tasks/cancel", {"taskId": task_id}, **WITH_TASKS)
    assert ack["result"] == {"resultType": "complete"}
    ended = (await _ask(a, "tasks/get", {"taskId": task_id}, **WITH_TASKS))["result"]
    assert ended["status"] == "cancelled"
    assert [e["method"] for e in _record(record)] == [
        "tools/call",
        "tasks/get",
        "tasks/cancel",
        "tasks/get",
    ]
    # The route is the task's only state: one key, in the shared store (beside
    # each replica's heartbeat as a task owner, which every replica keeps).
    async with open_redis_store(StoreConfig(url=redis_server.url, key_prefix="native-tasks:")) as s:
        keys = [key for key, _ in await s.scan("")]
        assert [key for key in keys if not key.startswith("tasks-owner:")] == [
            f"tasks-native:{task_id}"
        ]


async def test_the_inlined_result_passes_the_guardrail_result_chain(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """filtering rule 2: the backend's task result is a tool result like any other;
    the CreateTaskResult itself is not one and reaches the host whole."""
    record = tmp_path / "record.jsonl"
    backend = _backend(record, filters=[{"type": "size", "max_bytes": 16, "at": ["results"]}])
    running = await start_gateway(nursery, gateway_config([backend]))
    created = (await _ask(running, "tools/call", COUNTDOWN, **WITH_TASKS))["result"]
    assert (created["resultType"], created["status"]) == ("task", "working")
    task_id = created["taskId"]
    await _ask(running, "tasks/get", {"taskId": task_id}, **WITH_TASKS)
    done = (await _ask(running, "tasks/get", {"taskId": task_id}, **WITH_TASKS))["result"]
    assert done["status"] == "completed"
    last = done["result"]["content"][-1]["text"]
    assert last.startswith("[truncated by backend:t/size#0"), done["result"]


async def test_a_store_that_cannot_keep_the_route_cancels_the_backends_task(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Gateway choice: no task nobody can reach runs on; the host gets -32603, and a
    routed id answers -32603 while the store is away."""
    (tmp_path / "redis").mkdir()
    own = RedisServer(tmp_path / "redis")
    own.start()
    try:
        record = tmp_path / "record.jsonl"
        store = {"url": own.url, "key_prefix": "down:", "timeout": 1}
        running = await start_gateway(nursery, gateway_config([_backend(record)], store=store))
        first = (await _ask(running, "tools/call", COUNTDOWN, **WITH_TASKS))["result"]
        own.stop()
        refused = await _ask(running, "tools/call", COUNTDOWN, **WITH_TASKS)
        assert refused["error"]["code"] == -32603
        assert "was cancelled" in refused["error"]["message"]
        polled = await _ask(running, "tasks/get", {"taskId": first["taskId"]}, **WITH_TASKS)
        assert polled["error"]["code"] == -32603
        assert "state store is unavailable" in polled["error"]["message"]
        seen = [(e["method"], e["taskId"]) for e in _record(record)]
        second = seen[1][1]
        assert seen[1:] == [("tools/call", second), ("tasks/cancel", second)]
    finally:
        own.stop()


async def test_a_cached_tool_still_creates_a_task_per_call(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """response_cache rule: a CreateTaskResult is not a complete answer and is never
    kept, so each task call reaches the backend and gets a task of its own."""
    record = tmp_path / "record.jsonl"
    document = json.loads(msgspec.json.encode(gateway_config([_backend(record)])))
    document["cache"] = {"default_ttl": 60}
    opt_in = {"tools": ["t__countdown"], "ttl": 60, "allow_unannotated": True}
    document["profiles"] = [{"name": "default", "cache": opt_in}]
    config = parse(json.dumps(document), env={})
    running = await start_gateway(nursery, config)
    one = (await _ask(running, "tools/call", COUNTDOWN, **WITH_TASKS))["result"]["taskId"]
    two = (await _ask(running, "tools/call", COUNTDOWN, **WITH_TASKS))["result"]["taskId"]
    assert one != two
    calls = [e["taskId"] for e in _record(record) if e["method"] == "tools/call"]
    assert len(set(calls)) == 2
    # Without the extension the cache works as for any call: one backend answer.
    for _ in range(2):
        assert (await _ask(running, "tools/call", COUNTDOWN))["result"]["resultType"] == "complete"
    plain = [e for e in _record(record) if e["method"] == "tools/call" and e["taskId"] is None]
    assert len(plain) == 1


async def test_an_mrtr_round_first_then_the_backends_task_on_the_retry(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """sep-2663: the backend's round is an ordinary input_required (sealed state); the
    retry declares the extension too and its CreateTaskResult is routed like any."""
    record = tmp_path / "record.jsonl"
    running = await start_gateway(nursery, gateway_config([_backend(record)]))
    call = {"name": "t__round_then_task", "arguments": {}}
    first = (await _ask(running, "tools/call", call, **WITH_TASKS))["result"]
    assert first["resultType"] == "input_required"
    assert "taskId" not in first
    assert first["inputRequests"]["user_name"]["method"] == "elicitation/create"
    answer = {"action": "accept", "content": {"name": "Ada"}}
    retry = {**call, "requestState": first["requestState"], "inputResponses": {"user_name": answer}}
    created = (await _ask(running, "tools/call", retry, **WITH_TASKS))["result"]
    assert created["resultType"] == "task"
    task_id = created["taskId"]
    assert task_id.startswith("n.")
    done = (await _ask(running, "tasks/get", {"taskId": task_id}, **WITH_TASKS))["result"]
    assert done["status"] == "completed"
    # The round's answer and the backend's own state, as the backend got them.
    assert json.loads(done["result"]["content"][0]["text"]) == {
        "answer": answer,
        "state": "round-1",
    }
    calls = [(e["method"], e["declared"]) for e in _record(record)]
    assert calls == [("tools/call", True), ("tools/call", True), ("tasks/get", True)]
