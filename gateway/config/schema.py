"""The configuration schema, part one: the Struct base, its bounds, the gateway-wide sections.

Every rule a config file must follow is stated here, on the Structs, so that
``msgspec.convert(data, GatewayConfig)`` alone accepts exactly the valid
files:

- **bounds on one field** are ``msgspec.Meta`` constraints in the field's
  type (``Positive``, ``Port``, ``Name``); msgspec checks them while decoding.
  A constraint's ``extra["problem"]`` is how a person is told it failed;
  without one, :mod:`gateway.config.decode` words it from the bound itself.
- **rules across fields** live in ``__post_init__`` and raise
  :class:`Invalid`, which names the field each problem is at. msgspec turns
  it into a ``ValidationError`` and keeps it as the ``__cause__``.

A rule in ``__post_init__`` runs only once every field of its Struct decoded,
so a field that is already wrong never draws a second complaint.

The backend Structs are in :mod:`gateway.config.schema_backends`, the whole
file in :mod:`gateway.config.schema_gateway`.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal, TypeAlias, TypeGuard, get_args

import msgspec
from msgspec import Meta

from gateway.errors import GatewayError

__all__ = [
    "Base",
    "Invalid",
    "tag_table",
    "MIB",
    "MIN_NAME_LENGTH",
    "MAX_NAME_LENGTH",
    "NAME",
    "NAME_PATTERN",
    "Positive",
    "PositiveInt",
    "Off",
    "OffInt",
    "Name",
    "SessionMode",
    "LogLevel",
    "LogFormat",
    "Engine",
    "TlsConfig",
    "ServerConfig",
    "LimitsConfig",
    "NamingConfig",
    "PaginationConfig",
    "LoggingConfig",
    "ShutdownConfig",
    "NotificationsConfig",
]

MIB: Final = 1024 * 1024

# Backend names and non-empty prefixes (DESIGN "Namespacing"). catalog/naming.py
# relies on this: a prefix can never contain "+" or the separator.
NAME: Final = "[a-z0-9][a-z0-9-]*"
NAME_PATTERN: Final = f"^{NAME}$"
MIN_NAME_LENGTH: Final = 16
MAX_NAME_LENGTH: Final = 128

SessionMode: TypeAlias = Literal["auto", "shared", "per_principal", "per_client"]
LogLevel: TypeAlias = Literal["debug", "info", "warning", "error"]
LogFormat: TypeAlias = Literal["auto", "json", "console"]

# Bounds shared by many fields. "gt=0" also refuses NaN, which "<= 0" would let through.
Positive: TypeAlias = Annotated[float, Meta(gt=0)]
PositiveInt: TypeAlias = Annotated[int, Meta(gt=0)]
Off: TypeAlias = Annotated[float, Meta(ge=0, extra={"problem": "must be 0 (off) or more"})]
OffInt: TypeAlias = Annotated[int, Meta(ge=0, extra={"problem": "must be 0 (off) or more"})]
Name: TypeAlias = Annotated[
    str,
    Meta(
        pattern=NAME_PATTERN,
        extra={
            "problem": "{value!r} is not a valid name (lowercase letters, digits and '-', "
            "starting with a letter or digit)"
        },
    ),
]


class Invalid(GatewayError, ValueError):
    """Rules across the fields of one Struct that failed, each at its field.

    A ``ValueError`` because that is what msgspec turns into a
    ``ValidationError`` when ``__post_init__`` raises it; the problems stay
    structured so the decoder can put each at its place without reading a
    message.

    Args:
        problems: ``(place, message)`` pairs; the place is relative to the
            Struct (``"request"``, ``"backends[3].name"``).
    """

    def __init__(self, *problems: tuple[str, str]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{place}: {message}" for place, message in problems))


def tag_table(union: Any) -> dict[str, type[Base]]:
    """The classes of a tagged union by their tag, in the union's order.

    Deriving the table from the union means a new backend kind is added in
    one place, the union, and is then known to the decoder and its messages.

    Args:
        union: a union of tagged Structs (``StdioBackend | HttpBackend``).

    Returns:
        Each member's tag mapped to the member.

    Raises:
        TypeError: when a member is not a Struct with a string tag.
    """
    table: dict[str, type[Base]] = {}
    for member in get_args(union):
        tag = member.__struct_config__.tag if _is_struct(member) else None
        if not isinstance(tag, str):
            raise TypeError(f"{member!r} is not a tagged config Struct")
        table[tag] = member
    return table


def _is_struct(tp: object) -> TypeGuard[type[Base]]:
    return isinstance(tp, type) and issubclass(tp, Base)


class Base(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """Root of every config Struct.

    ``forbid_unknown_fields`` makes a typo fail loudly instead of silently
    falling back to a default; ``frozen`` because a loaded config is a value
    shared by every task. Each subclass repeats ``frozen=True, kw_only=True``:
    msgspec applies ``kw_only`` only to the fields a class itself declares
    (required fields such as ``command`` follow defaulted ones from
    ``BackendBase``), and mypy's dataclass_transform view of msgspec
    does not inherit ``frozen``.
    """


# Which HTTP server carries the frontend (docs/performance.md, "The HTTP/1.1 engine").
Engine: TypeAlias = Literal["h11", "hypercorn"]


class TlsConfig(Base, frozen=True, kw_only=True):
    """HTTPS on the frontend: both files, or neither (plain HTTP).

    Attributes:
        cert_file: PEM certificate chain the gateway presents.
        key_file: PEM private key of that certificate.
    """

    cert_file: str = ""
    key_file: str = ""

    def __post_init__(self) -> None:
        # Half a pair is a typo, not a choice: serving plain HTTP when the
        # operator asked for TLS would be the worse surprise.
        if bool(self.cert_file) != bool(self.key_file):
            missing = "key_file" if self.cert_file else "cert_file"
            raise Invalid((missing, "is required when the other TLS file is given"))

    @property
    def enabled(self) -> bool:
        """Whether the frontend speaks HTTPS."""
        return bool(self.cert_file)


class ServerConfig(Base, frozen=True, kw_only=True):
    """Where and how the frontend listens for hosts.

    Attributes:
        host: bind address; loopback by default, so nothing is exposed by
            accident.
        port: TCP port, 0 for any free port.
        path: the Streamable HTTP endpoint.
        allowed_origins: extra ``Origin`` values to accept. Loopback origins
            are always accepted on a loopback bind; anything else must be
            listed, against DNS rebinding (MCP transports, "Security").
        allowed_hosts: extra ``Host`` header values to accept, for the same
            reason.
        max_body_bytes: largest POST body accepted.
        session_idle_timeout: seconds after which an idle client session is
            dropped.
        max_sessions: most client sessions held at once, so a client that
            never deletes its sessions cannot exhaust memory.
        public_url: the gateway's MCP URL as hosts reach it (through a proxy,
            say): the resource identifier of RFC 8707/9728 and the default
            JWT audience. Empty: ``http://{host}:{port}{path}``.
        engine: the HTTP server: ``h11`` (the gateway's own HTTP/1.1 loop,
            the fast default; named for the parser it was first built on,
            llhttp parses now) or ``hypercorn`` (HTTP/2-capable, the
            cross-check).
        tls: certificate and key for HTTPS, on either engine.
    """

    host: str = "127.0.0.1"
    port: Annotated[int, Meta(ge=0, le=65535)] = 8000
    path: str = "/mcp"
    allowed_origins: list[str] = []
    allowed_hosts: list[str] = []
    max_body_bytes: PositiveInt = 4 * MIB
    session_idle_timeout: Positive = 3600.0
    max_sessions: PositiveInt = 10000
    public_url: str = ""
    engine: Engine = "h11"
    tls: TlsConfig = TlsConfig()

    def __post_init__(self) -> None:
        # A rule, not a pattern bound, so that a file whose port is already
        # wrong is not also told about its path (one complaint per section).
        if not self.path.startswith("/"):
            raise Invalid(("path", f"must start with '/' (got {self.path!r})"))
        if self.public_url and not self.public_url.startswith(("https://", "http://")):
            raise Invalid(("public_url", f"must be an http(s) URL (got {self.public_url!r})"))

    @property
    def resource_url(self) -> str:
        """The gateway's resource identifier: ``public_url`` or one made from the bind."""
        if self.public_url:
            return self.public_url.rstrip("/") or self.public_url
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{self.path}"


