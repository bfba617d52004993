"""The gateway as an MCP client: one supervised session per configured server."""
