"""A handshake-era backend's own task behind a modern host's task call (issue 14).

MRTR rounds first, then a task (``tasks-mrtr-composition``, sep-2663): the
gateway cannot tell by waiting whether a backend's question is a
synchronous round or the start of a task, so the backend's own 2025-11-25
task support decides. Rules:

1. A task call (``router/tasks``: the tool supports tasks, the host declared
   the extension) of a tool whose backend declares
   ``tasks.requests.tools.call`` at ``initialize`` (and runs on the shared
   session, not per-client ones) goes to that backend task-augmented
   (``params.task``); the gateway starts no task of its own yet.
2. A question the backend asks before its ``CreateTaskResult`` is an MRTR
   round of the host's call (the held-call bridge, ``router/held``).
3. The backend's ``CreateTaskResult`` ends the round: the host gets the
   gateway's own ``CreateTaskResult`` (its ids, never the backend's), and
   the gateway task's work is the backend's task: ``tasks/get`` at the
   backend's pace until it ends, then ``tasks/result``.
4. ``tasks/cancel`` of the gateway task cancels the backend's task.
5. Any other answer of the backend (a result, an error) is the call's own
   answer, as for any call.
6. A backend task that asks for input once it is a task (its status
   ``input_required``) gets ``tasks/result`` at once, on which 2025-11-25
   delivers the question as a server-to-client request; while it waits the
   gateway's task owns the backend's requests, so the question parks the
   gateway's task ``input_required`` and ``tasks/update`` answers it (as
   for any gateway task). The wait is bounded by the backend's request
   timeout (``timeouts.request``): a host slower than that fails the task.

A 2026-07-28 backend never declares the 2025-11-25 capability (its tasks
are the extension's, routed by ``router/stateless/native_tasks``), so only
handshake-era backends are handed tasks here.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

import structlog
import trio

from gateway.catalog.naming import public_uri
from gateway.errors import (
    INTERNAL_ERROR,
    GatewayError,
    GuardrailError,
    ProtocolError,
    to_protocol_error,
)
from gateway.protocol import jsonrpc, mcp
from gateway.router.context import Call
from gateway.router.filtering import filter_result

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    import msgspec

    from gateway.backends.state import BackendView, ServerInfo
    from gateway.guardrails.chains import Guardrails
    from gateway.protocol.jsonrpc import Request
    from gateway.protocol.tables import Owners
    from gateway.router.context import ModernRequest, TaskRequest
    from gateway.router.neighbours import PoolView
    from gateway.router.stateless.held_calls import HeldCalls, Run
    from gateway.router.to_clients import ToClients

    # Starts the gateway task whose work is the given coroutine; returns its
    # CreateTaskResult (``TaskRunner.adopt``).
    Adopt = Callable[
        [ModernRequest, str, Callable[[TaskRequest], Awaitable[bytes]]], dict[str, Any]
    ]

logger = structlog.get_logger("gateway.tasks")
ENDED: Final = frozenset({"completed", "failed", "cancelled"})
# The related-task key a 2025-11-25 backend puts on the task's result.
RELATED_TASK: Final = "io.modelcontextprotocol/related-task"
# Bounds on the backend's suggested poll interval, in seconds.
MIN_POLL: Final = 0.05
MAX_POLL: Final = 5.0
CANCEL_GRACE: Final = 5.0


def runs_tasks(info: ServerInfo | None) -> bool:
    """Rule 1: whether a backend declared task-augmented ``tools/call`` (2025-11-25)."""
    if info is None or info.modern:
        return False
    tasks = info.capabilities.get("tasks")
    requests = tasks.get("requests") if isinstance(tasks, dict) else None
    tools = requests.get("tools") if isinstance(requests, dict) else None
    return isinstance(tools, dict) and isinstance(tools.get("call"), dict)


def augmented(params: dict[str, Any], ttl_ms: int) -> dict[str, Any]:
    """``params`` task-augmented for the backend (rule 1), the caller's untouched."""
    return {**params, "task": {"ttl": ttl_ms}}


def created_task(reply: bytes) -> dict[str, Any] | None:
    """Rule 3: the backend's task from its answer, when it is a ``CreateTaskResult``.

    A 2025-11-25 ``CreateTaskResult`` is ``{task: {taskId, status, ...}}``;
    a ``CallToolResult`` has ``content``. Anything else is None (rule 5).
    """
    try:
        message = jsonrpc.decode(reply)
    except Exception:
        return None
    if not isinstance(message, jsonrpc.Response):
        return None
    result = mcp.decode_object(message.result)
    task = result.get("task") if result is not None else None
    if result is None or "content" in result or not isinstance(task, dict):
        return None
    return task if isinstance(task.get("taskId"), str) and task["taskId"] else None


