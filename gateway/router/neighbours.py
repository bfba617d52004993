"""What the router sees of its neighbours: narrow protocols, no concrete classes.

The router is written against these seams rather than against ``Backend``,
``Pool`` or the frontend's client session, so each list below is exactly
what the router uses and nothing more, and router tests run on small fakes
that need no inheritance (STYLE rule 8). The concrete classes satisfy them
structurally; mypy checks that where ``app`` wires them together. What the
router sees of one backend (``BackendView``, its state and info, the pool's
callbacks) is the backends' own seam, ``gateway.backends.state``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import msgspec

    from gateway.backends.state import (
        BackendNotificationHandler,
        BackendRequestHandler,
        BackendView,
    )
    from gateway.catalog.snapshot import Kind, Snapshot
    from gateway.identity.principal import Principal

# Sends a message on the related request's stream; False when it could not
# (stream gone or full), so the caller can fall back to the GET stream.
Emit = Callable[[bytes], bool]


class ClientPeer(Protocol):
    """What the router needs of a client session; the frontend provides it."""

    @property
    def session_id(self) -> str:
        """Opaque, unguessable id."""
        ...

    @property
    def protocol_version(self) -> str:
        """The revision negotiated with this client."""
        ...

    @property
    def principal(self) -> str | None:
        """The key of the principal it was authenticated as (None: auth off).

        Cursors and sealed ``requestState`` made for one principal verify
        for no other.
        """
        ...

    @property
    def caller(self) -> Principal | None:
        """The principal itself (None: auth off), for the access policy.

        Decided anew on every request, so a reloaded policy applies to
        sessions already open.
        """
        ...

    @property
    def capabilities(self) -> dict[str, Any]:
        """What the client declared in initialize."""
        ...

    @property
    def profile(self) -> str:
        """The profile whose endpoint the client came in on (``catalog.profiles``)."""
        ...

    def notify_nowait(self, message: bytes) -> None:
        """Queue an unsolicited message (its GET stream or stdio peer)."""
        ...

    async def request(
        self, method: str, params: msgspec.Raw | None, emit: Emit | None
    ) -> msgspec.Raw:
        """Ask the client something (server-to-client request) and wait for its answer.

        ``emit`` is the related request's stream, when there is one.

        Raises:
            RemoteProtocolError: the client answered with an error.
        """
        ...


class PoolView(Protocol):
    """The parts of the backend pool the router uses (``backends.Pool`` has them)."""

    @property
    def snapshot(self) -> Snapshot:
        """The current merged catalog."""
        ...

    @property
    def backends(self) -> Mapping[str, BackendView]:
        """Every configured backend, by name."""
        ...

    def get(self, name: str) -> BackendView | None:
        """The backend of that name, if configured."""
        ...

    def on_request(self, handler: BackendRequestHandler) -> None:
        """Have ``handler`` answer backends' own requests (the router's relay)."""
        ...

    def pin_refused(self, backend: str, kind: Kind, name: str) -> bool:
        """Whether calls to that item are refused until its change is approved (``block``)."""
        ...

    def pin_withheld(self, backend: str, kind: Kind, name: str) -> bool:
        """Whether hosts are shown that item's pin, or nothing, instead of it (``hold``)."""
        ...

    def on_notification(self, listener: BackendNotificationHandler) -> None:
        """Call ``listener`` for each backend notification."""
        ...

    def on_state_change(self, listener: Callable[[BackendView], None]) -> None:
        """Call ``listener(backend)`` whenever a backend's state or listing changes."""
        ...


def subscribable(backend: BackendView) -> bool:
    """Whether a backend takes ``resources/subscribe`` (declared, either era)."""
    info = backend.info
    if info is None:
        return False
    # A 2026-07-28 backend declares the same flag; its subscriptions ride on
    # the gateway's standing listen (backends/upstream_listen.py).
    resources = info.capabilities.get("resources")
    declared = isinstance(resources, dict) and resources.get("subscribe") is True
    # Declared and then refused (-32601 to the list or a subscription) is not served.
    return declared and not {"resources", "resources.subscribe"} & backend.refused
