"""The configuration schema, part three: the whole file, and the rules across backends.

Backend names and prefixes must be unique, and each prefix must fit the
naming section. These rules see every backend at once, so they are
:class:`GatewayConfig`'s ``__post_init__``; :func:`backend_problems` is also
called on its own by the decoder when another section is broken, so one run
of ``check`` still shows the duplicates.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Final, NamedTuple

import msgspec
from msgspec import Meta

from gateway.config.schema import (
    NAME_PATTERN,
    Base,
    Invalid,
    LimitsConfig,
    LoggingConfig,
    NamingConfig,
    NotificationsConfig,
    PaginationConfig,
    Positive,
    PositiveInt,
    Secret,
    ServerConfig,
    ShutdownConfig,
    secret_problems,
)
from gateway.config.schema_admin import AdminConfig, admin_problems
from gateway.config.schema_auth import AuthConfig
from gateway.config.schema_backends import BackendConfig, NetworkBackend
from gateway.config.schema_cache import CacheConfig
from gateway.config.schema_consent import ConsentConfig
from gateway.config.schema_filters import FilterConfig
from gateway.config.schema_hosts import BackendsFrom, HostFilePath
from gateway.config.schema_pinning import PinningConfig
from gateway.config.schema_policy import PolicyAudit, PolicyRule, policy_problems
from gateway.config.schema_profiles import RESERVED_PREFIX, ProfileConfig, profile_problems
from gateway.config.schema_store import StoreConfig
from gateway.config.schema_tracing import TracingConfig

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = [
    "GatewayConfig",
    "MrtrConfig",
    "MetricsListenerConfig",
    "BackendIdentity",
    "backend_problems",
]

_NAME: Final = re.compile(NAME_PATTERN)
# catalog/naming.py shortens an over-long public name to
# "{prefix}{sep}{at least 1 char}-{8 hex}"; a prefix must leave room for that.
_SHORT_FORM_MIN_TAIL: Final = 1 + 1 + 8


class MrtrConfig(Base, frozen=True, kw_only=True):
    """Held calls: a legacy backend's own request bridged to a modern client (MRTR).

    A held call lives in one replica's memory: the client's retry must reach
    the replica that answered ``input_required`` (docs/eras.md).

    Attributes:
        max_held_calls: calls that may wait for a client's retry at once; a
            call asking beyond it fails at once.
        held_call_lifetime: seconds a held call waits for the retry (and a
            ``requestState`` stays valid) per round; unset, the backend's
            own ``timeouts.input``. The backend's ``timeouts.max_total``
            for the call bounds it too.
        state_secret: what the HMAC key for ``requestState`` is derived
            from, or a list of them (newest first: it seals, the others
            verify); empty means a random key per process.
    """

    max_held_calls: PositiveInt = 256
    held_call_lifetime: Positive | None = None
    state_secret: Secret = ""

    def __post_init__(self) -> None:
        problems = secret_problems("state_secret", self.state_secret)
        if problems:
            raise Invalid(*problems)


class TasksConfig(Base, frozen=True, kw_only=True):
    """Tasks the gateway runs for 2026-07-28 hosts (the tasks extension).

    A ``tools/call`` of a tool its backend marks ``execution.taskSupport``
    becomes a task when the request declares ``io.modelcontextprotocol/tasks``.
    Each task's record is kept in the state store, so every replica
    sharing it answers for the task (docs/operations.md).

    Attributes:
        max_tasks: tasks kept at once, running and finished; a new task
            beyond it is refused (-32603).
        ttl: seconds a finished task stays readable with ``tasks/get``.
        poll_interval: seconds between polls suggested to clients
            (``pollIntervalMs``).
    """

    max_tasks: PositiveInt = 1024
    ttl: Positive = 300.0
    poll_interval: Positive = 1.0


class MetricsListenerConfig(Base, frozen=True, kw_only=True):
    """A separate listener for ``/metrics``, ``/readyz`` and ``/healthz``.

    ``/metrics`` and ``/readyz`` details name backends and tools; on a
    non-loopback bind they are served only here (or with an admin token).

    Attributes:
        host: its bind address (loopback by default).
        port: its port; 0 (the default) means no separate listener.
    """

    host: str = "127.0.0.1"
    port: Annotated[int, Meta(ge=0, le=65535)] = 0


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
        mrtr: legacy backends' requests held for modern clients.
        tasks: tasks the gateway runs for modern clients.
        metrics: the separate operations listener.
        tracing: OpenTelemetry traces (``gateway.config.schema_tracing``).
        store: where state that outlives a request lives
            (``gateway.config.schema_store``): embedded, or Valkey/Redis.
        pinning: what happens when a backend's definitions change
            (``gateway.config.schema_pinning``); ``false`` means off.
        admin: the operator console (``gateway.config.schema_admin``).
        cache: the response cache (``gateway.config.schema_cache``); None
            (the key absent) turns it off.
        consent: the token vault and OAuth callback of ``user_consent``
            backends (``gateway.config.schema_consent``).
        backends: the MCP servers behind the gateway, in file order.
        profiles: named subsets of the catalog, each on its own path
            (``gateway.config.schema_profiles``).
        backends_from: host config files whose servers are backends too,
            after ``backends`` (:mod:`gateway.config.backends_from`); a
            bare path stands for ``{path: PATH}``.
        policy: who may open which profile and see which items
            (``gateway.config.schema_policy``); None (the key absent): every
            caller sees everything its profile shows.
        policy_audit: ``denials`` logs each denying decision; ``calls``
            also logs every call, read and get with its outcome.
        filters: guardrail filters every call runs through, before its
            profile's and its backend's (``gateway.config.schema_filters``).
    """

    server: ServerConfig = msgspec.field(default_factory=ServerConfig)
    naming: NamingConfig = msgspec.field(default_factory=NamingConfig)
    pagination: PaginationConfig = msgspec.field(default_factory=PaginationConfig)
    logging: LoggingConfig = msgspec.field(default_factory=LoggingConfig)
    shutdown: ShutdownConfig = msgspec.field(default_factory=ShutdownConfig)
    auth: AuthConfig = msgspec.field(default_factory=AuthConfig)
    limits: LimitsConfig = msgspec.field(default_factory=LimitsConfig)
    notifications: NotificationsConfig = msgspec.field(default_factory=NotificationsConfig)
    mrtr: MrtrConfig = msgspec.field(default_factory=MrtrConfig)
    tasks: TasksConfig = msgspec.field(default_factory=TasksConfig)
    store: StoreConfig = msgspec.field(default_factory=StoreConfig)
    metrics: MetricsListenerConfig = msgspec.field(default_factory=MetricsListenerConfig)
    tracing: TracingConfig = msgspec.field(default_factory=TracingConfig)
    pinning: PinningConfig | bool = msgspec.field(default_factory=PinningConfig)
    admin: AdminConfig = msgspec.field(default_factory=AdminConfig)
    cache: CacheConfig | None = None
    consent: ConsentConfig = msgspec.field(default_factory=ConsentConfig)
    backends: list[BackendConfig] = msgspec.field(default_factory=list)
    profiles: list[ProfileConfig] = msgspec.field(default_factory=list)
    backends_from: list[BackendsFrom | HostFilePath] = msgspec.field(default_factory=list)
    policy: list[PolicyRule] | None = None
    policy_audit: PolicyAudit = "denials"
    filters: list[FilterConfig] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        identities = (
            BackendIdentity(position, backend.name, backend.prefix)
            for position, backend in enumerate(self.backends)
        )
        problems = backend_problems(identities, self.naming)
        # With host files the backends are not all known yet: the profiles
        # are checked once those are read (config.backends_from.resolve).
        if not self.backends_from:
            problems += self.profile_problems()
        if self.policy is not None:
            problems += policy_problems(
                self.policy, (p.name for p in self.profiles), self.auth.tokens
            )
        if self.pinning is True:
            problems.append(("pinning", "true names no mode: give {mode: record} or another"))
        admin_role = any(rule.role == "admin" for rule in self.policy or ())
        problems += admin_problems(
            self.admin, self.server.host, self.auth.admin_tokens, self.server.path, admin_role
        )
        problems += self.consent_problems()
        if self.cache is not None and self.cache.shared and not self.store.url:
            problems.append(
                (
                    "cache.shared",
                    "needs store.url: the embedded store serves this gateway only, "
                    "so there is no replica to share answers with",
                )
            )
        if problems:
            raise Invalid(*problems)

    def consent_problems(self) -> list[tuple[str, str]]:
        """``user_consent`` backends need the vault's keys and authenticated callers."""
        users = [
            position
            for position, backend in enumerate(self.backends)
            if isinstance(backend, NetworkBackend)
            and backend.auth is not None
            and backend.auth.type == "user_consent"
        ]
        if not users:
            return []
        problems: list[tuple[str, str]] = []
        if not self.consent.vault_key_file and not self.consent.vault_key_env:
            problems.append(
                (
                    "consent.vault_key_file",
                    "user_consent backends need the token vault's keys: "
                    "set consent.vault_key_file or consent.vault_key_env",
                )
            )
        if not self.auth.enabled:
            problems.append(
                (
                    f"backends[{users[0]}].auth.type",
                    "user_consent binds tokens to principals: configure auth",
                )
            )
        binding = self.consent.bind_login
        if binding is not None and not binding.issuer and not self.auth.jwt.issuer:
            problems.append(
                (
                    "consent.bind_login.issuer",
                    "name the OpenID provider people sign in at (or set auth.jwt.issuer)",
                )
            )
        return problems

    @property
    def pins(self) -> PinningConfig:
        """``pinning:`` with YAML's ``false`` read as ``{mode: off}``."""
        if isinstance(self.pinning, PinningConfig):
            return self.pinning
        return PinningConfig()

    def profile_problems(self) -> list[tuple[str, str]]:
        """The profiles checked against every backend (``schema_profiles.profile_problems``)."""
        prefixes = {b.name: b.prefix if b.prefix is not None else b.name for b in self.backends}
        return profile_problems(self.profiles, prefixes, self.naming.separator, self.server.path)


