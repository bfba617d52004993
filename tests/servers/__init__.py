"""Real MCP servers, written with the official SDK, that the gateway's tests talk to."""
