"""Demo backend: small stateless utilities, run as ``python -m mcp_gateway_demo.toolbox``.

Each tool is there to exercise one path through a gateway: plain text
(``echo``, ``add``), results that differ per call (``now``, ``uuid``),
structured output with an ``outputSchema`` (``stats``), and a tool that always
fails so ``isError: true`` results can be seen end to end (``fail``). A fixed
resource and a prompt with argument completion round it off.
"""

from __future__ import annotations

import datetime
import math
import statistics
import uuid as uuid_module
from typing import Any, Final

import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from pydantic import AnyUrl

from mcp_gateway_demo.serve import (
    ClientLog,
    invalid_params,
    prompt_argument,
    reject_unknown_tools,
    resource_not_found,
    run,
    strict_tool,
)

NAME: Final = "gateway-demo-toolbox"
ABOUT_URI: Final = "toolbox://about"
ABOUT: Final = (
    "gateway-demo-toolbox: a demo MCP server for mcp-gateway, on the official MCP SDK.\n"
    "Tools: echo, add, now, uuid, stats (structured output) and fail (always an error).\n"
    "Prompt: code_review, with completion of its language argument.\n"
)
# Offered by completion of code_review's ``language``; any other value still works.
LANGUAGES: Final = (
    "bash",
    "c",
    "c++",
    "c#",
    "go",
    "haskell",
    "java",
    "javascript",
    "kotlin",
    "python",
    "ruby",
    "rust",
    "sql",
    "swift",
    "typescript",
)

# Everything here is side-effect free and stays inside the process.
_PURE: Final = {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}
_READ_ONLY: Final = {"readOnlyHint": True, "openWorldHint": False}


def _number(title: str, description: str) -> dict[str, Any]:
    return {"type": "number", "title": title, "description": description}


STATS_OUTPUT_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "count": {"type": "integer", "description": "How many numbers there were."},
        "mean": {"type": "number", "description": "Their arithmetic mean."},
        "min": {"type": "number", "description": "The smallest."},
        "max": {"type": "number", "description": "The largest."},
    },
    "required": ["count", "mean", "min", "max"],
    "additionalProperties": False,
}
TOOLS: Final = (
    strict_tool(
        "echo",
        "Echo",
        "Return the given text unchanged.",
        _PURE,
        {"text": {"type": "string", "title": "Text", "description": "The text to send back."}},
    ),
    strict_tool(
        "add",
        "Add",
        "Add two numbers and return the sum.",
        _PURE,
        {
            "a": _number("First number", "The first addend."),
            "b": _number("Second number", "The second addend."),
        },
    ),
    strict_tool(
        "now", "Current time", "Return the current UTC time as an ISO 8601 string.", _READ_ONLY
    ),
    strict_tool(
        "fail",
        "Always fail",
        "Fail on purpose with the given message, to show how tool errors look.",
        _PURE,
        {
            "message": {
                "type": "string",
                "title": "Message",
                "description": "The error message to fail with.",
            }
        },
    ),
    strict_tool("uuid", "New UUID", "Return a new random UUID (version 4).", _READ_ONLY),
    strict_tool(
        "stats",
        "Statistics",
        "Count the numbers and return their mean, minimum and maximum.",
        _PURE,
        {
            "numbers": {
                "type": "array",
                "items": {"type": "number"},
                "minItems": 1,
                "title": "Numbers",
                "description": "At least one number.",
            }
        },
        output_schema=STATS_OUTPUT_SCHEMA,
    ),
)
CODE_REVIEW: Final = types.Prompt(
    name="code_review",
    title="Code review",
    description="Ask the model to review a piece of code.",
    arguments=[
        prompt_argument("code", "Code", "The code to review."),
        prompt_argument("language", "Language", "The code's language.", required=False),
    ],
)


def _text(value: str) -> list[types.ContentBlock]:
    return [types.TextContent(type="text", text=value)]


