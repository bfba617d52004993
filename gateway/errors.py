"""The gateway's exceptions, its JSON-RPC error codes, and the one translation to the wire.

Every failure the gateway reasons about is one of these, raised where it is
found (h11's ``_util.py`` strategy: raise locally, translate once). Foreign
exceptions are mapped at the boundary where they happen (a transport maps
trio/httpx errors; the session maps a backend's JSON-RPC error), and the
answer a host sees is made here: :func:`to_protocol_error` gives the
JSON-RPC error of any ``GatewayError`` and :func:`http_status_for` the HTTP
status its code travels with on a 2026-07-28 POST. The tree, with the module
of each class defined elsewhere::

    GatewayError
    ├── ConfigError                 the file and the place inside it
    ├── TransportError
    │   ├── ConnectError            could not reach or start the peer
    │   ├── TransportClosed         we closed it
    │   ├── CredentialUnavailable   no token for the backend (its token endpoint failed)
    │   │   └── TokenEndpointError  backends.credentials.grants: the endpoint's answer
    │   └── TransportBroken         the world broke it (EOF, reset, oversize line)
    │       └── SessionExpired      the server no longer knows our session
    ├── ProtocolError               abstract; carries a JSON-RPC ``code``
    │   ├── LocalProtocolError      *we* were sent something invalid
    │   │   ├── TaskTableFull       protocol.stateless.tasks
    │   │   ├── TaskRecordUnavailable  router.stateless.task_records: a task out of reach
    │   │   ├── ListenLimitReached  frontend.stateless.listen_stream: a principal's listen cap
    │   │   ├── ConsentRequired     router.consent_gate: -32042, a person must sign in first
    │   │   ├── AwaitingApproval    a call to an item whose change awaits approval (pinning)
    │   │   ├── OutsideShownDefinition  held item: arguments outside the pinned schema shown
    │   │   └── ModernProtocolError protocol.stateless.error_codes: the 2026-07-28 rules
    │   │       ├── EnvelopeInvalid, HeaderMismatch, MissingClientCapability,
    │   │       │   UnsupportedVersion, InvalidSealedToken   (error_codes)
    │   │       ├── MalformedInputRequired                   protocol.stateless.mrtr
    │   │       ├── MethodNotFound                           protocol.eras
    │   │       └── UnknownRequestState                      router.stateless.held_calls
    │   └── RemoteProtocolError     the peer answered with a JSON-RPC error
    ├── BackendUnavailable          the backend is down, starting or gone
    │   └── SessionLimitReached     backends.links: backends[].sessions.max reached
    ├── RequestTimeout              a forwarded request ran out of time
    ├── GuardrailError              a guardrail filter stopped a payload
    │   ├── FilterRefused           a filter denied it: -32602, data {filter, reason}
    │   └── PolicyUnavailable       a fail-closed policy service could not decide: -32603
    ├── UnexpectedEvent             protocol.stateless.held_call_states: a defect in the driver
    ├── InvalidToken                protocol.signing: a token we did not sign, or a dead one
    │   └── TokenMalformed, BadSignature, TokenExpired
    ├── WeakKey (ValueError)        protocol.signing: a key ring without a usable key
    ├── InvalidAnnotation           protocol.stateless.routing_headers: a bad x-mcp-header
    ├── NotModern                   protocol.stateless.backend_leg: the probe's answer
    ├── IncompatibleBackend         backends.handshake
    ├── StatelessLegFailed          backends.handshake: the 2026-07-28 leg does not work
    ├── EraRestored                 backends.stateless.era_fallback: reopen in 2026-07-28
    ├── Invalid (ValueError)        config.schema: cross-field rules of one Struct
    ├── JsoncError (ValueError)     config.jsonc
    ├── TokenRejected               identity.tokens: a bearer token not accepted
    │   └── UnknownKey              a key the key set lacks (a refetch may help)
    ├── JwksError                   identity.keys: an unusable JWK Set
    ├── Unauthenticated             identity.authenticator: 401
    ├── InsufficientScope           identity.authenticator: 403
    ├── Rejection                   frontend.rejection: an HTTP refusal before routing
    ├── BodyTooLarge                frontend.http_util
    ├── UnsafeHeader (ValueError)   frontend.engine.http1_response: CR/LF in a header
    ├── RequestRefused              frontend.engine.request_parser: a request answered 4xx/5xx
    ├── EnvelopeRefused             frontend.stateless.stdio_requests
    ├── ConsoleDenied               console.caller: status and page message
    ├── FormError (ValueError)      console.forms
    ├── Unreachable                 cli.status_report: the gateway did not answer
    ├── PinsCommandError            cli.pins_command: a pins command that cannot be done
    ├── StoreUnavailable            store.api: the state store did not answer in time
    ├── BaselineError               pinning.baseline: a baseline that cannot be trusted
    ├── VaultError                  consent.vault: an unusable key, a token that does not open
    ├── LoginRefused                consent.records: a consent link or callback refused
    └── ConsentSetupError           consent.oauth: discovery or registration cannot go on

``(ValueError)`` marks a class that is a ``ValueError`` too, because a
library it passes through (msgspec's ``dec_hook``, a caller's parse) knows
that type. ``tests/test_errors.py`` checks that no exception class of the
gateway is outside this tree.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

# JSON-RPC 2.0 codes (https://www.jsonrpc.org/specification#error_object).
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
# Implementation-defined range -32000..-32099: ours.
REQUEST_TIMEOUT_CODE: Final = -32001
# 2026-07-28 schema.ts "Errors": the spec-only sub-range -32020..-32099.
HEADER_MISMATCH: Final = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022
# 2025-11-25: the request needs the user to open a URL first (URL elicitation).
URL_ELICITATION_REQUIRED: Final = -32042

# 2026-07-28 basic/transports/streamable-http.mdx: 400 for the envelope's
# -32602 and for -32020/21/22, 404 for -32601. The spec assigns nothing to
# -32700 and -32600; 400 is what the SDK sends and what HTTP means by a bad
# request. Every other code (-32603, tool failures) goes out as 200.
HTTP_STATUS_BY_CODE: Final[Mapping[int, int]] = MappingProxyType(
    {
        PARSE_ERROR: 400,
        INVALID_REQUEST: 400,
        INVALID_PARAMS: 400,
        HEADER_MISMATCH: 400,
        MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
        UNSUPPORTED_PROTOCOL_VERSION: 400,
        METHOD_NOT_FOUND: 404,
    }
)


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


class AwaitingApproval(LocalProtocolError):
    """A call to an item blocked by ``pinning: block``: its definition changed, unapproved.

    Always -32602: the host asked for something the gateway will not serve
    as it is now; ``data.reason`` is ``awaiting_approval``.

    Args:
        what: ``tool``, ``prompt`` or ``skill``.
        public: the public name (a skill's URI) the host called or got.
        backend: the backend's configured name.
    """

    def __init__(self, what: str, public: str, backend: str) -> None:
        self.public = public
        self.backend = backend
        super().__init__(
            f"{what.capitalize()} {public} changed and awaits approval: calls to it are "
            f"refused until an operator approves the new definition",
            INVALID_PARAMS,
            {"reason": "awaiting_approval", "name": public, "backend": backend},
        )


class OutsideShownDefinition(LocalProtocolError):
    """A call to a held tool whose arguments do not fit the definition the host was shown.

    Under ``pinning: hold`` a changed tool is listed with its pinned
    definition while the backend already serves the new one; a call whose
    arguments the pinned ``inputSchema`` does not allow could only mean
    something under the unapproved definition, so it never reaches the
    backend. -32602, ``data.reason`` ``outside_shown_definition``.

    Args:
        public: the public tool name the host called.
        backend: the backend's configured name.
        problem: the first violation, with its path in the arguments.
    """

    def __init__(self, public: str, backend: str, problem: str) -> None:
        self.public = public
        self.backend = backend
        super().__init__(
            f"Tool {public} changed and awaits approval; these arguments do not fit the "
            f"definition this host was shown ({problem})",
            INVALID_PARAMS,
            {"reason": "outside_shown_definition", "name": public, "backend": backend},
        )


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


class GuardrailError(GatewayError):
    """A guardrail filter (``gateway.guardrails``) stopped a request, result or backend request.

    Args:
        filter: the filter's name (configured, or ``TYPE#POSITION``).
        reason: what the filter says, never the payload's text.
    """

    def __init__(self, filter: str, reason: str) -> None:
        self.filter = filter
        self.reason = reason
        super().__init__(f"refused by filter {filter!r}: {reason}")


class FilterRefused(GuardrailError):
    """A filter denied the payload; the host gets -32602 with ``data: {filter, reason}``."""


class PolicyUnavailable(GuardrailError):
    """An external filter with ``fail: closed`` got no usable answer (down, slow, garbage).

    The host gets -32603 with ``data.reason = "policy_unavailable"``: the
    request was not wrong, the gateway could not check it.
    """


def to_protocol_error(exc: GatewayError) -> ProtocolError:
    """The JSON-RPC error a host gets for ``exc``: the one translation.

    A ``ProtocolError`` is its own answer. A backend that is down or too
    slow is not the host's fault, so the host gets an error naming the
    backend with the reason in ``data`` (docs/protocol.md, errors):
    -32603 ``data.reason`` = the unavailability's kind, or -32001 with the
    seconds waited. A guardrail's refusal is -32602 with ``data: {filter,
    reason}``; a fail-closed policy service that could not decide is -32603
    with ``data.reason = "policy_unavailable"``. Anything else is a gateway fault: -32603 "internal
    error", saying nothing of the gateway's insides.
    """
    if isinstance(exc, ProtocolError):
        return exc
    if isinstance(exc, BackendUnavailable):
        return LocalProtocolError(
            str(exc), INTERNAL_ERROR, data={"reason": exc.kind, "backend": exc.backend}
        )
    if isinstance(exc, PolicyUnavailable):
        return LocalProtocolError(
            f"the policy service of filter {exc.filter!r} could not decide",
            INTERNAL_ERROR,
            data={"reason": "policy_unavailable", "filter": exc.filter},
        )
    if isinstance(exc, FilterRefused):
        return LocalProtocolError(
            str(exc), INVALID_PARAMS, data={"filter": exc.filter, "reason": exc.reason}
        )
    if isinstance(exc, RequestTimeout):
        return LocalProtocolError(
            f"backend {exc.backend!r} did not answer within {exc.seconds:.3g} s",
            REQUEST_TIMEOUT_CODE,
            data={"reason": "timeout", "backend": exc.backend, "seconds": round(exc.seconds, 3)},
        )
    return LocalProtocolError("internal error", INTERNAL_ERROR)


def http_status_for(code: int) -> int:
    """The HTTP status a JSON-RPC error with ``code`` is sent with on a 2026-07-28 POST.

    The handshake-era endpoints answer a JSON-RPC error with 200 (a body
    that is not JSON-RPC at all is a ``Rejection`` with its own status).
    """
    return HTTP_STATUS_BY_CODE.get(code, 200)
