"""Test peer "beta": a second stdio MCP server built with the official SDK's FastMCP.

Its ``echo`` tool has the same name as alpha's, so a gateway in front of both
has to namespace them. It also offers ``multiply``, the JSON resource
``beta://config`` and the prompt ``haiku``.

Run it as ``python tests/servers/beta.py``; it speaks MCP on stdin/stdout and
writes nothing else to stdout.
"""

from __future__ import annotations

import json

from mcp.server.fastmcp import FastMCP

CONFIG = {"name": "beta", "precision": "float64", "features": ["multiply"]}

mcp = FastMCP("beta", instructions="Beta multiplies.", log_level="WARNING")


@mcp.tool()
def echo(text: str) -> str:
    """Echo the text back, prefixed with "beta: "."""
    return "beta: " + text


@mcp.tool()
def multiply(a: float, b: float) -> float:
    """Multiply two numbers."""
    return a * b


@mcp.resource("beta://config", name="config", mime_type="application/json")
def config() -> str:
    """Beta's configuration, as JSON."""
    return json.dumps(CONFIG)


@mcp.prompt()
def haiku(topic: str) -> str:
    """Ask for a haiku about a topic."""
    return f"Write a haiku about {topic}."


if __name__ == "__main__":
    mcp.run()
