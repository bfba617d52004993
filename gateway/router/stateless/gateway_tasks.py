"""Tasks run by the gateway for 2026-07-28 hosts (``protocol.tasks`` has the rules).

A task is an ordinary ``tools/call`` routed the ordinary way, in the
runner's own nursery (``TaskRunner.run``) instead of under the request that started it: the request
gets a ``CreateTaskResult`` at once, the call goes on, and ``tasks/get``
reads how it ended. ``tasks/cancel`` cancels the call's scope.

A backend's own request during a task (elicitation, sampling, roots) parks
it ``input_required`` until ``tasks/update`` brings the answer (``TaskRequest``).

Each change of a task's status goes out as ``notifications/tasks`` to the
listen streams that named it in ``taskIds`` (its creator's only).

A backend that runs tasks itself (2025-11-25 ``tasks.requests.tools.call``)
gets the call instead, rounds first; its task then becomes one of ours
whose work follows it (``router/backend_tasks``, ``adopt``). A 2026-07-28
backend that declares the extension runs the task alone, reached through
a gateway id in the state store (``router/stateless/native_tasks``).

Every change of a task's status is a row of
``protocol/stateless/task_states.TRANSITIONS`` (``Task.feed``); this module
feeds the events and performs the actions the row leaves to it.

With the state store (``attach``, ``router/stateless/task_records``) each
task's record is saved on every change the table marks ``SAVE``; a tasks
method for a task this replica does not hold is answered from the record
(``tasks/get``) or relayed to the replica that runs it (cancel, update).
A task this replica holds is answered from memory, as without a store.

What a task cannot do (documented in docs/eras.md): send progress or log
messages (the extension has none), or move its call to another replica
(it fails when its replica stops).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec
import structlog
import trio

from gateway.catalog.snapshot import Kind
from gateway.config.schema_gateway import TasksConfig
from gateway.errors import INTERNAL_ERROR, LocalProtocolError
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.eras import MethodNotFound
from gateway.protocol.stateless.error_codes import MissingClientCapability
from gateway.protocol.stateless.listen import TASK_STATUS
from gateway.protocol.stateless.task_record import task_of
from gateway.protocol.stateless.task_states import TaskAction, TaskEvent
from gateway.protocol.stateless.tasks import (
    EXTENSION,
    TASK_METHODS,
    TASK_SUPPORT_MARK,
    TERMINAL,
    Task,
    TaskTable,
    declares_tasks,
    task_support,
)
from gateway.router.call_metrics import NO_METRICS
from gateway.router.context import TaskRequest
from gateway.router.outcomes import internal_error
from gateway.router.stateless.backend_tasks import BackendTasks
from gateway.telemetry import tracing
from gateway.telemetry.scrape import TaskSample

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from contextlib import AbstractContextManager

    from gateway.catalog.snapshot import Snapshot
    from gateway.protocol.jsonrpc import Request
    from gateway.protocol.stateless.task_record import TaskControl, TaskRecord
    from gateway.protocol.tables import Owners
    from gateway.router.context import Call, ModernRequest
    from gateway.router.neighbours import PoolView
    from gateway.router.stateless.held_calls import HeldCalls
    from gateway.router.stateless.native_tasks import NativeTasks
    from gateway.router.stateless.task_records import TaskRecords
    from gateway.router.to_clients import ToClients

    RunModern = Callable[[ModernRequest, Request, object], Awaitable[bytes]]

logger = structlog.get_logger("gateway.tasks")
EMPTY_ACK: bytes = msgspec.json.encode({"resultType": "complete"})
# Views whose task support is remembered at once (profiles x distinct accesses).
OFFERED_CACHE = 256


class TaskRunner:
    """The gateway's tasks: started on ``tools/call``, read and cancelled by id.

    A service: ``run`` (started with ``nursery.start``) owns the nursery the
    tasks' calls run in, since they outlive the request that started them.

    Args:
        run: routes one modern request to the end (``Router._run_modern``).
        limits: the table's bound, how long a finished task stays readable,
            the pace suggested to clients.
        handoff: what backends that run tasks themselves need
            (``router/backend_tasks``); none: every task runs here.
        on_change: where ``notifications/tasks`` go (the listen streams).
    """

    def __init__(
        self,
        run: RunModern,
        limits: TasksConfig | None = None,
        *,
        handoff: HandOff | None = None,
        on_change: Callable[[bytes], object] | None = None,
    ) -> None:
        self._nursery: trio.Nursery | None = None
        self._run = run
        limits = limits if limits is not None else TasksConfig()
        self._table = TaskTable(limits.max_tasks)
        self._ttl_ms = self._poll_ms = 0
        # Task calls of backends that run tasks themselves.
        self.handoff: BackendTasks | None = None
        self.configure(limits)
        if handoff is not None:
            self.handoff = BackendTasks(
                handoff.held,
                self._run,
                handoff.pool,
                self.adopt,
                self._ttl_ms,
                owners=handoff.owners,
                clients=handoff.clients,
            )
        self._running: dict[str, TaskRequest] = {}
        # A 2026-07-28 backend's own tasks, routed by the store (``router/stateless/native_tasks``).
        self.native: NativeTasks | None = None
        # What the metrics read at scrape time (``sample``): nothing per request.
        self._created = 0
        self._ended: collections.Counter[str] = collections.Counter()
        # Where ``notifications/tasks`` go (the listen streams).
        self._on_change = on_change
        # The tasks' records in the state store (``attach``); none: memory only.
        self.records: TaskRecords | None = None
        # Per view (a profile's, or a caller's effective one), kept with the
        # view itself so the id is not reused: whether it offers tasks.
        self._offered: dict[int, tuple[Snapshot, bool]] = {}

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run tasks until cancelled; cancelling it cancels every task's call."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                task_status.started()
                await trio.sleep_forever()
            finally:
                self._nursery = None

    def attach(self, records: TaskRecords) -> None:
        """Keep the tasks' records in the state store, so every replica answers for them."""
        self.records = records
        records.apply = self._relayed
        records.taken = self._taken
        records.kept = self._table.kept

    def configure(self, limits: TasksConfig) -> None:
        """New bounds (a reload): for tasks created from now on; kept tasks stay."""
        self._table.max_tasks = limits.max_tasks
        self._ttl_ms = max(1, round(limits.ttl * 1000))
        if self.handoff is not None:
            self.handoff.ttl_ms = self._ttl_ms
        self._poll_ms = max(1, round(limits.poll_interval * 1000))

    def offered(self, view: Snapshot) -> bool:
        """Whether any tool of the view supports tasks (the extension is advertised)."""
        cached = self._offered.get(id(view))
        if cached is not None and cached[0] is view:
            return cached[1]
        found = any(
            TASK_SUPPORT_MARK in entry.encoded and _support(entry.encoded) != "forbidden"
            for entry in view.view(Kind.TOOLS)
        )
        if len(self._offered) >= OFFERED_CACHE:
            self._offered.clear()  # old snapshots' views: let them go
        self._offered[id(view)] = (view, found)
        return found

    async def serve(
        self, request: ModernRequest, message: Request, params: dict[str, Any], view: Snapshot
    ) -> bytes | None:
        """Answer a tasks method, or start a task; None when the call is not a task."""
        if message.method in TASK_METHODS:
            with _span(request, message.method, params):
                native = self.native
                declared = declares_tasks(request.capabilities)
                if native is not None and declared and self.offered(view):
                    routed = await native.method(request, message, params)
                    if routed is not None:
                        return routed
                return await self._task_method(request, message, params, view)
        name = params.get("name")
        entry = view.resolve(Kind.TOOLS, name) if isinstance(name, str) else None
        if entry is None or TASK_SUPPORT_MARK not in entry.encoded:
            return None
        support = _support(entry.encoded)
        declared = declares_tasks(request.capabilities)
        if support == "forbidden" or (support == "optional" and not declared):
            return None
        if not declared:
            raise MissingClientCapability({"extensions": {EXTENSION: {}}})
        assert isinstance(name, str)
        with _span(request, message.method, params):  # the task's own call: a child span
            if self.native is not None and self.native.takes(entry.backend):
                return await self.native.serve(request, message, params, entry.backend)
            if self.handoff is not None and self.handoff.takes(entry.backend):
                # The backend runs the task itself: rounds first (router/backend_tasks).
                reply = await self.handoff.serve(request, message, params, entry.backend)
                if self.records is not None:
                    await self.records.flush()  # a new task is readable on every replica
                return reply

            async def call(background: TaskRequest) -> bytes:
                """The task's work: the call itself, routed the ordinary way."""
                return await self._run(background, message, params)

            created = self.adopt(request, name, call)
            if self.records is not None:
                await self.records.flush()  # a new task is readable on every replica
            return jsonrpc.encode_response(message.id, mcp.encode(created))

    def adopt(
        self, request: ModernRequest, tool: str, work: Callable[[TaskRequest], Awaitable[bytes]]
    ) -> dict[str, Any]:
        """Start a task whose work is ``work``; its ``CreateTaskResult``.

        ``work`` runs in the runner's own nursery; it enters the task's own
        cancel scope (``background.scope``, which ``tasks/cancel`` cancels)
        and answers a JSON-RPC response (a result is ``completed``, an error
        ``failed``).

        Raises:
            TaskTableFull: -32603, no room for another task.
            RuntimeError: ``run`` is not running.
        """
        if self._nursery is None:
            raise RuntimeError("TaskRunner.run is not running")
        task = self._table.new(
            request.principal,
            tool,
            trio.current_time(),
            ttl_ms=self._ttl_ms,
            poll_interval_ms=self._poll_ms,
        )
        background = TaskRequest(
            envelope=request.envelope,
            profile=request.profile,
            principal=request.principal,
            caller=request.caller,  # the access policy decides the task's call as the request's
            task=task,
            changed=self._changed,
            save=self._save,
        )
        self._running[task.task_id] = background
        self._save(task)
        self._created += 1
        self._nursery.start_soon(self._drive, task, background, work)
        logger.info("task.created", task=task.task_id[:8], tool=tool)
        return task.created()

    async def _task_method(
        self, request: ModernRequest, message: Request, params: dict[str, Any], view: Snapshot
    ) -> bytes:
        if not self.offered(view):
            raise MethodNotFound(message.method)
        if not declares_tasks(request.capabilities):
            raise MissingClientCapability({"extensions": {EXTENSION: {}}})
        task_id = params.get("taskId")
        try:
            task = self._table.find(task_id, request.principal, trio.current_time())
        except LocalProtocolError:
            if self.records is None or not isinstance(task_id, str):
                raise
            # Not held here: another replica's (or an earlier run's) task, from its record.
            record = await self.records.find(task_id, request.principal)
            if message.method == "tasks/get":
                return jsonrpc.encode_response(message.id, mcp.encode(task_of(record).detailed()))
            if record.status not in TERMINAL:
                await self.records.relay(message.method, record, request.principal, params)
            return jsonrpc.encode_response(message.id, msgspec.Raw(EMPTY_ACK))
        if message.method == "tasks/get":
            return jsonrpc.encode_response(message.id, mcp.encode(task.detailed()))
        self._act(task, message.method, params)
        # A finished task acks both the same way (idempotent, rule 3).
        return jsonrpc.encode_response(message.id, msgspec.Raw(EMPTY_ACK))

    def _act(self, task: Task, method: str, params: dict[str, Any]) -> None:
        """``tasks/cancel`` or ``tasks/update`` on a task run here.

        Raises:
            ModernProtocolError: -32602 for ``inputResponses`` that are not objects.
        """
        event = TaskEvent.CANCEL if method == "tasks/cancel" else TaskEvent.UPDATE
        actions = task.feed(event)
        running = self._running.get(task.task_id)
        if running is not None:
            running.perform(actions, params)

    def _relayed(self, control: TaskControl) -> None:
        """A cancel or update another replica relayed for a task run here (as if asked here)."""
        task = self._table.find(control.task_id, control.principal, trio.current_time())
        self._act(task, control.method, control.params)

    def _taken(self, task_id: str, record: TaskRecord) -> None:
        """Another replica ended a task run here (it found no heartbeat): its ending stands.

        The call stops and the task leaves this replica's table, so this
        replica too answers from the record: one answer on every replica.
        """
        if not self._table.forget(task_id):
            return
        running = self._running.get(task_id)
        if running is not None:
            running.scope.cancel()
        self._changed(task_of(record))

    def _save(self, task: Task) -> None:
        """Write ``task``'s record to the store (its row said ``SAVE``, or it is new)."""
        if self.records is not None:
            self.records.changed(task)

    async def _drive(
        self, task: Task, background: TaskRequest, work: Callable[[TaskRequest], Awaitable[bytes]]
    ) -> None:
        """Run the task's work to the end and record how it ended."""
        try:
            reply = await work(background)
        except Exception as exc:
            # Never into the router's nursery: that would end the process.
            err = internal_error(exc, NO_METRICS, "tools/call", background.session_id)
            reply = jsonrpc.encode_error(task.task_id, err.code, err.message)
        finally:
            self._running.pop(task.task_id, None)
        now = trio.current_time()
        if not reply and background.scope.cancelled_caught:
            event, outcome = TaskEvent.CALL_CANCELLED, {"message": "cancelled by tasks/cancel"}
        else:
            event, outcome = _outcome(reply)
        actions = task.feed(event, now, **outcome)
        self._ended[task.status] += 1
        if TaskAction.SAVE in actions:
            self._save(task)
        if TaskAction.NOTIFY in actions:
            self._changed(task)
        logger.info("task.ended", task=task.task_id[:8], tool=task.tool, status=task.status)

    def sample(self) -> TaskSample:
        """The counts the task metrics export (read at scrape time)."""
        return TaskSample(self._created, len(self._running), dict(self._ended))

    def watchable(self, task_ids: tuple[str, ...], principal: str | None) -> frozenset[str]:
        """The ids of ``task_ids`` a listen stream of ``principal`` may follow: its own."""
        now = trio.current_time()
        mine: set[str] = set()
        for task_id in task_ids:
            try:
                self._table.find(task_id, principal, now)
            except LocalProtocolError:
                continue
            mine.add(task_id)
        return frozenset(mine)

    def _changed(self, task: Task) -> None:
        """Tell the listen streams following ``task`` its new state (``notifications/tasks``)."""
        if self._on_change is None:
            return
        body = {k: v for k, v in task.detailed().items() if k != "resultType"}
        self._on_change(jsonrpc.encode_notification(TASK_STATUS, mcp.encode(body)))


