"""A 2026-07-28 backend's own tasks, routed to it by a gateway id kept in the state store.

The rules and the route record are ``protocol/stateless/native_tasks.py``;
this module is their driver, hooked into ``TaskRunner.serve``
(``router/stateless/gateway_tasks.py``).

1. A task call (the tool supports tasks, the request declared the
   extension) of a tool whose 2026-07-28 backend declares the extension
   goes to the backend as an ordinary held ``tools/call`` (guardrails,
   response cache, consent, MRTR rounds all as for any call) whose envelope
   declares the extension (``ModernRequest.task_extension``). The retry of
   an MRTR round of such a call declares it too (``retry``): the backend
   finishes its rounds before it makes the task (sep-2663).
2. When the backend answers its own ``CreateTaskResult``, the route (the
   backend, its task id, the principal) is put in the store under a new
   gateway id with the task's ttl, and only then does the host get the
   result under that id. A store that cannot keep the route ends the
   backend's task (``tasks/cancel``, shielded, at most 5 s) and the host
   gets -32603: a task nobody can reach again must not run on.
3. ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` of a gateway id
   (``n.``-marked) read the route from the store and go to the owning
   backend, from any replica: nothing of a task is kept in memory. An id
   the store does not hold, or another principal's, is -32602 as an
   unknown one. ``tasks/get``'s inlined ``result`` gets the namespacing of
   any tool result and passes the guardrail result chain (``filtering``
   rule 2); ``tasks/update`` and ``tasks/cancel`` answer the empty ack.
4. The backend's errors reach the host in the gateway's id; a backend that
   is down, gone from the config or slow is -32603 naming it.

A backend's task is not followed by the gateway (no poll, no
``notifications/tasks``): the host's own polls reach the backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec
import structlog
import trio

from gateway.catalog.naming import public_uri
from gateway.catalog.snapshot import Kind
from gateway.errors import (
    INTERNAL_ERROR,
    GatewayError,
    LocalProtocolError,
    RemoteProtocolError,
    to_protocol_error,
)
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.stateless import backend_leg
from gateway.protocol.stateless.native_tasks import (
    NativeRoute,
    backend_params,
    backend_task,
    declares_extension,
    decode_route,
    encode_route,
    for_host,
    in_public_text,
    is_native_id,
    new_task_id,
    route_key,
    route_ttl,
    undeclared_need,
    unknown_task,
    with_task_extension,
)
from gateway.protocol.stateless.tasks import TASK_SUPPORT_MARK, declares_tasks, task_support
from gateway.router.context import Call
from gateway.router.filtering import filter_result
from gateway.store.api import StoreUnavailable

if TYPE_CHECKING:
    from gateway.backends.state import BackendView
    from gateway.catalog.snapshot import Snapshot
    from gateway.guardrails.chains import Guardrails
    from gateway.protocol.jsonrpc import Request
    from gateway.router.context import ModernRequest
    from gateway.router.neighbours import PoolView
    from gateway.router.stateless.held_calls import HeldCalls, Run
    from gateway.store.api import Store

logger = structlog.get_logger("gateway.tasks")
EMPTY_ACK: Final = msgspec.Raw(msgspec.json.encode({"resultType": "complete"}))
CANCEL_GRACE: Final = 5.0


class NativeTasks:
    """Routes a 2026-07-28 backend's own tasks by the gateway ids in the store (rules 1-4).

    Args:
        held: the held-call table (a task call is a held call, rule 1).
        run: routes one modern request to the end (``Router._run_modern``).
        pool: the backends by name and the catalog.

    ``store`` is set once the gateway's state store is open; without one no
    backend's task is routed here (its task tools stay gateway tasks).
    """

    def __init__(self, held: HeldCalls, run: Run, pool: PoolView) -> None:
        self._held = held
        self._run = run
        self._pool = pool
        self.store: Store | None = None
        # The router's guardrail chains (``filtering`` rule 2 on inlined results).
        self.guard: Guardrails | None = None

    def takes(self, backend: str) -> bool:
        """Rule 1: whether ``backend`` runs task calls itself (2026-07-28, extension declared)."""
        view = self._pool.backends.get(backend)
        info = view.info if view is not None else None
        return (
            self.store is not None
            and info is not None
            and info.modern
            and declares_extension(info.capabilities)
        )

    async def serve(
        self, request: ModernRequest, message: Request, params: dict[str, Any], backend: str
    ) -> bytes:
        """Rules 1, 2: the task call, the backend's ``CreateTaskResult`` under our id.

        Raises:
            ModernProtocolError: as ``HeldCalls.serve``.
        """
        tool = str(params.get("name"))

        async def run(held_request: ModernRequest, msg: Request, own: dict[str, Any]) -> bytes:
            """The held call's work: the backend's answer, a task of its kept under our id."""
            held_request.task_extension = True
            reply = await self._run(held_request, msg, own)
            return await self._routed(held_request, msg, reply, backend, tool)

        return await self._held.serve(request, message, params, run)

    async def retry(
        self, request: ModernRequest, message: Request, params: dict[str, Any], view: Snapshot
    ) -> bytes | None:
        """Rule 1 for an MRTR retry: a task call's later round, which may become the task.

        sep-2663 has a backend finish its rounds before its ``CreateTaskResult``,
        so the retry of a task call to such a backend declares the extension
        too. None when the retry is not one (the ordinary held path serves it).

        Raises:
            ModernProtocolError: as ``HeldCalls.serve``.
        """
        name = params.get("name")
        if message.method != "tools/call" or not isinstance(name, str):
            return None
        if "requestState" not in params or not declares_tasks(request.capabilities):
            return None
        entry = view.resolve(Kind.TOOLS, name)
        if entry is None or TASK_SUPPORT_MARK not in entry.encoded:
            return None
        tool = mcp.decode_object(msgspec.Raw(entry.encoded))
        if tool is None or task_support(tool) == "forbidden" or not self.takes(entry.backend):
            return None
        return await self.serve(request, message, params, entry.backend)

    async def _routed(
        self, request: ModernRequest, message: Request, reply: bytes, backend: str, tool: str
    ) -> bytes:
        try:
            answer = jsonrpc.decode(reply)
        except Exception:
            return reply
        if not isinstance(answer, jsonrpc.Response):
            return reply
        created = mcp.decode_object(answer.result)
        task_id = backend_task(created)
        if created is None or task_id is None:
            return reply  # a result, an MRTR round: the call's own answer
        gateway_id = new_task_id()
        capabilities = with_task_extension(
            backend_leg.bridgeable_capabilities(request.capabilities)
        )
        route = NativeRoute(
            backend=backend,
            task_id=task_id,
            principal=request.principal,
            tool=tool,
            capabilities=capabilities,
        )
        store = self.store
        assert store is not None  # takes() was asked first
        try:
            await store.put(route_key(gateway_id), encode_route(route), ttl=route_ttl(created))
        except StoreUnavailable as exc:
            logger.warning("task.native_unroutable", backend=backend, error=str(exc)[:256])
            await self._cancel(route)
            return jsonrpc.encode_error(
                message.id,
                INTERNAL_ERROR,
                f"the state store could not keep the task of backend {backend!r}, "
                "so it was cancelled; try again, or call without the tasks extension",
            )
        logger.info("task.native_created", task=gateway_id[:10], backend=backend, tool=tool)
        return jsonrpc.encode_response(message.id, mcp.encode(for_host(created, gateway_id)))

    async def method(
        self, request: ModernRequest, message: Request, params: dict[str, Any]
    ) -> bytes | None:
        """Rule 3: a tasks method of a routed id; None when the id is not one of ours."""
        task_id = params.get("taskId")
        if not is_native_id(task_id) or self.store is None:
            return None
        assert isinstance(task_id, str)
        try:
            route = await self._route(task_id, request.principal)
            answer = await self._forward(request, message, params, route, task_id)
        except LocalProtocolError as exc:
            return jsonrpc.encode_error(message.id, exc.code, exc.message, exc.data)
        except GatewayError as exc:
            error = to_protocol_error(exc)
            return jsonrpc.encode_error(message.id, error.code, error.message, error.data)
        return jsonrpc.encode_response(message.id, answer)

    async def _route(self, task_id: str, principal: str | None) -> NativeRoute:
        assert self.store is not None
        try:
            raw = await self.store.get(route_key(task_id))
        except StoreUnavailable as exc:
            raise LocalProtocolError(
                f"the state store is unavailable, so task {task_id[:64]} cannot be reached "
                "now; try again",
                INTERNAL_ERROR,
            ) from exc
        route = decode_route(raw) if raw is not None else None
        if route is None or route.principal != principal:
            raise unknown_task(task_id)
        return route

    async def _forward(
        self,
        request: ModernRequest,
        message: Request,
        params: dict[str, Any],
        route: NativeRoute,
        task_id: str,
    ) -> msgspec.Raw:
        view = self._view(route.backend)
        body = backend_leg.with_envelope(
            backend_params(params, route),
            capabilities=with_task_extension(
                backend_leg.bridgeable_capabilities(request.capabilities)
            ),
        )
        try:
            result = await view.request(message.method, mcp.encode(body), client=request.session_id)
        except RemoteProtocolError as exc:
            raise LocalProtocolError(
                in_public_text(exc.message, route, task_id), exc.code, exc.data
            ) from None
        except GatewayError as exc:  # down, timed out
            raise LocalProtocolError(
                f"backend {route.backend}: {exc}", INTERNAL_ERROR, data={"backend": route.backend}
            ) from None
        if message.method != "tasks/get":
            return EMPTY_ACK  # rule 3: update and cancel are acks
        return await self._detailed(request, view, route, task_id, result)

    async def _detailed(
        self,
        request: ModernRequest,
        view: BackendView,
        route: NativeRoute,
        task_id: str,
        result: msgspec.Raw,
    ) -> msgspec.Raw:
        """The backend's ``tasks/get`` answer as the host gets it (rules 2, 3)."""
        detailed = mcp.decode_object(result)
        if detailed is None:
            raise LocalProtocolError(
                f"backend {route.backend} answered tasks/get with something that is not an object",
                INTERNAL_ERROR,
            )
        need = undeclared_need(detailed, route)
        if need is not None:
            raise LocalProtocolError(
                f"backend {route.backend} asks inside its task for {need}, which the call "
                "that created the task did not declare",
                INTERNAL_ERROR,
                data={"backend": route.backend},
            )
        out = for_host(detailed, task_id)
        inner = out.get("result")
        if isinstance(inner, dict):
            prefix = view.prefix
            shown = mcp.rewrite_call_result(mcp.encode(inner), lambda uri: public_uri(prefix, uri))
            if self.guard is not None:
                call = Call(request, self._pool.snapshot, backend=route.backend)
                shown = await filter_result(self.guard, call, view, route.tool, shown, tool=True)
            out["result"] = msgspec.json.decode(shown)
        return mcp.encode(out)

    def _view(self, backend: str) -> BackendView:
        view = self._pool.backends.get(backend)
        if view is None:
            raise LocalProtocolError(
                f"backend {backend!r} of this task is no longer configured",
                INTERNAL_ERROR,
                data={"backend": backend},
            )
        return view

    async def _cancel(self, route: NativeRoute) -> None:
        """``tasks/cancel`` for a task nobody can reach (rule 2), shielded and bounded."""
        view = self._pool.backends.get(route.backend)
        if view is None:
            return
        body = backend_leg.with_envelope(
            {"taskId": route.task_id}, capabilities=with_task_extension({})
        )
        with trio.CancelScope(shield=True), trio.move_on_after(CANCEL_GRACE):
            try:
                await view.request("tasks/cancel", mcp.encode(body))
            except GatewayError as exc:
                logger.info(
                    "task.native_cancel_failed", backend=route.backend, error=str(exc)[:256]
                )


__all__ = ["NativeTasks"]
