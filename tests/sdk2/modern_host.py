"""A host on the official Python SDK 2.x, in its default mode, against one URL.

Run by ``tests/e2e/test_sdk2_host.py`` with ``.venv-sdk2/bin/python`` (mcp 2.x
cannot share a virtualenv with the 1.x peers). It connects with
``Client(url)`` (mode ``auto``: ``server/discover`` at 2026-07-28, falling back
to ``initialize`` only when refused), then lists tools, calls two of them
(one with ``Mcp-Param-*`` headers), reads a resource, gets a prompt and
completes an argument. It prints one JSON object describing what it saw.
"""

from __future__ import annotations

import json
import sys

import anyio
from mcp import Client
from mcp.types import PromptReference, TextContent


async def main(url: str) -> None:
    """Drive the calls; print the summary as JSON on stdout."""
    async with Client(url) as client:
        session = client.session
        tools = await client.list_tools()
        names = sorted(tool.name for tool in tools.tools)
        added = await client.call_tool("toolbox__add", {"a": 20, "b": 22})
        looked = await client.call_tool(
            "headers__lookup", {"region": "eu-west", "count": 2, "verbose": True}
        )
        resources = await client.list_resources()
        uri = str(resources.resources[0].uri)
        read = await client.read_resource(uri)
        prompt = await client.get_prompt("toolbox__code_review", {"code": "x = 1"})
        completion = await client.complete(
            PromptReference(type="ref/prompt", name="toolbox__code_review"),
            {"name": "language", "value": "py"},
        )

        def text(result: object) -> str | None:
            content = getattr(result, "content", None) or []
            first = content[0] if content else None
            return first.text if isinstance(first, TextContent) else None

        summary = {
            "protocol_version": client.protocol_version,
            "discovered": session.discover_result is not None,
            "initialized": session.initialize_result is not None,
            "server_name": None if client.server_info is None else client.server_info.name,
            "tools": names,
            "add": text(added),
            "add_is_error": added.is_error,
            "lookup": text(looked),
            "read_uri": uri,
            "read_contents": len(read.contents),
            "prompt_messages": len(prompt.messages),
            "completion_values": list(completion.completion.values),
        }
    print(json.dumps(summary))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
