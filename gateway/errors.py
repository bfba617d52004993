"""The gateway's exceptions and JSON-RPC error codes.

Every failure the gateway reasons about is one of these, mapped from foreign
exceptions at the boundary where it happens (a transport maps trio/httpx
errors; the session maps a backend's JSON-RPC error; the frontend maps all of
them to a JSON-RPC error or an HTTP status)::

    GatewayError
    ├── ConfigError                 the file and the place inside it
    ├── TransportError
    │   ├── ConnectError            could not reach or start the peer
    │   ├── TransportClosed         we closed it
    │   ├── CredentialUnavailable   no token for the backend (its token endpoint failed)
    │   └── TransportBroken         the world broke it (EOF, reset, oversize line)
    │       └── SessionExpired      the server no longer knows our session
    ├── ProtocolError               abstract; carries a JSON-RPC ``code``
    │   ├── LocalProtocolError      *we* were sent something invalid
    │   └── RemoteProtocolError     the peer answered with a JSON-RPC error
    ├── BackendUnavailable          the backend is down, starting or gone
    └── RequestTimeout              a forwarded request ran out of time
"""

from __future__ import annotations

from typing import Any, Final

# JSON-RPC 2.0 codes (https://www.jsonrpc.org/specification#error_object).
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
# Implementation-defined range -32000..-32099: ours.
REQUEST_TIMEOUT_CODE: Final = -32001


class GatewayError(Exception):
    """Root of everything the gateway raises on purpose."""


class ConfigError(GatewayError):
    """A configuration that cannot be used.

    Args:
        problems: one line per problem, each starting with its place
            (``backends[2].command: required field missing``).
        path: the file the problems were found in, when there is one.
    """

    def __init__(self, problems: list[str], path: str | None = None) -> None:
        self.problems = problems
        self.path = path
        where = f"{path}: " if path else ""
        super().__init__(where + "; ".join(problems))


class TransportError(GatewayError):
    """A link to a peer failed."""


class ConnectError(TransportError):
    """The peer could not be reached or started."""


class TransportClosed(TransportError):
    """The link was closed by us; further use is a bug or a race."""


class CredentialUnavailable(TransportError):
    """No credential for a backend could be had: its token endpoint refused or failed.

    A transport error because the message could not be sent, but neither a
    broken link nor an unreachable peer: the backend is fine, so it is not
    restarted for it; the request that needed the credential fails with
    this (its message names the token endpoint's status and OAuth error,
    never a secret).
    """


class TransportBroken(TransportError):
    """The link was broken from outside: EOF, reset, an oversize frame."""


class SessionExpired(TransportBroken):
    """The server forgot the session we hold (404, or a 400 that names it).

    A type of its own because the backend's reaction differs from any other
    break: re-initialize at once and repeat an idempotent request once, which
    would be wrong after a reset or an EOF (spec: session management).
    """


class ProtocolError(GatewayError):
    """A JSON-RPC level failure; ``code`` is the JSON-RPC error code to use.

    Args:
        message: human text, sent to the peer as the error's ``message``.
        code: the JSON-RPC error code.
        data: optional structured ``data`` for the error object.
    """

    def __init__(self, message: str, code: int = INTERNAL_ERROR, data: Any = None) -> None:
        self.message = message
        self.code = code
        self.data = data
        super().__init__(message)


class LocalProtocolError(ProtocolError):
    """The peer sent us something invalid; we answer with ``code``."""


class RemoteProtocolError(ProtocolError):
    """The peer answered one of our requests with a JSON-RPC error."""


class BackendUnavailable(GatewayError):
    """A call was routed to a backend that is not serving right now.

    Args:
        backend: the backend's configured name.
        reason: short human text (``"starting"``, ``"exited with code 1"``).
        kind: the machine-readable reason hosts see in the error's data
            (``backend_unavailable``, or ``overloaded`` when the backend's
            call limits are full).
        cause: the condition that took the backend down, when one is known
            (a ``SessionExpired`` tells the caller a retry may be safe); the
            decision is made on this type, never on ``reason``'s text.
    """

    def __init__(
        self,
        backend: str,
        reason: str,
        kind: str = "backend_unavailable",
        cause: BaseException | None = None,
    ) -> None:
        self.backend = backend
        self.reason = reason
        self.kind = kind
        self.cause = cause
        super().__init__(f"backend {backend!r} is unavailable: {reason}")


class RequestTimeout(GatewayError):
    """A forwarded request got no answer in time.

    Args:
        backend: the backend's configured name.
        seconds: how long the gateway waited.
    """

    def __init__(self, backend: str, seconds: float) -> None:
        self.backend = backend
        self.seconds = seconds
        super().__init__(f"backend {backend!r} did not answer within {seconds:g} s")
