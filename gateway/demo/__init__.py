"""Small MCP servers shipped with the gateway so the default config runs anywhere."""
