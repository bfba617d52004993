"""The per-request ``_meta`` envelope of MCP 2026-07-28 (sans-IO).

A modern request carries its version, capabilities and identity in
``params._meta`` instead of an ``initialize`` handshake, and the server must
rely on nothing else (``S/basic/index.mdx`` §Statelessness, §_meta). Rules:

- **Era.** A request whose ``params._meta`` holds
  ``io.modelcontextprotocol/protocolVersion`` is modern; anything else
  (``initialize`` included) belongs to a legacy session
  (``S/basic/versioning.mdx`` §Backward Compatibility, dual-era server).
- **Order of checks**, first failure wins, as the Python SDK does it
  (``mcp/shared/inbound.py``):
  1. ``_meta`` is an object holding ``protocolVersion`` and
     ``clientCapabilities`` → else -32602/400 (``S/basic/index.mdx``).
  2. On HTTP, ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name``
     match the body → else -32020/400 (``streamable-http.mdx`` §Server
     Validation). Before the version check, so a client that contradicts
     itself is told so rather than told its version is unsupported.
  3. The version is a string (-32602) the gateway serves → else -32022/400
     with ``data.supported`` and ``data.requested`` (``S/basic/versioning.mdx``).
  4. The shapes of the remaining keys (gateway choice: only once the
     version is known do we know which schema applies): capabilities and
     clientInfo are objects, ``logLevel`` is a ``LoggingLevel``
     (``S/server/utilities/logging.mdx``: -32602), ``progressToken`` is a
     string or a number (schema.ts ``ProgressToken``). All -32602/400.
- **Capabilities.** Per request, never inferred from earlier ones; a need
  the request did not declare is -32021/400 with ``requiredCapabilities``
  (``S/basic/index.mdx``). ``elicitation: {}`` means form mode
  (``S/client/elicitation.mdx``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

from gateway.protocol.stateless.error_codes import (
    EnvelopeInvalid,
    MissingClientCapability,
    UnsupportedVersion,
)
from gateway.protocol.stateless.routing_headers import check_standard_headers
from gateway.protocol.tables import LOG_LEVELS

if TYPE_CHECKING:
    from collections.abc import Mapping

PROTOCOL_VERSION_KEY: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY: Final = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL_KEY: Final = "io.modelcontextprotocol/logLevel"
SERVER_INFO_KEY: Final = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_ID_KEY: Final = "io.modelcontextprotocol/subscriptionId"
TRACE_KEYS: Final = ("traceparent", "tracestate", "baggage")

# The revisions served statelessly, newest first. Kept here rather than in
# versions.py (the handshake table) until the frontend leg joins the two.
MODERN_VERSIONS: Final = ("2026-07-28",)


class Envelope(msgspec.Struct, frozen=True, kw_only=True):
    """A validated request envelope: everything the request says about its client.

    Attributes:
        protocol_version: one of ``MODERN_VERSIONS``.
        client_capabilities: the capabilities declared for this request only.
        client_info: ``{name, version, ...}`` or ``None``; for logs, never
            for behaviour (``S/basic/index.mdx``).
        log_level: the level asked for, or ``None``: then no log messages
            may be sent for this request (schema.ts ``RequestMetaObject``).
        progress_token: the request's progress token, or ``None``.
        trace: ``traceparent``/``tracestate``/``baggage`` present as strings,
            to be passed through to backends untouched.
    """

    protocol_version: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any] | None = None
    log_level: str | None = None
    progress_token: str | int | float | None = None
    trace: dict[str, str] = msgspec.field(default_factory=dict)

    def wants_log(self, level: str) -> bool:
        """Whether a message at ``level`` may be sent on this request's stream."""
        if self.log_level is None or level not in LOG_LEVELS:
            return False
        return LOG_LEVELS.index(level) >= LOG_LEVELS.index(self.log_level)

    def missing(self, required: Mapping[str, Any]) -> dict[str, Any]:
        """The part of ``required`` (shaped like ClientCapabilities) not declared."""
        return missing_capabilities(self.client_capabilities, required)

    def require(self, required: Mapping[str, Any]) -> None:
        """Insist the request declared ``required``.

        Raises:
            MissingClientCapability: -32021 naming what is missing.
        """
        gap = self.missing(required)
        if gap:
            raise MissingClientCapability(gap)


