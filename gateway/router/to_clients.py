"""From backends back to clients: notifications and backends' own requests.

Rules:

1. A backend's own request (sampling, elicitation, roots) goes to the one
   client that owns it: the client the backend session named (a session of
   a principal or client knows whose call is in flight on it), else the
   only client with calls in flight to that backend. No owner, several
   owners, or an owner without the capability: the backend gets an error at
   once, never a guess and never a hang. A held modern call waiting for its
   client's retry is no candidate: its backend already waits on its question.
2. Notifications fan out only to the clients they concern: list_changed to
   all (the app's coalescer does that), resources/updated to subscribers,
   log messages to clients whose level admits them.
3. The router never awaits a client while fanning out: messages are queued
   with ``notify_nowait`` (STYLE rule 4).
4. A client that does not answer a backend's request within the backend's
   ``timeouts.input`` is answered for, with -32001, so the backend never
   hangs. While the question is open, the request clock of the call it
   belongs to stands still (``backends/call_clock``): a person's time to
   answer is not spent from ``timeouts.request``.
5. A backend's request that needs a mode the owner did not declare (URL
   elicitation, sampling with tools) is refused, -32601; a 2026-07-28
   host's call then ends with -32021 naming the mode in
   ``requiredCapabilities`` (``S/basic/index.mdx``), as for a missing
   capability. A URL elicitation's ``notifications/elicitation/complete``
   goes to the client that was asked; a 2026-07-28 host has no such
   notification (removed in that revision) and learns the outcome from its
   retry's result.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, Final

import structlog
import trio

from gateway.catalog.naming import public_uri
from gateway.errors import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    REQUEST_TIMEOUT_CODE,
    LocalProtocolError,
)
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.stateless.mrtr import without_key_hint
from gateway.router.context import ModernRequest
from gateway.router.filtering import filter_backend_request

if TYPE_CHECKING:
    from collections.abc import Callable

    import msgspec

    from gateway.backends.state import BackendView
    from gateway.guardrails.chains import Guardrails
    from gateway.protocol.tables import LogLevels, Owners, Subscriptions
    from gateway.router.context import Call
    from gateway.router.neighbours import ClientPeer

logger = structlog.get_logger("gateway.router")

# Server-to-client requests a backend may send, and the client capability
# each needs (spec: client features).
_CLIENT_FEATURES: Final = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}
#: The client capabilities without which no backend request reaches a client
#: (the frontend's plain JSON path relies on it: docs/performance.md).
ASKABLE_FEATURES: Final = frozenset(_CLIENT_FEATURES.values())


def lacking_mode(
    method: str, params: msgspec.Raw | None, capabilities: dict[str, Any]
) -> str | None:
    """The sub-capability a backend's request needs and the host did not declare.

    A URL-mode elicitation needs ``elicitation.url``; a form one needs
    ``elicitation.form`` unless the host declared ``elicitation: {}`` (form,
    by the 2025-11-25 rule); a sampling request with ``tools`` needs
    ``sampling.tools``. None when nothing is missing.
    """
    if method not in ("elicitation/create", "sampling/createMessage") or params is None:
        return None
    body = mcp.decode_object(params) or {}
    if method == "sampling/createMessage":
        sampling = capabilities.get("sampling")
        if body.get("tools") and not (isinstance(sampling, dict) and "tools" in sampling):
            return "sampling.tools"
        return None
    declared = capabilities.get("elicitation")
    modes = declared if isinstance(declared, dict) else {}
    mode = body.get("mode", "form")
    if mode == "url" and "url" not in modes:
        return "elicitation.url"
    if mode == "form" and modes and "form" not in modes:
        return "elicitation.form"
    return None


def url_elicitation_id(method: str, params: msgspec.Raw | None) -> str | None:
    """The ``elicitationId`` of a URL-mode ``elicitation/create``; None for anything else."""
    if method != "elicitation/create" or params is None:
        return None
    body = mcp.decode_object(params) or {}
    found = body.get("elicitationId")
    return found if body.get("mode") == "url" and isinstance(found, str) else None


def _elicitation_id(params: msgspec.Raw | None) -> str:
    body = (mcp.decode_object(params) or {}) if params is not None else {}
    return str(body.get("elicitationId"))


class ToClients:
    """The client sessions the router can reach, and what goes to them.

    Args:
        owners: calls in flight, to find who owns a backend's request.
        subscriptions: who receives which ``resources/updated``.
        levels: which log messages each client receives.
        sees: whether a client may see a public resource URI now.
        guardrails: the filter chains a backend's request goes through
            (``router.filtering`` rule 4); None when none is configured.
    """

    def __init__(
        self,
        owners: Owners[Call],
        subscriptions: Subscriptions,
        levels: LogLevels,
        *,
        sees: Callable[[ClientPeer, str], bool] | None = None,
        guardrails: Guardrails | None = None,
    ) -> None:
        self._owners = owners
        self.guardrails = guardrails
        self._subscriptions = subscriptions
        self._levels = levels
        self._clients: dict[str, ClientPeer] = {}
        # URL elicitations relayed, by (backend, elicitationId): who was asked.
        self._asked: dict[tuple[str, str], str] = {}
        # Whether a client may see a public resource URI now (the access
        # policy): a subscription made before a reload hid its resource
        # delivers nothing more. None: every holder may.
        self.sees = sees

    def opened(self, client: ClientPeer) -> None:
        """A client session was created: it may now receive messages."""
        self._clients[client.session_id] = client

    def closed(self, session_id: str) -> None:
        """A client session ended: nothing more goes to it."""
        self._clients.pop(session_id, None)
        for key in [k for k, asked in self._asked.items() if asked == session_id]:
            del self._asked[key]

    def get(self, session_id: str) -> ClientPeer | None:
        """The client session of that id, while it is open."""
        return self._clients.get(session_id)

    def backend_notification(
        self, backend: BackendView, method: str, params: msgspec.Raw | None, client: str | None
    ) -> None:
        """Fan a backend's notification out to the clients it concerns (rule 2)."""
        if method == "notifications/resources/updated":
            self._resource_updated(backend, params, client)
        elif method == "notifications/message":
            self._log_message(backend, params, client)
        elif method == "notifications/elicitation/complete":
            self._elicitation_complete(backend, params, client)
        elif method == "notifications/cancelled":
            pass  # cancels of server-to-client requests are handled by their waiters' timeouts
        else:
            logger.debug("backend.notification.dropped", backend=backend.name, method=method)

    def _elicitation_complete(
        self, backend: BackendView, params: msgspec.Raw | None, client: str | None
    ) -> None:
        """A URL elicitation finished: tell the client that was asked, and only it (rule 5)."""
        asked = self._asked.pop((backend.name, _elicitation_id(params)), None)
        target = client if client is not None else asked
        peer = self._clients.get(target) if target is not None else None
        if peer is not None:
            peer.notify_nowait(
                jsonrpc.encode_notification("notifications/elicitation/complete", params)
            )

    def _resource_updated(
        self, backend: BackendView, params: msgspec.Raw | None, client: str | None
    ) -> None:
        try:
            body = mcp.decode_params(params)
        except LocalProtocolError:
            return
        uri = body.get("uri")
        if not isinstance(uri, str):
            return
        holders = (
            {client} if client is not None else self._subscriptions.subscribers(backend.name, uri)
        )
        public = body["uri"] = public_uri(backend.prefix, uri)
        message = jsonrpc.encode_notification("notifications/resources/updated", mcp.encode(body))
        for holder in holders:
            peer = self._clients.get(holder)
            if peer is not None and (self.sees is None or self.sees(peer, public)):
                peer.notify_nowait(message)

    def _log_message(
        self, backend: BackendView, params: msgspec.Raw | None, client: str | None
    ) -> None:
        try:
            body = mcp.decode_params(params)
        except LocalProtocolError:
            return
        level = body.get("level")
        source = body.get("logger")
        body["logger"] = (
            f"{backend.name}/{source}" if isinstance(source, str) and source else backend.name
        )
        message = jsonrpc.encode_notification("notifications/message", mcp.encode(body))
        targets = [client] if client is not None else list(self._clients)
        for target in targets:
            peer = self._clients.get(target)
            if peer is None or not self._levels.wants(target, level):
                continue
            if (
                isinstance(peer, ModernRequest)
                and self._owners.latest(backend.name, target) is None
            ):
                continue  # a modern request hears only its own backends (modern.py rule 3)
            peer.notify_nowait(message)

    def _waiting(self) -> set[str]:
        """Modern calls held for their client's retry: their backend waits already."""
        return {
            sid
            for sid, peer in self._clients.items()
            if isinstance(peer, ModernRequest) and peer.waiting
        }

    async def backend_request(
        self, backend: BackendView, method: str, params: msgspec.Raw | None, client: str | None
    ) -> msgspec.Raw:
        """Relay a backend's own request to the client that owns it (rules 1 and 4).

        Raises:
            LocalProtocolError: no single owner, the owner lacks the
                capability or has gone, or it did not answer in time.
            RemoteProtocolError: the client answered with an error.
        """
        feature = _CLIENT_FEATURES.get(method)
        if feature is None:
            raise LocalProtocolError(f"method not found: {method}", METHOD_NOT_FOUND)
        related: Call | None = None
        if client is None:
            owner = self._owners.sole_owner(backend.name, self._waiting())
            if owner is None:
                raise LocalProtocolError(
                    f"{method}: the gateway cannot tell which client this request is for "
                    "(no single client has a call in flight on the shared session of "
                    f"backend {backend.name!r}; its setting session: per_client or "
                    "per_principal gives every caller a session of its own)",
                    INTERNAL_ERROR,
                )
            client, related = owner
        else:
            related = self._owners.latest(backend.name, client)
        peer = self._clients.get(client)
        if peer is None:
            raise LocalProtocolError(f"{method}: the client session has ended", INTERNAL_ERROR)
        if feature not in peer.capabilities:
            if isinstance(peer, ModernRequest):
                peer.lacks(feature)  # the host's call fails with -32021 (modern.py rule 4)
            raise LocalProtocolError(
                f"{method}: the client did not declare the {feature!r} capability",
                METHOD_NOT_FOUND,
            )
        lacking = lacking_mode(method, params, peer.capabilities)
        if lacking is not None:
            if isinstance(peer, ModernRequest):
                peer.lacks(lacking)  # -32021 naming the mode, as for a capability
            raise LocalProtocolError(
                f"{method}: the client did not declare {lacking!r}", METHOD_NOT_FOUND
            )
        if self.guardrails is not None:
            params = await filter_backend_request(self.guardrails, peer, backend, method, params)
        clock = related.clock if related is not None else None
        with clock.waiting_for_input() if clock is not None else nullcontext():
            if isinstance(peer, ModernRequest):
                return await peer.ask(backend.name, method, params)  # bounded by held_calls
            elicitation = url_elicitation_id(method, params)
            if elicitation is not None:  # its completion goes to this client (rule 5)
                self._asked[(backend.name, elicitation)] = client
            emit = related.emit if related is not None else None
            bound = backend.config.timeouts.input
            with trio.move_on_after(bound) as scope:
                return await peer.request(method, without_key_hint(params), emit)
        assert scope.cancelled_caught
        raise LocalProtocolError(
            f"{method}: the client did not answer within {bound:g} s (timeouts.input)",
            REQUEST_TIMEOUT_CODE,
        )
