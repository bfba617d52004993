"""Two small MCP servers on the official SDK, so the shipped config runs on a bare machine.

They live outside the ``gateway`` package on purpose: the gateway ships no MCP
server implementation of its own, and a demo backend is a peer of the gateway,
installed with the ``demo`` extra (``pip install 'trio-mcp-gateway[demo]'``) and run
as ``python -m mcp_gateway_demo.notes`` or ``python -m mcp_gateway_demo.toolbox``.
"""
