"""What every transport offers: one JSON message at a time, both ways.

A transport knows nothing of JSON-RPC. It moves whole messages (the bytes
of one JSON value) over one link and maps the link's failures to the
gateway's ``TransportError`` family, so the session above never sees a trio,
httpx or websocket exception.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

from gateway.errors import TransportError

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping


class MessageChannel(Protocol):
    """One bidirectional link carrying one JSON message per call."""

    async def send(self, message: bytes) -> None:
        """Send one encoded JSON-RPC message.

        Raises:
            TransportClosed: the channel was closed by us.
            TransportBroken: the link failed.
        """

    async def receive(self) -> bytes:
        """The next message from the peer.

        Raises:
            TransportBroken: the link failed or the peer went away (EOF).
            TransportClosed: the channel was closed by us.
        """

    async def aclose(self) -> None:
        """Close the link; idempotent."""


@contextmanager
def map_exceptions(mapping: Mapping[type[BaseException], type[TransportError]]) -> Iterator[None]:
    """Re-raise foreign exceptions as the gateway's transport errors (httpcore style).

    The first matching entry wins; anything unmapped passes through unchanged.
    """
    try:
        yield
    except TransportError:
        raise
    except Exception as exc:
        for source, target in mapping.items():
            if isinstance(exc, source):
                raise target(str(exc) or type(exc).__name__) from exc
        raise
