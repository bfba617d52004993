"""The gateway as an MCP server to hosts: Streamable HTTP, legacy SSE, stdio."""
