"""The HTTP header names and media types MCP's HTTP transports use (sans-IO).

Both legs speak them: the frontend reads them from hosts and the HTTP
transports send them to backends, so a name is spelled in exactly one place
(python-sdk ``MCP_SESSION_ID_HEADER``). Names are lower-case, as HTTP/2
sends them and as ASGI hands them over; ``*_RAW`` are the same names as the
bytes an ASGI scope carries.
"""

from __future__ import annotations

from typing import Final

# The session a request belongs to, given by the server with its
# InitializeResult (transports, "Session Management").
MCP_SESSION_ID_HEADER: Final = "mcp-session-id"
# The negotiated revision, on every request after initialize (2025-06-18).
MCP_PROTOCOL_VERSION_HEADER: Final = "mcp-protocol-version"
# The last SSE event a client saw, sent to resume a stream (SSE standard).
LAST_EVENT_ID_HEADER: Final = "last-event-id"

JSON_MEDIA_TYPE: Final = "application/json"
SSE_MEDIA_TYPE: Final = "text/event-stream"

MCP_SESSION_ID_HEADER_RAW: Final = MCP_SESSION_ID_HEADER.encode("ascii")
MCP_PROTOCOL_VERSION_HEADER_RAW: Final = MCP_PROTOCOL_VERSION_HEADER.encode("ascii")
LAST_EVENT_ID_HEADER_RAW: Final = LAST_EVENT_ID_HEADER.encode("ascii")
JSON_MEDIA_TYPE_RAW: Final = JSON_MEDIA_TYPE.encode("ascii")
SSE_MEDIA_TYPE_RAW: Final = SSE_MEDIA_TYPE.encode("ascii")