class BackendIdentity(NamedTuple):
    """What the rules across backends read of one backend.

    Attributes:
        position: its index in ``backends``, for the place of a problem.
        name: its name.
        prefix: its ``prefix`` field (None: defaults to the name).
    """

    position: int
    name: str
    prefix: str | None

    @property
    def public_prefix(self) -> str:
        """The prefix actually used: ``prefix``, or the name when unset."""
        return self.prefix if self.prefix is not None else self.name


def _native_place(position: int) -> str:
    return f"backends[{position}]"


def backend_problems(
    backends: Iterable[BackendIdentity],
    naming: NamingConfig | None,
    where: Callable[[int], str] = _native_place,
) -> list[tuple[str, str]]:
    """Check backends against each other: unique names and prefixes, prefixes that fit naming.

    Args:
        backends: the backends whose name and prefix are known, in file order.
        naming: the naming section, or None when it is itself invalid (its
            problems would only make every prefix look wrong).
        where: the place of the backend at a position (by default
            ``backends[N]``; a host file's server for ``backends_from``).

    Returns:
        ``(place, message)`` pairs, places relative to the whole file.
    """
    problems: list[tuple[str, str]] = []
    names: dict[str, int] = {}
    prefixes: dict[str, BackendIdentity] = {}
    for backend in backends:
        place = where(backend.position)
        if backend.name in names:
            problems.append(
                (
                    f"{place}.name",
                    f"duplicate backend name {backend.name!r} (also {where(names[backend.name])})",
                )
            )
        else:
            names[backend.name] = backend.position
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
        if prefix == RESERVED_PREFIX:
            problems.append(
                (
                    prefix_place,
                    f"prefix {prefix!r} is reserved for the gateway's own tools{hint}",
                )
            )
        other = prefixes.get(prefix)
        if other is None:
            prefixes[prefix] = backend
        elif backend.prefix is not None or other.prefix is not None:
            # Two defaulted prefixes collide only when the names do: said above.
            problems.append(
                (
                    prefix_place,
                    f"duplicate prefix {prefix!r} (also {where(other.position)}){hint}",
                )
            )
        if naming is not None and _NAME.fullmatch(prefix):
            problems.extend(
                (prefix_place, message + hint) for message in _prefix_problems(prefix, naming)
            )
    return problems


def _prefix_problems(prefix: str, naming: NamingConfig) -> list[str]:
    problems: list[str] = []
    separator = naming.separator
    # The first separator in a public name must end the prefix, or two
    # backends' names could collide: prefix "ab" with separator "bb" gives
    # "abbbx", which is also prefix "a" + "bb" + "bx". Plain containment
    # ("a__b") is the common case of the same thing.
    if (prefix + separator).find(separator) != len(prefix):
        problems.append(
            f"prefix {prefix!r} contains or runs into the naming separator "
            f"{separator!r}, so public names could collide"
        )
    room = naming.max_length - len(separator) - _SHORT_FORM_MIN_TAIL
    if len(prefix) > room:
        problems.append(
            f"prefix {prefix!r} is too long: with separator {separator!r} and "
            f"naming.max_length {naming.max_length} it may have at most {max(room, 0)} "
            "characters"
        )
    return problems
