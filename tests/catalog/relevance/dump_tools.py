"""Regenerate ``tools.json``: the merged tools/list of the real peers, as the gateway names them.

Run from the repository root with the npm test peers installed
(``npm ci --prefix tests/node``)::

    python -m tests.catalog.relevance.dump_tools [NODE_MODULES]

It starts each peer over stdio with the official MCP client, takes its
``tools/list`` and renames each tool ``{prefix}__{name}`` with the gateway's
own naming function, so the relevance test runs without Node or children.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from gateway.catalog.naming import NamingRules, public_name
from tests.servers.paths import NODE_DIR, SERVERS_DIR

OUT = Path(__file__).resolve().parent / "tools.json"
ROOT = SERVERS_DIR.parent.parent


def _peers(node_modules: Path, sandbox: str) -> list[tuple[str, list[str]]]:
    scoped = node_modules / "@modelcontextprotocol"
    python = sys.executable
    return [
        ("everything", ["node", str(scoped / "server-everything" / "dist" / "index.js"), "stdio"]),
        ("files", ["node", str(scoped / "server-filesystem" / "dist" / "index.js"), sandbox]),
        ("alpha", [python, str(SERVERS_DIR / "alpha.py")]),
        ("beta", [python, str(SERVERS_DIR / "beta.py")]),
        ("notes", [python, "-m", "mcp_gateway_demo.notes"]),
        ("toolbox", [python, "-m", "mcp_gateway_demo.toolbox"]),
    ]


async def _list(argv: list[str]) -> list[dict[str, Any]]:
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page = await session.list_tools(cursor=cursor)
            tools.extend(
                t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools
            )
            cursor = page.nextCursor
            if cursor is None:
                return tools


async def _dump(node_modules: Path) -> None:
    rules = NamingRules()
    merged: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as sandbox:
        for prefix, argv in _peers(node_modules, sandbox):
            tools = await _list(argv)
            merged.extend({**t, "name": public_name(prefix, t["name"], rules)} for t in tools)
    document = {"separator": rules.separator, "tools": merged}
    OUT.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(merged)} tools -> {OUT}")


if __name__ == "__main__":
    anyio.run(_dump, Path(sys.argv[1]) if len(sys.argv) > 1 else NODE_DIR / "node_modules")
