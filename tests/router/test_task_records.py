"""Task records across replicas: two drivers on one store, heartbeats, relays, a store down."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import pytest
import trio
import trio.lowlevel
import trio.testing

from gateway.config.schema_store import StoreConfig
from gateway.errors import INVALID_PARAMS, LocalProtocolError
from gateway.protocol.stateless.task_record import (
    OWNER_LOST,
    TaskControl,
    TaskRecord,
    owner_key,
    record_key,
)
from gateway.protocol.stateless.task_states import TaskEvent
from gateway.protocol.stateless.tasks import Task
from gateway.router.stateless.task_records import RELAY_TIMEOUT, TaskRecords, TaskRecordUnavailable
from gateway.store.api import StoreUnavailable
from gateway.store.embedded import EmbeddedStore
from gateway.store.redis_store import open_redis_store

if TYPE_CHECKING:
    from gateway.store.api import Store
    from tests.redis_server import RedisServer

TIMEOUT = 6.0


def _task(task_id: str = "t" * 22) -> Task:
    return Task(task_id, "alice", "c__slow", ttl_ms=30_000, poll_interval_ms=500)


class _Flaky(EmbeddedStore):
    """An embedded store on the test's clock that refuses everything while ``down``."""

    def __init__(self) -> None:
        super().__init__(clock=trio.current_time)
        self.down = False

    def _check(self, operation: str) -> None:
        if self.down:
            raise StoreUnavailable(operation, "connection refused")

    async def get(self, key: str) -> bytes | None:
        """Refused while down."""
        self._check("get")
        return await super().get(key)

    async def put(self, key: str, value: bytes, *, ttl: float | None = None) -> None:
        """Refused while down."""
        self._check("put")
        await super().put(key, value, ttl=ttl)

    async def swap(
        self, key: str, expected: bytes | None, new: bytes | None, *, ttl: float | None = None
    ) -> bool:
        """Refused while down."""
        self._check("swap")
        return await super().swap(key, expected, new, ttl=ttl)


class _Reach:
    """One replica's way to a shared store; once ``cut``, it reaches nothing (a crash)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.cut = False

    def __getattr__(self, name: str) -> Any:
        if self.cut:
            raise StoreUnavailable(name, "the replica crashed")
        return getattr(self.store, name)


async def _replica(
    nursery: trio.Nursery, store: Store, name: str, owner_timeout: float = TIMEOUT
) -> tuple[TaskRecords, trio.CancelScope]:
    """A replica's records service in a scope of its own (cancelling it stops the replica)."""
    records = TaskRecords(store, owner_timeout, replica=name)
    scope = trio.CancelScope()

    async def serve(task_status: trio.TaskStatus[None]) -> None:
        with scope:
            await records.run(task_status=task_status)

    await nursery.start(serve)
    with trio.fail_after(5):
        await records.listening.wait()
    return records, scope


async def test_a_task_of_a_replica_that_stopped_is_failed_within_the_owner_timeout(
    nursery: trio.Nursery, autojump_clock: Any
) -> None:
    """Issue 26: working while the owner beats; failed, never unknown, within the timeout after."""
    store = EmbeddedStore(clock=trio.current_time)
    reach = _Reach(store)
    owner, owner_scope = await _replica(nursery, cast("Store", reach), "a")
    other, _ = await _replica(nursery, store, "b")
    task = _task()
    owner.changed(task)
    await owner.flush()
    await trio.sleep(TIMEOUT * 5)  # beats and renewals keep it live long past the timeout
    assert (await other.find(task.task_id, "alice")).status == "working"
    reach.cut = True  # a crash: nothing more reaches the store from it
    owner_scope.cancel()
    died = trio.current_time()
    await trio.sleep(TIMEOUT - 0.01)
    for _ in range(100):  # polled every 10 ms past the deadline
        record = await other.find(task.task_id, "alice")
        if record.status != "working":
            break
        await trio.sleep(0.01)
    assert trio.current_time() - died <= TIMEOUT + 0.01
    assert record.status == "failed" and record.status_message == OWNER_LOST
    assert (await other.find(task.task_id, "alice")) == record  # the same answer afterwards


async def test_someone_elses_or_an_unknown_task_is_not_found_on_another_replica(
    nursery: trio.Nursery, autojump_clock: Any
) -> None:
    """spec: ext tasks (rule 5): -32602 for another principal, as on the owner."""
    store = EmbeddedStore(clock=trio.current_time)
    owner, _ = await _replica(nursery, store, "a")
    other, _ = await _replica(nursery, store, "b")
    task = _task()
    owner.changed(task)
    await owner.flush()
    for task_id, principal in ((task.task_id, "mallory"), ("nope", "alice")):
        with pytest.raises(LocalProtocolError) as caught:
            await other.find(task_id, principal)
        assert caught.value.code == INVALID_PARAMS
        assert caught.value.message == f"unknown taskId: {task_id}"


