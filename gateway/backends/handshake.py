"""The ``initialize`` exchange: what the gateway says, what it keeps of the answer.

Both the shared session and every per-client session open with the same
handshake, so it lives here, apart from who runs it. The answer is read by a
pure function (``server_info``); only ``Handshake.__call__`` talks to a peer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from gateway import __version__
from gateway.errors import GatewayError
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.versions import LATEST_VERSION, accept_as_client

if TYPE_CHECKING:
    import msgspec

    from gateway.session import Peer

# What the gateway tells backends about itself as a client. Roots,
# sampling and elicitation are relayed to hosts (router), so we offer them.
CLIENT_CAPABILITIES: Final = {
    "roots": {"listChanged": True},
    "sampling": {},
    "elicitation": {},
}


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What a backend said about itself in its InitializeResult."""

    protocol_version: str
    capabilities: dict[str, Any]
    instructions: str | None
    name: str
    version: str


class IncompatibleBackend(GatewayError):
    """The backend answered initialize with a revision we do not speak."""


def initialize_params() -> msgspec.Raw:
    """The params of our ``initialize`` request."""
    return jsonrpc.to_raw(
        {
            "protocolVersion": LATEST_VERSION,
            "capabilities": CLIENT_CAPABILITIES,
            "clientInfo": {"name": "mcp-gateway", "version": __version__},
        }
    )


def server_info(result: msgspec.Raw) -> ServerInfo:
    """Read an InitializeResult, tolerating odd field types.

    Raises:
        IncompatibleBackend: the backend chose a revision we do not speak.
    """
    body = mcp.decode_object(result) or {}
    version = accept_as_client(body.get("protocolVersion"))
    if version is None:
        raise IncompatibleBackend(
            f"backend answered protocolVersion {body.get('protocolVersion')!r}, "
            "which the gateway does not speak"
        )
    capabilities = body.get("capabilities")
    info = body.get("serverInfo")
    info = info if isinstance(info, dict) else {}
    instructions = body.get("instructions")
    return ServerInfo(
        protocol_version=version,
        capabilities=capabilities if isinstance(capabilities, dict) else {},
        instructions=instructions if isinstance(instructions, str) else None,
        name=str(info.get("name", "")),
        version=str(info.get("version", "")),
    )


class Handshake:
    """Runs ``initialize`` on a new session and counts the answers (a metric)."""

    def __init__(self) -> None:
        self.count = 0

    async def __call__(self, peer: Peer) -> ServerInfo:
        """Initialize ``peer``; the caller sets the deadline and sends ``initialized``.

        Raises:
            IncompatibleBackend: the backend chose a revision we do not speak.
        """
        result = await peer.request("initialize", initialize_params())
        self.count += 1
        return server_info(result)
