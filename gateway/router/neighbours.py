"""What the router sees of its neighbours: narrow protocols, no concrete classes.

The router is written against these seams rather than against ``Backend``,
``Pool`` or the frontend's client session, so each list below is exactly
what the router uses and nothing more, and router tests run on small fakes
that need no inheritance (STYLE rule 8). The concrete classes satisfy them
structurally; mypy checks that where ``app`` wires them together.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import msgspec

    from gateway.backends.backend import BackendState, ServerInfo
    from gateway.backends.call_clock import CallClock
    from gateway.catalog.snapshot import Kind, Snapshot
    from gateway.config import BackendConfig
    from gateway.identity.principal import Principal
    from gateway.protocol.stateless.cache_hints import CacheHint

# Sends a message on the related request's stream; False when it could not
# (stream gone or full), so the caller can fall back to the GET stream.
Emit = Callable[[bytes], bool]

# Receives a backend's progress params for one forwarded call.
ProgressListener = Callable[[dict[str, Any]], None]


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


class BackendView(Protocol):
    """The parts of one backend the router uses (``backends.Backend`` has them)."""

    @property
    def name(self) -> str:
        """The configured name: logs, metrics, catalog entries."""
        ...

    @property
    def prefix(self) -> str:
        """The public prefix of its items and URIs ("" when unprefixed)."""
        ...

    @property
    def state(self) -> BackendState:
        """Where it is in its life; only ``UP`` takes calls."""
        ...

    @property
    def reason(self) -> str:
        """Why it is in that state, for ``backend_unavailable`` errors."""
        ...

    @property
    def info(self) -> ServerInfo | None:
        """What it said in its InitializeResult; None before the first one."""
        ...

    @property
    def config(self) -> BackendConfig:
        """Its configuration (timeouts, resource list mode and filter)."""
        ...

    @property
    def per_client(self) -> bool:
        """Whether each client session gets a backend session of its own."""
        ...

    def list_hint(self, kind: Kind) -> CacheHint:
        """The cache hint of this backend's list of ``kind`` (``{0, private}`` if legacy)."""
        ...

    def offers(self, capability: str) -> bool:
        """Whether it declared a server capability (``logging``, ``completions``...)."""
        ...

    @property
    def refused(self) -> frozenset[str]:
        """Capabilities it declared and then refused with -32601 (``resources.subscribe``...)."""
        ...

    def has_link(self, client: str) -> bool:
        """Whether a per-client backend session is open for this client."""
        ...

    def close_client(self, client: str) -> None:
        """The client session ended: close its own backend session, if any."""
        ...

    async def request(
        self,
        method: str,
        params: msgspec.Raw | None = None,
        *,
        client: str | None = None,
        progress_token: str | None = None,
        on_progress: ProgressListener | None = None,
        clock: CallClock | None = None,
    ) -> msgspec.Raw:
        """Forward one request, bounded by the backend's own request timeout.

        Raises:
            BackendUnavailable: not up, or went down mid-call.
            RequestTimeout: no answer in time.
            RemoteProtocolError: the backend answered with an error.
        """
        ...

    async def notify(
        self, method: str, params: msgspec.Raw | None = None, *, client: str | None = None
    ) -> None:
        """Forward a notification; dropped when no session can carry it."""
        ...


class NotificationListener(Protocol):
    """Receives a backend's notifications (other than progress and list_changed)."""

    def __call__(
        self, backend: BackendView, method: str, params: msgspec.Raw | None, client: str | None
    ) -> None:
        """``client`` is set when the notification came on that client's own session."""
        ...


class RequestListener(Protocol):
    """Answers a backend's own requests (sampling, elicitation, roots)."""

    def __call__(
        self, backend: BackendView, method: str, params: msgspec.Raw | None, client: str | None
    ) -> Awaitable[msgspec.Raw]:
        """``client`` is set when the request came on that client's own session."""
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

    @property
    def request_handler(self) -> object:
        """Who answers backends' own requests (only ever set by the router)."""
        ...

    @request_handler.setter
    def request_handler(self, handler: RequestListener) -> None:
        """Install the router's relay for backends' own requests."""
        ...

    def on_notification(self, listener: NotificationListener) -> None:
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
