"""mcp-gateway: one MCP endpoint in front of many MCP servers."""

from __future__ import annotations

__version__ = "0.1.0"
# The command the wheel installs (pyproject [project.scripts]) and its
# distribution's name: `mcp-gateway` on the package index is another project.
COMMAND = "trio-mcp-gateway"