def poll_interval(status: dict[str, Any] | None) -> float:
    """The backend's suggested pace (``pollInterval``, ms), bounded; 1 s if absent."""
    value = status.get("pollInterval") if status is not None else None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return 1.0
    return min(MAX_POLL, max(MIN_POLL, value / 1000))


def ended_without_result(status: dict[str, Any] | None, result: msgspec.Raw) -> str | None:
    """Why the backend's task failed, when it ended ``failed``/``cancelled`` with no result.

    A 2025-11-25 backend's ``tasks/result`` for such a task may carry no
    ``content`` at all (the SDK 1.x answers only its ``_meta``): that is a
    failed gateway task, with the backend's ``statusMessage``, never an
    empty ``completed`` one. A tool error (``content`` with ``isError``) is
    a result like any other.
    """
    ended = status.get("status") if status is not None else "failed"
    body = mcp.decode_object(result)
    if ended not in ("failed", "cancelled") or (body is not None and "content" in body):
        return None
    message = status.get("statusMessage") if status is not None else None
    reason = message if isinstance(message, str) and message else "no reason given"
    return f"the backend's task ended {ended}: {reason[:512]}"


def task_outcome(result: msgspec.Raw, prefix: str) -> msgspec.Raw:
    """The backend's ``tasks/result`` as the gateway task's result.

    The related-task ``_meta`` names the backend's task id, which the host
    never sees; resource URIs are namespaced like any call's.
    """
    body = mcp.decode_object(result)
    if body is not None and isinstance(body.get("_meta"), dict):
        meta = {k: v for k, v in body["_meta"].items() if k != RELATED_TASK}
        if meta:
            body["_meta"] = meta
        else:
            del body["_meta"]
        result = mcp.encode(body)
    return mcp.rewrite_call_result(result, lambda uri: public_uri(prefix, uri))


