"""The ``trio-mcp-gateway`` command line: parsing, the commands, and the process that serves."""
