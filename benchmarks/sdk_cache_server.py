"""The official-SDK backend of the cache benchmark (FastMCP, stdio).

One resource (``bench://note``) and one tool annotated ``readOnlyHint``
(``lookup``), each answering a small constant; logging at WARNING for the
reason ``sdk_server.py`` gives.
"""

from __future__ import annotations

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

server = FastMCP("bench-cache", log_level="WARNING")


@server.resource("bench://note", name="note", mime_type="text/plain")
def note() -> str:
    """A constant note."""
    return "a note worth keeping"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def lookup(key: str = "") -> str:
    """Look a key up (constant, no effects)."""
    return f"value of {key}"


if __name__ == "__main__":
    server.run()
