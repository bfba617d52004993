"""The Streamable HTTP transport towards hosts.

The ``/mcp`` endpoint, its POST answers and GET streams.
"""
