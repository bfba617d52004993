"""Applying a changed config file to the running gateway (SIGHUP, ``mcp-gateway reload``).

Everything that can change while serving does: auth (tokens, JWT settings,
resource metadata), the access policy (open sessions see it from the moment
it is applied, and those whose view it changed hear list_changed), limits,
logging, allowed origins and hosts, notifications, pagination (a rotated
cursor secret keeps verifying for a grace period), ``mrtr`` (likewise for
``requestState``) and backends. What only a restart can change (the bind
address, the port, the MCP path, the operations listener, the log format,
naming) is refused with a log line that says so, and the rest still
applies. ``config.reload.applied`` lists the sections that changed.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol

import msgspec
import structlog
import trio

from gateway.config import load
from gateway.errors import ConfigError
from gateway.frontend.origin import OriginPolicy
from gateway.identity.keys import JwksError
from gateway.identity.policy import Policy
from gateway.protocol.sealed import Sealer
from gateway.telemetry.logs import set_log_level

if TYPE_CHECKING:
    from collections.abc import Set as AbstractSet

    from gateway.backends.pool import Pool
    from gateway.catalog.cursor import CursorCodec
    from gateway.catalog.snapshot import Kind
    from gateway.config import GatewayConfig
    from gateway.frontend.clients import ClientRegistry
    from gateway.frontend.guard import Guard
    from gateway.frontend.rate_limits import RateLimiter
    from gateway.identity.service import IdentityService
    from gateway.router import Router
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

    window: float

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
    """The running parts a reload changes, each one attribute it replaces or adjusts.

    Attributes:
        identity: builds and swaps the authenticator.
        guards: every HTTP front door (their Origin/Host policy).
        session_limiter: per-session buckets.
        principal_limiter: per-credential buckets.
        set_debounce: changes the list_changed coalescing window.
        cursors: the cursor codec (key ring).
        held: the held calls (their ``requestState`` sealer).
        router: the page size, the tasks' bounds.
        pool: the backends.
        clients: open sessions (closed when their static token is removed).
        nursery: where a retired secret's expiry waits.
        last: what the last reload did (None before one).
    """

    identity: IdentityService
    guards: list[Guard]
    session_limiter: RateLimiter
    principal_limiter: RateLimiter
    set_debounce: Coalescer
    cursors: CursorCodec
    held: HeldCalls
    router: Router
    pool: Pool
    clients: ClientRegistry
    nursery: trio.Nursery
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
        changed = await apply(live, current, new)
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
    value: object = config
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def _sealer_key(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest() if secret else secrets.token_bytes(32)


async def apply(live: Live, old: GatewayConfig, new: GatewayConfig) -> list[str]:
    """Apply ``new`` over ``old``; returns the sections that changed.

    Raises:
        JwksError: ``auth.jwt.jwks_file`` cannot be used; nothing is applied.
    """
    changed: list[str] = []
    # The bind stays as it is until a restart, so the derived URL does too.
    resource_url = msgspec.structs.replace(
        old.server, public_url=new.server.public_url
    ).resource_url
    if old.auth != new.auth or old.server.resource_url != resource_url:
        before = live.identity.holder.current.static_names if live.identity.holder else frozenset()
        authenticator = await live.identity.apply(new.auth, resource_url)
        _close_sessions_of_removed_tokens(live.clients, before - authenticator.static_names)
        live.pool.authenticated = new.auth.enabled  # session: auto follows it
        changed.append("auth")
    if old.limits != new.limits:
        live.session_limiter.configure(new.limits.session_rate, new.limits.session_burst)
        live.principal_limiter.configure(new.limits.token_rate, new.limits.token_burst)
        changed.append("limits")
    if old.logging.level != new.logging.level:
        set_log_level(new.logging.level)
        changed.append("logging.level")
    server_old, server_new = old.server, new.server
    if (server_old.allowed_origins, server_old.allowed_hosts) != (
        server_new.allowed_origins,
        server_new.allowed_hosts,
    ):
        policy = OriginPolicy(server_old.host, server_new.allowed_origins, server_new.allowed_hosts)
        for guard in live.guards:
            guard.origin = policy
        changed.append("server.allowed_origins/allowed_hosts")
    if old.server.max_sessions != new.server.max_sessions:
        live.clients.max_sessions = new.server.max_sessions
        changed.append("server.max_sessions")
    if old.server.session_idle_timeout != new.server.session_idle_timeout:
        changed.append("server.session_idle_timeout")  # read by each expiry sweep
    if old.notifications != new.notifications:
        live.set_debounce.window = new.notifications.debounce
        changed.append("notifications")
    if old.pagination != new.pagination:
        live.router.set_page_size(new.pagination.page_size)
        if old.pagination.cursor_secret != new.pagination.cursor_secret:
            live.cursors.rotate(new.pagination.cursor_secret, new.pagination.previous_secret_grace)
        changed.append("pagination")
    if old.mrtr != new.mrtr:
        if old.mrtr.state_secret != new.mrtr.state_secret:
            rotate_state_secret(live, new)
        live.held.max_held = new.mrtr.max_held_calls
        live.held.lifetime = new.mrtr.held_call_lifetime
        changed.append("mrtr")
    if old.tasks != new.tasks:
        limits = new.tasks
        live.router.tasks.configure(
            max_tasks=limits.max_tasks, ttl=limits.ttl, poll_interval=limits.poll_interval
        )
        changed.append("tasks")
    if (old.policy, old.policy_audit) != (new.policy, new.policy_audit):
        # From here on every request is decided under the new policy; the
        # sessions whose effective view it changed hear list_changed.
        for profile, session, kinds in live.router.access.apply(
            Policy.from_config(new.policy),
            audit_calls=new.policy_audit == "calls",
            peers=live.clients.peers(),
            base_of=live.router.view,
        ):
            live.set_debounce.add(kinds, profile, session=session)
        changed.append("policy")
    if old.backends != new.backends:
        changed.append("backends")
    await live.pool.reload(new.backends, new.shutdown.drain_timeout)
    return changed


def rotate_state_secret(live: Live, new: GatewayConfig) -> None:
    """New ``requestState`` key first; the old one verifies until the longest hold is over."""
    key = _sealer_key(new.mrtr.state_secret)
    previous = live.held.sealer
    live.held.sealer = Sealer([key, *previous.keys[:1]])
    grace = new.mrtr.held_call_lifetime

    async def retire() -> None:
        """Drop the previous key once no state sealed with it can be live."""
        await trio.sleep(grace)
        if live.held.sealer.keys[0] == key:
            live.held.sealer = Sealer([key])

    live.nursery.start_soon(retire)


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
    "Live",
    "apply",
    "reload_file",
    "effective_config",
    "restart_only_changes",
    "RESTART_ONLY",
]
