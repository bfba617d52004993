"""mcp-gateway: one MCP endpoint in front of many MCP servers."""

from __future__ import annotations

__version__ = "0.1.0"
