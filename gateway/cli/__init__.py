"""The ``mcp-gateway`` command line: argument parsing, the commands, and the process that serves."""