@dataclass(frozen=True)
class HandOff:
    """What a runner needs to hand task calls to backends that run tasks themselves."""

    held: HeldCalls
    pool: PoolView
    owners: Owners[Call]
    clients: ToClients


def _outcome(reply: bytes) -> tuple[TaskEvent, dict[str, Any]]:
    """The call's answer as the task's end: a result is completed, an error failed."""
    try:
        answer = jsonrpc.decode(reply)
    except Exception:
        answer = None
    if isinstance(answer, jsonrpc.Response):
        result = mcp.decode_object(answer.result) or {}
        result.setdefault("resultType", "complete")
        return TaskEvent.CALL_COMPLETED, {"result": result}
    if isinstance(answer, jsonrpc.ErrorResponse):
        error: dict[str, Any] = {"code": answer.code, "message": answer.message}
        if answer.data is not None:
            error["data"] = answer.data
        return TaskEvent.CALL_FAILED, {"error": error}
    error = {"code": INTERNAL_ERROR, "message": "the call ended without an answer"}
    return TaskEvent.CALL_FAILED, {"error": error}


def _support(encoded: bytes) -> str:
    tool = mcp.decode_object(msgspec.Raw(encoded))
    return "forbidden" if tool is None else task_support(tool)


__all__ = ["EMPTY_ACK", "HandOff", "TaskRunner"]


def _span(
    request: ModernRequest, method: str, params: dict[str, Any]
) -> AbstractContextManager[object]:
    """The server span of a tasks method or a task-starting call (tracing rule 5)."""
    version = request.envelope.protocol_version
    return tracing.answered(method, params, version=version, profile=request.profile)