class LimitsConfig(Base, frozen=True, kw_only=True):
    """Request rate limits (token buckets; 0 turns one off) and stream caps.

    Attributes:
        session_rate: requests per second per client session.
        session_burst: bucket size per client session.
        token_rate: requests per second per credential (all its sessions).
        token_burst: bucket size per credential.
        listen_streams_per_principal: open ``subscriptions/listen`` streams
            one principal (without auth: all anonymous hosts together) may
            hold at once; one more is refused (HTTP 429, -32603).
    """

    session_rate: Off = 0.0
    session_burst: Off = 100.0
    token_rate: Off = 0.0
    token_burst: Off = 200.0
    listen_streams_per_principal: Annotated[int, Meta(gt=0)] = 100


class NamingConfig(Base, frozen=True, kw_only=True):
    """How backend items get their public names (see ``catalog/naming.py``).

    Attributes:
        separator: between prefix and original name; must never occur in a
            prefix so a public name splits back unambiguously.
        max_length: longest public tool or prompt name; 64 is what common
            hosts accept.
    """

    separator: Annotated[
        str,
        Meta(min_length=1),
        Meta(
            pattern="^[A-Za-z0-9_-]+$",
            extra={"problem": "may contain only letters, digits, '_' and '-' (got {value!r})"},
        ),
    ] = "__"
    max_length: Annotated[int, Meta(ge=MIN_NAME_LENGTH, le=MAX_NAME_LENGTH)] = 64


