"""Opening a backend session: the 2026-07-28 probe, else ``initialize``.

Both the shared session and every per-client session open the same way, so
it lives here, apart from who runs it. The answers are read by pure
functions (``server_info`` here, ``protocol.backend_leg.read_discover``);
only ``Handshake.__call__`` talks to a peer.

Rules (config ``protocol``):

1. ``legacy``: ``initialize`` only (the caller sends ``initialized``).
2. ``auto``: ``server/discover`` with the modern envelope first, bounded by
   ``PROBE_TIMEOUT``; a DiscoverResult listing 2026-07-28 makes the session
   modern. Any error answer but a -32022 naming 2026-07-28, or no answer in
   time, falls back to ``initialize`` on the same session. A handshake-era
   server answers an unknown method with an error (SDK 1.x: -32602), so the
   fallback costs one round trip; one that never answers costs the timeout.
3. ``modern``: the probe only; anything but a DiscoverResult listing
   2026-07-28 fails the attempt (``IncompatibleBackend``, naming what the
   backend said).
4. A -32022 naming 2026-07-28 shows a modern server that refused our
   envelope: the probe is sent once more (sep-2575's client retry: a
   server may refuse a connection's first request), and a second refusal
   fails the attempt (``IncompatibleBackend``) in ``auto`` too, since
   ``initialize`` would not help.
5. What discover said is kept as the ``ServerInfo`` the handshake keeps
   (``modern=True``), so the catalog, the merged instructions and the
   gateway's own discover/initialize answers read one shape.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import trio

from gateway import __version__
from gateway.config import SseBackend
from gateway.errors import GatewayError, RemoteProtocolError
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.stateless import backend_leg
from gateway.protocol.stateless.cache_hints import NO_CACHE, CacheHint
from gateway.protocol.versions import LATEST_VERSION, accept_as_client

if TYPE_CHECKING:
    import msgspec

    from gateway.config import BackendConfig
    from gateway.session.peer import Peer

# What the gateway tells backends about itself as a client on its own
# (catalog) session: everything it relays to hosts (router/to_clients), so
# the catalog lists what some host can use. A session of a principal or
# client declares that host's own capabilities instead (backends/links).
CLIENT_CAPABILITIES: Final = {
    "roots": {"listChanged": True},
    "sampling": {"tools": {}},
    "elicitation": {"form": {}, "url": {}},
}
# How long ``auto`` waits for an answer to ``server/discover`` before it
# takes the backend for a handshake-era server that ignores unknown methods.
PROBE_TIMEOUT: Final = 5.0


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What a backend said about itself in its InitializeResult."""

    protocol_version: str
    capabilities: dict[str, Any]
    instructions: str | None
    name: str
    version: str
    modern: bool = False
    supported_versions: tuple[str, ...] = ()
    # A modern backend's own discover hint (a handshake-era one gives none).
    discover_hint: CacheHint = NO_CACHE


class IncompatibleBackend(GatewayError):
    """The backend answered initialize with a revision we do not speak."""


def initialize_params(capabilities: dict[str, Any] | None = None) -> msgspec.Raw:
    """The params of our ``initialize`` request.

    Args:
        capabilities: what to declare: a host's own (a session of a
            principal or client), else the gateway's (its shared session).
    """
    return jsonrpc.to_raw(
        {
            "protocolVersion": LATEST_VERSION,
            "capabilities": CLIENT_CAPABILITIES if capabilities is None else capabilities,
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


def effective_protocol(config: BackendConfig) -> str:
    """The ``protocol`` setting in force: HTTP+SSE is handshake-era only."""
    return "legacy" if isinstance(config, SseBackend) else config.protocol


def discovered_info(found: backend_leg.Discovered) -> ServerInfo:
    """A modern backend's DiscoverResult in the shape the handshake keeps (rule 5)."""
    return ServerInfo(
        protocol_version=backend_leg.MODERN_VERSION,
        capabilities=found.capabilities,
        instructions=found.instructions,
        name=found.name,
        version=found.version,
        modern=True,
        supported_versions=found.supported_versions,
        discover_hint=found.hint,
    )


class Handshake:
    """Opens sessions (probe, else ``initialize``) and counts the answers (metrics).

    Attributes:
        count: ``initialize`` answers received.
        discovered: ``server/discover`` answers that made a session modern.
        requests: requests sent on the backend's sessions, by their era.
    """

    def __init__(self) -> None:
        self.count = 0
        self.discovered = 0
        self.requests: collections.Counter[str] = collections.Counter()

    def sent(self, info: ServerInfo | None) -> None:
        """Count one request sent on a session of ``info``'s era (a metric)."""
        if info is not None:
            self.requests["modern" if info.modern else "legacy"] += 1

    async def __call__(
        self, peer: Peer, protocol: str = "legacy", *, capabilities: dict[str, Any] | None = None
    ) -> ServerInfo:
        """Open ``peer`` as ``protocol`` says; the caller sets the deadline.

        The caller sends ``notifications/initialized`` when the answer is
        not modern. A modern answer turns the peer's envelope on.

        Args:
            peer: the new session.
            protocol: the backend's ``protocol`` setting.
            capabilities: the client capabilities to declare (None: the gateway's).

        Raises:
            IncompatibleBackend: the backend chose a revision we do not speak,
                or refused the modern probe when ``protocol`` is ``modern``.
        """
        if protocol != "legacy":
            found = await self._probe(peer, required=protocol == "modern")
            if found is not None:
                self.discovered += 1
                peer.modern = True
                return discovered_info(found)
        result = await peer.request("initialize", initialize_params(capabilities))
        self.count += 1
        return server_info(result)

    async def _probe(
        self, peer: Peer, *, required: bool, retry: bool = True
    ) -> backend_leg.Discovered | None:
        """``server/discover``; the modern answer, or None to fall back (rules 2-4)."""
        params = jsonrpc.to_raw(backend_leg.discover_params())
        verdict = ""
        again = False
        try:
            with trio.move_on_after(PROBE_TIMEOUT) as scope:
                result = await peer.request("server/discover", params)
            if scope.cancelled_caught:
                verdict = f"no answer to server/discover within {PROBE_TIMEOUT:g} s"
            else:
                return backend_leg.read_discover(mcp.decode_object(result))
        except RemoteProtocolError as exc:
            if backend_leg.read_discover_error(exc.code, exc.data) and not retry:
                raise IncompatibleBackend(
                    "backend speaks 2026-07-28 but refused the gateway's envelope "
                    f"({exc.code}: {exc.message})"
                ) from None
            again = backend_leg.read_discover_error(exc.code, exc.data)
            verdict = f"server/discover answered {exc.code}: {exc.message}"
        except backend_leg.NotModern as exc:
            verdict = str(exc)
        if again:
            # A -32022 naming 2026-07-28, the version we sent: ask once more,
            # as sep-2575 has a client retry with a version the server lists
            # (a server may refuse a connection's first request).
            return await self._probe(peer, required=required, retry=False)
        if required:
            raise IncompatibleBackend(f"protocol: modern, but {verdict}")
        return None
