"""Test peer "conformance": what the official MCP conformance suite's server scenarios call.

``@modelcontextprotocol/conformance`` (pinned in tests/conformance/package.json)
connects to one MCP endpoint and calls fixed names: the tools ``test_simple_text``,
``test_image_content``, ..., the resources ``test://static-text``, ..., the
prompts ``test_simple_prompt``, .... This server provides every one of them,
named exactly as the suite's scenarios ask, so that the suite can run through
the gateway with this server mounted unprefixed (``prefix: ""``).

Built on the official SDK's low-level ``Server`` so that every schema is the
one the suite checks (``json_schema_2020_12_tool`` keeps ``$schema``,
``$defs`` and ``additionalProperties``) and the ``resources.subscribe``
capability is declared.

Run it as

* ``python tests/servers/conformance_backend.py``: MCP over stdio (how the
  gateway runs it);
* ``python tests/servers/conformance_backend.py --http PORT``: MCP over
  Streamable HTTP on ``http://127.0.0.1:PORT/mcp``, with an event store (SSE
  priming events, resumption after ``test_reconnection`` closes its stream)
  and DNS rebinding protection, for a baseline run of the suite without the
  gateway.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import struct
import sys
import wave
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.session import ServerSession
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.shared.exceptions import McpError
from mcp.shared.message import ServerMessageMetadata
from pydantic import AnyUrl

SERVER_NAME = "mcp-gateway-conformance-backend"


# --------------------------------------------------------------------------
# Fixed test data, made here rather than shipped as opaque base64.


def _png_1x1_red() -> bytes:
    """A valid 1x1 red RGB PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit, RGB
    pixels = zlib.compress(b"\x00\xff\x00\x00")  # filter byte 0, then one red pixel
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def _wav_silence() -> bytes:
    """A valid WAV file: 10 ms of 8 kHz mono 16-bit silence."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\x00\x00" * 80)
    return buffer.getvalue()


PNG_BYTES = _png_1x1_red()
PNG_BASE64 = base64.b64encode(PNG_BYTES).decode("ascii")
WAV_BASE64 = base64.b64encode(_wav_silence()).decode("ascii")

STATIC_TEXT = "This is the content of the static text resource."
WATCHED_TEXT = "Watched resource content"
TEMPLATE_URI = "test://template/{id}/data"
TEMPLATE_PREFIX, TEMPLATE_SUFFIX = "test://template/", "/data"

# json-schema-2020-12 (SEP-1613): these keywords must reach the client untouched.
JSON_SCHEMA_2020_12 = "https://json-schema.org/draft/2020-12/schema"
JSON_SCHEMA_TOOL_INPUT: dict[str, Any] = {
    "$schema": JSON_SCHEMA_2020_12,
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
    # 0.2.x (SEP-2106): composition, conditional and anchor keywords survive too.
    "allOf": [{"anyOf": [{"required": ["name"]}, {"required": ["address"]}, {}]}],
    "if": {"properties": {"name": {"const": "anonymous"}}, "required": ["name"]},
    "then": {"properties": {"address": {"type": "object"}}},
    "else": {"properties": {"name": {"type": "string"}}},
}
JSON_SCHEMA_TOOL_INPUT["$defs"]["address"]["$anchor"] = "address"

# http-custom-header-server-validation (0.2.x, SEP-2243): arguments mirrored in
# Mcp-Param-* headers, which the gateway checks for a modern host.
CUSTOM_HEADERS_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "priority": {"type": "integer", "x-mcp-header": "Priority"},
        "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
        "query": {"type": "string"},
    },
}

ELICITATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}

# elicitation-sep1034-defaults: a default for every primitive type.
SEP1034_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verified user", "default": True},
    },
}

# elicitation-sep1330-enums: all five enum shapes.
SEP1330_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}

PROMPT_ARG_VALUES = ["paris", "park", "party", "test", "testValue1", "testValue2"]
TEMPLATE_ID_VALUES = ["1", "123", "42"]

LOG_LEVELS: list[types.LoggingLevel] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
]

NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}


# --------------------------------------------------------------------------
# Per-session state (the HTTP mode serves many clients from one process).


@dataclass
class SessionState:
    """What one client session has set: its log level and subscriptions."""

    log_level: types.LoggingLevel = "debug"
    subscriptions: set[str] = field(default_factory=set)


_states: dict[int, SessionState] = {}


def _state(session: ServerSession) -> SessionState:
    return _states.setdefault(id(session), SessionState())


class ConformanceServer(Server[Any, Any]):
    """The low-level server, declaring ``resources.subscribe`` (it is implemented)."""

    def get_capabilities(
        self,
        notification_options: NotificationOptions,
        experimental_capabilities: dict[str, dict[str, Any]],
    ) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(notification_options, experimental_capabilities)
        if capabilities.resources is not None:
            capabilities.resources.subscribe = True
        return capabilities


server = ConformanceServer(
    SERVER_NAME,
    version="1.0.0",
    instructions="Implements what the MCP conformance suite's server scenarios call.",
)


# --------------------------------------------------------------------------
# Tools


@dataclass
class ToolDef:
    tool: types.Tool
    run: Callable[[dict[str, Any]], Any]


TOOLS: dict[str, ToolDef] = {}


def tool(
    name: str, description: str, input_schema: dict[str, Any] | None = None
) -> Callable[[Callable[[dict[str, Any]], Any]], Callable[[dict[str, Any]], Any]]:
    def register(fn: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
        TOOLS[name] = ToolDef(
            types.Tool(name=name, description=description, inputSchema=input_schema or NO_ARGS),
            fn,
        )
        return fn

    return register


def _text(text: str) -> list[types.ContentBlock]:
    return [types.TextContent(type="text", text=text)]


def _context() -> tuple[ServerSession, types.RequestId, types.RequestParams.Meta | None]:
    ctx = server.request_context
    return ctx.session, ctx.request_id, ctx.meta


async def _log(level: types.LoggingLevel, message: str) -> None:
    """Send a log notification tied to the current request, if the level passes."""
    session, request_id, _ = _context()
    if LOG_LEVELS.index(level) >= LOG_LEVELS.index(_state(session).log_level):
        await session.send_log_message(
            level, message, logger=SERVER_NAME, related_request_id=request_id
        )


@tool("test_simple_text", "Returns one text content block.")
async def _simple_text(_: dict[str, Any]) -> list[types.ContentBlock]:
    return _text("This is a simple text response for testing.")


@tool("test_image_content", "Returns one image content block (a 1x1 red PNG).")
async def _image_content(_: dict[str, Any]) -> list[types.ContentBlock]:
    return [types.ImageContent(type="image", data=PNG_BASE64, mimeType="image/png")]


@tool("test_audio_content", "Returns one audio content block (a short silent WAV).")
async def _audio_content(_: dict[str, Any]) -> list[types.ContentBlock]:
    return [types.AudioContent(type="audio", data=WAV_BASE64, mimeType="audio/wav")]


@tool("test_embedded_resource", "Returns one embedded text resource.")
async def _embedded_resource(_: dict[str, Any]) -> list[types.ContentBlock]:
    return [
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri=AnyUrl("test://embedded-resource"),
                mimeType="text/plain",
                text="This is an embedded resource content.",
            ),
        )
    ]


@tool("test_multiple_content_types", "Returns text, image and embedded resource content.")
async def _multiple_content_types(_: dict[str, Any]) -> list[types.ContentBlock]:
    return [
        types.TextContent(type="text", text="Multiple content types test:"),
        types.ImageContent(type="image", data=PNG_BASE64, mimeType="image/png"),
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri=AnyUrl("test://mixed-content-resource"),
                mimeType="application/json",
                text=json.dumps({"test": "data", "value": 123}),
            ),
        ),
    ]


@tool("test_tool_with_logging", "Sends three info log notifications while it runs.")
async def _tool_with_logging(_: dict[str, Any]) -> list[types.ContentBlock]:
    await _log("info", "Tool execution started")
    await anyio.sleep(0.05)
    await _log("info", "Tool processing data")
    await anyio.sleep(0.05)
    await _log("info", "Tool execution completed")
    return _text("Tool with logging executed successfully")


@tool("test_error_handling", "Always fails: the result has isError: true.")
async def _error_handling(_: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=_text("This tool intentionally returns an error for testing"), isError=True
    )


@tool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100 when asked to.")
async def _tool_with_progress(_: dict[str, Any]) -> list[types.ContentBlock]:
    session, request_id, meta = _context()
    token = meta.progressToken if meta is not None else None
    for step, progress in enumerate((0.0, 50.0, 100.0)):
        if step:
            await anyio.sleep(0.05)
        if token is not None:
            await session.send_progress_notification(
                token,
                progress,
                total=100.0,
                message=f"Completed step {int(progress)} of 100",
                related_request_id=str(request_id),
            )
    return _text(f"Progress tool completed (progress token: {token})")


@tool(
    "test_sampling",
    "Asks the client's LLM (sampling/createMessage) and returns its answer.",
    {
        "type": "object",
        "properties": {"prompt": {"type": "string", "description": "The prompt to send"}},
        "required": ["prompt"],
    },
)
async def _sampling(arguments: dict[str, Any]) -> list[types.ContentBlock]:
    session, request_id, _ = _context()
    result = await session.create_message(
        messages=[
            types.SamplingMessage(
                role="user", content=types.TextContent(type="text", text=arguments["prompt"])
            )
        ],
        max_tokens=100,
        related_request_id=request_id,
    )
    content = result.content
    answer = content.text if isinstance(content, types.TextContent) else str(content)
    return _text(f"LLM response: {answer}")


async def _elicit(message: str, schema: dict[str, Any], label: str) -> list[types.ContentBlock]:
    session, request_id, _ = _context()
    result = await session.elicit_form(message, schema, related_request_id=request_id)
    content = json.dumps(result.content) if result.content is not None else "{}"
    return _text(f"{label}: action={result.action}, content={content}")


@tool(
    "test_elicitation",
    "Asks the user (elicitation/create) for a username and an email.",
    {
        "type": "object",
        "properties": {"message": {"type": "string", "description": "What to ask the user"}},
        "required": ["message"],
    },
)
async def _elicitation(arguments: dict[str, Any]) -> list[types.ContentBlock]:
    return await _elicit(arguments["message"], ELICITATION_SCHEMA, "User response")


@tool(
    "test_elicitation_sep1034_defaults",
    "Elicits a form whose fields all have defaults (SEP-1034).",
)
async def _elicitation_defaults(_: dict[str, Any]) -> list[types.ContentBlock]:
    return await _elicit("Please review your information", SEP1034_SCHEMA, "Elicitation completed")


@tool("test_elicitation_sep1330_enums", "Elicits a form with the five enum shapes (SEP-1330).")
async def _elicitation_enums(_: dict[str, Any]) -> list[types.ContentBlock]:
    return await _elicit("Please choose your options", SEP1330_SCHEMA, "Elicitation completed")


@tool(
    "test_missing_capability",
    "Asks for sampling: a modern host that did not declare it gets -32021 from the gateway.",
)
async def _missing_capability(_: dict[str, Any]) -> list[types.ContentBlock]:
    return await _sampling({"prompt": "Needs sampling"})


@tool("test_custom_headers", "Echoes arguments mirrored in Mcp-Param-*.", CUSTOM_HEADERS_INPUT)
async def _custom_headers(arguments: dict[str, Any]) -> list[types.ContentBlock]:
    return _text(f"Received: {json.dumps(arguments, sort_keys=True)}")


@tool("test_logging_tool", "Logs at info, then answers (a modern host hears it only if asked).")
async def _logging_tool(_: dict[str, Any]) -> list[types.ContentBlock]:
    await _log("info", "logging tool ran")
    return _text("logged")


@tool(
    "json_schema_2020_12_tool",
    "Tool with JSON Schema 2020-12 features",
    JSON_SCHEMA_TOOL_INPUT,
)
async def _json_schema_tool(arguments: dict[str, Any]) -> list[types.ContentBlock]:
    return _text(f"Received: {json.dumps(arguments, sort_keys=True)}")


@tool(
    "test_reconnection",
    "Closes its SSE stream mid-call (over Streamable HTTP), then answers (SEP-1699).",
)
async def _reconnection(_: dict[str, Any]) -> list[types.ContentBlock]:
    await _log("info", "Before disconnect")
    close = server.request_context.close_sse_stream
    if close is not None:
        await close()
    await anyio.sleep(0.2)  # the client reconnects with Last-Event-ID meanwhile
    await _log("info", "After reconnect")
    return _text("Reconnection test completed")


# MRTR (input-required-result-*, server-stateless): a handshake-era backend
# asks with ordinary server-to-client requests; the gateway turns each into
# input_required for a 2026-07-28 host (gateway/router/stateless/held_calls.py).


def _name_schema(field_name: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {field_name: {"type": "string"}},
        "required": [field_name],
    }


# The inputRequests key a modern host sees for a request that names one
# (gateway/protocol/stateless/mrtr.py: a gateway convention, removed before the host).
INPUT_KEY_META = "dev.mcp-gateway/inputKey"


async def _ask_form(
    message: str, schema: dict[str, Any], key: str | None = None
) -> types.ElicitResult:
    session, request_id, _ = _context()
    if key is None:
        return await session.elicit_form(message, schema, related_request_id=request_id)
    params = types.ElicitRequestFormParams(
        message=message, requestedSchema=schema, _meta={INPUT_KEY_META: key}
    )
    return await session.send_request(
        types.ServerRequest(types.ElicitRequest(params=params)),
        types.ElicitResult,
        metadata=ServerMessageMetadata(related_request_id=request_id),
    )


async def _ask_llm(text: str, max_tokens: int) -> str:
    session, request_id, _ = _context()
    result = await session.create_message(
        messages=[
            types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))
        ],
        max_tokens=max_tokens,
        related_request_id=request_id,
    )
    content = result.content
    return content.text if isinstance(content, types.TextContent) else str(content)


async def _ask_roots() -> list[str]:
    session, request_id, _ = _context()
    result = await session.send_request(
        types.ServerRequest(types.ListRootsRequest(method="roots/list")),
        types.ListRootsResult,
        metadata=ServerMessageMetadata(related_request_id=request_id),
    )
    return [str(root.uri) for root in result.roots]


def _field(result: types.ElicitResult, name: str) -> str:
    content = result.content or {}
    return str(content.get(name, result.action))


@tool("test_input_required_result_elicitation", "Elicits a name, then greets it.")
async def _irr_elicitation(_: dict[str, Any]) -> list[types.ContentBlock]:
    # The scenario wants the key "user_name" (input-required-result-basic-elicitation).
    answer = await _ask_form("What is your name?", _name_schema("name"), key="user_name")
    return _text(f"Hello, {_field(answer, 'name')}!")


@tool("test_input_required_result_sampling", "Asks the client's LLM for a capital.")
async def _irr_sampling(_: dict[str, Any]) -> list[types.ContentBlock]:
    return _text(await _ask_llm("What is the capital of France?", 100))


@tool("test_input_required_result_list_roots", "Lists the client's roots.")
async def _irr_list_roots(_: dict[str, Any]) -> list[types.ContentBlock]:
    return _text("Roots: " + ", ".join(await _ask_roots()))


@tool("test_input_required_result_request_state", "Asks for confirmation (state round trip).")
async def _irr_request_state(_: dict[str, Any]) -> list[types.ContentBlock]:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    answer = await _ask_form("Please confirm", schema)
    return _text(f"state-ok: {answer.action}")


@tool("test_input_required_result_multiple_inputs", "Elicits, samples and lists roots at once.")
async def _irr_multiple(_: dict[str, Any]) -> list[types.ContentBlock]:
    found: dict[str, str] = {}

    async def name() -> None:
        found["name"] = _field(await _ask_form("What is your name?", _name_schema("name")), "name")

    async def greeting() -> None:
        found["greeting"] = await _ask_llm("Generate a greeting", 50)

    async def roots() -> None:
        found["roots"] = ", ".join(await _ask_roots())

    async with anyio.create_task_group() as group:
        for ask in (name, greeting, roots):
            group.start_soon(ask)
    return _text(json.dumps(found, sort_keys=True))


@tool("test_input_required_result_multi_round", "Elicits twice, one after the other.")
async def _irr_multi_round(_: dict[str, Any]) -> list[types.ContentBlock]:
    first = await _ask_form("Step 1: What is your name?", _name_schema("name"))
    second = await _ask_form("Step 2: What is your favorite color?", _name_schema("color"))
    return _text(f"{_field(first, 'name')} likes {_field(second, 'color')}")


@tool("test_input_required_result_tampered_state", "Elicits; the gateway seals the state.")
async def _irr_tampered(_: dict[str, Any]) -> list[types.ContentBlock]:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    return _text(f"confirmed: {(await _ask_form('Please confirm', schema)).action}")


@tool("test_input_required_result_capabilities", "Asks only for sampling.")
async def _irr_capabilities(_: dict[str, Any]) -> list[types.ContentBlock]:
    return _text(await _ask_llm("Say something", 20))


@tool("test_streaming_elicitation", "Elicits while the call's stream is open.")
async def _streaming_elicitation(_: dict[str, Any]) -> list[types.ContentBlock]:
    answer = await _ask_form("What is your name?", _name_schema("name"))
    return _text(f"Hello, {_field(answer, 'name')}!")


# The tasks extension's fixtures (scenarios tasks-*): the gateway runs the
# tasks (gateway/router/stateless/gateway_tasks.py); this backend only marks which tools may be
# one and answers them as ordinary calls.
TASK_OPTIONAL = types.ToolExecution(taskSupport="optional")


def task_tool(
    name: str, description: str, input_schema: dict[str, Any] | None = None
) -> Callable[[Callable[[dict[str, Any]], Any]], Callable[[dict[str, Any]], Any]]:
    def register(fn: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
        TOOLS[name] = ToolDef(
            types.Tool(
                name=name,
                description=description,
                inputSchema=input_schema or NO_ARGS,
                execution=TASK_OPTIONAL,
            ),
            fn,
        )
        return fn

    return register


@tool(
    "greet",
    "Say hello (sync only).",
    {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
)
async def greet(arguments: dict[str, Any]) -> Any:
    return _text(f"Hello, {arguments.get('name', 'World')}!")


@task_tool(
    "slow_compute",
    "Sleep `seconds`, then answer (may run as a task).",
    {
        "type": "object",
        "properties": {"seconds": {"type": "number"}, "label": {"type": "string"}},
    },
)
async def slow_compute(arguments: dict[str, Any]) -> Any:
    seconds = float(arguments.get("seconds", 0))
    await anyio.sleep(min(seconds, 120))
    return _text(f"computed {arguments.get('label', '')} after {seconds:g} s")


CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}, "name": {"type": "string"}},
}


@task_tool(
    "confirm_delete",
    "Ask (elicitation/create) whether to delete `filename`, then answer (may run as a task).",
    {"type": "object", "properties": {"filename": {"type": "string"}}},
)
async def confirm_delete(arguments: dict[str, Any]) -> Any:
    return await _elicit(f"Delete {arguments.get('filename', 'it')}?", CONFIRM_SCHEMA, "Answer")


@task_tool("multi_input", "Ask two questions at once, then answer (may run as a task).")
async def multi_input(arguments: dict[str, Any]) -> Any:
    answers: list[str] = []

    async def ask(question: str) -> None:
        blocks = await _elicit(question, CONFIRM_SCHEMA, question)
        answers.extend(b.text for b in blocks if isinstance(b, types.TextContent))

    async with anyio.create_task_group() as group:
        group.start_soon(ask, "First?")
        group.start_soon(ask, "Second?")
    return _text(" | ".join(sorted(answers)))


def task_required(fn: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
    """Mark a task tool ``taskSupport: required`` (tasks-required-task-error)."""
    name = fn.__name__
    TOOLS[name].tool.execution = types.ToolExecution(taskSupport="required")
    return fn


@task_required
@task_tool("failing_job", "A tool error after about a second (always runs as a task).")
async def failing_job(arguments: dict[str, Any]) -> Any:
    await anyio.sleep(1)
    raise ValueError("failing_job failed, as it always does")


@task_tool("protocol_error_job", "A protocol error (may run as a task).")
async def protocol_error_job(arguments: dict[str, Any]) -> Any:
    raise AssertionError("answered by _call_tool_or_protocol_error before it gets here")


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    return [definition.tool for definition in TOOLS.values()]


@server.call_tool()
async def call_tool(name: str, arguments: dict[str, Any]) -> Any:
    definition = TOOLS.get(name)
    if definition is None:
        raise ValueError(f"Unknown tool: {name}")
    return await definition.run(arguments)


_call_tool_handler = server.request_handlers[types.CallToolRequest]


async def _call_tool_or_protocol_error(request: Any) -> Any:
    """``protocol_error_job`` answers a JSON-RPC error, not a tool error.

    The SDK turns any exception of a tool into ``isError: true``; only an
    ``McpError`` raised from the request handler itself becomes an error
    response, which is what the tasks scenarios call a protocol error.
    """
    if request.params.name == "protocol_error_job":
        raise McpError(
            types.ErrorData(code=types.INTERNAL_ERROR, message="protocol_error_job broke")
        )
    return await _call_tool_handler(request)


server.request_handlers[types.CallToolRequest] = _call_tool_or_protocol_error


# --------------------------------------------------------------------------
# Resources


RESOURCES = [
    types.Resource(
        uri=AnyUrl("test://static-text"),
        name="static-text",
        description="A static text resource.",
        mimeType="text/plain",
    ),
    types.Resource(
        uri=AnyUrl("test://static-binary"),
        name="static-binary",
        description="A static binary resource (a 1x1 PNG).",
        mimeType="image/png",
    ),
    types.Resource(
        uri=AnyUrl("test://watched-resource"),
        name="watched-resource",
        description="A resource clients may subscribe to.",
        mimeType="text/plain",
    ),
]


@server.list_resources()
async def list_resources() -> list[types.Resource]:
    return RESOURCES


@server.list_resource_templates()
async def list_resource_templates() -> list[types.ResourceTemplate]:
    return [
        types.ResourceTemplate(
            uriTemplate=TEMPLATE_URI,
            name="template-data",
            description="Data for an id, substituted into the URI.",
            mimeType="application/json",
        )
    ]


@server.read_resource()
async def read_resource(uri: AnyUrl) -> Iterable[ReadResourceContents]:
    text = str(uri)
    if text == "test://static-text":
        return [ReadResourceContents(STATIC_TEXT, "text/plain")]
    if text == "test://static-binary":
        return [ReadResourceContents(PNG_BYTES, "image/png")]
    if text == "test://watched-resource":
        return [ReadResourceContents(WATCHED_TEXT, "text/plain")]
    if text.startswith(TEMPLATE_PREFIX) and text.endswith(TEMPLATE_SUFFIX):
        item = text[len(TEMPLATE_PREFIX) : -len(TEMPLATE_SUFFIX)]
        if item and "/" not in item:
            body = {"id": item, "templateTest": True, "data": f"Data for ID: {item}"}
            return [ReadResourceContents(json.dumps(body), "application/json")]
    raise ValueError(f"Resource not found: {text}")


@server.subscribe_resource()
async def subscribe_resource(uri: AnyUrl) -> None:
    _state(server.request_context.session).subscriptions.add(str(uri))


@server.unsubscribe_resource()
async def unsubscribe_resource(uri: AnyUrl) -> None:
    _state(server.request_context.session).subscriptions.discard(str(uri))


# --------------------------------------------------------------------------
# Prompts


def _argument(name: str, description: str) -> types.PromptArgument:
    return types.PromptArgument(name=name, description=description, required=True)


PROMPTS = [
    types.Prompt(name="test_simple_prompt", description="A simple prompt without arguments."),
    types.Prompt(
        name="test_prompt_with_arguments",
        description="A prompt with two required arguments.",
        arguments=[
            _argument("arg1", "First test argument"),
            _argument("arg2", "Second test argument"),
        ],
    ),
    types.Prompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt embedding a resource.",
        arguments=[_argument("resourceUri", "URI of the resource to embed")],
    ),
    types.Prompt(name="test_prompt_with_image", description="A prompt with image content."),
    types.Prompt(
        name="test_input_required_result_prompt",
        description="Elicits the context to use (MRTR through the gateway).",
    ),
]


def _user(content: types.ContentBlock) -> types.PromptMessage:
    return types.PromptMessage(role="user", content=content)


@server.list_prompts()
async def list_prompts() -> list[types.Prompt]:
    return PROMPTS


@server.get_prompt()
async def get_prompt(name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
    args = arguments or {}
    known = {prompt.name: prompt for prompt in PROMPTS}
    if name not in known:
        raise ValueError(f"Unknown prompt: {name}")
    missing = [a.name for a in known[name].arguments or [] if a.required and a.name not in args]
    if missing:
        raise ValueError(f"Missing required arguments: {', '.join(missing)}")
    messages: list[types.PromptMessage]
    if name == "test_input_required_result_prompt":
        answer = await _ask_form("What context should the prompt use?", _name_schema("context"))
        text = f"Use this context: {_field(answer, 'context')}"
        messages = [_user(types.TextContent(type="text", text=text))]
    elif name == "test_simple_prompt":
        messages = [
            _user(types.TextContent(type="text", text="This is a simple prompt for testing."))
        ]
    elif name == "test_prompt_with_arguments":
        text = f"Prompt with arguments: arg1='{args['arg1']}', arg2='{args['arg2']}'"
        messages = [_user(types.TextContent(type="text", text=text))]
    elif name == "test_prompt_with_embedded_resource":
        messages = [
            _user(
                types.EmbeddedResource(
                    type="resource",
                    resource=types.TextResourceContents(
                        uri=AnyUrl(args["resourceUri"]),
                        mimeType="text/plain",
                        text="Embedded resource content for testing.",
                    ),
                )
            ),
            _user(
                types.TextContent(type="text", text="Please process the embedded resource above.")
            ),
        ]
    else:
        messages = [
            _user(types.ImageContent(type="image", data=PNG_BASE64, mimeType="image/png")),
            _user(types.TextContent(type="text", text="Please analyze the image above.")),
        ]
    return types.GetPromptResult(description=known[name].description, messages=messages)


# --------------------------------------------------------------------------
# Completion and logging


@server.completion()
async def complete(
    ref: types.PromptReference | types.ResourceTemplateReference,
    argument: types.CompletionArgument,
    context: types.CompletionContext | None,
) -> types.Completion:
    values: list[str] = []
    if isinstance(ref, types.PromptReference):
        if ref.name == "test_prompt_with_arguments" and argument.name in ("arg1", "arg2"):
            values = [v for v in PROMPT_ARG_VALUES if v.startswith(argument.value)]
    elif ref.uri == TEMPLATE_URI and argument.name == "id":
        values = [v for v in TEMPLATE_ID_VALUES if v.startswith(argument.value)]
    return types.Completion(values=values, total=len(values), hasMore=False)


@server.set_logging_level()
async def set_logging_level(level: types.LoggingLevel) -> None:
    _state(server.request_context.session).log_level = level


# --------------------------------------------------------------------------
# Transports


async def serve_stdio() -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


class MemoryEventStore(EventStore):
    """Every event of every stream, kept in memory (the process is short-lived)."""

    def __init__(self) -> None:
        self._events: list[tuple[str, types.JSONRPCMessage | None]] = []

    async def store_event(self, stream_id: str, message: types.JSONRPCMessage | None) -> str:
        self._events.append((stream_id, message))
        return str(len(self._events))

    async def replay_events_after(
        self, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        if not last_event_id.isdigit() or not 0 < int(last_event_id) <= len(self._events):
            return None
        after = int(last_event_id)
        stream_id = self._events[after - 1][0]
        for index in range(after, len(self._events)):
            event_stream, message = self._events[index]
            if event_stream == stream_id and message is not None:
                await send_callback(EventMessage(message, str(index + 1)))
        return stream_id


def serve_http(host: str, port: int) -> None:
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    loopback = ("127.0.0.1", "localhost", "[::1]")
    manager = StreamableHTTPSessionManager(
        app=server,
        event_store=MemoryEventStore(),
        retry_interval=100,
        security_settings=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[h for name in loopback for h in (name, f"{name}:*")],
            allowed_origins=[
                o for name in loopback for o in (f"http://{name}", f"http://{name}:*")
            ],
        ),
    )

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        """/mcp to the SDK's session manager; the manager runs for the app's lifespan."""
        if scope["type"] == "lifespan":
            await receive()  # lifespan.startup
            async with manager.run():
                await send({"type": "lifespan.startup.complete"})
                await receive()  # lifespan.shutdown
            await send({"type": "lifespan.shutdown.complete"})
        elif scope["type"] == "http" and scope["path"] == "/mcp":
            await manager.handle_request(scope, receive, send)
        elif scope["type"] == "http":
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})

    uvicorn.run(app, host=host, port=port, log_level="warning")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP on PORT")
    parser.add_argument("--host", default="127.0.0.1", help="bind address for --http")
    args = parser.parse_args(argv)
    if args.http is None:
        anyio.run(serve_stdio)
    else:
        serve_http(args.host, args.http)


if __name__ == "__main__":
    main(sys.argv[1:])