def meta_of(params: object) -> dict[str, Any] | None:
    """``params._meta`` if both are objects, else ``None``."""
    if isinstance(params, dict):
        meta = params.get("_meta")
        if isinstance(meta, dict):
            return meta
    return None


def is_modern(params: object) -> bool:
    """Whether a request with these params is a 2026-07-28 (modern) request.

    Presence of the version key decides, not its value: a modern client
    asking for a version we lack must get -32022, not a legacy answer.
    """
    meta = meta_of(params)
    return meta is not None and PROTOCOL_VERSION_KEY in meta


def _normalised(declared: Mapping[str, Any]) -> dict[str, Any]:
    caps = dict(declared)
    if caps.get("elicitation") == {}:
        caps["elicitation"] = {"form": {}}
    return caps


def missing_capabilities(
    declared: Mapping[str, Any], required: Mapping[str, Any]
) -> dict[str, Any]:
    """What ``required`` asks that ``declared`` lacks, as a ClientCapabilities object.

    A required empty object asks only for presence; a non-empty one asks for
    each of its sub-keys in turn (``{"sampling": {"tools": {}}}``).
    """
    have = _normalised(declared)
    gap: dict[str, Any] = {}
    for key, want in required.items():
        got = have.get(key)
        if not isinstance(got, dict):
            gap[key] = want
        elif isinstance(want, dict) and want:
            sub = {k: v for k, v in want.items() if not isinstance(got.get(k), dict)}
            if sub:
                gap[key] = sub
    return gap


def parse_envelope(
    method: str,
    params: object,
    headers: Mapping[str, str] | None = None,
    supported: tuple[str, ...] = MODERN_VERSIONS,
) -> Envelope:
    """Validate a modern request's envelope (and its HTTP headers, if any).

    Args:
        method: the request's method.
        params: the request's params, as decoded.
        headers: lowercase-keyed headers (``routing_headers.fold_headers``)
            on HTTP; ``None`` on stdio, which has none.
        supported: the versions served, newest first.

    Returns:
        The typed envelope.

    Raises:
        EnvelopeInvalid: -32602, a required key missing or a key ill-typed.
        HeaderMismatch: -32020, headers missing or not matching the body.
        UnsupportedVersion: -32022, with the supported list.
    """
    meta = meta_of(params)
    if meta is None:
        raise EnvelopeInvalid("params._meta must be an object carrying the request envelope")
    absent = [k for k in (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY) if k not in meta]
    if absent:
        raise EnvelopeInvalid("params._meta is missing " + ", ".join(absent))
    assert isinstance(params, dict)  # meta_of proved it
    version = meta[PROTOCOL_VERSION_KEY]
    if headers is not None:
        check_standard_headers(method, params, version, headers)
    if not isinstance(version, str):
        raise EnvelopeInvalid(f"{PROTOCOL_VERSION_KEY} must be a string")
    if version not in supported:
        raise UnsupportedVersion(version, supported)
    return _typed(meta, version)


def _typed(meta: dict[str, Any], version: str) -> Envelope:
    caps = meta[CLIENT_CAPABILITIES_KEY]
    if not isinstance(caps, dict):
        raise EnvelopeInvalid(f"{CLIENT_CAPABILITIES_KEY} must be an object")
    info = meta.get(CLIENT_INFO_KEY)
    if info is not None and not isinstance(info, dict):
        raise EnvelopeInvalid(f"{CLIENT_INFO_KEY} must be an object")
    level = meta.get(LOG_LEVEL_KEY)
    if level is not None and level not in LOG_LEVELS:
        raise EnvelopeInvalid(f"{LOG_LEVEL_KEY} must be one of {', '.join(LOG_LEVELS)}")
    token = meta.get("progressToken")
    if token is not None and (isinstance(token, bool) or not isinstance(token, str | int | float)):
        raise EnvelopeInvalid("progressToken must be a string or a number")
    trace = {k: meta[k] for k in TRACE_KEYS if isinstance(meta.get(k), str)}
    return Envelope(
        protocol_version=version,
        client_capabilities=caps,
        client_info=info,
        log_level=level,
        progress_token=token,
        trace=trace,
    )
