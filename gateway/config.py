"""Typed, validated gateway configuration: YAML → ``${ENV}`` expansion → Structs.

A config file is read once, at startup or reload, by a person who wants to
know everything that is wrong with it at once. So decoding does not stop at
the first error the way ``msgspec.convert`` does: every field is converted on
its own, and every problem is reported with its place in the file
(``backends[2].timeouts.request: must not exceed max_total (600.0)``), all
together in one :class:`~gateway.errors.ConfigError`.

The pipeline:

1. **YAML** with PyYAML's safe loader (plus a duplicate-key check: a second
   ``backends:`` key would otherwise silently replace the first).
2. **Environment expansion** of ``${VAR}`` and ``${VAR:-default}`` inside
   string *values*, after parsing, so an environment value can never inject
   YAML structure; ``$${`` is a literal ``${``. Expanded values stay strings.
3. **Decoding** field by field into the Structs below, with
   ``strict=False`` so ``port: ${PORT}`` (a string) still becomes an int.
4. **Semantic checks** that types cannot express (name patterns, uniqueness,
   ranges), each with its own place.

This module performs no I/O except reading the file in :func:`load`.
"""

from __future__ import annotations

import difflib
import os
import re
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, TypeVar, get_args, get_origin

import msgspec
import yaml

from gateway.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "Base",
    "ServerConfig",
    "NamingConfig",
    "PaginationConfig",
    "LoggingConfig",
    "Timeouts",
    "ItemFilter",
    "RestartPolicy",
    "BackendBase",
    "StdioBackend",
    "NetworkBackend",
    "HttpLikeBackend",
    "HttpBackend",
    "SseBackend",
    "WebSocketBackend",
    "BackendConfig",
    "GatewayConfig",
    "SessionMode",
    "LogLevel",
    "LogFormat",
    "TRANSPORTS",
    "parse",
    "load",
    "format_problems",
]

SessionMode: TypeAlias = Literal["auto", "shared", "per_client"]
LogLevel: TypeAlias = Literal["debug", "info", "warning", "error"]
LogFormat: TypeAlias = Literal["auto", "json", "console"]

MIB: Final = 1024 * 1024

# Backend names and non-empty prefixes (DESIGN "Namespacing"). catalog/naming.py
# relies on this: a prefix can never contain "+" or the separator.
_NAME_PATTERN: Final = re.compile(r"[a-z0-9][a-z0-9-]*")
_SEPARATOR_PATTERN: Final = re.compile(r"[A-Za-z0-9_-]+")
MIN_NAME_LENGTH: Final = 16
MAX_NAME_LENGTH: Final = 128
# catalog/naming.py shortens an over-long public name to
# "{prefix}{sep}{at least 1 char}-{8 hex}"; a prefix must leave room for that.
_SHORT_FORM_MIN_TAIL: Final = 1 + 1 + 8

_HTTP_SCHEMES: Final = ("http://", "https://")
_WS_SCHEMES: Final = ("ws://", "wss://")

_TOP: Final = "<top>"


class _Invalid:
    """Marks a value that failed to decode (its problem is already recorded)."""


_INVALID: Final = _Invalid()


