"""Applying a changed config file to the running gateway (SIGHUP, ``mcp-gateway reload``).

Everything that can change while serving does: auth (tokens, JWT settings,
resource metadata), the access policy (open sessions see it from the moment
it is applied, and those whose view it changed hear list_changed), limits,
logging, allowed origins and hosts, notifications, guardrail ``filters``
(top level, per profile, per backend), pagination (a rotated
cursor secret keeps verifying for a grace period), ``mrtr`` (likewise for
``requestState``) and backends. What only a restart can change (the bind
address, the port, the MCP path, the operations listener, the log format,
naming) is refused with a log line that says so, and the rest still
applies. ``config.reload.applied`` lists the sections that changed. A
``user_consent`` backend the reload removed, or whose URL,
``authorization_server``, ``client_id`` or ``scopes`` changed, loses its
stored consents (``consent.registration`` rule 3). A reload of ``auth`` or
the policy revokes and deletes the consents of principals it took a backend
from (``identity.consent_standing``).

One module past 450 lines because it is one idea: a reload is one
transaction over every section (load, compare, refuse what needs a
restart, apply the rest in one order, report once), and splitting it by
section would scatter that order across files that each see part of it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol

import msgspec
import structlog

from gateway.config import load
from gateway.consent.registration import consent_settings, purge_targets
from gateway.errors import ConfigError
from gateway.frontend.origin import OriginPolicy
from gateway.identity.consent_standing import backend_items, may_use
from gateway.identity.keys import JwksError
from gateway.identity.policy import Policy
from gateway.router.response_cache import cache_for
from gateway.router.stateless.held_calls import DEFAULT_LIFETIME
from gateway.store.api import StoreUnavailable
from gateway.telemetry.logs import set_log_level

if TYPE_CHECKING:
    from collections.abc import Callable
    from collections.abc import Set as AbstractSet

    from gateway.backends.pool import Pool
    from gateway.catalog.cursor import CursorCodec
    from gateway.catalog.snapshot import Kind
    from gateway.config import GatewayConfig
    from gateway.config.schema import LimitsConfig, PaginationConfig
    from gateway.config.schema_auth import AuthConfig
    from gateway.config.schema_gateway import MrtrConfig, TasksConfig
    from gateway.frontend.clients import ClientRegistry
    from gateway.frontend.guard import Guard
    from gateway.frontend.rate_limits import RateLimiter
    from gateway.guardrails.chains import Guardrails
    from gateway.identity.service import IdentityService
    from gateway.router import Router
    from gateway.router.shared_cache import SharedCache
    from gateway.router.stateless.held_calls import HeldCalls
    from gateway.telemetry.metrics import Metrics

logger = structlog.get_logger("gateway.runtime.reload")

#: Sections only a restart applies (the listeners are bound once).
RESTART_ONLY: Final = (
    "server.host",
    "server.port",
    "server.path",
    "server.max_body_bytes",
    "metrics",
    "logging.format",
    "logging.requests",
    "naming",
    "profiles",
    "shutdown.pid_file",
    "tracing",
    "admin",
    "consent",
)


@dataclass(frozen=True)
class ReloadOutcome:
    """What the last reload did, for the operator console.

    Attributes:
        at: when it ended, Unix seconds.
        applied: whether the new config is in force.
        problems: why it was rejected (each problem with its place).
        changed: the sections that changed.
        needs_restart: settings that changed but wait for a restart.
    """

    at: float
    applied: bool
    problems: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    needs_restart: list[str] = field(default_factory=list)


class Coalescer(Protocol):
    """What a reload changes of the list_changed coalescer: its window; and what it tells."""

    def apply(self, window: float) -> None:
        """A new coalescing window."""
        ...

    def add(
        self,
        kinds: frozenset[Kind],
        profile: str = ...,
        tag: str | None = None,
        session: str | None = None,
    ) -> None:
        """Note a list_changed for one profile's clients (of one view, or one session)."""
        ...


@dataclass
class Live:
    """The running parts a reload changes; each applies its own piece of a :class:`ConfigPlan`.

    Attributes:
        identity: builds and swaps the authenticator.
        guards: every HTTP front door (their Origin/Host policy).
        session_limiter: per-session buckets.
        principal_limiter: per-credential buckets.
        coalescer: the list_changed coalescer (its window; what a policy change tells).
        cursors: the cursor codec (key ring).
        held: the held calls (their bounds and ``requestState`` key ring).
        router: the page size, the tasks' bounds, the access policy.
        pool: the backends.
        clients: open sessions (closed when their static token is removed).
        guardrails_of: builds the filter chains of a config (None when it
            configures no filter), counted and shown like the first ones.
        shared_cache: the response cache's shared tier (with ``store.url``).
        last: what the last reload did (None before one).
    """

    identity: IdentityService
    guards: list[Guard]
    session_limiter: RateLimiter
    principal_limiter: RateLimiter
    coalescer: Coalescer
    cursors: CursorCodec
    held: HeldCalls
    router: Router
    pool: Pool
    clients: ClientRegistry
    guardrails_of: Callable[[GatewayConfig], Guardrails | None] | None = None
    shared_cache: SharedCache | None = None
    last: ReloadOutcome | None = None