def _stats(numbers: list[float]) -> dict[str, Any]:
    mean = statistics.fmean(numbers)
    if not math.isfinite(mean):
        raise ValueError("The mean is too large to represent")
    return {"count": len(numbers), "mean": mean, "min": min(numbers), "max": max(numbers)}


def _review_request(code: str, language: str) -> str:
    subject = f"this {language} code" if language else "this code"
    return (
        f"Please review {subject}. Point out bugs first, then anything hard to read,"
        f" and suggest concrete fixes.\n\n```{language}\n{code}\n```"
    )


def build_server() -> Server[Any, Any]:
    """Declare the toolbox demo's tools, resource and prompt.

    Returns:
        The server, ready for :func:`mcp_gateway_demo.serve.run`.
    """
    server: Server[Any, Any] = Server(
        NAME,
        "0.2.0",
        instructions=(
            "Small utilities (echo, arithmetic, statistics, time, UUIDs) plus a tool that"
            " always fails, for trying out MCP clients and the gateway."
        ),
    )
    # logging/setLevel is served (and announced); the toolbox itself has nothing to log.
    ClientLog(server, NAME)

    @server.list_tools()
    async def _list_tools() -> list[types.Tool]:
        return list(TOOLS)

    @server.call_tool()
    async def _call_tool(name: str, arguments: dict[str, Any]) -> Any:
        # The SDK has checked the arguments against the tool's inputSchema.
        if name == "echo":
            return _text(arguments["text"])
        if name == "add":
            # JSON integers stay integers: 2 + 3 is "5", not "5.0".
            return _text(str(arguments["a"] + arguments["b"]))
        if name == "now":
            moment = datetime.datetime.now(datetime.UTC)
            return _text(moment.isoformat(timespec="seconds").replace("+00:00", "Z"))
        if name == "uuid":
            return _text(str(uuid_module.uuid4()))
        if name == "stats":
            return _stats(arguments["numbers"])
        raise RuntimeError(arguments["message"])

    reject_unknown_tools(server, {tool.name for tool in TOOLS})

    @server.list_resources()
    async def _list_resources() -> list[types.Resource]:
        return [
            types.Resource(
                uri=AnyUrl(ABOUT_URI),
                name="about",
                title="About the toolbox",
                description="What this demo server offers and why.",
                mimeType="text/plain",
            )
        ]

    @server.list_resource_templates()
    async def _list_resource_templates() -> list[types.ResourceTemplate]:
        return []

    @server.read_resource()
    async def _read_resource(uri: AnyUrl) -> list[ReadResourceContents]:
        if str(uri) != ABOUT_URI:
            raise resource_not_found(str(uri))
        return [ReadResourceContents(content=ABOUT, mime_type="text/plain")]

    @server.list_prompts()
    async def _list_prompts() -> list[types.Prompt]:
        return [CODE_REVIEW]

    @server.get_prompt()
    async def _get_prompt(name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        if name != CODE_REVIEW.name:
            raise invalid_params(f"Unknown prompt: {name}")
        arguments = arguments or {}
        if "code" not in arguments:
            raise invalid_params(f"Missing required argument for prompt {name}: code")
        request = _review_request(arguments["code"], arguments.get("language", ""))
        return types.GetPromptResult(
            description=CODE_REVIEW.description,
            messages=[
                types.PromptMessage(
                    role="user", content=types.TextContent(type="text", text=request)
                )
            ],
        )

    @server.completion()
    async def _complete(
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: types.CompletionArgument,
        context: types.CompletionContext | None,
    ) -> types.Completion:
        if not isinstance(ref, types.PromptReference) or ref.name != CODE_REVIEW.name:
            raise invalid_params("Unknown completion reference: only the code_review prompt")
        typed = argument.value.casefold()
        offered = LANGUAGES if argument.name == "language" else ()
        values = [value for value in offered if value.startswith(typed)]
        return types.Completion(values=values, total=len(values), hasMore=False)

    return server


def main() -> None:
    """Run the toolbox demo on stdin/stdout."""
    run(build_server())


if __name__ == "__main__":
    main()
