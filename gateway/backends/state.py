"""What the rest of the gateway knows of a backend: its state, its info, its view.

The seam between the backends and the router, in the manner of httpcore's
``interfaces.py``: plain data (``BackendState``, ``ServerInfo``), the narrow
protocol the router calls a backend through (``BackendView``), and the
shapes of the pool's two callbacks, which answer a backend's own requests
and fan its notifications out (``BackendRequestHandler``,
``BackendNotificationHandler``).

Rules:

1. This module imports no other module of the gateway's backends (nor the
   session, the transports or the supervisor): ``gateway.router`` imports
   only this of ``gateway.backends``, so loading the router loads none of
   them (docs/architecture.md, the layers).
2. ``backends.Backend`` satisfies ``BackendView`` structurally; mypy checks
   that where the pool hands a backend to a handler and where ``app`` wires
   the pool to the router. Nothing inherits from the protocols.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from gateway.protocol.stateless.cache_hints import NO_CACHE, CacheHint

if TYPE_CHECKING:
    import msgspec

    from gateway.backends.call_clock import CallClock
    from gateway.catalog.snapshot import Kind
    from gateway.config import BackendConfig

# Receives a backend's progress params for one forwarded call.
ProgressListener = Callable[[dict[str, Any]], None]


class BackendState(enum.Enum):
    """Where a backend is in its life."""

    STARTING = "starting"
    UP = "up"
    DOWN = "down"
    INCOMPATIBLE = "incompatible"
    STOPPED = "stopped"


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
    def refused_listing(self) -> bool:
        """Down because it refused the catalog session's credential (HTTP 401)."""
        ...

    @property
    def config(self) -> BackendConfig:
        """Its configuration (timeouts, resource list mode and filter)."""
        ...

    @property
    def per_client(self) -> bool:
        """Whether each client session gets a backend session of its own."""
        ...

    @property
    def keyed_by_roots(self) -> bool:
        """Whether its sessions are shared by a principal's hosts with the same roots."""
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

    def rekey_client(self, client: str) -> None:
        """The client's roots are known anew: its principal's session follows them."""
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


class BackendNotificationHandler(Protocol):
    """Receives a backend's notifications (other than progress and list_changed)."""

    def __call__(
        self, backend: BackendView, method: str, params: msgspec.Raw | None, client: str | None
    ) -> None:
        """``client`` is set when the notification came on that client's own session."""
        ...


class BackendRequestHandler(Protocol):
    """Answers a backend's own requests (sampling, elicitation, roots)."""

    def __call__(
        self, backend: BackendView, method: str, params: msgspec.Raw | None, client: str | None
    ) -> Awaitable[msgspec.Raw]:
        """``client`` is set when the request came on that client's own session."""
        ...


__all__ = [
    "BackendNotificationHandler",
    "BackendRequestHandler",
    "BackendState",
    "BackendView",
    "ProgressListener",
    "ServerInfo",
]
