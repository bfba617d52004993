"""The gateway as a 2026-07-28 client: the probe, the envelope, the results.

Sans-IO rules for the backend leg (issue 14, step 5); the supervisor and the
router do the I/O. Spec paths as in ``docs/eras.md``.

Rules:

1. **Probe.** ``server/discover`` with a complete envelope at 2026-07-28
   (``S/server/discover.mdx``). The backend is modern when it answers a
   DiscoverResult whose ``supportedVersions`` lists 2026-07-28, or a -32022
   whose ``data.supported`` names it (it refused our envelope, not the era;
   ``S/basic/versioning.mdx``). Any other answer (-32601 from a
   handshake-era server, a DiscoverResult without a version we speak) means
   ``initialize``.
2. **Envelope.** Every request to a modern backend carries
   ``protocolVersion``, ``clientCapabilities`` and ``clientInfo`` in
   ``params._meta`` (``S/basic/index.mdx`` §Per-request protocol fields);
   keys already there (``progressToken``, trace context, ``logLevel`` set by
   the caller) are kept, so a caller's choice is never overwritten.
3. **HTTP headers** of a modern request (``S/basic/transports/streamable-http.mdx``
   §Standard Headers, §Custom Headers): ``MCP-Protocol-Version`` from the
   envelope, ``Mcp-Method``, ``Mcp-Name``, and for ``tools/call`` the
   ``Mcp-Param-*`` the *backend's own* tool schema declares (the public
   schema the host saw may differ; the backend checks against its own). A
   tool whose annotations are invalid gets no ``Mcp-Param-*`` (it was left
   out of the host's list anyway).
4. **Results for a legacy host** lose the fields its revision does not
   know: ``resultType`` (only ``complete`` gets here), ``ttlMs``,
   ``cacheScope``. Unknown fields survive; inputs are never mutated.
"""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING, Any, Final

import msgspec

