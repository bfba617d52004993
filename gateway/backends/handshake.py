"""Opening a backend session: the 2026-07-28 probe, else ``initialize``.

Both the shared session and every per-client session open the same way, so
it lives here, apart from who runs it. The answers are read by pure
functions (``server_info`` here, ``protocol.backend_leg.read_discover``);
only ``Handshake.__call__`` talks to a peer.

Rules (config ``protocol``; bounds from ``timeouts``):

1. ``legacy``: ``initialize`` only, within ``timeouts.initialize`` (the
   caller sends ``initialized``).
2. ``auto``: ``server/discover`` with the modern envelope first, waited on
   for up to ``timeouts.probe``; a DiscoverResult listing 2026-07-28 makes
   the session modern, however late it comes. An error answer (a
   handshake-era server answers an unknown method with one: SDK 1.x
   -32602, others -32601) or a legacy-shaped answer is a refusal, and
   ``initialize`` follows on the same session: the fallback costs one
   round trip.
3. Silence is not a refusal. ``initialize`` is never sent on a session
   whose ``server/discover`` has not been seen to fail: a server that chose
   2026-07-28 for the connection would refuse it (-32022), and a late
   DiscoverResult would be dropped. No answer within ``timeouts.probe``
   fails the attempt with ``StatelessLegFailed``; the supervisor's next
   attempt opens a new connection in the handshake era
   (``backends/stateless/era_fallback.py``).
4. ``modern``: the probe only; anything but a DiscoverResult listing
   2026-07-28 fails the attempt (``IncompatibleBackend``, naming what the
   backend said or that it said nothing).
5. A -32022 naming 2026-07-28 shows a modern server that refused our
   envelope: the probe is sent once more (sep-2575's client retry: a
   server may refuse a connection's first request), and a second refusal
   fails the attempt (``IncompatibleBackend``) in ``auto`` too, since
   ``initialize`` would not help.
6. What discover said is kept as the ``ServerInfo`` the handshake keeps
   (``modern=True``), so the catalog, the merged instructions and the
   gateway's own discover/initialize answers read one shape.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any, Final

import trio

from gateway import __version__
from gateway.backends.state import ServerInfo
from gateway.config import SseBackend
from gateway.errors import GatewayError, RemoteProtocolError
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.stateless import backend_leg
from gateway.protocol.versions import LATEST_VERSION, accept_as_client

if TYPE_CHECKING:
    import msgspec

    from gateway.config import BackendConfig, Timeouts
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


class IncompatibleBackend(GatewayError):
    """The backend answered initialize with a revision we do not speak."""


class StatelessLegFailed(GatewayError):
    """The backend's 2026-07-28 leg did not work on this connection (rule 3).

    The message names what was wrong (no answer to ``server/discover``, a
    listen that is not an event stream, an acknowledgement never seen, a
    capability declared and then refused). The supervisor answers it by
    connecting again in the handshake era, never by ``initialize`` on the
    same connection.
    """


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
        self,
        peer: Peer,
        protocol: str,
        timeouts: Timeouts,
        *,
        capabilities: dict[str, Any] | None = None,
    ) -> ServerInfo:
        """Open ``peer`` as ``protocol`` says, each step within its own bound.

        The caller sends ``notifications/initialized`` when the answer is
        not modern. A modern answer turns the peer's envelope on.

        Args:
            peer: the new session.
            protocol: the backend's ``protocol`` setting (or the era the
                supervisor chose for this attempt).
            timeouts: the backend's ``timeouts`` (``probe``, ``initialize``).
            capabilities: the client capabilities to declare (None: the gateway's).

        Raises:
            IncompatibleBackend: the backend chose a revision we do not speak,
                or refused the modern probe when ``protocol`` is ``modern``.
            StatelessLegFailed: ``auto``, and no answer to the probe within
                ``timeouts.probe`` (rule 3).
            trio.TooSlowError: no answer to ``initialize`` in time.
        """
        if protocol != "legacy":
            found = await self._probe(peer, timeouts.probe, required=protocol == "modern")
            if found is not None:
                self.discovered += 1
                peer.modern = True
                return discovered_info(found)
        with trio.fail_after(timeouts.initialize):
            result = await peer.request("initialize", initialize_params(capabilities))
        self.count += 1
        return server_info(result)

    async def _probe(
        self, peer: Peer, limit: float, *, required: bool, retry: bool = True
    ) -> backend_leg.Discovered | None:
        """``server/discover``; the modern answer, or None to fall back (rules 2-5)."""
        params = jsonrpc.to_raw(backend_leg.discover_params())
        verdict = ""
        again = False
        try:
            with trio.move_on_after(limit) as scope:
                result = await peer.request("server/discover", params)
            if scope.cancelled_caught:
                silence = f"no answer to server/discover within {limit:g} s"
                if required:
                    raise IncompatibleBackend(f"protocol: modern, but {silence}")
                raise StatelessLegFailed(silence)
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
            return await self._probe(peer, limit, required=required, retry=False)
        if required:
            raise IncompatibleBackend(f"protocol: modern, but {verdict}")
        return None