async def reload_file(
    live: Live, metrics: Metrics, current: GatewayConfig, path: str
) -> GatewayConfig | None:
    """Read ``path`` and apply it over ``current``; None when it was rejected whole.

    Returns:
        The config now in force (restart-only settings kept from ``current``).
    """
    try:
        new = load(path)
    except ConfigError as exc:
        _rejected(live, metrics, path, exc.problems)
        return None
    refused = restart_only_changes(current, new)
    if refused:
        logger.warning(
            "config.reload.needs_restart",
            settings=refused,
            detail="these keep their old values until the gateway restarts; the rest applies",
        )
    new = effective_config(current, new)
    try:
        changed = await apply(live, plan_config(current, new))
    except JwksError as exc:
        _rejected(live, metrics, path, [str(exc)])
        return None
    logger.info("config.reload.applied", path=path, changed=changed, needs_restart=refused)
    metrics.config_reloads.labels(outcome="applied").inc()
    metrics.config_last_reload_successful.set(1)
    live.last = ReloadOutcome(time.time(), True, changed=changed, needs_restart=refused)
    return new


def _rejected(live: Live, metrics: Metrics, path: str, problems: list[str]) -> None:
    live.last = ReloadOutcome(time.time(), False, problems=list(problems))
    metrics.config_reloads.labels(outcome="rejected").inc()
    metrics.config_last_reload_successful.set(0)
    logger.error("config.reload.rejected", path=path, problems=problems)


def restart_only_changes(old: GatewayConfig, new: GatewayConfig) -> list[str]:
    """The settings that changed but only a restart applies (``RESTART_ONLY``)."""
    return [name for name in RESTART_ONLY if _setting(old, name) != _setting(new, name)]


def effective_config(old: GatewayConfig, new: GatewayConfig) -> GatewayConfig:
    """``new`` with every restart-only setting kept at its value in ``old``.

    What the gateway reports as its config (``Gateway.config``) is then what
    is in force, not what the file will mean after a restart.
    """
    replace = msgspec.structs.replace
    return replace(
        new,
        server=replace(
            new.server,
            host=old.server.host,
            port=old.server.port,
            path=old.server.path,
            max_body_bytes=old.server.max_body_bytes,
        ),
        metrics=old.metrics,
        logging=replace(new.logging, format=old.logging.format, requests=old.logging.requests),
        naming=old.naming,
        shutdown=replace(new.shutdown, pid_file=old.shutdown.pid_file),
        tracing=old.tracing,  # the tracer is installed once, by the command
    )


def _setting(config: GatewayConfig, dotted: str) -> object:
    if dotted == "profiles":  # a profile's cache opt-in and its filters apply on reload
        return [msgspec.structs.replace(p, cache=None, filters=[]) for p in config.profiles]
    value: object = config
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


@dataclass(frozen=True)
class ConfigPlan:
    """What a reload changes, piece by piece (``plan_config``, pure); None: unchanged.

    Attributes:
        new: the config the plan leads to (its backends go to the pool).
        changed: the sections that changed, in the order they are logged.
        auth: the ``auth`` section and the resource URL to build from.
        limits: the new per-session and per-credential limits.
        log_level: the new ``logging.level``.
        origin: the new Origin/Host policy of every front door.
        max_sessions: the new ``server.max_sessions``.
        debounce: the new list_changed coalescing window.
        pagination: the new ``pagination`` section.
        rotate_cursor_secret: whether its cursor secret is new.
        mrtr: the new ``mrtr`` section.
        rotate_state_secret: whether its ``requestState`` secret is new.
        tasks: the new task bounds.
        policy: the new access policy and whether calls are audited.
        filters: whether any ``filters`` (top level, a profile's, a
            backend's) changed: the chains are built again from ``new``.
    """

    new: GatewayConfig
    changed: tuple[str, ...] = ()
    auth: tuple[AuthConfig, str] | None = None
    limits: LimitsConfig | None = None
    log_level: str | None = None
    origin: OriginPolicy | None = None
    max_sessions: int | None = None
    debounce: float | None = None
    pagination: PaginationConfig | None = None
    rotate_cursor_secret: bool = False
    mrtr: MrtrConfig | None = None
    rotate_state_secret: bool = False
    tasks: TasksConfig | None = None
    policy: tuple[Policy | None, bool] | None = None
    filters: bool = False