from gateway import __version__
from gateway.errors import UNSUPPORTED_PROTOCOL_VERSION, GatewayError
from gateway.protocol.stateless.cache_hints import NO_CACHE, CacheHint, hint_of
from gateway.protocol.stateless.envelope import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    LOG_LEVEL_KEY,
    MODERN_VERSIONS,
    PROTOCOL_VERSION_KEY,
    SERVER_INFO_KEY,
)
from gateway.protocol.stateless.routing_headers import (
    InvalidAnnotation,
    param_headers,
    standard_headers,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = [
    "GATEWAY_CLIENT_INFO",
    "MODERN_VERSION",
    "MODERN_ONLY_FIELDS",
    "Discovered",
    "NotModern",
    "bridgeable_capabilities",
    "discover_params",
    "for_legacy_host",
    "http_headers",
    "read_discover",
    "read_discover_error",
    "with_envelope",
]

# The revision the gateway speaks to modern backends.
MODERN_VERSION: Final = MODERN_VERSIONS[0]
# Who the gateway is, as a client (the same as in its ``initialize``).
GATEWAY_CLIENT_INFO: Final = {"name": "mcp-gateway", "version": __version__}
# Result fields a handshake-era host has no use for (rule 3).
MODERN_ONLY_FIELDS: Final = ("resultType", "ttlMs", "cacheScope")
# What the gateway can honour for a host, by capability: it asks the host
# itself (MRTR passthrough or a real server-to-client request), so each is
# bridgeable when the host has it.
_BRIDGEABLE: Final = frozenset({"roots", "sampling", "elicitation"})


class NotModern(GatewayError):
    """The backend did not answer the probe as a 2026-07-28 server (rule 1)."""


class Discovered(msgspec.Struct, frozen=True, kw_only=True):
    """What a backend's DiscoverResult said about itself.

    Attributes:
        supported_versions: the revisions it lists.
        capabilities: its server capabilities.
        instructions: its instructions, if any.
        name: ``serverInfo.name`` from the result's ``_meta`` ("" when absent).
        version: ``serverInfo.version`` ("" when absent).
        hint: the result's own ``ttlMs``/``cacheScope`` (read leniently,
            ``caching.hint_of``): what it contributes to the gateway's
            merged ``server/discover``.
    """

    supported_versions: tuple[str, ...]
    capabilities: dict[str, Any]
    instructions: str | None
    name: str
    version: str
    hint: CacheHint = NO_CACHE


def with_envelope(
    params: Mapping[str, Any] | None,
    *,
    capabilities: Mapping[str, Any] | None = None,
    log_level: str | None = None,
    client_info: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``params`` with the modern envelope in ``_meta`` (rule 2).

    Args:
        params: the request's params as forwarded (may hold ``_meta`` with
            ``progressToken`` and trace context already).
        capabilities: what the backend may ask the caller for; ``{}`` when
            nobody can be asked (the gateway's own list walks).
        log_level: the lowest level the caller wants logs at, if it asked.
        client_info: who is calling; the gateway's own by default.

    Returns:
        A new dict; ``params`` is not changed.
    """
    out = dict(params or {})
    meta_in = out.get("_meta")
    meta = dict(meta_in) if isinstance(meta_in, dict) else {}
    meta.setdefault(PROTOCOL_VERSION_KEY, MODERN_VERSION)
    meta.setdefault(CLIENT_CAPABILITIES_KEY, dict(capabilities or {}))
    meta.setdefault(CLIENT_INFO_KEY, dict(client_info or GATEWAY_CLIENT_INFO))
    if log_level is not None:
        meta.setdefault(LOG_LEVEL_KEY, log_level)
    out["_meta"] = meta
    return out


def bridgeable_capabilities(host: Mapping[str, Any] | None) -> dict[str, Any]:
    """The host's client capabilities the gateway can honour on a backend's behalf.

    Roots, sampling and elicitation are passed on as the host declared them
    (their sub-flags, ``elicitation.url`` or ``sampling.tools`` say what the
    host can do, and the backend must not ask for more); extensions and
    experimental keys are dropped, the gateway bridges none of them yet.
    """
    if not host:
        return {}
    return {key: value for key, value in host.items() if key in _BRIDGEABLE}


def discover_params() -> dict[str, Any]:
    """The params of the probe: nothing but the envelope (rule 1)."""
    return with_envelope(None, capabilities={})


def read_discover(result: object) -> Discovered:
    """Read a DiscoverResult, tolerating odd field types.

    Raises:
        NotModern: the result lists no revision the gateway speaks as a modern
            client, or is not an object.
    """
    if not isinstance(result, dict):
        raise NotModern("server/discover answered with something that is not an object")
    listed = result.get("supportedVersions")
    versions = tuple(v for v in listed if isinstance(v, str)) if isinstance(listed, list) else ()
    if MODERN_VERSION not in versions:
        raise NotModern(f"server/discover lists {list(versions)}, not {MODERN_VERSION}")
    capabilities = result.get("capabilities")
    instructions = result.get("instructions")
    meta = result.get("_meta")
    info = meta.get(SERVER_INFO_KEY) if isinstance(meta, dict) else None
    info = info if isinstance(info, dict) else {}
    return Discovered(
        supported_versions=versions,
        capabilities=capabilities if isinstance(capabilities, dict) else {},
        instructions=instructions if isinstance(instructions, str) else None,
        name=str(info.get("name", "")),
        version=str(info.get("version", "")),
        hint=hint_of(result),
    )


def read_discover_error(code: int, data: object) -> bool:
    """Whether an error answer to the probe still shows a modern server (rule 1).

    Only -32022 naming 2026-07-28 in ``data.supported`` does: the backend
    speaks the era and disliked something in our envelope, which a retry
    would not fix; any other error is a handshake-era server.
    """
    if code != UNSUPPORTED_PROTOCOL_VERSION or not isinstance(data, dict):
        return False
    supported = data.get("supported")
    return isinstance(supported, list) and MODERN_VERSION in supported


def for_legacy_host(result: Mapping[str, Any]) -> dict[str, Any]:
    """A modern backend's complete result as a handshake-era host receives it (rule 3)."""
    return {key: value for key, value in result.items() if key not in MODERN_ONLY_FIELDS}


def http_headers(
    method: str, params: object, schema_of: Callable[[str], object] | None = None
) -> dict[str, str]:
    """The headers a modern request POSTed to a backend carries (rule 3).

    Args:
        method: the request's method.
        params: its params as sent (the envelope already in ``_meta``).
        schema_of: the backend's ``inputSchema`` by tool name.

    Returns:
        Nothing when ``params`` carries no modern envelope (a legacy request).
    """
    if not isinstance(params, dict):
        return {}
    meta = params.get("_meta")
    version = meta.get(PROTOCOL_VERSION_KEY) if isinstance(meta, dict) else None
    if not isinstance(version, str):
        return {}
    headers = standard_headers(method, params, version)
    name = params.get("name")
    if method == "tools/call" and isinstance(name, str) and schema_of is not None:
        schema = schema_of(name)
        if schema is not None:
            # A tool with a bad annotation is not listed to hosts; if called
            # anyway, the backend says what is wrong.
            with suppress(InvalidAnnotation):
                headers.update(param_headers(schema, params.get("arguments")))
    return headers
