"""Moving one JSON message at a time to and from a backend: stdio, HTTP, SSE, WebSocket."""
