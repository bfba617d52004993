"""A 2026-07-28 backend that runs tasks itself: SDK 2.x ``MCPServer`` with the tasks extension.

Run with ``.venv-sdk2/bin/python tests/servers/modern_tasks.py [stdio|http PORT]``.
Neither official SDK serves ``io.modelcontextprotocol/tasks`` yet (SDK 2.x
has the extension mechanism, ``mcp.server.extension``, and no tasks; the
TypeScript SDK 2.4 only knows the routing header), so this backend is the
SDK's own server, envelope, transports and extension plumbing with a small
tasks extension on top (``ext:`` tasks, sep-2663): ``tools/call`` of a task
tool from a request that declared the extension answers a flat
``CreateTaskResult``; ``tasks/get``, ``tasks/update`` and ``tasks/cancel``
serve it.

Task progress is counted in polls, not time, so tests never depend on
machine speed: ``countdown`` is ``working`` for its first ``polls``
``tasks/get`` and then ``completed`` (its result ``done: <its id>``,
followed by ``for <tag>`` when called with a ``tag``); ``confirm`` is ``input_required``
(one form elicitation under the key ``confirm``) until ``tasks/update``
answers it, then ``completed`` with the answer; ``round_then_task`` asks a
name in an MRTR round first and becomes a task on the retry (sep-2663's
composition), completing with the answer and the round's state at the
first ``tasks/get``; ``tasks/cancel`` ends a
task ``cancelled``. Every task call and tasks method is appended to the
file ``MODERN_TASKS_RECORD`` names (one JSON object a line: the method,
the task id, whether the request declared the extension), so tests see
what reached the backend.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolRequestParams, RequestParams
from pydantic import ConfigDict

EXTENSION: Final = "io.modelcontextprotocol/tasks"
CAPABILITIES_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
TASK_TOOLS: Final = {"countdown": "optional", "confirm": "required", "round_then_task": "optional"}
TTL_MS: Final = 60_000
_ids = itertools.count(1)
_tasks: dict[str, dict[str, Any]] = {}


class TaskParams(RequestParams):
    """``tasks/get``, ``tasks/update`` and ``tasks/cancel`` params (extra keys kept)."""

    model_config = ConfigDict(extra="allow")
    taskId: str  # the wire name


def _record(method: str, task_id: str | None, ctx: Any, **more: Any) -> None:
    path = os.environ.get("MODERN_TASKS_RECORD")
    if not path:
        return
    entry = {"method": method, "taskId": task_id, "declared": _declared(ctx), **more}
    with Path(path).open("a", encoding="utf-8") as out:
        out.write(json.dumps(entry) + "\n")


def _declared(ctx: Any) -> bool:
    meta = ctx.meta if isinstance(ctx.meta, dict) else {}
    caps = meta.get(CAPABILITIES_KEY)
    extensions = caps.get("extensions") if isinstance(caps, dict) else None
    return isinstance(extensions, dict) and EXTENSION in extensions


NAME_REQUEST: Final = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _view(task: dict[str, Any]) -> dict[str, Any]:
    out = {
        "taskId": task["taskId"],
        "status": task["status"],
        "createdAt": task["createdAt"],
        "lastUpdatedAt": task["lastUpdatedAt"],
        "ttlMs": TTL_MS,
        "pollIntervalMs": 10,
    }
    if task["status"] == "input_required":
        out["inputRequests"] = {
            "confirm": {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": "Go ahead?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"ok": {"type": "boolean"}},
                    },
                },
            }
        }
    if task["status"] == "completed":
        out["result"] = task["result"]
    return out


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def _set(task: dict[str, Any], status: str, result: dict[str, Any] | None = None) -> None:
    task["status"] = status
    task["lastUpdatedAt"] = _now()
    if result is not None:
        task["result"] = result


class Tasks(Extension):
    """The tasks extension: task tools answer ``CreateTaskResult``; the three methods."""

    identifier = EXTENSION

    def methods(self) -> list[MethodBinding]:
        """``tasks/get``, ``tasks/update``, ``tasks/cancel``."""
        return [
            MethodBinding("tasks/get", TaskParams, self._get),
            MethodBinding("tasks/update", TaskParams, self._update),
            MethodBinding("tasks/cancel", TaskParams, self._cancel),
        ]

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: Any, call_next: Any
    ) -> Any:
        """A task tool called by a request that declared the extension becomes a task."""
        if params.name not in TASK_TOOLS or not _declared(ctx):
            if params.name in TASK_TOOLS:
                _record("tools/call", None, ctx, name=params.name)
            return await call_next(ctx)
        answer = (params.input_responses or {}).get("user_name")
        if params.name == "round_then_task" and answer is None:
            # sep-2663: the MRTR round first, synchronously; the task on the retry.
            _record("tools/call", None, ctx, name=params.name)
            return {
                "resultType": "input_required",
                "inputRequests": {"user_name": NAME_REQUEST},
                "requestState": "round-1",
            }
        task_id = f"backend-task-{next(_ids)}"
        now = _now()
        arguments = params.arguments or {}
        task = {
            "taskId": task_id,
            "tool": params.name,
            "status": "input_required" if params.name == "confirm" else "working",
            "createdAt": now,
            "lastUpdatedAt": now,
            "polls": int(arguments.get("polls", 1)),
            "tag": str(arguments.get("tag", "")),
        }
        if params.name == "round_then_task":
            task["tool"] = "countdown"  # it ends like one, with the round's answer
            task["polls"] = 0
            shown = answer.model_dump(mode="json", by_alias=True, exclude_none=True)
            task["answer"] = {"answer": shown, "state": params.request_state}
        _tasks[task_id] = task
        _record("tools/call", task_id, ctx, name=params.name)
        view = _view(task)
        view.pop("inputRequests", None)
        return {"resultType": "task", **view}

    def _task(self, params: TaskParams) -> dict[str, Any]:
        task = _tasks.get(params.taskId)
        if task is None:
            raise MCPError(-32602, f"unknown taskId: {params.taskId}")
        return task

    async def _get(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        task = self._task(params)
        _record("tasks/get", params.taskId, ctx)
        if task["tool"] == "countdown" and task["status"] == "working":
            if task["polls"] <= 0:
                text = json.dumps(task["answer"]) if "answer" in task else f"done: {task['taskId']}"
                if task["tag"]:
                    text += f" for {task['tag']}"
                _set(task, "completed", _text(text))
            task["polls"] -= 1
        return {"resultType": "complete", **_view(task)}

    async def _update(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        task = self._task(params)
        responses = (params.model_extra or {}).get("inputResponses") or {}
        _record("tasks/update", params.taskId, ctx, inputResponses=responses)
        answer = responses.get("confirm") if isinstance(responses, dict) else None
        if task["status"] == "input_required" and isinstance(answer, dict):
            _set(task, "completed", _text(json.dumps({"answer": answer})))
        return {"resultType": "complete"}

    async def _cancel(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        task = self._task(params)
        _record("tasks/cancel", params.taskId, ctx)
        if task["status"] not in ("completed", "failed", "cancelled"):
            _set(task, "cancelled")
        return {"resultType": "complete"}


async def task_support(ctx: Any, call_next: Any) -> Any:
    """Middleware: the task tools' ``execution.taskSupport`` on ``tools/list``.

    The SDK's 2026-07-28 result sieve drops ``Tool.execution`` (a core field
    of 2025-11-25 only); the tasks extension is what gives it meaning again,
    so it is put back on the wire form here.
    """
    result = await call_next(ctx)
    if ctx.method == "tools/list" and isinstance(result, dict):
        for tool in result.get("tools", []):
            support = TASK_TOOLS.get(tool.get("name"))
            if support is not None:
                tool["execution"] = {"taskSupport": support}
    return result


server = MCPServer("modern-tasks", extensions=[Tasks()], middleware=[task_support])


@server.tool()
def countdown(polls: int = 1, tag: str = "") -> str:
    """Counts down (a task when the caller declares the extension); ``tag`` ends the result."""
    return f"done at once ({polls})"


@server.tool()
def confirm() -> str:
    """Asks for confirmation inside its task (task only)."""
    return "confirmed"


@server.tool()
def round_then_task() -> str:
    """Asks a name in an MRTR round, then becomes a task (when the caller declares it)."""
    return "no task"


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers (no task)."""
    return str(a + b)


def main() -> None:
    """Serve on stdio, or on Streamable HTTP at 127.0.0.1:PORT/mcp."""
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
