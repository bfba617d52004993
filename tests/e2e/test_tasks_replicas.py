"""Gateway tasks on more than one replica: the record in the store answers on every one.

Two gateways share one ``redis-server`` (each runs its own conformance
backend); a task created on A is read, answered and cancelled on B, and a
task whose replica stops ends ``failed`` on the other. The embedded store
keeps ended tasks across a restart of a single gateway.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import trio

from gateway.protocol.stateless.task_record import OWNER_LOST
from gateway.runtime.app import drain
from tests.e2e.test_tasks import TOKENS, WAIT, WITH_TASKS, _ask, _start, _until
from tests.redis_server import RedisServer

if TYPE_CHECKING:
    from pathlib import Path

    from tests.harness import Running

OWNER_TIMEOUT: Final = 3.0
ALICE: Final = TOKENS["alice"]


def _shared(redis_server: RedisServer, prefix: str) -> dict[str, Any]:
    return {"url": redis_server.url, "key_prefix": prefix, "task_owner_timeout": OWNER_TIMEOUT}


async def _create(running: Running, call: dict[str, Any]) -> str:
    created = await _ask(running, "tools/call", call, token=ALICE, **WITH_TASKS)
    task_id: str = created["result"]["taskId"]
    return task_id


async def test_a_task_started_on_one_replica_is_read_answered_and_cancelled_on_another(
    nursery: trio.Nursery, redis_server: RedisServer
) -> None:
    """Issue 26: tasks/get, tasks/update and tasks/cancel on B for A's task; same answers."""
    store = _shared(redis_server, "tasks-anywhere:")
    a = await _start(nursery, auth={"tokens": TOKENS}, store=store)
    b = await _start(nursery, auth={"tokens": TOKENS}, store=store)
    call = {"name": "c__confirm_delete", "arguments": {"filename": "x.txt"}}
    task_id = await _create(a, call)
    waiting = await _until(b, task_id, {"input_required"}, token=ALICE)
    (key,) = waiting["inputRequests"]
    bob = await _ask(b, "tasks/get", {"taskId": task_id}, token=TOKENS["bob"], **WITH_TASKS)
    assert bob["error"] == {"code": -32602, "message": f"unknown taskId: {task_id}"}
    bad = {"taskId": task_id, "inputResponses": {key: "not an object"}}
    refused = await _ask(b, "tasks/update", bad, token=ALICE, **WITH_TASKS)
    assert refused["error"]["code"] == -32602  # the owner's refusal, relayed
    answer = {"action": "accept", "content": {"confirm": True}}
    update = {"taskId": task_id, "inputResponses": {key: answer}}
    ack = await _ask(b, "tasks/update", update, token=ALICE, **WITH_TASKS)
    assert ack["result"] == {"resultType": "complete"}
    on_b = await _until(b, task_id, {"completed"}, token=ALICE)
    on_a = await _until(a, task_id, {"completed"}, token=ALICE)
    assert on_a == on_b and "confirm" in on_b["result"]["content"][0]["text"]

    slow = await _create(a, {"name": "c__slow_compute", "arguments": {"seconds": 60}})
    assert (await _until(b, slow, {"working"}, token=ALICE))["taskId"] == slow
    ack = await _ask(b, "tasks/cancel", {"taskId": slow}, token=ALICE, **WITH_TASKS)
    assert ack["result"] == {"resultType": "complete"}
    ended = await _until(b, slow, {"cancelled", "completed", "failed"}, token=ALICE)
    assert ended["status"] == "cancelled"
    assert ended == await _until(a, slow, {"cancelled"}, token=ALICE)
    assert a.gateway.pool.backends["c"].in_flight == 0


