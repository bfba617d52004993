"""JSON-RPC and the parts of MCP the gateway reads or rewrites (sans-IO)."""