async def test_a_relayed_cancel_is_done_by_the_owner_and_its_refusal_comes_back(
    nursery: trio.Nursery, autojump_clock: Any
) -> None:
    """Gateway choice (rule 4): cancel and update reach the owner; its error is the answer."""
    store = EmbeddedStore(clock=trio.current_time)
    owner, _ = await _replica(nursery, store, "a")
    other, _ = await _replica(nursery, store, "b")
    done: list[TaskControl] = []

    def apply(control: TaskControl) -> None:
        if control.method == "tasks/update":
            raise LocalProtocolError("inputResponses must be an object", INVALID_PARAMS)
        done.append(control)

    owner.apply = apply
    task = _task()
    owner.changed(task)
    await owner.flush()
    record = await other.find(task.task_id, "alice")
    await other.relay("tasks/cancel", record, "alice", {"taskId": task.task_id})
    assert [(c.method, c.task_id, c.principal) for c in done] == [
        ("tasks/cancel", task.task_id, "alice")
    ]
    with pytest.raises(LocalProtocolError) as caught:
        await other.relay("tasks/update", record, "alice", {"inputResponses": 1})
    assert caught.value.code == INVALID_PARAMS and "inputResponses" in caught.value.message


async def test_a_relay_to_a_dead_owner_fails_the_task_and_one_to_a_silent_live_owner_is_an_error(
    nursery: trio.Nursery, autojump_clock: Any
) -> None:
    """Gateway choice (rule 4): bounded by RELAY_TIMEOUT; a dead owner's task ends failed."""
    store = EmbeddedStore(clock=trio.current_time)
    reach = _Reach(store)
    owner, owner_scope = await _replica(nursery, cast("Store", reach), "a", owner_timeout=3.0)
    other, _ = await _replica(nursery, store, "b", owner_timeout=3.0)
    task = _task()
    owner.changed(task)
    await owner.flush()
    record = await other.find(task.task_id, "alice")
    # Alive but deaf: its heartbeat is there, nobody hears its channel.
    reach.cut = True
    owner_scope.cancel()
    await store.put(owner_key("a"), b"1", ttl=60)
    start = trio.current_time()
    with pytest.raises(TaskRecordUnavailable) as caught:
        await other.relay("tasks/cancel", record, "alice", {})
    assert caught.value.data == {"reason": "owner_unreachable"}
    assert trio.current_time() - start == pytest.approx(RELAY_TIMEOUT)
    await store.delete(owner_key("a"))  # now it is dead
    await other.relay("tasks/cancel", record, "alice", {})
    assert (await other.find(task.task_id, "alice")).status == "failed"


async def test_an_owner_that_was_failed_by_another_replica_takes_that_ending(
    nursery: trio.Nursery, autojump_clock: Any
) -> None:
    """Gateway choice (rule 1): a record another replica ended is never overwritten."""
    store = EmbeddedStore(clock=trio.current_time)
    owner, _ = await _replica(nursery, store, "a")
    other, _ = await _replica(nursery, store, "b")
    taken: list[TaskRecord] = []
    owner.taken = lambda _id, record: taken.append(record)
    task = _task()
    owner.changed(task)
    await owner.flush()
    await store.delete(owner_key("a"))  # its heartbeat lost (a store hiccup, a pause)
    assert (await other.find(task.task_id, "alice")).status == "failed"
    task.feed(TaskEvent.CALL_COMPLETED, 1.0, result={"content": []})  # too late: shown failed
    owner.changed(task)
    await owner.flush()
    assert [r.status_message for r in taken] == [OWNER_LOST]
    assert (await other.find(task.task_id, "alice")).status == "failed"


async def test_with_the_store_down_the_owner_catches_up_and_others_get_a_typed_error(
    nursery: trio.Nursery, autojump_clock: Any
) -> None:
    """Gateway choice: the owner keeps its tasks in memory; others answer -32603, store down."""
    store = _Flaky()
    owner, _ = await _replica(nursery, store, "a")
    other, _ = await _replica(nursery, store, "b")
    task = _task()
    store.down = True
    owner.changed(task)
    with trio.fail_after(1):
        await owner.flush()  # does not wait on a store that is down
    with pytest.raises(TaskRecordUnavailable) as caught:
        await other.find(task.task_id, "alice")
    assert caught.value.code == -32603 and caught.value.data == {"reason": "store_unavailable"}
    store.down = False
    await trio.sleep(2)  # the next retry writes what was marked
    assert (await other.find(task.task_id, "alice")).status == "working"


