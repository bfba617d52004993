"""Typed, validated gateway configuration: YAML → ``${ENV}`` expansion → Structs.

A config file is read once, at startup or reload, by a person who wants to
know everything that is wrong with it at once: every problem is reported
with its place in the file, all together in one
:class:`~gateway.errors.ConfigError`.

The package, bottom up:

- :mod:`~gateway.config.schema`, :mod:`~gateway.config.schema_backends`,
  :mod:`~gateway.config.schema_gateway`: the msgspec Structs, with their
  bounds as ``msgspec.Meta`` constraints and their rules across fields in
  ``__post_init__``; nothing else.
- :mod:`~gateway.config.source`: the file, its YAML (duplicate keys
  refused) and ``${VAR}`` expansion.
- :mod:`~gateway.config.decode`: msgspec decoding that goes on past the
  first problem.
- :mod:`~gateway.config.loading`: :func:`parse` and :func:`load`, the
  pipeline; :func:`format_problems`.
- :mod:`~gateway.config.schema_hosts`, :mod:`~gateway.config.hosts`,
  :mod:`~gateway.config.jsonc`, :mod:`~gateway.config.backends_from`:
  ``backends_from``, the servers of the hosts' own config files (Claude
  Desktop, Cursor, Windsurf, Claude Code, VS Code) as backends; the
  pipeline calls it once the gateway's own file has decoded.

Callers import everything from here.
"""

from __future__ import annotations

from gateway.config.loading import format_problems, load, parse
from gateway.config.schema import (
    MAX_NAME_LENGTH,
    MIB,
    MIN_NAME_LENGTH,
    Base,
    LimitsConfig,
    LogFormat,
    LoggingConfig,
    LogLevel,
    NamingConfig,
    NotificationsConfig,
    PaginationConfig,
    ServerConfig,
    SessionMode,
    ShutdownConfig,
)
from gateway.config.schema_admin import AdminConfig
from gateway.config.schema_auth import AuthConfig, JwtConfig, ResourceMetadataConfig
from gateway.config.schema_backends import (
    BACKEND_CLASSES,
    TRANSPORTS,
    BackendBase,
    BackendConfig,
    HealthConfig,
    HttpBackend,
    HttpLikeBackend,
    ItemFilter,
    NetworkBackend,
    ResourceFilter,
    RestartPolicy,
    SseBackend,
    StdioBackend,
    Timeouts,
    WebSocketBackend,
)
from gateway.config.schema_consent import ConsentConfig
from gateway.config.schema_gateway import GatewayConfig
from gateway.config.schema_hosts import HOST_FORMATS, BackendsFrom, HostFormat
from gateway.config.schema_policy import ItemRules, PolicyAudit, PolicyRule
from gateway.config.schema_profiles import DEFAULT_PROFILE, ProfileConfig
from gateway.config.schema_store import StoreConfig
from gateway.config.schema_tracing import TracingConfig

__all__ = [
    "TracingConfig",
    "ConsentConfig",
    "StoreConfig",
    "Base",
    "ServerConfig",
    "JwtConfig",
    "ResourceMetadataConfig",
    "AdminConfig",
    "AuthConfig",
    "LimitsConfig",
    "NamingConfig",
    "PaginationConfig",
    "LoggingConfig",
    "ShutdownConfig",
    "NotificationsConfig",
    "HealthConfig",
    "Timeouts",
    "ItemFilter",
    "ResourceFilter",
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
    "ProfileConfig",
    "ItemRules",
    "PolicyAudit",
    "PolicyRule",
    "DEFAULT_PROFILE",
    "BackendsFrom",
    "HostFormat",
    "HOST_FORMATS",
    "SessionMode",
    "LogLevel",
    "LogFormat",
    "BACKEND_CLASSES",
    "TRANSPORTS",
    "MIB",
    "MIN_NAME_LENGTH",
    "MAX_NAME_LENGTH",
    "parse",
    "load",
    "format_problems",
]
