"""Demo backend: small stateless utilities, run as ``python -m gateway.demo.toolbox``.

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

from gateway.demo._stdio_server import DemoServer, Param, PromptArg, ToolOutput, message
from gateway.demo._stdio_server import text as text_block

ABOUT_URI: Final = "toolbox://about"
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
_NUMBER: Final = {"type": "number"}
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


def build_server() -> DemoServer:
    """Declare the toolbox demo's tools, resource and prompt.

    Returns:
        The server, ready to ``run()``.
    """
    server = DemoServer(
        "gateway-demo-toolbox",
        "0.1.0",
        title="Demo toolbox",
        instructions=(
            "Small utilities (echo, arithmetic, statistics, time, UUIDs) plus a tool that"
            " always fails, for trying out MCP clients and the gateway."
        ),
    )

    @server.tool(
        title="Echo",
        description="Return the given text unchanged.",
        params=[Param("text", {"type": "string"}, "Text", "The text to send back.")],
        annotations=_PURE,
    )
    def echo(text: str) -> ToolOutput:
        return text

    @server.tool(
        title="Add",
        description="Add two numbers and return the sum.",
        params=[
            Param("a", _NUMBER, "First number", "The first addend."),
            Param("b", _NUMBER, "Second number", "The second addend."),
        ],
        annotations=_PURE,
    )
    def add(a: float, b: float) -> ToolOutput:
        return str(a + b)

    @server.tool(
        title="Current time",
        description="Return the current UTC time as an ISO 8601 string.",
        annotations=_READ_ONLY,
    )
    def now() -> ToolOutput:
        moment = datetime.datetime.now(datetime.UTC)
        return moment.isoformat(timespec="seconds").replace("+00:00", "Z")

    @server.tool(
        title="Always fail",
        description="Fail on purpose with the given message, to show how tool errors look.",
        params=[Param("message", {"type": "string"}, "Message", "The error message to fail with.")],
        annotations=_PURE,
    )
    def fail(message: str) -> ToolOutput:
        raise RuntimeError(message)

    @server.tool(
        title="New UUID",
        description="Return a new random UUID (version 4).",
        annotations=_READ_ONLY,
    )
    def uuid() -> ToolOutput:
        return str(uuid_module.uuid4())

    @server.tool(
        title="Statistics",
        description="Count the numbers and return their mean, minimum and maximum.",
        params=[
            Param(
                "numbers",
                {"type": "array", "items": _NUMBER, "minItems": 1},
                "Numbers",
                "At least one number.",
            )
        ],
        annotations=_PURE,
        output_schema=STATS_OUTPUT_SCHEMA,
    )
    def stats(numbers: list[float]) -> ToolOutput:
        mean = statistics.fmean(numbers)
        if not math.isfinite(mean):
            raise ValueError("The mean is too large to represent")
        return {"count": len(numbers), "mean": mean, "min": min(numbers), "max": max(numbers)}

    @server.resource(
        ABOUT_URI,
        name="about",
        title="About the toolbox",
        description="What this demo server offers and why.",
        mime_type="text/plain",
    )
    def about() -> str:
        return (
            "gateway-demo-toolbox: a demo MCP server bundled with mcp-gateway.\n"
            "Tools: echo, add, now, uuid, stats (structured output) and fail (always an error).\n"
            "Prompt: code_review, with completion of its language argument.\n"
        )

    @server.prompt(
        title="Code review",
        description="Ask the model to review a piece of code.",
        arguments=[
            PromptArg("code", "Code", "The code to review."),
            PromptArg("language", "Language", "The code's language.", required=False),
        ],
    )
    def code_review(code: str, language: str = "") -> list[dict[str, Any]]:
        subject = f"this {language} code" if language else "this code"
        request = (
            f"Please review {subject}. Point out bugs first, then anything hard to read,"
            f" and suggest concrete fixes.\n\n```{language}\n{code}\n```"
        )
        return [message("user", text_block(request))]

    @server.completion("language", prompt="code_review")
    def complete_language(context: dict[str, str]) -> tuple[str, ...]:
        return LANGUAGES

    return server


def main() -> None:
    """Run the toolbox demo on stdin/stdout until EOF or SIGTERM."""
    raise SystemExit(build_server().run())


if __name__ == "__main__":
    main()
