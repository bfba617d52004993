"""Where the test peers live, and the commands that start them.

Tests build backend configurations from these, e.g.
``python_server_command("alpha")`` or ``everything_command()``.
"""

from __future__ import annotations

import sys
from pathlib import Path

SERVERS_DIR = Path(__file__).resolve().parent
"""The folder holding the Python test peers (alpha.py, beta.py, paging.py, broken.py)."""

NODE_DIR = SERVERS_DIR.parent / "node"
"""The npm project that pins the Node reference server (tests/node)."""

EVERYTHING_ENTRY = (
    NODE_DIR / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
)
"""The reference server's launcher; its first argument picks the transport."""

EVERYTHING_INSTALL_HINT = "npm ci --prefix tests/node"
"""The command (run from the repository root) that installs the reference server."""


def python_server_command(name: str) -> list[str]:
    """The argv that starts the Python test peer ``name`` (e.g. "alpha") over stdio."""
    path = SERVERS_DIR / f"{name}.py"
    if not path.is_file():
        raise ValueError(f"no test server named {name!r} in {SERVERS_DIR}")
    return [sys.executable, str(path)]


def everything_command() -> list[str] | None:
    """The argv that starts @modelcontextprotocol/server-everything over stdio.

    None when tests/node/node_modules is not installed (see EVERYTHING_INSTALL_HINT).
    """
    if not EVERYTHING_ENTRY.is_file():
        return None
    return ["node", str(EVERYTHING_ENTRY), "stdio"]