class BackendTasks:
    """Hands task calls to backends that run tasks themselves (rules 1-6).

    Args:
        held: the held-call table (rule 2's rounds).
        run: routes one modern request to the end (``Router._run_modern``).
        pool: the backends by name (one gone: not configured any more) and
            the catalog.
        adopt: starts a gateway task around a backend's (``TaskRunner.adopt``).
        ttl_ms: the ttl asked of the backend's task.
        owners: the router's calls in flight (rule 6: whose the backend's
            request is).
        clients: the router's open clients (rule 6: where it goes).
    """

    def __init__(
        self,
        held: HeldCalls,
        run: Run,
        pool: PoolView,
        adopt: Adopt,
        ttl_ms: int,
        owners: Owners[Call],
        clients: ToClients,
    ) -> None:
        self._held = held
        self._run = run
        self._pool = pool
        self._backend = pool.backends.get
        self._adopt = adopt
        self.ttl_ms = ttl_ms
        self._owners = owners
        self._clients = clients
        # The router's guardrail chains: the backend task's result is a tool
        # result like any other (``router.filtering`` rule 2).
        self.guard: Guardrails | None = None

    def takes(self, backend: str) -> bool:
        """Rule 1: whether ``backend`` runs a task call itself.

        Not over per-client sessions (``session: per_client``): the call's
        session closes when its request ends, and a backend may bind its task
        to the session that created it (the SDK 1.x does), so the task could
        not be followed on the shared one. Those backends' task tools stay
        gateway tasks.
        """
        view = self._backend(backend)
        return view is not None and not view.per_client and runs_tasks(view.info)

    async def serve(
        self, request: ModernRequest, message: Request, params: dict[str, Any], backend: str
    ) -> bytes:
        """The first round of a handed-over task call (rules 2, 3, 5).

        Raises:
            ModernProtocolError: as ``HeldCalls.serve``.
        """
        tool = str(params.get("name"))

        async def run(held_request: ModernRequest, msg: Request, own: dict[str, Any]) -> bytes:
            """The held call's work: the backend's answer, or our task for its task."""
            reply = await self._run(held_request, msg, augmented(own, self.ttl_ms))
            task = created_task(reply)
            if task is None:
                return reply
            task_id = task["taskId"]
            logger.info("task.backend_created", backend=backend, tool=tool)
            try:
                created = self._adopt(
                    held_request, tool, lambda bg: self._follow(bg, backend, task_id, tool)
                )
            except ProtocolError as exc:
                await self._cancel(backend, task_id)
                return jsonrpc.encode_error(msg.id, exc.code, exc.message, exc.data)
            return jsonrpc.encode_response(msg.id, mcp.encode(created))

        return await self._held.serve(request, message, params, run)

    async def _follow(
        self, background: TaskRequest, backend: str, task_id: str, tool: str
    ) -> bytes:
        """Rules 3 and 4: the backend's task to its end, as a JSON-RPC answer.

        Runs under the gateway task's scope: ``tasks/cancel`` cancels it, and
        the backend's task is cancelled too; nothing is answered then.
        """
        with background.scope:
            try:
                return await self._outcome(background, backend, task_id, tool)
            except trio.Cancelled:
                with trio.move_on_after(CANCEL_GRACE, shield=True):  # as _cancel's own
                    await self._cancel(backend, task_id)
                raise
            except ProtocolError as exc:
                return jsonrpc.encode_error(0, exc.code, exc.message, exc.data)
            except GuardrailError as exc:  # a fail-closed policy service on the result
                error = to_protocol_error(exc)
                return jsonrpc.encode_error(0, error.code, error.message, error.data)
            except GatewayError as exc:  # the backend down, a timeout
                await self._cancel(backend, task_id)  # no one follows it any more
                return jsonrpc.encode_error(0, INTERNAL_ERROR, f"backend {backend}: {exc}")
        return b""

    @contextmanager
    def _attending(self, background: TaskRequest, backend: str) -> Iterator[None]:
        """Rule 6: the gateway's task owns the backend's requests while ``tasks/result`` waits.

        The backend's question arrives as an ordinary server-to-client request
        (2025-11-25 delivers a task's questions on ``tasks/result``); the
        router sends it to the one client with a call in flight to the
        backend, which for this while is the gateway's task: its
        ``TaskRequest.ask`` parks it ``input_required`` until ``tasks/update``.
        """
        call = Call(background, self._pool.snapshot, backend=backend)
        self._clients.opened(background)
        self._owners.add(backend, background.session_id, call)
        try:
            yield
        finally:
            self._owners.remove(backend, background.session_id, call)
            self._clients.closed(background.session_id)

    async def _outcome(
        self, background: TaskRequest, backend: str, task_id: str, tool: str
    ) -> bytes:
        params = mcp.encode({"taskId": task_id})
        while True:
            view = self._require(backend)
            status = mcp.decode_object(await view.request("tasks/get", params))
            if status is None or status.get("status") in ENDED:
                break
            if status.get("status") == "input_required":
                break  # rule 6: tasks/result delivers the question
            await trio.sleep(poll_interval(status))
        view = self._require(backend)
        with self._attending(background, backend):
            result = await view.request("tasks/result", params)
        if status is not None and status.get("status") == "input_required":
            status = mcp.decode_object(await view.request("tasks/get", params))
        error = ended_without_result(status, result)
        if error is not None:
            return jsonrpc.encode_error(0, INTERNAL_ERROR, error)
        outcome = task_outcome(result, view.prefix)
        if self.guard is not None:
            call = Call(background, self._pool.snapshot, backend=backend)
            outcome = await filter_result(self.guard, call, view, tool, outcome, tool=True)
        return jsonrpc.encode_response(0, outcome)

    def _require(self, backend: str) -> BackendView:
        view = self._backend(backend)
        if view is None:
            raise ProtocolError(f"backend {backend!r} is no longer configured", INTERNAL_ERROR)
        return view

    async def _cancel(self, backend: str, task_id: str) -> None:
        """``tasks/cancel`` to the backend, shielded and bounded (rule 4)."""
        view = self._backend(backend)
        if view is None:
            return
        with trio.CancelScope(shield=True), trio.move_on_after(CANCEL_GRACE):
            try:
                await view.request("tasks/cancel", mcp.encode({"taskId": task_id}))
            except GatewayError as exc:
                logger.info("task.backend_cancel_failed", backend=backend, error=str(exc)[:256])


__all__ = [
    "BackendTasks",
    "created_task",
    "ended_without_result",
    "poll_interval",
    "runs_tasks",
    "task_outcome",
]