class Base(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """Root of every config Struct.

    ``forbid_unknown_fields`` makes a typo fail loudly instead of silently
    falling back to a default; ``frozen`` because a loaded config is a value
    shared by every task. Each subclass repeats ``frozen=True, kw_only=True``:
    msgspec applies ``kw_only`` only to the fields a class itself declares
    (required fields such as ``command`` follow defaulted ones from
    :class:`BackendBase`), and mypy's dataclass_transform view of msgspec
    does not inherit ``frozen``.
    """


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
    """

    host: str = "127.0.0.1"
    port: int = 8000
    path: str = "/mcp"
    allowed_origins: list[str] = []
    allowed_hosts: list[str] = []
    max_body_bytes: int = 4 * MIB
    session_idle_timeout: float = 3600.0
    max_sessions: int = 10000


class JwtConfig(Base, frozen=True, kw_only=True):
    """Validation of JWT bearer tokens signed with a shared secret (HS256).

    Attributes:
        secret: the HMAC key (from the environment); empty disables JWTs.
        audience: the ``aud`` a token must carry (this gateway's resource URL).
        issuer: the ``iss`` a token must carry; empty accepts any.
        leeway: seconds of clock skew tolerated on ``exp`` and ``nbf``.
    """

    secret: str = ""
    audience: str = ""
    issuer: str = ""
    leeway: float = 30.0


class AuthConfig(Base, frozen=True, kw_only=True):
    """Who may use the gateway. With no tokens and no JWT secret, anyone on
    an allowed Origin/Host may (the default, for a loopback bind).

    Attributes:
        bearer_tokens: static tokens, compared in constant time; entries that
            expand to "" are ignored, so ``${TOKEN:-}`` is safe to leave in.
        jwt: JWT validation.
        resource_metadata: URL of the protected-resource metadata, sent in
            ``WWW-Authenticate`` on 401 (RFC 9728).
    """

    bearer_tokens: list[str] = []
    jwt: JwtConfig = msgspec.field(default_factory=JwtConfig)
    resource_metadata: str = ""

    @property
    def enabled(self) -> bool:
        """Whether requests must carry a credential."""
        return any(self.bearer_tokens) or bool(self.jwt.secret)


class LimitsConfig(Base, frozen=True, kw_only=True):
    """Request rate limits (token buckets); 0 turns one off.

    Attributes:
        session_rate: requests per second per client session.
        session_burst: bucket size per client session.
        token_rate: requests per second per credential (all its sessions).
        token_burst: bucket size per credential.
    """

    session_rate: float = 0.0
    session_burst: float = 100.0
    token_rate: float = 0.0
    token_burst: float = 200.0


class NamingConfig(Base, frozen=True, kw_only=True):
    """How backend items get their public names (see ``catalog/naming.py``).

    Attributes:
        separator: between prefix and original name; must never occur in a
            prefix so a public name splits back unambiguously.
        max_length: longest public tool or prompt name; 64 is what common
            hosts accept.
    """

    separator: str = "__"
    max_length: int = 64


class PaginationConfig(Base, frozen=True, kw_only=True):
    """How the gateway pages its merged lists.

    Attributes:
        page_size: items per page; 0 returns everything in one page.
        cursor_secret: HMAC key for cursors. Replicas that share it can
            continue each other's walks; empty means a random key per process.
    """

    page_size: int = 100
    cursor_secret: str = ""


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


class HealthConfig(Base, frozen=True, kw_only=True):
    """Liveness checks of one backend.

    Attributes:
        ping_interval: seconds of idleness after which the backend is pinged;
            a failed ping restarts it. 0 disables pings.
        ping_timeout: how long a ping may take.
        eject_after_timeouts: this many requests in a row timing out end the
            backend's session (it is restarted with backoff, and calls fail at
            once meanwhile) instead of every caller waiting out its timeout
            on a path that has gone silent. 0 disables it.
    """

    ping_interval: float = 30.0
    ping_timeout: float = 10.0
    eject_after_timeouts: int = 5


class ShutdownConfig(Base, frozen=True, kw_only=True):
    """Graceful stop on SIGTERM/SIGINT.

    Attributes:
        drain_timeout: seconds calls in flight may take to finish before the
            rest are cancelled; also how long a removed backend is drained on
            reload.
        pid_file: where ``serve`` writes its pid for ``mcp-gateway reload``
            (empty: none).
    """

    drain_timeout: float = 15.0
    pid_file: str = ""


class NotificationsConfig(Base, frozen=True, kw_only=True):
    """Fan-out of notifications to hosts.

    Attributes:
        debounce: a burst of list changes reaches each host as at most one
            ``list_changed`` of each kind per this many seconds.
    """

    debounce: float = 0.2


class Timeouts(Base, frozen=True, kw_only=True):
    """Per-backend time limits in seconds, applied as cancel scopes by callers.

    Attributes:
        connect: to open the transport (spawn, TCP/TLS, WebSocket handshake).
        initialize: for the MCP ``initialize`` exchange.
        request: for one forwarded request without progress.
        max_total: hard ceiling for one request, progress or not.
        reset_on_progress: whether a progress notification restarts the
            ``request`` clock (long tools that report progress keep going).
    """

    connect: float = 5.0
    initialize: float = 30.0
    request: float = 60.0
    max_total: float = 600.0
    reset_on_progress: bool = True


class ItemFilter(Base, frozen=True, kw_only=True):
    """Which of a backend's items (by original name) the gateway exposes.

    Attributes:
        include: fnmatch globs; an item must match one.
        exclude: fnmatch globs; an item matching one is hidden even if
            included.
    """

    include: list[str] = msgspec.field(default_factory=lambda: ["*"])
    exclude: list[str] = []

    def allows(self, name: str) -> bool:
        """Whether the item called ``name`` passes this filter.

        Matching is case-sensitive on every platform (``fnmatchcase``), since
        MCP names are.

        Args:
            name: the item's original name at the backend.

        Returns:
            True when ``name`` matches some include glob and no exclude glob.
        """
        return any(fnmatchcase(name, p) for p in self.include) and not any(
            fnmatchcase(name, p) for p in self.exclude
        )


class ResourceFilter(ItemFilter, frozen=True, kw_only=True):
    """Which resources are exposed, and whether their list is cached.

    Attributes:
        list_mode: ``cached`` (default) lists the backend's resources once
            and on list_changed; ``passthrough`` never caches them and fetches
            the backend's own pages during each host's walk, for servers
            whose resource lists are huge or change fast.
    """

    list_mode: Literal["cached", "passthrough"] = "cached"


class RestartPolicy(Base, frozen=True, kw_only=True):
    """Exponential backoff (with jitter) between restarts of a failed backend.

    Attributes:
        initial_delay: seconds before the first restart.
        max_delay: cap on the delay.
        multiplier: growth factor per consecutive failure.
    """

    initial_delay: float = 0.5
    max_delay: float = 60.0
    multiplier: float = 2.0


class BackendBase(Base, tag_field="transport", frozen=True, kw_only=True):
    """What every backend has, whatever its transport.

    The concrete classes form a tagged union on the YAML key ``transport``.

    Attributes:
        name: unique, ``[a-z0-9][a-z0-9-]*``; used in logs, metrics and as the
            default prefix.
        prefix: namespace for this backend's items; None means the name, ""
            mounts the backend unprefixed.
        session: ``shared`` multiplexes every client over one backend
            session; ``per_client`` opens one per client session; ``auto``
            picks by transport (see :attr:`effective_session`).
        required: whether the gateway is not ready until this backend is.
        enabled: False keeps the entry in the file but never starts it.
        timeouts: time limits for this backend.
        restart: backoff between restarts.
        health: idle pings.
        tools: which tools to expose.
        prompts: which prompts to expose.
        resources: which resources and templates to expose, and the
            resource list mode (``list_mode``).
        max_list_pages: most pages followed when listing, so a backend whose
            ``nextCursor`` never ends cannot stall the catalog.
        max_list_items: most items kept from one list, so a backend that
            lists a million tools costs a bounded amount of memory.
        max_in_flight: most calls sent to this backend at once (0: no limit).
        max_pending: calls that may wait for a slot when ``max_in_flight``
            is reached; beyond that a call fails at once (overloaded).
        on_collision: what happens to an item of this backend whose public
            name another backend already has (possible only with unprefixed
            backends): ``error`` leaves it out and logs an error naming both,
            ``skip`` leaves it out quietly, ``rename`` gives it the public name
            it would have had under the backend's name as prefix.
    """

    name: str
    prefix: str | None = None
    session: SessionMode = "auto"
    required: bool = False
    enabled: bool = True
    timeouts: Timeouts = msgspec.field(default_factory=Timeouts)
    restart: RestartPolicy = msgspec.field(default_factory=RestartPolicy)
    health: HealthConfig = msgspec.field(default_factory=HealthConfig)
    tools: ItemFilter = msgspec.field(default_factory=ItemFilter)
    prompts: ItemFilter = msgspec.field(default_factory=ItemFilter)
    resources: ResourceFilter = msgspec.field(default_factory=ResourceFilter)
    max_list_pages: int = 100
    max_list_items: int = 100_000
    max_in_flight: int = 0
    max_pending: int = 0
    on_collision: Literal["error", "skip", "rename"] = "error"

    @property
    def transport(self) -> str:
        """The ``transport`` tag of this backend's class (for logs and metrics)."""
        tag = type(self).__struct_config__.tag
        return tag if isinstance(tag, str) else type(self).__name__

    @property
    def public_prefix(self) -> str:
        """The prefix actually used: ``prefix``, or the name when unset."""
        return self.prefix if self.prefix is not None else self.name

    @property
    def effective_session(self) -> Literal["shared", "per_client"]:
        """The session mode after resolving ``auto``.

        ``auto`` means per_client for network backends, where an initialize
        is cheap and per-client state is then never mixed up, and shared for
        stdio, where a process per client is not cheap (DESIGN "Backend
        sessions").
        """
        if self.session == "shared":
            return "shared"
        if self.session == "per_client":
            return "per_client"
        return "shared" if isinstance(self, StdioBackend) else "per_client"


class StdioBackend(BackendBase, tag="stdio", frozen=True, kw_only=True):
    """A backend run as a child process speaking newline-delimited JSON-RPC.

    Attributes:
        command: the program to run (looked up on PATH).
        args: its arguments.
        env: extra environment variables for the child.
        cwd: working directory; None keeps the gateway's.
        max_line_bytes: longest stdout line accepted; a longer one breaks the
            transport instead of growing memory without bound.
        inherit_env: whether the child starts from the gateway's environment
            (False passes only ``env``, to keep secrets away from it).
        stop_grace: seconds to wait after closing stdin, and again after
            SIGTERM, before the next step of shutdown.
    """

    command: str
    args: list[str] = []
    env: dict[str, str] = {}
    cwd: str | None = None
    max_line_bytes: int = 16 * MIB
    inherit_env: bool = True
    stop_grace: float = 2.0


class NetworkBackend(BackendBase, frozen=True, kw_only=True):
    """Fields shared by every backend reached through a URL.

    Attributes:
        url: the endpoint.
        headers: sent with every request (``Authorization``, typically
            through ``${ENV}`` expansion).
    """

    url: str
    headers: dict[str, str] = {}


class HttpLikeBackend(NetworkBackend, frozen=True, kw_only=True):
    """Fields shared by the HTTP-based transports (Streamable HTTP and SSE).

    Attributes:
        verify_tls: whether to verify the server certificate.
        ca_file: PEM bundle to verify against instead of the system store.
        client_cert: PEM client certificate for mutual TLS.
        client_key: PEM key for ``client_cert`` when it is not in that file.
    """

    verify_tls: bool = True
    ca_file: str | None = None
    client_cert: str | None = None
    client_key: str | None = None


class HttpBackend(HttpLikeBackend, tag="http", frozen=True, kw_only=True):
    """A backend speaking MCP Streamable HTTP (2025-03-26 and later)."""


class SseBackend(HttpLikeBackend, tag="sse", frozen=True, kw_only=True):
    """A backend speaking the legacy HTTP+SSE transport (2024-11-05)."""


class WebSocketBackend(NetworkBackend, tag="websocket", frozen=True, kw_only=True):
    """A backend reached over a WebSocket (``ws://`` or ``wss://``)."""


BackendConfig: TypeAlias = StdioBackend | HttpBackend | SseBackend | WebSocketBackend

_BACKEND_TYPES: Final[dict[str, type[BackendBase]]] = {
    "stdio": StdioBackend,
    "http": HttpBackend,
    "sse": SseBackend,
    "websocket": WebSocketBackend,
}
# The valid values of a backend's `transport`, in the order messages list them.
TRANSPORTS: Final = tuple(_BACKEND_TYPES)


class GatewayConfig(Base, frozen=True, kw_only=True):
    """The whole configuration file.

    Attributes:
        server: the HTTP frontend.
        naming: public names of backend items.
        pagination: paging of merged lists.
        logging: the log pipeline.
        shutdown: graceful stop and the pid file.
        auth: client authentication.
        limits: request rate limits.
        notifications: fan-out to hosts.
        backends: the MCP servers behind the gateway, in file order.
    """

    server: ServerConfig = msgspec.field(default_factory=ServerConfig)
    naming: NamingConfig = msgspec.field(default_factory=NamingConfig)
    pagination: PaginationConfig = msgspec.field(default_factory=PaginationConfig)
    logging: LoggingConfig = msgspec.field(default_factory=LoggingConfig)
    shutdown: ShutdownConfig = msgspec.field(default_factory=ShutdownConfig)
    auth: AuthConfig = msgspec.field(default_factory=AuthConfig)
    limits: LimitsConfig = msgspec.field(default_factory=LimitsConfig)
    notifications: NotificationsConfig = msgspec.field(default_factory=NotificationsConfig)
    backends: list[BackendConfig] = []


# --------------------------------------------------------------------------
# Public functions


def parse(
    text: str, *, env: Mapping[str, str] | None = None, source: str | None = None
) -> GatewayConfig:
    """Build a config from YAML text, reporting every problem at once.

    Args:
        text: the YAML document. Empty (or only comments) means all defaults.
        env: variables for ``${VAR}`` expansion; ``os.environ`` when None.
        source: the file name to put in the error, if the text came from one.

    Returns:
        The validated configuration.

    Raises:
        ConfigError: with one ``place: message`` line per problem found.
    """
    problems = _Problems()
    data = _load_yaml(text, problems)
    if data is not _INVALID:
        expanded = _expand(data, "", os.environ if env is None else env, problems, set())
        config = _decode_config(expanded, problems)
        if not problems.items and config is not None:
            return config
    raise ConfigError(problems.items, source)


def load(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> GatewayConfig:
    """Read and validate a config file; the only file I/O in this module.

    Args:
        path: the YAML file (UTF-8).
        env: variables for ``${VAR}`` expansion; ``os.environ`` when None.

    Returns:
        The validated configuration.

    Raises:
        ConfigError: when the file cannot be read or has problems; ``path`` is
            set to the file name.
    """
    name = os.fspath(path)
    try:
        text = Path(name).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [f"{_TOP}: not UTF-8 text ({exc.reason} at byte {exc.start})"], name
        ) from exc
    except OSError as exc:
        raise ConfigError([f"{_TOP}: cannot read the file: {exc.strerror or exc}"], name) from exc
    return parse(text, env=env, source=name)


def format_problems(err: ConfigError) -> str:
    """Render a ConfigError for a terminal: one problem per line.

    Each line starts with the file path when there is one, so editors and
    terminals can jump to the file (``gateway.yaml: server.port: ...``).

    Args:
        err: the error raised by :func:`parse` or :func:`load`.

    Returns:
        The lines joined with newlines, without a trailing newline.
    """
    head = f"{err.path}: " if err.path else ""
    return "\n".join(head + problem for problem in err.problems)


# --------------------------------------------------------------------------
# Problems


class _Problems:
    """Collects ``place: message`` lines.

    A place already found broken before decoding (an unset environment
    variable, a recursive alias) is *muted*: what stands there now would only
    cause follow-up complaints about the same value.
    """

    def __init__(self) -> None:
        self.items: list[str] = []
        self._muted: set[str] = set()

    def add(self, place: str, message: str) -> None:
        if any(_within(place, muted) for muted in self._muted):
            return
        self.items.append(f"{place or _TOP}: {message}")

    def mute(self, place: str) -> None:
        self._muted.add(place)


def _within(place: str, root: str) -> bool:
    return place == root or place.startswith((root + ".", root + "["))


def _join(place: str, key: object) -> str:
    return f"{place}.{key}" if place else str(key)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


# --------------------------------------------------------------------------
# YAML


class _Loader(yaml.SafeLoader):
    """safe_load's loader, noting duplicate keys instead of keeping the last."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicates: list[str] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            # "<<" merge keys legitimately repeat and override.
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                if key_node.value in seen:
                    mark = key_node.start_mark
                    self.duplicates.append(
                        f"line {mark.line + 1}, column {mark.column + 1}: "
                        f"duplicate key {key_node.value!r}"
                    )
                seen.add(key_node.value)
        return super().construct_mapping(node, deep=deep)


def _load_yaml(text: str, problems: _Problems) -> object:
    """The parsed document, or ``_INVALID`` when it is not YAML at all."""
    loader: _Loader | None = None
    try:
        loader = _Loader(text)  # checks the characters already
        data = loader.get_single_data()
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        problems.add(
            f"line {line}, column {column}",
            f"invalid YAML: {exc.reason} (character #x{exc.character:04x})",
        )
        return _INVALID
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = exc.problem or exc.context or "invalid YAML"
        if exc.context and exc.problem:
            what = f"{exc.problem} ({exc.context})"
        place = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problems.add(place, f"invalid YAML: {what}")
        return _INVALID
    finally:
        if loader is not None:
            loader.dispose()
    # Reported, but decoding goes on with the last value, so that the other
    # problems in the file are found too.
    problems.items.extend(loader.duplicates)
    return data


# --------------------------------------------------------------------------
# Environment expansion

# "$${" escapes; "${NAME}" or "${NAME:-default}" expands; any other "${" is malformed.
# A default may hold "$" but not "${": nesting is not supported, and refusing it
# is clearer than half-expanding it.
_REFERENCE: Final = re.compile(
    r"\$\$\{|\$\{(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>(?:[^}$]|\$(?!\{))*))?\})?"
)


def _expand(
    node: object, place: str, env: Mapping[str, str], problems: _Problems, active: set[int]
) -> object:
    """Expand references in every string value (not keys) of the YAML tree."""
    if isinstance(node, str):
        return _expand_string(node, place, env, problems)
    if isinstance(node, dict | list):
        # A YAML alias can make a node contain itself.
        if id(node) in active:
            problems.add(place, "recursive YAML alias")
            problems.mute(place)
            return node
        active.add(id(node))
        try:
            if isinstance(node, dict):
                return {
                    k: _expand(v, _join(place, k), env, problems, active) for k, v in node.items()
                }
            return [_expand(v, f"{place}[{i}]", env, problems, active) for i, v in enumerate(node)]
        finally:
            active.discard(id(node))
    return node


def _expand_string(text: str, place: str, env: Mapping[str, str], problems: _Problems) -> str:
    failures: list[str] = []

    def substitute(match: re.Match[str]) -> str:
        whole = match.group(0)
        if whole == "$${":
            return "${"
        name = match.group("name")
        if name is None:
            failures.append(
                "malformed ${...} reference (use ${NAME} or ${NAME:-default}; $${ for a literal ${)"
            )
            return whole
        value = env.get(name)
        default = match.group("default")
        if default is not None:
            # Shell ":-": the default also replaces an empty value.
            return value or default
        if value is None:
            failures.append(f"environment variable {name} is not set")
            return ""
        return value

    result = _REFERENCE.sub(substitute, text)
    for failure in failures:
        problems.add(place, failure)
    if failures:
        problems.mute(place)
    return result


# --------------------------------------------------------------------------
# Decoding, one field at a time


_TYPE_WORDS: Final = {"array": "a list", "object": "a mapping"}
_EXPECTED: Final = re.compile(r"Expected `(?P<want>[^`]+)`, got `(?P<got>[^`]+)`")


def _readable_type(name: str) -> str:
    return " or ".join(_TYPE_WORDS.get(part, part) for part in name.split(" | "))


def _convert(tp: Any, value: object, place: str, problems: _Problems) -> object:
    """Convert one scalar with msgspec, rewording its error for a config reader.

    Containers and Structs are walked by ``_decode_value``, so the message never
    carries a ``- at `$...``` path of its own: the place is already exact.
    """
    try:
        return msgspec.convert(value, type=tp, strict=False)
    except msgspec.ValidationError as exc:
        message = str(exc)
        expected = _EXPECTED.fullmatch(message)
        if expected:
            message = (
                f"expected {_readable_type(expected.group('want'))}, "
                f"got {_readable_type(expected.group('got'))}"
            )
            if isinstance(value, str | int | float):
                message += f" {value!r}"
        else:
            message = message[:1].lower() + message[1:]
        problems.add(place, message)
        return _INVALID


def _decode_value(tp: Any, value: object, place: str, problems: _Problems) -> object:
    """Decode one value of type ``tp``, recursing so every place is exact."""
    if isinstance(tp, type) and issubclass(tp, Base):
        # "server:" with every key commented out parses as null; read it as {}.
        return _decode_struct(tp, {} if value is None else value, place, problems)
    origin = get_origin(tp)
    if origin is Literal:
        choices = get_args(tp)
        if isinstance(value, str) and value in choices:
            return value
        shown = f"{value!r}" if isinstance(value, str | int | float | bool) else _kind(value)
        problems.add(place, f"must be one of: {', '.join(choices)} (got {shown})")
        return _INVALID
    if origin is dict:
        if not isinstance(value, dict):
            problems.add(place, f"expected a mapping, got {_kind(value)}")
            return _INVALID
        _, value_type = get_args(tp)
        result: dict[str, object] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                problems.add(_join(place, key), f"keys must be strings, got {_kind(key)}")
                continue
            result[key] = _decode_value(value_type, item, _join(place, key), problems)
        if len(result) < len(value) or any(v is _INVALID for v in result.values()):
            return _INVALID
        return result
    if origin is list:
        if not isinstance(value, list):
            problems.add(place, f"expected a list, got {_kind(value)}")
            return _INVALID
        (item_type,) = get_args(tp)
        items = [
            _decode_value(item_type, item, f"{place}[{i}]", problems)
            for i, item in enumerate(value)
        ]
        return _INVALID if any(v is _INVALID for v in items) else items
    return _convert(tp, value, place, problems)


def _unknown_field(key: object, known: list[str]) -> str:
    close = difflib.get_close_matches(str(key), known, n=1)
    return f"unknown field, did you mean `{close[0]}`?" if close else "unknown field"


def _decode_fields(
    cls: type[Base],
    data: dict[Any, Any],
    place: str,
    problems: _Problems,
    *,
    skip: frozenset[str] = frozenset(),
) -> tuple[dict[str, object], bool]:
    """Decode each present field of ``cls`` from ``data``, in file order.

    Returns:
        The fields that decoded, and whether everything did (no unknown,
        missing or invalid field). Keys in ``skip`` are left to the caller.
    """
    fields = {f.encode_name: f for f in msgspec.structs.fields(cls)}
    known = [*fields, *skip]
    kwargs: dict[str, object] = {}
    ok = True
    for key, raw in data.items():
        if key in skip:
            continue
        field = fields.get(key) if isinstance(key, str) else None
        if field is None:
            problems.add(_join(place, key), _unknown_field(key, known))
            ok = False
            continue
        value = _decode_value(field.type, raw, _join(place, key), problems)
        if value is _INVALID:
            ok = False
        else:
            kwargs[field.name] = value
    for key, field in fields.items():
        if field.required and key not in data:
            problems.add(_join(place, key), "required field missing")
            ok = False
    return kwargs, ok


def _decode_struct(
    cls: type[Base],
    data: object,
    place: str,
    problems: _Problems,
    *,
    skip: frozenset[str] = frozenset(),
) -> Base | _Invalid:
    """Decode and check one Struct.

    The instance is returned even when a semantic check failed, so checks
    across structs (duplicate names) still see it; the caller raises anyway
    because the problem is recorded.
    """
    if not isinstance(data, dict):
        problems.add(place, f"expected a mapping, got {_kind(data)}")
        return _INVALID
    kwargs, ok = _decode_fields(cls, data, place, problems, skip=skip)
    if not ok:
        return _INVALID
    instance = _build(cls, kwargs)
    _check(instance, place, problems)
    return instance


_S = TypeVar("_S", bound=Base)


def _build(cls: type[_S], fields: dict[str, object]) -> _S:
    """Construct ``cls`` from fields that were each decoded to their type."""
    return cls(**fields)


def _decode_backend(data: object, place: str, problems: _Problems) -> BackendBase | None:
    if not isinstance(data, dict):
        problems.add(place, f"expected a mapping, got {_kind(data)}")
        return None
    choices = ", ".join(TRANSPORTS)
    if "transport" not in data:
        problems.add(_join(place, "transport"), f"required field missing (one of: {choices})")
        return None
    transport = data["transport"]
    cls = _BACKEND_TYPES.get(transport) if isinstance(transport, str) else None
    if cls is None:
        problems.add(
            _join(place, "transport"), f"unknown transport {transport!r} (one of: {choices})"
        )
        return None
    backend = _decode_struct(cls, data, place, problems, skip=frozenset({"transport"}))
    return backend if isinstance(backend, BackendBase) else None


def _decode_config(data: object, problems: _Problems) -> GatewayConfig | None:
    if data is None:
        return GatewayConfig()
    if not isinstance(data, dict):
        problems.add("", f"expected a mapping at the top level, got {_kind(data)}")
        return None
    kwargs, _ = _decode_fields(GatewayConfig, data, "", problems, skip=frozenset({"backends"}))
    backends: list[tuple[int, BackendBase]] = []
    raw = data.get("backends")
    if isinstance(raw, list):
        for index, item in enumerate(raw):
            backend = _decode_backend(item, f"backends[{index}]", problems)
            if backend is not None:
                backends.append((index, backend))
    elif raw is not None:
        problems.add("backends", f"expected a list, got {_kind(raw)}")
    # A naming section that failed or is itself wrong would only make the
    # prefix checks below complain about the wrong thing.
    naming = kwargs.get("naming", None if "naming" in data else NamingConfig())
    if not isinstance(naming, NamingConfig) or not _naming_is_valid(naming):
        naming = None
    _check_backends(backends, naming, problems)
    if problems.items:
        return None
    return _build(GatewayConfig, {**kwargs, "backends": [b for _, b in backends]})


# --------------------------------------------------------------------------
# Semantic checks


def _check(instance: Base, place: str, problems: _Problems) -> None:
    """Checks on one struct that its types cannot express."""
    if isinstance(instance, ServerConfig):
        if not instance.path.startswith("/"):
            problems.add(_join(place, "path"), f"must start with '/' (got {instance.path!r})")
        if not 0 <= instance.port <= 65535:
            problems.add(_join(place, "port"), f"must be between 0 and 65535 (got {instance.port})")
        for field in ("max_body_bytes", "session_idle_timeout", "max_sessions"):
            _positive(instance, field, place, problems)
    elif isinstance(instance, NamingConfig):
        if not instance.separator:
            problems.add(_join(place, "separator"), "must not be empty")
        elif not _SEPARATOR_PATTERN.fullmatch(instance.separator):
            problems.add(
                _join(place, "separator"),
                f"may contain only letters, digits, '_' and '-' (got {instance.separator!r})",
            )
        if not MIN_NAME_LENGTH <= instance.max_length <= MAX_NAME_LENGTH:
            problems.add(
                _join(place, "max_length"),
                f"must be between {MIN_NAME_LENGTH} and {MAX_NAME_LENGTH} "
                f"(got {instance.max_length})",
            )
    elif isinstance(instance, PaginationConfig):
        if instance.page_size < 0:
            problems.add(_join(place, "page_size"), f"must be 0 or more (got {instance.page_size})")
    elif isinstance(instance, HealthConfig):
        if instance.ping_interval < 0:
            problems.add(_join(place, "ping_interval"), "must be 0 (off) or more")
        if instance.eject_after_timeouts < 0:
            problems.add(_join(place, "eject_after_timeouts"), "must be 0 (off) or more")
        _positive(instance, "ping_timeout", place, problems)
    elif isinstance(instance, ShutdownConfig):
        _positive(instance, "drain_timeout", place, problems)
    elif isinstance(instance, LimitsConfig):
        for field in ("session_rate", "session_burst", "token_rate", "token_burst"):
            if getattr(instance, field) < 0:
                problems.add(_join(place, field), "must be 0 (off) or more")
    elif isinstance(instance, NotificationsConfig):
        _positive(instance, "debounce", place, problems)
    elif isinstance(instance, Timeouts):
        for field in ("connect", "initialize", "request", "max_total"):
            _positive(instance, field, place, problems)
        if instance.request > instance.max_total:
            problems.add(
                _join(place, "request"), f"must not exceed max_total ({instance.max_total})"
            )
    elif isinstance(instance, RestartPolicy):
        _positive(instance, "initial_delay", place, problems)
        _positive(instance, "max_delay", place, problems)
        if instance.initial_delay > instance.max_delay:
            problems.add(
                _join(place, "initial_delay"), f"must not exceed max_delay ({instance.max_delay})"
            )
        if not instance.multiplier >= 1:
            problems.add(
                _join(place, "multiplier"), f"must be 1 or more (got {instance.multiplier})"
            )
    elif isinstance(instance, BackendBase):
        _check_backend(instance, place, problems)


def _positive(instance: Base, field: str, place: str, problems: _Problems) -> None:
    value = getattr(instance, field)
    # "not > 0" rather than "<= 0" so NaN is refused too.
    if not value > 0:
        problems.add(_join(place, field), f"must be positive (got {value})")


def _check_backend(backend: BackendBase, place: str, problems: _Problems) -> None:
    if not _NAME_PATTERN.fullmatch(backend.name):
        problems.add(
            _join(place, "name"),
            f"{backend.name!r} is not a valid name (lowercase letters, digits and '-', "
            "starting with a letter or digit)",
        )
    if backend.prefix and not _NAME_PATTERN.fullmatch(backend.prefix):
        problems.add(
            _join(place, "prefix"),
            f'{backend.prefix!r} is not a valid prefix ("" or lowercase letters, digits '
            "and '-', starting with a letter or digit)",
        )
    _positive(backend, "max_list_pages", place, problems)
    _positive(backend, "max_list_items", place, problems)
    for name in ("max_in_flight", "max_pending"):
        if getattr(backend, name) < 0:
            problems.add(_join(place, name), "must be 0 (no limit) or more")
    if isinstance(backend, StdioBackend):
        if not backend.command:
            problems.add(_join(place, "command"), "must not be empty")
        _positive(backend, "max_line_bytes", place, problems)
        _positive(backend, "stop_grace", place, problems)
    elif isinstance(backend, NetworkBackend):
        schemes = _WS_SCHEMES if isinstance(backend, WebSocketBackend) else _HTTP_SCHEMES
        if not backend.url.lower().startswith(schemes):
            problems.add(
                _join(place, "url"), f"must start with {' or '.join(schemes)} (got {backend.url!r})"
            )
        if isinstance(backend, HttpLikeBackend) and backend.client_key and not backend.client_cert:
            problems.add(_join(place, "client_key"), "needs client_cert as well")


def _naming_is_valid(naming: NamingConfig) -> bool:
    return (
        _SEPARATOR_PATTERN.fullmatch(naming.separator) is not None
        and MIN_NAME_LENGTH <= naming.max_length <= MAX_NAME_LENGTH
    )


def _check_backends(
    backends: list[tuple[int, BackendBase]], naming: NamingConfig | None, problems: _Problems
) -> None:
    """Checks across backends: unique names and prefixes, prefix/naming interplay.

    Args:
        backends: the backends that decoded, with their index in the file.
        naming: the naming section, or None when it is itself invalid.
        problems: where to record problems.
    """
    names: dict[str, int] = {}
    prefixes: dict[str, tuple[int, BackendBase]] = {}
    for index, backend in backends:
        place = f"backends[{index}]"
        if backend.name in names:
            problems.add(
                f"{place}.name",
                f"duplicate backend name {backend.name!r} (also backends[{names[backend.name]}])",
            )
        else:
            names[backend.name] = index
        prefix = backend.public_prefix
        if not prefix:
            continue  # several backends may be mounted unprefixed
        # Where the prefix came from: the prefix key, or the name it defaults to.
        prefix_place = f"{place}.prefix" if backend.prefix is not None else f"{place}.name"
        hint = (
            ""
            if backend.prefix is not None
            else "; the prefix defaults to the name, set `prefix` to choose another"
        )
        if prefix in prefixes:
            other_index, other = prefixes[prefix]
            # Two defaulted prefixes collide only when the names do: said above.
            if backend.prefix is not None or other.prefix is not None:
                problems.add(
                    prefix_place,
                    f"duplicate prefix {prefix!r} (also backends[{other_index}]){hint}",
                )
        else:
            prefixes[prefix] = (index, backend)
        if naming is not None and _NAME_PATTERN.fullmatch(prefix):
            _check_prefix_against_naming(prefix, naming, prefix_place, hint, problems)


def _check_prefix_against_naming(
    prefix: str, naming: NamingConfig, place: str, hint: str, problems: _Problems
) -> None:
    separator = naming.separator
    # The first separator in a public name must end the prefix, or two
    # backends' names could collide: prefix "ab" with separator "bb" gives
    # "abbbx", which is also prefix "a" + "bb" + "bx". Plain containment
    # ("a__b") is the common case of the same thing.
    if (prefix + separator).find(separator) != len(prefix):
        problems.add(
            place,
            f"prefix {prefix!r} contains or runs into the naming separator "
            f"{separator!r}, so public names could collide{hint}",
        )
    room = naming.max_length - len(separator) - _SHORT_FORM_MIN_TAIL
    if len(prefix) > room:
        problems.add(
            place,
            f"prefix {prefix!r} is too long: with separator {separator!r} and "
            f"naming.max_length {naming.max_length} it may have at most {max(room, 0)} "
            f"characters{hint}",
        )