# A signing secret: one string, or a list for rotation, newest (the one that
# signs) first; the others still verify (protocol/signing.keys_from_secret).
Secret: TypeAlias = str | list[str]


def secret_problems(field: str, secret: Secret) -> list[tuple[str, str]]:
    """What is wrong with a configured secret list (a string is always usable)."""
    if isinstance(secret, str) or (secret and all(secret)):
        return []
    return [(field, "a list of secrets needs at least one, and none of them empty")]


class PaginationConfig(Base, frozen=True, kw_only=True):
    """How the gateway pages its merged lists.

    Attributes:
        page_size: items per page; 0 returns everything in one page.
        cursor_secret: what the HMAC key for cursors is derived from, or a
            list of them (newest first: it signs, the others verify). Replicas
            that share it can continue each other's walks; empty means a
            random key per process.
        previous_secret_grace: seconds a cursor made with the secret before
            a reload keeps verifying after the reload rotated it.
    """

    page_size: Annotated[int, Meta(ge=0)] = 100
    cursor_secret: Secret = ""
    previous_secret_grace: Off = 300.0

    def __post_init__(self) -> None:
        problems = secret_problems("cursor_secret", self.cursor_secret)
        if problems:
            raise Invalid(*problems)


class LoggingConfig(Base, frozen=True, kw_only=True):
    """The log pipeline set up once by the CLI.

    Attributes:
        level: the least severe level emitted.
        format: ``auto`` is console on a tty and JSON otherwise.
        requests: one ``request.routed`` line per routed request at info
            level (client session, method, backend, duration, outcome); off,
            the line is logged at debug level only.
    """

    level: LogLevel = "info"
    format: LogFormat = "auto"
    requests: bool = False


class ShutdownConfig(Base, frozen=True, kw_only=True):
    """Graceful stop on SIGTERM/SIGINT.

    Attributes:
        drain_timeout: seconds calls in flight may take to finish before the
            rest are cancelled; also how long a removed backend is drained on
            reload.
        pid_file: where ``serve`` writes its pid for ``trio-mcp-gateway reload``
            (empty: none).
    """

    drain_timeout: Positive = 15.0
    pid_file: str = ""


class NotificationsConfig(Base, frozen=True, kw_only=True):
    """Fan-out of notifications to hosts.

    Attributes:
        debounce: a burst of list changes reaches each host as at most one
            ``list_changed`` of each kind per this many seconds.
    """

    debounce: Positive = 0.2
