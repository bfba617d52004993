"""Which era a message belongs to, and what a modern request may ask (sans-IO).

One endpoint serves both eras (``S/basic/versioning.mdx`` §Backward
Compatibility, dual-era server). The rules the frontend asks here:

- **A request** is modern when its ``params._meta`` carries
  ``io.modelcontextprotocol/protocolVersion`` (``envelope.is_modern``),
  whatever else it carries: an ``Mcp-Session-Id`` on it is ignored, never
  looked up, minted or echoed (``streamable-http.mdx`` §Earlier versions).
  It is modern too when it comes without a session but with a modern
  ``MCP-Protocol-Version`` header: only a modern client sends that, and
  its request with a missing or broken envelope deserves the envelope's
  -32602 with its own id, not a legacy "session required" (gateway choice;
  the conformance suite's ``server-stateless`` checks exactly this).
  ``initialize`` and everything else belong to a legacy session.
- **A notification** is modern when its ``_meta`` carries the version, or
  when it comes without a session but with a modern ``MCP-Protocol-Version``
  header: it is accepted (202) and needs nothing more, since a modern HTTP
  client cancels by closing the stream, not by notifying.
- **GET and DELETE** without ``Mcp-Session-Id`` but with a modern
  ``MCP-Protocol-Version`` header come from a modern client: 405, since the
  revision has neither a GET stream nor a session to delete. Without that
  header they stay what they were (400, a legacy client that forgot its
  session); with a session they serve that legacy session.
- **Methods.** A modern request may use only what 2026-07-28 defines and
  the gateway serves (:data:`MODERN_METHODS`). Anything else, including the
  methods the revision removed (``ping``, ``logging/setLevel``,
  ``resources/subscribe``, ``initialize``...), is an unknown method: -32601
  with HTTP 404 (``streamable-http.mdx`` §Status codes), the body telling a
  modern 404 from a legacy one. ``subscriptions/listen`` is served by
  ``frontend.listen`` (rules in ``protocol.listen``).
- **Versions** the gateway serves on its host leg, newest first: the
  stateless ones, then the handshake ones. A modern request naming another
  version gets -32022 whose ``data.supported`` lists *all* of them: a
  dual-era client reads a list with handshake versions as "fall back to
  ``initialize``", one without as "modern-only, incompatible" (the SDK's
  ``client/_probe.py``), and the gateway does serve the handshake.
- **Results** to a modern client (:func:`modern_result`): ``resultType`` on
  every one; on discover, the lists and ``resources/read`` the cache hint,
  which for today's handshake-era backends is the gateway's own default
  :data:`LEGACY_BACKEND_HINT` = ``{ttlMs: 0, cacheScope: private}``
  (gateway choice: a legacy backend promises neither freshness nor that
  its answer is the same for every user, and a modern client cannot yet
  listen for list changes, so it must re-fetch rather than trust a copy);
  tools whose ``x-mcp-header`` use is invalid are left out of tools/list
  (``S/server/tools.mdx``), and returned so the caller can log them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from gateway.errors import METHOD_NOT_FOUND
from gateway.protocol.stateless.cache_hints import CacheHint, finish_result
from gateway.protocol.stateless.envelope import (
    MODERN_VERSIONS,
    Envelope,
    is_modern,
    parse_envelope,
)
from gateway.protocol.stateless.error_codes import ModernProtocolError, UnsupportedVersion
from gateway.protocol.stateless.routing_headers import DroppedTool, tools_to_drop
from gateway.protocol.versions import SUPPORTED_VERSIONS

if TYPE_CHECKING:
    from collections.abc import Mapping

# 2026-07-28 methods the gateway answers for a modern client.
MODERN_METHODS: Final = frozenset(
    {
        "server/discover",
        "tools/list",
        "tools/call",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "completion/complete",
        "skills/list",
        "skills/get",
        "resources/directory/read",
        "subscriptions/listen",
        "tasks/get",
        "tasks/update",
        "tasks/cancel",
    }
)
# Methods of the handshake era that 2026-07-28 removed (S/changelog.mdx).
REMOVED_METHODS: Final = frozenset(
    {
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "tasks/result",
        "tasks/list",
    }
)
SERVED_VERSIONS: Final = MODERN_VERSIONS + tuple(reversed(SUPPORTED_VERSIONS))


class MethodNotFound(ModernProtocolError):
    """A modern request for a method the gateway does not serve: -32601, HTTP 404.

    Args:
        method: the method asked for (quoted, shortened, in the message).
    """

    def __init__(self, method: str) -> None:
        self.method = method
        removed = " (removed in 2026-07-28)" if method in REMOVED_METHODS else ""
        super().__init__(f"Method not found: {method[:64]}{removed}", METHOD_NOT_FOUND)


def parse_modern(method: str, params: object, headers: Mapping[str, str] | None) -> Envelope:
    """``envelope.parse_envelope`` for the host leg, with the dual-era -32022 (rules above).

    Raises:
        EnvelopeInvalid: -32602.
        HeaderMismatch: -32020.
        UnsupportedVersion: -32022, ``data.supported`` naming both eras.
    """
    try:
        return parse_envelope(method, params, headers, MODERN_VERSIONS)
    except UnsupportedVersion as exc:
        raise UnsupportedVersion(exc.requested, SERVED_VERSIONS) from None


def check_method(method: str) -> None:
    """Insist a modern request names a method the gateway serves.

    Raises:
        MethodNotFound: any other method.
    """
    if method not in MODERN_METHODS:
        raise MethodNotFound(method)


def is_modern_version_header(value: str | None) -> bool:
    """Whether an ``MCP-Protocol-Version`` header names a stateless revision."""
    return value is not None and value in MODERN_VERSIONS


def is_modern_request(params: object, session_id: str | None, version: str | None) -> bool:
    """Whether a POSTed request is served as 2026-07-28 (rules above)."""
    return is_modern(params) or (session_id is None and is_modern_version_header(version))


def is_modern_notification(params: object, session_id: str | None, version: str | None) -> bool:
    """Whether a POSTed notification comes from a modern client (rules above)."""
    return is_modern_request(params, session_id, version)


def sessionless_get_or_delete_is_modern(session_id: str | None, version: str | None) -> bool:
    """Whether a GET or DELETE is a modern client's, to be answered 405."""
    return session_id is None and is_modern_version_header(version)


LEGACY_BACKEND_HINT: Final = CacheHint(ttl_ms=0, scope="private")


def modern_result(
    method: str,
    result: Mapping[str, Any],
    params: Mapping[str, Any] | None = None,
    hint: CacheHint = LEGACY_BACKEND_HINT,
) -> tuple[dict[str, Any], list[DroppedTool]]:
    """A result as a modern client receives it, and the tools left out of it.

    Args:
        method: the request's method.
        result: the result as the router produced it (not mutated).
        params: the request's params (an MRTR retry is never cacheable).
        hint: the cache hint; the legacy default unless the caller knows better.
    """
    dropped: list[DroppedTool] = []
    tools = result.get("tools")
    if method == "tools/list" and isinstance(tools, list):
        dropped = tools_to_drop(tools)
        if dropped:
            names = {d.name for d in dropped}
            kept = [t for t in tools if not (isinstance(t, dict) and t.get("name") in names)]
            result = {**result, "tools": kept}
    return finish_result(method, result, hint, params), dropped
