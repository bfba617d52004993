"""Opening a backend's transport from its config.

One function knows which transport each kind of backend config takes; the
supervisor (``supervisor.py``) only asks for a channel. Tests pass their own
opener of the same shape (``ChannelOpener``) to use in-memory fakes.
"""

from __future__ import annotations

import os
import sys
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Protocol

from gateway.config import (
    BackendConfig,
    HttpBackend,
    SseBackend,
    StdioBackend,
    WebSocketBackend,
)
from gateway.errors import ConnectError
from gateway.transports.stdio import open_stdio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from contextlib import AbstractAsyncContextManager

    import httpx

    from gateway.transports.base import MessageChannel


class TransportCredential(Protocol):
    """What a transport needs of a session's credential (``credentials.provider`` makes them)."""

    def http_auth(self) -> httpx.Auth:
        """For an HTTP transport's client: every request carries the token."""
        ...

    async def bearer(self) -> str:
        """The token now, for a WebSocket handshake."""
        ...

    def refused(self, token: str) -> None:
        """The backend refused ``token`` (a WebSocket handshake's 401)."""
        ...


class ChannelOpener(Protocol):
    """Opens a backend's transport: ``open_channel`` in production."""

    def __call__(self, cfg: BackendConfig, /) -> AbstractAsyncContextManager[MessageChannel]:
        """An async context manager yielding the channel."""
        ...


def _stdio_command(cfg: StdioBackend) -> list[str]:
    # ``python`` means the gateway's own interpreter, so the bundled demos
    # (and any module installed beside the gateway) run from a virtualenv
    # without it being on PATH. Documented in the README.
    program = sys.executable if cfg.command == "python" else cfg.command
    return [program, *cfg.args]


def _stdio_environment(cfg: StdioBackend) -> dict[str, str]:
    base = dict(os.environ) if cfg.inherit_env else {"PATH": os.environ.get("PATH", "")}
    base.update(cfg.env)
    return base


@asynccontextmanager
async def open_channel(
    cfg: BackendConfig, credential: TransportCredential | None = None
) -> AsyncIterator[MessageChannel]:
    """Open the transport a backend's config asks for.

    Args:
        cfg: the backend's config.
        credential: what the session authenticates with (its ``auth:``
            block); an HTTP client sends it on every request, a WebSocket in
            its handshake.

    Raises:
        ConnectError: the transport could not be opened.
        CredentialUnavailable: a WebSocket's token could not be had.
    """
    if isinstance(cfg, StdioBackend):
        async with open_stdio(
            _stdio_command(cfg),
            env=_stdio_environment(cfg),
            cwd=cfg.cwd,
            max_line_bytes=cfg.max_line_bytes,
            stop_grace=cfg.stop_grace,
            backend=cfg.name,
        ) as channel:
            yield channel
        return
    # Network transports are imported on first use: httpx and trio-websocket
    # cost a tenth of the gateway's start-up, and most setups are stdio only.
    if isinstance(cfg, HttpBackend):
        from gateway.transports.streamable_http import open_streamable_http

        auth = credential.http_auth() if credential is not None else None
        async with open_streamable_http(cfg, backend=cfg.name, auth=auth) as channel:
            yield channel
        return
    if isinstance(cfg, SseBackend):
        from gateway.transports.sse import open_sse

        auth = credential.http_auth() if credential is not None else None
        async with open_sse(cfg, backend=cfg.name, auth=auth) as channel:
            yield channel
        return
    if isinstance(cfg, WebSocketBackend):
        from gateway.transports.websocket import open_websocket

        bearer = await credential.bearer() if credential is not None else None
        try:
            async with open_websocket(cfg, backend=cfg.name, bearer=bearer) as channel:
                yield channel
        except ConnectError:
            # A refused handshake may be a refused token: the next attempt
            # (the supervisor's restart) fetches a new one.
            if credential is not None and bearer is not None:
                credential.refused(bearer)
            raise
        return
    raise ConnectError(f"transport {type(cfg).__name__} is not supported yet")