def _filters(config: GatewayConfig) -> object:
    return (
        config.filters,
        [(p.name, p.filters) for p in config.profiles],
        [(b.name, b.filters) for b in config.backends],
    )


def plan_config(old: GatewayConfig, new: GatewayConfig) -> ConfigPlan:
    """Diff two configs into the pieces each running part applies (pure)."""
    changed: list[str] = []

    def differs(section: str, before: object, after: object) -> bool:
        if before != after:
            changed.append(section)
        return before != after

    server_old, server_new = old.server, new.server
    # The bind stays as it is until a restart, so the derived URL does too.
    resource_url = msgspec.structs.replace(
        server_old, public_url=server_new.public_url
    ).resource_url
    auth = differs("auth", (old.auth, server_old.resource_url), (new.auth, resource_url))
    limits = differs("limits", old.limits, new.limits)
    log_level = differs("logging.level", old.logging.level, new.logging.level)
    origin = differs(
        "server.allowed_origins/allowed_hosts",
        (server_old.allowed_origins, server_old.allowed_hosts),
        (server_new.allowed_origins, server_new.allowed_hosts),
    )
    max_sessions = differs("server.max_sessions", server_old.max_sessions, server_new.max_sessions)
    # Read by each expiry sweep: nothing to apply.
    differs(
        "server.session_idle_timeout",
        server_old.session_idle_timeout,
        server_new.session_idle_timeout,
    )
    notifications = differs("notifications", old.notifications, new.notifications)
    pagination = differs("pagination", old.pagination, new.pagination)
    mrtr = differs("mrtr", old.mrtr, new.mrtr)
    tasks = differs("tasks", old.tasks, new.tasks)
    policy = differs("policy", (old.policy, old.policy_audit), (new.policy, new.policy_audit))
    differs("backends", old.backends, new.backends)
    filters = differs("filters", _filters(old), _filters(new))
    differs(
        "cache",
        (old.cache, [p.cache for p in old.profiles]),
        (new.cache, [p.cache for p in new.profiles]),
    )
    return ConfigPlan(
        new,
        tuple(changed),
        auth=(new.auth, resource_url) if auth else None,
        limits=new.limits if limits else None,
        log_level=new.logging.level if log_level else None,
        origin=OriginPolicy(server_old.host, server_new.allowed_origins, server_new.allowed_hosts)
        if origin
        else None,
        max_sessions=server_new.max_sessions if max_sessions else None,
        debounce=new.notifications.debounce if notifications else None,
        pagination=new.pagination if pagination else None,
        rotate_cursor_secret=old.pagination.cursor_secret != new.pagination.cursor_secret,
        mrtr=new.mrtr if mrtr else None,
        rotate_state_secret=old.mrtr.state_secret != new.mrtr.state_secret,
        tasks=new.tasks if tasks else None,
        policy=(Policy.from_config(new.policy), new.policy_audit == "calls") if policy else None,
        filters=filters,
    )


