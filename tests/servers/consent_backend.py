"""Test peer "tracker": an official-SDK Streamable HTTP server acting for whoever's token it gets.

Usage::

    python tests/servers/consent_backend.py PORT RECORD_FILE [ISSUER]

Listing needs no token (the gateway's catalog session sends none); the
tool ``whoami`` needs the person's bearer token: it answers with the
token's ``sub`` (the person who consented) and appends one JSON line
``{"sub": ..., "token": ...}`` to RECORD_FILE, so a test can check whose
token each call carried. Without a bearer it fails. The token is read, not
verified: the authorization server's signature is not what is tested here.

With ISSUER, the server is a protected resource as the MCP authorization
spec has it: every MCP request without a bearer token (listing too) is
answered 401 with ``WWW-Authenticate: Bearer resource_metadata=...``, and
its protected resource metadata (RFC 9728) at
``/.well-known/oauth-protected-resource/mcp`` names ISSUER.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.fastmcp import Context, FastMCP


def _sub(token: str) -> str:
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return ""
    sub = claims.get("sub") if isinstance(claims, dict) else None
    return sub if isinstance(sub, str) else ""


def build(record: Path) -> Any:
    """The SDK's Streamable HTTP app with the recording tool."""
    mcp = FastMCP("tracker", log_level="WARNING")

    @mcp.tool()
    def whoami(ctx: Context) -> str:  # type: ignore[type-arg]
        """Who this call acts for: the sub of the bearer token it carried."""
        request = ctx.request_context.request
        value = request.headers.get("authorization", "") if request is not None else ""
        token = value[7:] if value.startswith("Bearer ") else ""
        if not token:
            raise ValueError("this tool acts for a person: no bearer token")
        sub = _sub(token)
        with record.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"sub": sub, "token": token}) + "\n")
        return f"acting for {sub}"

    return mcp.streamable_http_app()


def protected(app: Any, origin: str, issuer: str) -> Any:
    """``app`` behind a bearer check, serving its resource metadata (RFC 9728)."""
    well_known = "/.well-known/oauth-protected-resource/mcp"
    document = json.dumps(
        {
            "resource": origin + "/mcp",
            "authorization_servers": [issuer],
            "scopes_supported": ["tracker:read"],
        }
    ).encode()
    challenge = f'Bearer resource_metadata="{origin}{well_known}"'.encode()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        if scope["path"] == well_known:
            status, body, extra = 200, document, [(b"content-type", b"application/json")]
        elif not any(
            name == b"authorization" and value.startswith(b"Bearer ")
            for name, value in scope["headers"]
        ):
            status, body, extra = 401, b"", [(b"www-authenticate", challenge)]
        else:
            await app(scope, receive, send)
            return
        headers = [(b"content-length", str(len(body)).encode()), *extra]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return guarded


def main() -> None:
    """Serve on 127.0.0.1:PORT until terminated."""
    port = int(sys.argv[1])
    app = build(Path(sys.argv[2]))
    if len(sys.argv) > 3:
        app = protected(app, f"http://127.0.0.1:{port}", sys.argv[3])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
