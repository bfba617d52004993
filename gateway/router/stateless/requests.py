"""Modern (2026-07-28) requests: routed per request, with no client session.

Rules:

1. A modern request reaches the router as a :class:`ModernRequest`: the
   request's own context (its envelope, its stream), never a client
   session. It is known to the router only while the request runs; nothing
   about it survives the answer (``S/basic/index.mdx`` §Statelessness).
2. The envelope's keys (``io.modelcontextprotocol/*``) stay at the gateway:
   today's backends speak the handshake era and get the request as a legacy
   session would send it, with the progress token and trace context kept.
3. Log messages reach a modern request only when its ``_meta`` asked for a
   ``logLevel``, at or above it, from a backend it has a call in flight to,
   and only on its own stream (``S/server/utilities/logging.mdx``).
   Progress follows the request's ``progressToken`` onto the same stream.
4. A backend's own request (sampling, elicitation, roots) during a modern
   ``tools/call``, ``prompts/get`` or ``resources/read`` is bridged to MRTR:
   the host gets ``input_required`` and the backend's call is held until the
   retry (``router/held``). During any other request it is refused to the
   backend at once: 2026-07-28 has no server-to-client requests. When the
   request needs a capability this request did not declare, the host's call
   fails with -32021 naming it (HTTP 400), and the backend's call is
   cancelled: the server "MUST NOT rely on capabilities the client has not
   declared" (``S/basic/index.mdx``).
5. ``server/discover`` is the gateway's own answer from the merged view.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio

from gateway import __version__
from gateway.backends.state import BackendState
from gateway.catalog.profiles import DEFAULT_PROFILE
from gateway.catalog.snapshot import Kind
from gateway.errors import METHOD_NOT_FOUND, LocalProtocolError
from gateway.protocol import mcp
from gateway.protocol.eras import SERVED_VERSIONS
from gateway.protocol.jsonrpc import Request
from gateway.protocol.stateless.cache_hints import COMPLETE, NO_CACHE, backend_hint, combined_hint
from gateway.protocol.stateless.discover import discover_result
from gateway.protocol.stateless.error_codes import MissingClientCapability, ModernProtocolError
from gateway.router import initialize

if TYPE_CHECKING:
    from collections.abc import Callable

    from gateway.backends.state import BackendView
    from gateway.catalog.snapshot import Snapshot
    from gateway.identity.principal import Principal
    from gateway.protocol.stateless.envelope import Envelope
    from gateway.router.neighbours import Emit, PoolView
    from gateway.router.stateless.held_calls import HeldCall

_ENVELOPE_PREFIX: Final = "io.modelcontextprotocol/"
_ids: Final = itertools.count(1)
_LOG_METHOD: Final = b'"method":"notifications/message"'
# How long a call whose backend asked for an undeclared capability may go on
# after the refusal before it is cancelled (ModernRequest.fail).
REFUSAL_GRACE: Final = 2.0


def _no_emit(message: bytes) -> bool:
    return False


@dataclass(eq=False)
class ModernRequest:
    """One modern request while it is routed (the router's ``ClientPeer``).

    Attributes:
        envelope: the request's validated ``_meta``.
        emit: the request's response stream.
        session_id: an id unique to this request, for the router's tables
            only; never sent to the host or a backend.
        principal: the key of the principal the request was authenticated
            as (None: auth off).
    """

    envelope: Envelope
    emit: Emit = _no_emit
    session_id: str = field(default_factory=lambda: f"modern-{next(_ids)}")
    profile: str = DEFAULT_PROFILE
    failure: ModernProtocolError | None = None
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    held: HeldCall | None = None
    # A verified retry of a modern backend's input_required: that backend's
    # name and its own requestState (None when it sent none).
    backend_state: tuple[str, str | None] | None = None
    principal: str | None = None
    caller: Principal | None = None

    @property
    def protocol_version(self) -> str:
        """The revision the request names."""
        return self.envelope.protocol_version

    @property
    def capabilities(self) -> dict[str, Any]:
        """The capabilities this request declared, and only this request."""
        return self.envelope.client_capabilities

    @property
    def waiting(self) -> bool:
        """Whether the request's call is held, waiting for the client's retry."""
        return self.held is not None and self.held.awaiting_retry

    def fail(self, failure: ModernProtocolError, grace: float = 0.0) -> None:
        """End the request with ``failure`` instead of its result (rule 4).

        With a ``grace``, the call is cancelled only if it is still running
        that many seconds later: a backend whose own request was just refused
        usually ends its call at once, and an SDK 1.x server can crash when
        the refusal and a cancellation reach it together.
        """
        if self.failure is None:
            self.failure = failure
        if grace > 0:
            self.scope.deadline = min(self.scope.deadline, trio.current_time() + grace)
        else:
            self.scope.cancel()

    def lacks(self, feature: str) -> None:
        """A backend asked for ``feature``, which this request did not declare (rule 4)."""
        self.fail(MissingClientCapability({feature: {}}), grace=REFUSAL_GRACE)

    def notify_nowait(self, message: bytes) -> None:
        """Only log messages reach a modern request unasked (rule 3); others drop."""
        if _LOG_METHOD in message:
            self.emit(message)

    async def ask(self, backend: str, method: str, params: msgspec.Raw | None) -> msgspec.Raw:
        """A backend's own request: bridged when the call is held, else refused (rule 4).

        Raises:
            LocalProtocolError: the backend is answered with it.
        """
        if self.held is not None:
            return await self.held.ask(backend, method, params)
        return await self.request(method, params, None)

    async def request(
        self, method: str, params: msgspec.Raw | None, emit: Emit | None
    ) -> msgspec.Raw:
        """Refuse a backend's own request (rule 4).

        Raises:
            LocalProtocolError: always; the backend is answered with it.
        """
        raise LocalProtocolError(
            f"{method}: the calling client speaks 2026-07-28, which has no "
            "server-to-client requests; only tools/call, prompts/get and "
            "resources/read can carry input_required",
            METHOD_NOT_FOUND,
        )


def backend_params(params: object) -> msgspec.Raw | None:
    """The request's params as a legacy backend gets them (rule 2)."""
    if not isinstance(params, dict):
        return None
    out = dict(params)
    meta = out.get("_meta")
    if isinstance(meta, dict):
        kept = {k: v for k, v in meta.items() if not k.startswith(_ENVELOPE_PREFIX)}
        if kept:
            out["_meta"] = kept
        else:
            del out["_meta"]
    return mcp.encode(out)


def backend_request(request: Request, params: object) -> Request:
    """``request`` with its params rewritten for a legacy backend."""
    return Request(request.id, request.method, backend_params(params))


def discover(
    pool: PoolView, shown: Callable[[str], bool], *, per_principal: bool = False
) -> dict[str, Any]:
    """The gateway's ``server/discover`` result (rule 5).

    Capabilities are those the gateway offers a legacy host: on 2026-07-28
    ``listChanged`` and ``subscribe`` promise ``subscriptions/listen``,
    which ``frontend.listen`` serves (list_changed whenever the merged view
    changes; ``subscribe`` only while a backend up offers subscriptions).
    Only the ``shown`` backends (a profile's) count.

    The cache hint combines those of the ``shown`` backends up now, whose
    answers the result is made of (``caching.combined_hint``): a
    2026-07-28 backend's own discover hint, ``{0, private}`` for a
    handshake-era one, none up at all ``{0, private}``; ``private`` when
    ``per_principal`` (an access policy is in force).
    """
    caps = initialize.server_capabilities(pool, shown)
    hints = [
        b.info.discover_hint if b.info is not None and b.info.modern else NO_CACHE
        for b in pool.backends.values()
        if b.state is BackendState.UP and shown(b.name)
    ]
    return discover_result(
        supported_versions=SERVED_VERSIONS,
        capabilities=caps,
        server_info={"name": initialize.SERVER_NAME, "version": __version__},
        hint=combined_hint(hints, per_principal=per_principal),
        instructions=initialize.instructions(pool, shown),
    )


def public_tool_schema(snapshot: Snapshot, name: object) -> object:
    """The ``inputSchema`` of the public tool ``name`` in a profile's view, or None."""
    if not isinstance(name, str):
        return None
    entry = snapshot.resolve(Kind.TOOLS, name)
    if entry is None:
        return None
    tool = mcp.decode_object(msgspec.Raw(entry.encoded))
    return None if tool is None else tool.get("inputSchema")


def with_read_hint(
    result: msgspec.Raw, backend: BackendView, *, per_principal: bool
) -> msgspec.Raw:
    """A modern host's ``resources/read`` result with the owning backend's hint.

    A 2026-07-28 backend's own ``ttlMs``/``cacheScope``; a handshake-era
    one promised nothing: ``{0, private}`` whatever its result holds;
    ``private`` under an access policy (``caching.combined_hint``). An
    ``input_required`` result is left as it is (it carries no hint; the
    frontend strips any).
    """
    body = mcp.decode_object(result)
    if body is None or body.get("resultType", COMPLETE) != COMPLETE:
        return result
    info = backend.info
    own = backend_hint(info is not None and info.modern, body)
    body.update(combined_hint([own], per_principal=per_principal).as_fields())
    return mcp.encode(body)