async def apply(live: Live, plan: ConfigPlan) -> list[str]:
    """Have each running part apply its piece of ``plan``; returns the sections that changed.

    Raises:
        JwksError: ``auth.jwt.jwks_file`` cannot be used; nothing is applied.
    """
    if plan.auth is not None:
        before = live.identity.holder.current.static_names if live.identity.holder else frozenset()
        authenticator = await live.identity.apply(*plan.auth)
        _close_sessions_of_removed_tokens(live.clients, before - authenticator.static_names)
        live.pool.apply_auth(plan.new.auth.enabled)  # session: auto follows it
    if plan.limits is not None:
        live.session_limiter.configure(plan.limits.session_rate, plan.limits.session_burst)
        live.principal_limiter.configure(plan.limits.token_rate, plan.limits.token_burst)
        live.clients.listeners.per_principal = plan.limits.listen_streams_per_principal
    if plan.log_level is not None:
        set_log_level(plan.log_level)
    if plan.origin is not None:
        for guard in live.guards:
            guard.apply(plan.origin)
    if plan.max_sessions is not None:
        live.clients.apply(plan.max_sessions)
    if plan.debounce is not None:
        live.coalescer.apply(plan.debounce)
    if plan.pagination is not None:
        live.router.set_page_size(plan.pagination.page_size)
        if plan.rotate_cursor_secret:
            live.cursors.rotate(
                plan.pagination.cursor_secret, plan.pagination.previous_secret_grace
            )
    if plan.mrtr is not None:
        longest_input = max(
            (backend.timeouts.input for backend in plan.new.backends), default=DEFAULT_LIFETIME
        )
        live.held.apply(plan.mrtr, rotate=plan.rotate_state_secret, longest_input=longest_input)
    if plan.tasks is not None:
        live.router.tasks.configure(plan.tasks)
    if plan.policy is not None:
        # From here on every request is decided under the new policy; the
        # sessions whose effective view it changed hear list_changed.
        policy, audit_calls = plan.policy
        for profile, session, kinds in live.router.access.apply(
            policy, audit_calls=audit_calls, peers=live.clients.peers(), base_of=live.router.view
        ):
            live.coalescer.add(kinds, profile, session=session)
    if plan.filters and live.guardrails_of is not None:
        # From here on every call goes through the new chains (none when the
        # new config has no filter: the fast path is back).
        live.router.set_guardrails(live.guardrails_of(plan.new))
    # Every reload starts the response cache afresh, before the backends'
    # drains: its opt-ins may have changed, so may the policy its answers
    # were shaped under; a backend restarted by the reload drops its own.
    # Shared answers go on every replica too (``router.shared_cache`` rule 4).
    cache = cache_for(
        plan.new.cache, plan.new.backends, plan.new.profiles, shared=live.shared_cache
    )
    if cache is not None:
        cache.renewed(backend.name for backend in plan.new.backends)
    live.router.set_cache(cache)
    consents = consent_settings(backend.config for backend in live.pool.backends.values())
    await live.pool.reload(plan.new.backends, plan.new.shutdown.drain_timeout)
    await _purge_consents(live.pool, purge_targets(consents, consent_settings(plan.new.backends)))
    if plan.auth is not None or plan.policy is not None:
        await _purge_withdrawn(live, plan.new.auth.enabled)
    return list(plan.changed)


async def _purge_consents(pool: Pool, backends: set[str]) -> None:
    """Delete the stored consents of ``user_consent`` backends the reload removed or changed.

    In the store, so every replica behind it loses them at once; a store
    that does not answer is logged (each replica's own reload tries again).
    """
    from gateway.backends.credentials.consent_tokens import ConsentTokens

    personal = pool.personal
    if not backends or not isinstance(personal, ConsentTokens):
        return
    try:
        await personal.purge(backends)
    except StoreUnavailable as exc:
        logger.warning("consent.purge_failed", backends=sorted(backends), error=str(exc))


async def _purge_withdrawn(live: Live, auth_enabled: bool) -> None:
    """Revoke the consents of principals the new ``auth`` or policy took a backend from.

    Judged with the policy now in force (``identity.consent_standing``) against the
    profiles' views of the current catalog; a store that does not answer is
    logged (each replica's own reload tries again).
    """
    from gateway.backends.credentials.consent_tokens import ConsentTokens

    personal = live.pool.personal
    if not isinstance(personal, ConsentTokens):
        return
    router = live.router
    static_names = live.identity.holder.current.static_names if live.identity.holder else None
    reach: dict[str, dict[str, list[tuple[Kind, str]]]] = {}

    def reach_of(backend: str) -> dict[str, list[tuple[Kind, str]]]:
        if backend not in reach:
            separator = router.profiles.separator
            reach[backend] = {
                name: backend_items(router.view(name), backend, separator)
                for name in router.profiles.names
                if (profile := router.profiles.profile(name)) is not None
                and profile.backends.allows(backend)
            }
        return reach[backend]

    def still_may(principal: str, backend: str) -> bool:
        return may_use(
            principal,
            reach_of(backend),
            policy=router.access.policy,
            auth_enabled=auth_enabled and static_names is not None,
            static_names=static_names or frozenset(),
        )

    try:
        await personal.purge_withdrawn(still_may)
    except StoreUnavailable as exc:
        logger.warning("consent.purge_failed", reason="access removed", error=str(exc))


def _close_sessions_of_removed_tokens(clients: ClientRegistry, removed: AbstractSet[str]) -> None:
    """End sessions (and their GET streams) opened with a static token no longer configured."""
    if not removed:
        return
    keys = {f"token:{name}" for name in removed}
    for session in clients:
        if session.principal in keys:
            clients.close(session)
            logger.info(
                "client.session.closed",
                client_session=session.session_id[:8],
                reason="token removed by reload",
            )


__all__ = [
    "ConfigPlan",
    "Live",
    "apply",
    "plan_config",
    "reload_file",
    "effective_config",
    "restart_only_changes",
    "RESTART_ONLY",
]
