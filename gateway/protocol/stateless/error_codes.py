"""The failures of MCP 2026-07-28's rules, one exception class each.

Every class here is a ``LocalProtocolError`` (the peer sent us something
invalid) carrying its code; the codes and the HTTP status each travels with
are in ``gateway/errors.py`` (``http_status_for``), the one place the
gateway's failures are translated to the wire. On Streamable HTTP the
status is part of the answer: a modern client's era probe reads a 400 plus
a recognised body as "modern", anything else as "legacy"
(``S/basic/transports/streamable-http.mdx`` §Backward Compatibility)::

    LocalProtocolError
    └── ModernProtocolError
        ├── EnvelopeInvalid          -32602/400  ``_meta`` key missing or ill-typed
        ├── HeaderMismatch           -32020/400  header vs body, missing, bad chars
        ├── MissingClientCapability  -32021/400  ``data.requiredCapabilities``
        ├── UnsupportedVersion       -32022/400  ``data.supported``/``requested``
        └── InvalidSealedToken       -32602/400  requestState/cursor/task id

``S/`` is ``docs/specification/2026-07-28/`` of the spec repository.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.errors import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    LocalProtocolError,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


class ModernProtocolError(LocalProtocolError):
    """A request the 2026-07-28 rules reject (its HTTP status: ``errors.http_status_for``).

    Args:
        message: one sentence for the error's ``message``.
        code: the JSON-RPC code.
        data: the error's ``data`` member, if the spec defines one.
    """

    def __init__(self, message: str, code: int, data: Any = None) -> None:
        super().__init__(message, code, data)


class EnvelopeInvalid(ModernProtocolError):
    """A required ``_meta`` key is missing or a key has the wrong shape.

    ``S/basic/index.mdx`` §Per-request protocol fields: -32602, HTTP 400.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, INVALID_PARAMS)


class HeaderMismatch(ModernProtocolError):
    """A routing header is missing, malformed, or disagrees with the body.

    ``S/basic/transports/streamable-http.mdx`` §Server Validation: -32020, 400,
    and no ``data`` (schema.ts ``HeaderMismatchError``).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, HEADER_MISMATCH)


class MissingClientCapability(ModernProtocolError):
    """Serving the request needs a capability the request did not declare.

    ``S/basic/index.mdx``: -32021 with ``data.requiredCapabilities``, 400.

    Args:
        required: the missing capabilities, shaped like ``ClientCapabilities``.
    """

    def __init__(self, required: Mapping[str, Any]) -> None:
        self.required = dict(required)
        names = ", ".join(sorted(self.required))
        super().__init__(
            f"Missing required client capability: {names}",
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            {"requiredCapabilities": self.required},
        )


class UnsupportedVersion(ModernProtocolError):
    """The request names a protocol version the gateway does not serve.

    ``S/basic/versioning.mdx``: -32022, ``data = {supported, requested}``, 400.

    Args:
        requested: the version the request named.
        supported: every version the gateway serves, newest first.
    """

    def __init__(self, requested: str, supported: Sequence[str]) -> None:
        self.requested = requested
        self.supported = list(supported)
        super().__init__(
            "Unsupported protocol version",
            UNSUPPORTED_PROTOCOL_VERSION,
            {"supported": self.supported, "requested": requested},
        )


class InvalidSealedToken(ModernProtocolError):
    """A sealed token (requestState, cursor, task id) failed verification.

    The spec names no code; the Python SDK answers -32602 "Invalid or expired
    requestState" and we do the same for every kind, without saying which
    check failed (``S/basic/patterns/mrtr.mdx`` §Security Considerations).

    Args:
        kind: what the token was presented as (``requestState``).
        reason: the failed check, for logs only; never sent to the peer.
    """

    def __init__(self, kind: str, reason: str) -> None:
        self.kind = kind
        self.reason = reason
        super().__init__(f"Invalid or expired {kind}", INVALID_PARAMS)
