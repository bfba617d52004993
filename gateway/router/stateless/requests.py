"""Modern (2026-07-28) requests: routed per request, with no client session.

Rules:

1. A modern request reaches the router as a ``ModernRequest``
   (``router.context``): the request's own context (its envelope, its
   stream), never a client session. It is known to the router only while the request runs; nothing
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

from typing import TYPE_CHECKING, Any, Final

import msgspec

from gateway import __version__
from gateway.backends.state import BackendState
from gateway.catalog.snapshot import Kind
from gateway.protocol import mcp
from gateway.protocol.eras import SERVED_VERSIONS
from gateway.protocol.jsonrpc import Request
from gateway.protocol.stateless.cache_hints import COMPLETE, NO_CACHE, backend_hint, combined_hint
from gateway.protocol.stateless.discover import discover_result
from gateway.router import initialize

if TYPE_CHECKING:
    from collections.abc import Callable

    from gateway.backends.state import BackendView
    from gateway.catalog.snapshot import Snapshot
    from gateway.router.neighbours import PoolView

_ENVELOPE_PREFIX: Final = "io.modelcontextprotocol/"


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
