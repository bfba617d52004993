"""What every transport offers: one JSON message at a time, both ways.

A transport knows nothing of JSON-RPC. It moves whole messages (the bytes
of one JSON value) over one link and maps the link's failures to the
gateway's ``TransportError`` family, so the session above never sees a trio,
httpx or websocket exception.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from gateway.errors import TransportError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    # A backend's own ``inputSchema`` by tool name (None when unknown).
    ToolSchemas = Callable[[str], object]


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


def mapped(
    exc: Exception, mapping: Mapping[type[BaseException], type[TransportError]]
) -> Exception:
    """``exc`` as :func:`map_exceptions` would raise it (``from exc``), for a hot path's ``except``.

    A ``with map_exceptions(...)`` costs a generator and four calls even
    when nothing is raised; a plain ``try`` costs nothing then.
    """
    if isinstance(exc, TransportError):
        return exc
    for source, target in mapping.items():
        if isinstance(exc, source):
            return target(str(exc) or type(exc).__name__)
    return exc


@runtime_checkable
class NeedsToolSchemas(Protocol):
    """A channel that mints ``Mcp-Param-*`` headers from the backend's tool schemas.

    Streamable HTTP towards a 2026-07-28 backend: the headers mirror tool
    arguments as the backend's own ``x-mcp-header`` annotations say.
    """

    def use_tool_schemas(self, lookup: ToolSchemas) -> None:
        """From now on, look tool schemas up with ``lookup``."""


def schemas_for(channel: object, lookup: ToolSchemas | None) -> None:
    """Hand ``lookup`` to ``channel`` when it wants tool schemas; else nothing."""
    if lookup is not None and isinstance(channel, NeedsToolSchemas):
        channel.use_tool_schemas(lookup)