async def test_a_record_a_restarted_store_lost_is_written_again_by_its_owner(
    nursery: trio.Nursery, autojump_clock: Any
) -> None:
    """Gateway choice: the owner's memory is the truth of a live task; a lost record comes back."""
    store = EmbeddedStore(clock=trio.current_time)
    owner, _ = await _replica(nursery, store, "a")
    other, _ = await _replica(nursery, store, "b")
    task = _task()
    owner.changed(task)
    await owner.flush()
    await store.delete(record_key(task.task_id))
    task.feed(TaskEvent.CALL_COMPLETED, 1.0, result={"content": []})
    owner.changed(task)
    await owner.flush()
    assert (await other.find(task.task_id, "alice")).status == "completed"


async def test_two_replicas_on_every_store_kind_share_records_and_relays(
    nursery: trio.Nursery, store: Store
) -> None:
    """Issue 26: the same record and relay on the embedded store and on Redis."""
    owner, _ = await _replica(nursery, store, "a")
    other, _ = await _replica(nursery, store, "b")
    cancelled: list[str] = []
    owner.apply = lambda control: cancelled.append(control.task_id)
    task = _task()
    owner.changed(task)
    await owner.flush()
    record = await other.find(task.task_id, "alice")
    assert record.owner == "a" and record.status == "working"
    with trio.fail_after(5):
        await other.relay("tasks/cancel", record, "alice", {})
    assert cancelled == [task.task_id]
    task.feed(TaskEvent.CALL_CANCELLED, 1.0, message="cancelled by tasks/cancel")
    owner.changed(task)
    await owner.flush()
    assert (await other.find(task.task_id, "alice")).status == "cancelled"


async def test_a_replica_that_stops_fails_its_live_tasks_at_once_and_keeps_its_ended_ones(
    nursery: trio.Nursery, autojump_clock: Any
) -> None:
    """Gateway choice: a stopping replica does not leave its tasks working for the timeout."""
    store = EmbeddedStore(clock=trio.current_time)
    owner, owner_scope = await _replica(nursery, store, "a")
    other, _ = await _replica(nursery, store, "b")
    live, ended = _task("live" * 6), _task("ended" * 5)
    ended.feed(TaskEvent.CALL_COMPLETED, 1.0, result={"content": []})
    owner.changed(live)
    owner.changed(ended)
    await owner.flush()
    stopped = trio.current_time()
    owner_scope.cancel()
    await trio.testing.wait_all_tasks_blocked()
    lost = await other.find(live.task_id, "alice")
    assert lost.status == "failed" and lost.status_message == OWNER_LOST
    assert trio.current_time() - stopped < 1.0  # no heartbeat had to expire
    assert (await other.find(ended.task_id, "alice")).status == "completed"
    assert await store.get(owner_key("a")) is None


async def test_a_crashed_replicas_task_is_failed_on_redis_by_the_servers_expiry(
    redis_server: RedisServer,
) -> None:
    """Issue 26: the heartbeat's expiry is the server's; a crashed owner's task ends failed."""
    redis_server.flush()
    config = StoreConfig(url=redis_server.url, key_prefix="crash:")
    async with open_redis_store(config) as store, trio.open_nursery() as replicas:
        reach = _Reach(store)
        owner, owner_scope = await _replica(replicas, cast("Store", reach), "a", owner_timeout=1.0)
        other, _ = await _replica(replicas, store, "b", owner_timeout=1.0)
        task = _task()
        owner.changed(task)
        await owner.flush()
        reach.cut = True  # no stop of its own: only the expiry tells
        owner_scope.cancel()
        with trio.fail_after(10):  # a guard; the heartbeat expires 1 s after its last renewal
            while (await other.find(task.task_id, "alice")).status == "working":  # noqa: ASYNC110
                await trio.sleep(0.05)
        assert (await other.find(task.task_id, "alice")).status_message == OWNER_LOST
        replicas.cancel_scope.cancel()


async def test_a_store_that_restarted_empty_gets_every_record_its_replicas_hold_again(
    nursery: trio.Nursery, autojump_clock: Any
) -> None:
    """Issue 26: no record lost across a store restart; back within a heartbeat (a third of it)."""
    store = EmbeddedStore(clock=trio.current_time)
    owner, _ = await _replica(nursery, store, "a")
    other, _ = await _replica(nursery, store, "b")
    live, ended = _task("live" * 6), _task("ended" * 5)
    ended.feed(TaskEvent.CALL_COMPLETED, 1.0, result={"content": [{"type": "text", "text": "x"}]})
    owner.kept = lambda: [live, ended]
    owner.changed(live)
    owner.changed(ended)
    await owner.flush()
    before = [await other.find(t.task_id, "alice") for t in (live, ended)]
    for key, _ in await store.scan(""):
        await store.delete(key)  # the server came back without its data
    await trio.sleep(TIMEOUT / 3 + 0.1)  # the next beat, and the writes it marks
    after = [await other.find(t.task_id, "alice") for t in (live, ended)]
    assert after == before