async def test_a_task_whose_replica_stopped_is_failed_on_another_within_the_owner_timeout(
    nursery: trio.Nursery, redis_server: RedisServer
) -> None:
    """Issue 26: failed with a message that says so, never unknown (a stop: at once)."""
    store = _shared(redis_server, "tasks-owner-lost:")
    b = await _start(nursery, store=store)
    async with trio.open_nursery() as doomed:
        a = await _start(doomed, store=store)
        task_id = (
            await _ask(
                a,
                "tools/call",
                {"name": "c__slow_compute", "arguments": {"seconds": 60}},
                **WITH_TASKS,
            )
        )["result"]["taskId"]
        assert (await _until(b, task_id, {"working"}))["taskId"] == task_id
        doomed.cancel_scope.cancel()
    stopped = trio.current_time()
    # A stopping replica fails its tasks itself; a crashed one's heartbeat expires
    # (tests/router/test_task_records.py). WAIT covers two busy cores.
    ended = await _until(b, task_id, {"failed", "completed", "cancelled"})
    assert trio.current_time() - stopped <= OWNER_TIMEOUT + WAIT
    assert ended["status"] == "failed" and ended["statusMessage"] == OWNER_LOST
    assert ended["error"] == {"code": -32603, "message": OWNER_LOST}
    assert await _until(b, task_id, {"failed"}) == ended  # and stays so


async def test_the_embedded_store_keeps_ended_tasks_across_a_restart_and_fails_live_ones(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Gateway choice: an ended task reads the same after a restart; a live one is failed."""
    store = {"path": str(tmp_path / "state.sqlite")}
    async with trio.open_nursery() as first_run:
        first = await _start(first_run, auth={"tokens": TOKENS}, store=store)
        done = await _create(first, {"name": "c__slow_compute", "arguments": {"seconds": 0}})
        before = await _until(first, done, {"completed"}, token=ALICE)
        live = await _create(first, {"name": "c__slow_compute", "arguments": {"seconds": 60}})
        first_run.cancel_scope.cancel()
    second = await _start(nursery, auth={"tokens": TOKENS}, store=store)
    assert await _until(second, done, {"completed"}, token=ALICE) == before
    lost = await _until(second, live, {"failed"}, token=ALICE)
    assert lost["statusMessage"] == OWNER_LOST
    assert second.gateway.router.tasks.sample().running == 0


async def test_with_the_store_down_the_owner_serves_its_tasks_and_another_replica_says_why(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Gateway choice: the owner answers from memory; another replica -32603 store_unavailable."""
    server = RedisServer(tmp_path)
    server.start()
    try:
        store = {"url": server.url, "timeout": 0.5, "task_owner_timeout": OWNER_TIMEOUT}
        a = await _start(nursery, store=store)
        b = await _start(nursery, store=store)
        server.stop()
        call = {"name": "c__slow_compute", "arguments": {"seconds": 0}}
        created = await _ask(a, "tools/call", call, **WITH_TASKS)
        task_id = created["result"]["taskId"]
        done = await _until(a, task_id, {"completed"})
        assert done["result"]["content"][0]["text"].startswith("computed")
        elsewhere = await _ask(b, "tasks/get", {"taskId": task_id}, **WITH_TASKS)
    finally:
        server.stop()
    assert elsewhere["error"]["code"] == -32603
    assert elsewhere["error"]["data"] == {"reason": "store_unavailable"}
    assert "state store" in elsewhere["error"]["message"]


async def test_a_replica_that_drains_fails_its_running_tasks_at_once_for_every_replica(
    nursery: trio.Nursery, redis_server: RedisServer
) -> None:
    """Gateway choice: a task still running when its replica's drain ends is failed then."""
    store = _shared(redis_server, "tasks-drained:")
    b = await _start(nursery, store=store)
    async with trio.open_nursery() as doomed:
        a = await _start(doomed, store=store, shutdown={"drain_timeout": 0.2})
        call = {"name": "c__slow_compute", "arguments": {"seconds": 60}}
        task_id = (await _ask(a, "tools/call", call, **WITH_TASKS))["result"]["taskId"]
        assert (await _until(b, task_id, {"working"}))["taskId"] == task_id
        await drain(a.gateway)
        first = await _ask(b, "tasks/get", {"taskId": task_id}, **WITH_TASKS)
        doomed.cancel_scope.cancel()
    assert first["result"]["status"] == "failed"
    assert first["result"]["statusMessage"] == OWNER_LOST
