"""The two tools a profile in search mode lists instead of its catalog (issue 15, sans-IO).

A host in search mode sees ``gateway{sep}search_tools`` and
``gateway{sep}call_tool`` (plus pinned tools): the model asks for the tools
it needs and calls them through the gateway, so the context holds two
schemas instead of hundreds. The prefix ``gateway`` is reserved for them.

The definitions are data, named here without the prefix; ``search_mode_tools``
gives them their public names, and ``search_tools_result`` turns search hits
into the ``tools/call`` result whose ``structuredContent`` matches
``SEARCH_TOOLS_OUTPUT_SCHEMA``.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Final

import msgspec

from gateway.catalog.search import DEFAULT_LIMIT, MAX_LIMIT, MIN_LIMIT

if TYPE_CHECKING:
    from collections.abc import Iterable

    from gateway.catalog.search import SearchHit

GATEWAY_PREFIX: Final = "gateway"
SEARCH_TOOLS_NAME: Final = "search_tools"
CALL_TOOL_NAME: Final = "call_tool"

_encoder: Final = msgspec.json.Encoder()

FOUND_TOOL_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "The public name to pass to call_tool."},
        "title": {"type": "string"},
        "description": {"type": "string"},
        "inputSchema": {"type": "object", "description": "The tool's arguments, as it lists them."},
    },
    "required": ["name", "inputSchema"],
}

SEARCH_TOOLS_OUTPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "tools": {
            "type": "array",
            "description": "The best matching tools, best first.",
            "items": FOUND_TOOL_SCHEMA,
        }
    },
    "required": ["tools"],
}

SEARCH_TOOLS_TOOL: Final[dict[str, Any]] = {
    "name": SEARCH_TOOLS_NAME,
    "title": "Search tools",
    "description": (
        "Find the tools that can do a task. Describe the task in plain words "
        '(for example "list the files in a folder"); the answer gives each '
        "matching tool's name, description and input schema. Then run one "
        "with call_tool."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "What you want to do, in plain words.",
            },
            "limit": {
                "type": "integer",
                "minimum": MIN_LIMIT,
                "maximum": MAX_LIMIT,
                "default": DEFAULT_LIMIT,
                "description": "How many tools to return at most.",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    "outputSchema": SEARCH_TOOLS_OUTPUT_SCHEMA,
    "annotations": {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
}

CALL_TOOL_TOOL: Final[dict[str, Any]] = {
    "name": CALL_TOOL_NAME,
    "title": "Call a tool",
    "description": (
        "Run a tool found with search_tools: give its name exactly as "
        "search_tools returned it and the arguments its input schema asks for. "
        "The answer is that tool's own result."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The tool's name from search_tools."},
            "arguments": {
                "type": "object",
                "description": "The tool's arguments, matching its input schema.",
                "additionalProperties": True,
            },
        },
        "required": ["name"],
        "additionalProperties": False,
    },
}


def gateway_tool_name(name: str, separator: str) -> str:
    """The public name of a gateway tool, ``gateway{sep}name``."""
    return f"{GATEWAY_PREFIX}{separator}{name}"


def search_mode_tools(separator: str) -> list[dict[str, Any]]:
    """Fresh copies of both gateway tools under their public names, search first.

    Args:
        separator: the configured naming separator (``naming.separator``).

    Returns:
        The two tool definitions as ``tools/list`` items; the caller may
        change them (the module's constants stay as they are).
    """
    tools = [copy.deepcopy(SEARCH_TOOLS_TOOL), copy.deepcopy(CALL_TOOL_TOOL)]
    for tool in tools:
        tool["name"] = gateway_tool_name(tool["name"], separator)
    return tools


def found_tool(item: dict[str, Any]) -> dict[str, Any]:
    """What search_tools tells about one tool: its public name, title, description, schema."""
    found: dict[str, Any] = {"name": item.get("name", "")}
    for key in ("title", "description"):
        value = item.get(key)
        if isinstance(value, str):
            found[key] = value
    schema = item.get("inputSchema")
    found["inputSchema"] = schema if isinstance(schema, dict) else {"type": "object"}
    return found


def search_tools_result(hits: Iterable[SearchHit]) -> dict[str, Any]:
    """The ``tools/call`` result of search_tools: the same tools as text and as structuredContent.

    Spec (tools, structured content): a tool with an output schema returns
    ``structuredContent`` and should also return it serialised as text, for
    clients that read only ``content``.
    """
    structured = {"tools": [found_tool(hit.item) for hit in hits]}
    text = _encoder.encode(structured).decode("utf-8")
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
        "isError": False,
    }
