"""What a backend hands upwards: the shapes of the pool's two callbacks.

The router answers a backend's own requests and fans its notifications out;
the backend layer knows them only by these protocols, so it never imports
the router (docs/architecture.md, the layers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Awaitable

    import msgspec

    from gateway.backends.backend import Backend


class BackendNotificationHandler(Protocol):
    """Receives a backend's notifications (other than progress and list_changed)."""

    def __call__(
        self, backend: Backend, method: str, params: msgspec.Raw | None, client: str | None
    ) -> None:
        """``client`` is set when the notification came on that client's own session."""
        ...


class BackendRequestHandler(Protocol):
    """Answers a backend's own requests (sampling, elicitation, roots)."""

    def __call__(
        self, backend: Backend, method: str, params: msgspec.Raw | None, client: str | None
    ) -> Awaitable[msgspec.Raw]:
        """``client`` is set when the request came on that client's own session."""
        ...


__all__ = ["BackendNotificationHandler", "BackendRequestHandler"]
