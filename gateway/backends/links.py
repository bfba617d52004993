"""Per-client backend sessions (session mode ``per_client``).

Rules:

1. A client's own backend session is opened on its first call and runs as a
   task in the backend's session nursery (``attach``), so it never outlives
   the shared session it belongs to: when that ends, every link ends too
   (``close_all``).
2. A failure to open a link goes to the call that asked for it, as
   ``BackendUnavailable`` carrying the condition; after it opened, a broken
   link just ends. One client's broken session never takes the backend down.
3. Calls that arrive while a link is opening wait for that one opening
   rather than starting another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import trio

from gateway.backends.failure_reasons import EXPECTED, condition, describe
from gateway.backends.handshake import effective_protocol
from gateway.errors import BackendUnavailable
from gateway.session.peer import Peer, open_session
from gateway.transports.base import schemas_for

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import msgspec

    from gateway.backends.channel import ChannelOpener
    from gateway.backends.handshake import Handshake
    from gateway.backends.state import ServerInfo
    from gateway.config import BackendConfig
    from gateway.transports.base import ToolSchemas


class SessionRequestHandler(Protocol):
    """Answers a request a backend session sent, knowing whose session it is."""

    def __call__(
        self, method: str, params: msgspec.Raw | None, *, client: str | None = None
    ) -> Awaitable[msgspec.Raw]:
        """``client`` is None on the shared session."""
        ...


class SessionNotificationHandler(Protocol):
    """Takes a notification a backend session sent, knowing whose session it is."""

    def __call__(
        self, method: str, params: msgspec.Raw | None, *, client: str | None = None
    ) -> None:
        """``client`` is None on the shared session."""
        ...


@dataclass(eq=False)
class _ClientLink:
    """One client's backend session."""

    client: str
    peer: Peer | None = None
    ready: trio.Event = field(default_factory=trio.Event)
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)


class Links:
    """The per-client backend sessions of one backend.

    Args:
        config: the backend's config.
        connect: opens the transport.
        handshake: runs ``initialize`` on each new session.
        on_request: answers the backend's requests on a link.
        on_notification: takes the backend's notifications on a link.
        log: the backend's bound logger.
        tool_schema: the backend's own ``inputSchema`` by tool name, for a
            modern HTTP link's ``Mcp-Param-*`` headers.
        shared_info: what the shared session learnt; a link speaks the same
            era without probing again (one round trip less per client).
        connect_client: opens one client's transport, when that differs by
            client (a ``token_exchange`` credential); else ``connect``.
    """

    def __init__(
        self,
        config: BackendConfig,
        *,
        connect: ChannelOpener,
        handshake: Handshake,
        on_request: SessionRequestHandler,
        on_notification: SessionNotificationHandler,
        log: Any,
        tool_schema: ToolSchemas | None = None,
        shared_info: Callable[[], ServerInfo | None] | None = None,
        connect_client: Callable[[str], ChannelOpener] | None = None,
    ) -> None:
        self._config = config
        self._connect_client = connect_client
        self._tool_schema = tool_schema
        self._shared_info = shared_info
        self._name = config.name
        self._connect = connect
        self._handshake = handshake
        self._on_request = on_request
        self._on_notification = on_notification
        self._log = log
        self._nursery: trio.Nursery | None = None
        self._links: dict[str, _ClientLink] = {}

    def _protocol(self) -> str:
        """The era for a new link: the shared session's, else the configured probe."""
        info = self._shared_info() if self._shared_info is not None else None
        if info is None:
            return effective_protocol(self._config)
        return "modern" if info.modern else "legacy"

    def attach(self, nursery: trio.Nursery) -> None:
        """Run links in ``nursery`` (the shared session's) from now on."""
        self._nursery = nursery

    def detach(self) -> None:
        """The shared session is ending: open no more links."""
        self._nursery = None

    def close_all(self) -> None:
        """End every link (the shared session ended)."""
        for link in list(self._links.values()):
            link.scope.cancel()
        self._links.clear()

    def __contains__(self, client: object) -> bool:
        return client in self._links

    def peer_of(self, client: str) -> Peer | None:
        """The client's open session, if any; never opens one."""
        link = self._links.get(client)
        return link.peer if link is not None else None

    def close(self, client: str) -> None:
        """The client session ended: close its own backend session, if any."""
        link = self._links.pop(client, None)
        if link is not None:
            link.scope.cancel()
            link.ready.set()

    async def peer_for(self, client: str) -> Peer:
        """The client's own session, opened on first use.

        Only called while the backend is up, which is when a nursery is attached.

        Raises:
            BackendUnavailable: the session could not be opened, or closed.
        """
        link = self._links.get(client)
        if link is None:
            link = _ClientLink(client)
            self._links[client] = link
            assert self._nursery is not None  # attached whenever the backend is up
            try:
                await self._nursery.start(self._run, link)
            except (*EXPECTED, BaseExceptionGroup) as exc:
                self._links.pop(client, None)
                link.ready.set()
                raise BackendUnavailable(
                    self._name,
                    f"cannot open a session for this client: {describe(exc)}",
                    cause=condition(exc),
                ) from None
        await link.ready.wait()
        if link.peer is None:
            raise BackendUnavailable(self._name, "the client's backend session closed")
        return link.peer

    async def _run(
        self, link: _ClientLink, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """One client's own backend session.

        Failures before ``started`` go to the caller; after that, the link
        just ends.
        """
        started = False
        log = self._log.bind(client_session=link.client[:8])
        try:
            with link.scope:
                connect = (
                    self._connect_client(link.client)
                    if self._connect_client is not None
                    else self._connect
                )
                async with (
                    connect(self._config) as channel,
                    open_session(
                        channel,
                        name=f"{self._name}/{link.client[:8]}",
                        on_request=partial(self._on_request, client=link.client),
                        on_notification=partial(self._on_notification, client=link.client),
                    ) as peer,
                ):
                    schemas_for(channel, self._tool_schema)
                    info = await self._handshake(peer, self._protocol(), self._config.timeouts)
                    if not info.modern:
                        await peer.notify("notifications/initialized")
                    link.peer = peer
                    link.ready.set()
                    started = True
                    task_status.started()
                    log.info("backend.client_session.opened")
                    await peer.closed.wait()
        except (*EXPECTED, BaseExceptionGroup) as exc:
            if isinstance(exc, BaseExceptionGroup):
                _, rest = exc.split(EXPECTED)
                if rest is not None:
                    raise
            if not started:
                raise
            log.info("backend.client_session.failed", error=describe(exc))
        finally:
            link.peer = None
            link.ready.set()
            if self._links.get(link.client) is link:
                del self._links[link.client]
            log.info("backend.client_session.closed")
