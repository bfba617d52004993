"""Test peer "tasks": a handshake-era backend that runs its own tasks (SDK 1.x experimental).

The conformance suite's ``tasks-mrtr-composition`` wants a tool that first
asks for input in ordinary MRTR rounds and only then becomes a task. The
gateway tells the two apart by the backend's own 2025-11-25 task support
(docs/eras.md, "Tasks": a backend's own task): it sends this server the call
task-augmented; an ``elicitation/create`` before the ``CreateTaskResult`` is a
synchronous round, the ``CreateTaskResult`` ends it, and ``tasks/result``
brings the task's outcome.

This is its own process, not a tool of ``conformance_backend.py``: declaring
``tasks.requests.tools.call`` there would make the gateway hand every task
tool of that backend to the backend, and ``confirm_delete``
(``tasks-mrtr-input``) must stay a gateway task that asks during the task.

Tools (``server.experimental.enable_tasks`` declares the capability):

* ``test_tool_with_task`` (``taskSupport: required``): asks for ``name``
  under the input key ``user_name``, then ``run_task``; the task sleeps
  ``seconds`` (default 0) and answers ``Hello, <name>!``.
* ``ask_in_task`` (``required``): no question first; the task itself asks
  (``ServerTaskContext.elicit``: status ``input_required``, the question on
  ``tasks/result``) and answers ``Confirmed: <name>``.
* ``backend_task_fails`` (``required``): no question; the task fails.

Run: ``python tests/servers/task_backend.py [--log FILE]`` (stdio). With
``--log``, one line per event the tests look for: ``asked``, ``task started``,
``cancelled <taskId>`` (the backend's ``tasks/cancel`` handler ran).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from mcp.server.experimental.task_context import ServerTaskContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import ServerMessageMetadata

SERVER_NAME = "mcp-gateway-task-backend"
# The inputRequests key a modern host sees (gateway/protocol/stateless/mrtr.py convention).
INPUT_KEY_META = "dev.mcp-gateway/inputKey"
REQUIRED = types.ToolExecution(taskSupport="required")
NAME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}

server: Server[Any, Any] = Server(SERVER_NAME, version="1.0.0")
server.experimental.enable_tasks()
LOG: list[Path] = []


def _log(event: str) -> None:
    for path in LOG:
        with path.open("a") as out:
            out.write(event + "\n")


TOOLS = [
    types.Tool(
        name="test_tool_with_task",
        description="Ask for a name (an MRTR round), then greet it in a task.",
        inputSchema={"type": "object", "properties": {"seconds": {"type": "number"}}},
        execution=REQUIRED,
    ),
    types.Tool(
        name="ask_in_task",
        description="A task that asks for a name once it is a task.",
        inputSchema={"type": "object", "properties": {}},
        execution=REQUIRED,
    ),
    types.Tool(
        name="backend_task_fails",
        description="A task of the backend's own that fails.",
        inputSchema={"type": "object", "properties": {}},
        execution=REQUIRED,
    ),
]


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    return TOOLS


async def _ask_name() -> str:
    """``elicitation/create`` on the call itself, before any task exists."""
    ctx = server.request_context
    params = types.ElicitRequestFormParams(
        message="What is your name?",
        requestedSchema=NAME_SCHEMA,
        _meta={INPUT_KEY_META: "user_name"},
    )
    answer = await ctx.session.send_request(
        types.ServerRequest(types.ElicitRequest(params=params)),
        types.ElicitResult,
        metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
    )
    _log("asked")
    content = answer.content or {}
    return str(content.get("name", answer.action))


@server.call_tool()
async def call_tool(name: str, arguments: dict[str, Any]) -> Any:
    ctx = server.request_context
    if not ctx.experimental.is_task:
        raise ValueError(f"{name} runs only as a task (send it task-augmented)")
    if name == "test_tool_with_task":
        who = await _ask_name()
        seconds = float(arguments.get("seconds", 0))

        async def greet(task: ServerTaskContext) -> types.CallToolResult:
            _log("task started")
            await anyio.sleep(min(seconds, 60))
            text = types.TextContent(type="text", text=f"Hello, {who}!")
            return types.CallToolResult(content=[text])

        return await ctx.experimental.run_task(greet)
    if name == "ask_in_task":

        async def confirm(task: ServerTaskContext) -> types.CallToolResult:
            _log("task started")
            answer = await task.elicit("Who confirms?", NAME_SCHEMA)
            _log("asked in task")
            who = (answer.content or {}).get("name", answer.action)
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"Confirmed: {who}")]
            )

        return await ctx.experimental.run_task(confirm)
    if name == "backend_task_fails":

        async def fail(task: ServerTaskContext) -> types.CallToolResult:
            raise RuntimeError("backend_task_fails failed, as it always does")

        return await ctx.experimental.run_task(fail)
    raise ValueError(f"Unknown tool: {name}")


_cancel_task_handler = server.request_handlers[types.CancelTaskRequest]


async def _logged_cancel(request: Any) -> Any:
    """The SDK's own ``tasks/cancel``, logged (the tests check it was reached)."""
    _log(f"cancelled {request.params.taskId}")
    return await _cancel_task_handler(request)


server.request_handlers[types.CancelTaskRequest] = _logged_cancel


async def serve_stdio() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--log", type=Path, help="append the events tests look for here")
    args = parser.parse_args(argv)
    if args.log is not None:
        LOG.append(args.log)
    anyio.run(serve_stdio)


if __name__ == "__main__":
    main(sys.argv[1:])
