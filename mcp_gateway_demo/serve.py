"""What both demos share: running an SDK server on stdio the way a gateway's child should.

The SDK does the protocol; this module adds only what a demo backend needs on
top: a clean exit on SIGTERM (the stdio transport's second step), protocol
messages alone on stdout, client-visible logging that starts once the client
asks for it, unknown tools answered as the protocol error the spec calls them,
and ``DEMO_PROTOCOL_VERSION`` to stand in for a server of an older revision.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from io import TextIOWrapper
from typing import TYPE_CHECKING, Any, Final

import anyio
import mcp.types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import McpError
from mcp.shared.message import SessionMessage

if TYPE_CHECKING:
    from collections.abc import Collection
    from types import FrameType

    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = [
    "LOG_LEVELS",
    "RESOURCE_NOT_FOUND",
    "ClientLog",
    "invalid_params",
    "prompt_argument",
    "resource_not_found",
    "reject_unknown_tools",
    "strict_tool",
    "run",
]

PROTOCOL_VERSION_ENV: Final = "DEMO_PROTOCOL_VERSION"
LOG_LEVEL_ENV: Final = "DEMO_LOG_LEVEL"
# MCP's resource-not-found (server/resources, Error Handling); the SDK has no constant.
RESOURCE_NOT_FOUND: Final = -32002
# RFC 5424 severities in increasing order, as logging/setLevel names them.
LOG_LEVELS: Final[tuple[types.LoggingLevel, ...]] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)

_log = logging.getLogger("mcp_gateway_demo")


def invalid_params(message: str) -> McpError:
    """Return the -32602 error for a request whose params name something that is not there."""
    return McpError(types.ErrorData(code=types.INVALID_PARAMS, message=message))


def strict_tool(
    name: str,
    title: str,
    description: str,
    hints: dict[str, bool],
    properties: dict[str, dict[str, Any]] | None = None,
    output_schema: dict[str, Any] | None = None,
) -> types.Tool:
    """Declare a tool whose every argument is required and no other is accepted.

    The SDK checks calls against this ``inputSchema``, so a handler can index
    its arguments without checking them again.

    Args:
        name: the wire name.
        title: a display name, also the annotations' title.
        description: what the tool is for, for the model.
        hints: the ``ToolAnnotations`` hints (``readOnlyHint`` and so on).
        properties: the JSON Schema of each argument, in order.
        output_schema: the JSON Schema of its structured result, if any.

    Returns:
        The tool, for ``tools/list``.
    """
    properties = properties or {}
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if properties:
        schema["required"] = list(properties)
    return types.Tool(
        name=name,
        title=title,
        description=description,
        inputSchema=schema,
        outputSchema=output_schema,
        annotations=types.ToolAnnotations(title=title, **hints),
    )


def prompt_argument(
    name: str, title: str, description: str, *, required: bool = True
) -> types.PromptArgument:
    """Declare a prompt argument with a display ``title``.

    The spec's PromptArgument has one (BaseMetadata); the SDK's model does not
    declare it but keeps extra fields, so it is passed through validation.
    """
    fields = {"name": name, "title": title, "description": description, "required": required}
    return types.PromptArgument.model_validate(fields)


def resource_not_found(uri: str) -> McpError:
    """Return the -32002 error for a ``resources/read`` of a URI that names nothing."""
    return McpError(
        types.ErrorData(
            code=RESOURCE_NOT_FOUND, message=f"Resource not found: {uri}", data={"uri": uri}
        )
    )


class ClientLog:
    """Log messages for the client (``notifications/message``), once it asked for them.

    Nothing is sent until the client calls ``logging/setLevel``: the spec lets
    a server choose, and silence keeps the demos' streams predictable.

    Args:
        server: the server whose ``logging/setLevel`` this handles.
        logger: the ``logger`` name the messages carry.
    """

    def __init__(self, server: Server[Any, Any], logger: str) -> None:
        self._server = server
        self._logger = logger
        self.level: types.LoggingLevel | None = None
        server.set_logging_level()(self._set_level)

    async def _set_level(self, level: types.LoggingLevel) -> None:
        self.level = level

    async def send(self, level: types.LoggingLevel, data: Any) -> None:
        """Send ``data`` at ``level`` if the client asked for this level or a lower one.

        Call it from a request handler: the message goes out ahead of that
        request's answer.
        """
        if self.level is None or LOG_LEVELS.index(level) < LOG_LEVELS.index(self.level):
            return
        session = self._server.request_context.session
        await session.send_log_message(level, data, logger=self._logger)


def reject_unknown_tools(server: Server[Any, Any], names: Collection[str]) -> None:
    """Answer ``tools/call`` of a tool not in ``names`` with -32602, as the spec asks.

    The SDK's handler turns every failure, this one included, into an
    ``isError`` result; the check runs before it. Call after ``call_tool``.
    """
    call_tool = server.request_handlers[types.CallToolRequest]

    async def _guarded(request: types.CallToolRequest) -> types.ServerResult:
        if request.params.name not in names:
            raise invalid_params(f"Unknown tool: {request.params.name}")
        return await call_tool(request)

    server.request_handlers[types.CallToolRequest] = _guarded


async def _pin_version(
    source: MemoryObjectReceiveStream[SessionMessage | Exception],
    sink: MemoryObjectSendStream[SessionMessage | Exception],
    version: str,
) -> None:
    # The SDK answers initialize with the requested version when it knows it;
    # asking on the client's behalf for the pinned one makes it answer that.
    async with source, sink:
        async for item in source:
            if isinstance(item, SessionMessage):
                request = item.message.root
                if isinstance(request, types.JSONRPCRequest) and request.method == "initialize":
                    request.params = {**(request.params or {}), "protocolVersion": version}
            await sink.send(item)


async def _serve(server: Server[Any, Any], options: Any, pinned: str) -> None:
    stdout = anyio.wrap_file(TextIOWrapper(sys.stdout.buffer, encoding="utf-8"))
    # A stray print() must not corrupt the protocol stream.
    sys.stdout = sys.stderr
    async with stdio_server(stdout=stdout) as (read_stream, write_stream):
        if not pinned:
            await server.run(read_stream, write_stream, options)
            return
        sink, source = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_pin_version, read_stream, sink, pinned)
            await server.run(source, write_stream, options)


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    # Exit right here rather than raise into the event loop: a demo that
    # hangs on SIGTERM costs its gateway the SIGKILL grace period, and every
    # note is already on disk (or only ever was in memory).
    os.write(2, b"demo.stopped reason=sigterm\n")
    os._exit(0)


def run(server: Server[Any, Any], *, resources_changed: bool = False) -> None:
    """Serve ``server`` on this process's stdin/stdout until EOF, SIGTERM or Ctrl-C.

    Every one of those endings exits with status 0. Logs go to stderr at
    ``DEMO_LOG_LEVEL`` (default ``INFO``; the SDK's own per-request lines only
    at ``DEBUG``).

    Args:
        server: the demo, with its handlers registered.
        resources_changed: whether its resource list changes at run time, so
            ``notifications/resources/list_changed`` is announced.
    """
    level = os.environ.get(LOG_LEVEL_ENV, "INFO").upper()
    logging.basicConfig(
        stream=sys.stderr, level=level, format="%(asctime)s %(levelname)s %(message)s"
    )
    if level != "DEBUG":
        logging.getLogger("mcp").setLevel(logging.WARNING)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    options = server.create_initialization_options(
        NotificationOptions(resources_changed=resources_changed)
    )
    _log.info("demo.started server=%s pid=%d", server.name, os.getpid())
    reason = "eof"
    try:
        anyio.run(_serve, server, options, os.environ.get(PROTOCOL_VERSION_ENV, ""))
    except KeyboardInterrupt:
        reason = "sigint"
    _log.info("demo.stopped server=%s reason=%s", server.name, reason)
    # Every answer is flushed and every note written. Skip the interpreter's
    # teardown of the SDK's hundreds of modules: it takes longer than a
    # gateway's default stop grace on a busy machine, and buys nothing here.
    logging.shutdown()
    sys.stderr.flush()
    os._exit(0)
