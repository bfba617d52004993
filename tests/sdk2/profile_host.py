"""A host on the official Python SDK 2.x against one profile's endpoint (issue 15).

Run by ``tests/e2e/test_sdk2_profiles.py`` with ``.venv-sdk2/bin/python``. It
connects with ``Client(url)`` (2026-07-28 first), walks ``tools/list``, calls
the tool named on the command line, then calls a second name and records
the error it gets. Prints one JSON object describing what it saw.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import TextContent


async def main(url: str, tool: str, arguments: str, refused: str) -> None:
    """Drive the calls; print the summary as JSON on stdout."""
    async with Client(url) as client:
        tools = await client.list_tools()
        result = await client.call_tool(tool, json.loads(arguments))
        error: dict[str, Any] = {}
        try:
            await client.call_tool(refused, {})
        except MCPError as exc:
            error = {"code": exc.error.code, "message": exc.error.message}
        first = result.content[0] if result.content else None
        summary = {
            "protocol_version": client.protocol_version,
            "discovered": client.session.discover_result is not None,
            "tools": sorted(t.name for t in tools.tools),
            "text": first.text if isinstance(first, TextContent) else None,
            "is_error": result.is_error,
            "structured": result.structured_content,
            "refused": error,
        }
    print(json.dumps(summary))


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:5])
