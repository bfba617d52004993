"""Composition root: config → metrics → pool → router → frontend → HTTP engine.

Everything the gateway runs lives under the nursery of ``serve``: the
backends (inside the pool), the services (each owning its nursery), and the
HTTP engine. Leaving it stops all of them, backends last, so that no child
process outlives the gateway.

Past 450 lines and still one idea: composing one gateway from its config.
The small builders beside ``open_gateway`` (``pin_settings``,
``read_baseline``, ``guardrails_of``, ``consent_flow``, ...) each turn one
config section into the part the pool, router or console takes, and exist
for this wiring alone; the logic they configure lives in its own room.
"""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec
import structlog
import trio

from gateway.backends.pins import PinGuard
from gateway.backends.pool import Pool, open_pool
from gateway.backends.state import BackendState
from gateway.catalog.cursor import CursorCodec
from gateway.catalog.naming import NamingRules
from gateway.config import NetworkBackend
from gateway.config.schema import TlsConfig
from gateway.console.activity import Activity
from gateway.frontend.asgi import GatewayApp, OperationsApp, operations_access
from gateway.frontend.clients import ClientRegistry, ClientSession
from gateway.frontend.engine.selection import serve_http
from gateway.frontend.list_changed import ListChangedCoalescer
from gateway.frontend.origin import OriginPolicy
from gateway.frontend.rate_limits import RateLimiter
from gateway.frontend.session_records import SessionRecords
from gateway.frontend.shared_limits import SharedLimiter
from gateway.frontend.sse_endpoint import LegacySseEndpoint
from gateway.frontend.streamable.endpoint import McpEndpoint
from gateway.guardrails.chains import Guardrails
from gateway.identity.keys import JwksError
from gateway.identity.policy import Policy
from gateway.identity.service import IdentityService
from gateway.pinning.ledger import PinMode
from gateway.router import Router
from gateway.router.access import AccessControl
from gateway.router.profile_setup import profile_views, record_catalog
from gateway.router.response_cache import cache_for
from gateway.router.shared_cache import SharedCache
from gateway.router.stateless.held_calls import DEFAULT_LIFETIME, HeldCalls
from gateway.router.stateless.task_records import TaskRecords
from gateway.runtime import readiness as status
from gateway.runtime import reload as live_reload
from gateway.runtime.reload_news import ReloadNews
from gateway.store.api import StoreState
from gateway.store.measured import MeasuredStore
from gateway.store.opening import open_store
from gateway.telemetry.metrics import Metrics, StoreSample

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping

    from prometheus_client import CollectorRegistry

    from gateway.backends.backend import Backend
    from gateway.backends.channel import ChannelOpener
    from gateway.backends.credentials.consent_tokens import ConsentBackend, ConsentTokens
    from gateway.catalog.snapshot import Kind, Snapshot
    from gateway.config import BackendConfig, GatewayConfig
    from gateway.config.schema_consent import ConsentConfig, LoginBinding
    from gateway.consent.vault import Vault
    from gateway.console.handler import ConsoleApp
    from gateway.frontend.asgi import SubApp
    from gateway.identity.authenticator import AuthHolder
    from gateway.pinning.baseline import Baseline
    from gateway.store.api import Store, StoreHealth
from gateway.errors import ConfigError

logger = structlog.get_logger("gateway.runtime.app")

# How often the event loop's lag is sampled.
LAG_PROBE_INTERVAL: Final = 0.5
# How often idle client sessions are looked for.
EXPIRY_SWEEP_INTERVAL: Final = 30.0


@dataclass
class Gateway:
    """The running parts, for the server loop and for tests."""

    config: GatewayConfig
    pool: Pool
    router: Router
    clients: ClientRegistry
    app: GatewayApp
    metrics: Metrics
    endpoint: McpEndpoint
    live: live_reload.Live | None = None
    # The file a reload re-reads (the console's reload button); None without one.
    config_path: str | None = None
    # The state store (``store:``): the embedded one unless a server is set.
    store: Store | None = None
    # What judges listings against their pins (``pinning:``); the admin API's and console's.
    pins: PinGuard | None = None
    # Tells the other replicas of a reload and follows theirs (shared store only).
    reload_news: ReloadNews | None = None
    # Handshake-era sessions' records, so any replica serves them (shared store only).
    session_records: SessionRecords | None = None
    # Each person's tokens at user_consent backends; None without any.
    consent: ConsentTokens | None = None
    draining: bool = False
    # Set when shutdown starts: the HTTP engine's shutdown trigger, so its
    # listeners close at once while requests in flight drain.
    stopping: trio.Event = field(default_factory=trio.Event)

    started: float = field(default_factory=trio.current_time)  # the overview's uptime

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """(ready, details) for ``/readyz`` (``runtime.readiness``); keeps mcp_gateway_ready."""
        health = self.store.health() if self.store is not None else None
        ready, details = status.readiness(
            self.pool,
            self.clients,
            self.started,
            self.draining,
            health,
            None if self.consent is None else self.consent.last_survey,
        )
        self.metrics.ready.set(1 if ready else 0)
        return ready, details

    def calls_in_flight(self) -> int:
        """Host requests being handled right now, over every client session."""
        return sum(len(session.inflight) for session in self.clients)


@asynccontextmanager
async def open_gateway(
    config: GatewayConfig,
    *,
    registry: CollectorRegistry | None = None,
    connect: ChannelOpener | None = None,
    config_path: str | None = None,
) -> AsyncIterator[Gateway]:
    """Start the backends and the services, build the frontend on them; stop all on exit.

    Wiring only: each part gets what it works with as constructor
    arguments, and each long-lived service (identity, the router with its
    held calls and tasks, the list_changed coalescer) runs in a nursery of
    its own, started here with ``nursery.start``.
    """
    metrics = Metrics(registry)
    server = config.server
    views = profile_views(config.profiles, config.naming.separator)
    session_limiter = RateLimiter(config.limits.session_rate, config.limits.session_burst)
    principal_limiter = RateLimiter(config.limits.token_rate, config.limits.token_burst)
    router: Router
    gateway: Gateway
    records: SessionRecords | None = None

    def opened(session: ClientSession) -> None:
        """A host initialized: the router may now route to it."""
        router.client_opened(session)
        metrics.client_sessions_opened.inc()
        metrics.client_sessions_open.inc()
        metrics.session_opened(session.protocol_version, session.profile)

    def closed(session: ClientSession) -> None:
        """A session ended, however: release what it held at the backends."""
        router.client_closed(session.session_id)
        session_limiter.forget(session.session_id)
        if records is not None:
            records.forget(session)
        metrics.client_sessions_open.dec()
        metrics.session_closed(session.profile)

    clients = ClientRegistry(
        server.max_sessions,
        listen_streams_per_principal=config.limits.listen_streams_per_principal,
        on_open=opened,
        on_close=closed,
    )
    # The console watches the router's requests and the refusals, when it is on.
    activity = Activity(trio.current_time) if config.admin.enabled else None
    rules = NamingRules(config.naming.separator, config.naming.max_length)
    pins = PinGuard(*pin_settings(config), rules, metrics)
    baseline = read_baseline(config)
    async with (
        # token exchange: whose client session is it
        open_pool(
            config.backends,
            rules,
            connect,
            subjects=clients.subject_of,  # token exchange: whose client session is it
            # per-principal backend sessions: who calls and what its host can do
            hosts=lambda client: router.host_of(client),
            authenticated=config.auth.enabled,  # session: auto follows it
            pins=pins,
        ) as pool,
        open_store(config.store, config_file=config_path) as opened_store,
        trio.open_nursery() as services,
    ):
        store: Store = MeasuredStore(opened_store, metrics)
        await services.start(pins.run, store, baseline)
        identity = IdentityService(metrics)
        await services.start(identity.run)
        auth = await _authenticate(identity, config)
        consent = consent_flow(
            config, store, lambda: [backend.config for backend in pool.backends.values()]
        )
        pool.personal = consent
        if consent is not None:
            await services.start(consent.run)  # the counts /readyz shows
        cursors = CursorCodec(config.pagination.cursor_secret, clock=trio.current_time)
        held = HeldCalls.from_config(
            config.mrtr, metrics, input_bound=lambda name: _input_bound(pool, name)
        )
        access = AccessControl(
            Policy.from_config(config.policy),
            audit_calls=config.policy_audit == "calls",
            metrics=metrics,
            separator=config.naming.separator,
        )
        router = Router(
            pool,
            cursors,
            config.pagination.page_size,
            metrics=metrics,
            separator=config.naming.separator,
            log_requests=config.logging.requests,
            held=held,
            profiles=views,
            tasks=config.tasks,
            access=access,
            task_notices=clients.listeners.broadcast,
            observer=activity,
            guardrails=guardrails_of(config, metrics, activity),
            consent=consent,
        )
        # The response cache's shared tier, for ``cache.shared`` (now or after a reload).
        shared_cache = None
        if config.store.url:
            shared_cache = SharedCache(
                store,
                timeout=config.store.timeout,
                on_failure=metrics.store_fallbacks.labels(tenant="cache").inc,
            )
            await services.start(shared_cache.run)
        router.set_cache(
            cache_for(config.cache, config.backends, config.profiles, shared=shared_cache)
        )
        task_records = TaskRecords(store, config.store.task_owner_timeout)
        router.tasks.attach(task_records)
        await services.start(task_records.run)
        if router.tasks.native is not None:  # a 2026-07-28 backend's tasks, from any replica
            router.tasks.native.store = store
        await services.start(router.run)
        coalescer = ListChangedCoalescer(
            clients, metrics, config.notifications.debounce, lambda peer: access.on(peer).tag
        )
        await services.start(coalescer.run)
        # With a shared store, the replicas behind it admit one budget per credential.
        credential_limits: RateLimiter | SharedLimiter = principal_limiter
        if config.store.url:
            fallbacks = metrics.store_fallbacks.labels(tenant="rate_limits")
            credential_limits = SharedLimiter(principal_limiter, store, fallbacks.inc)
            records = SessionRecords(
                store,
                clients,
                lambda: gateway.config.server.session_idle_timeout,  # a reload may change it
                router.client_level,
                router.restore_client_level,
            )
        endpoint = McpEndpoint(
            router,
            clients,
            OriginPolicy(server.host, server.allowed_origins, server.allowed_hosts),
            max_body_bytes=server.max_body_bytes,
            is_draining=lambda: gateway.draining,
            auth=auth,
            session_limiter=session_limiter,
            principal_limiter=credential_limits,
            metrics=metrics,
            path=server.path,
            records=records,
        )
        legacy = LegacySseEndpoint(
            router,
            clients,
            OriginPolicy(server.host, server.allowed_origins, server.allowed_hosts),
            max_body_bytes=server.max_body_bytes,
            auth=auth,
            resource_path=server.path,
            metrics=metrics,
        )
        console = (
            None
            if activity is None
            else _console(config, lambda: gateway, pool, clients, router, auth, activity, store)
        )
        app = GatewayApp(
            server.path,
            endpoint,
            lambda: gateway.readiness(),
            metrics,
            legacy,
            views.names,
            auth=auth,
            operations=operations_access(config.server.host, config.metrics.port),
            console=console,
            observer=activity,  # refusals join the recent errors
            consent=None if consent is None else _consent_pages(consent, config),
        )
        live = live_reload.Live(
            identity=identity,
            guards=[endpoint.guard, legacy.guard],
            session_limiter=session_limiter,
            principal_limiter=principal_limiter,
            coalescer=coalescer,
            cursors=cursors,
            held=held,
            router=router,
            pool=pool,
            clients=clients,
            guardrails_of=lambda changed: guardrails_of(changed, metrics, activity),
            shared_cache=shared_cache,
        )
        gateway = Gateway(
            config, pool, router, clients, app, metrics, endpoint, live, config_path, store, pins
        )
        gateway.session_records = records
        if records is not None:
            await services.start(records.run)
        gateway.consent = consent

        def catalog_changed(snapshot: Snapshot, kinds: frozenset[Kind]) -> None:
            """Tell each profile's hosts what changed in their view (coalesced); refresh gauges."""
            for profile, tag, changed in router.catalog_changed(snapshot, clients.peers()):
                coalescer.add(changed, profile, tag)
            record_catalog(metrics, views, snapshot, pool.backends)

        def track_state(backend: Backend) -> None:
            """Keep the up and ready gauges current."""
            metrics.backend_up.labels(backend=backend.name).set(
                1 if backend.state is BackendState.UP else 0
            )
            gateway.readiness()  # keeps mcp_gateway_ready current

        if config.store.url and config_path is not None:
            path = config_path

            async def follow() -> bool:
                """Another replica reloaded: reload this one's file, without announcing."""
                return await reload_config(gateway, path, announce=False)

            gateway.reload_news = ReloadNews(store, follow)
            await services.start(gateway.reload_news.run)
        metrics.watch_backends(pool.samples)
        metrics.watch_store(lambda: _store_sample(store.health()))
        metrics.watch_tasks(router.tasks.sample)
        metrics.watch_cache(lambda: () if router.cache is None else router.cache.samples())
        pool.on_catalog_change(catalog_changed)
        router.search.follow(pool.snapshot)  # tools listed before the hook was in place
        pool.on_state_change(track_state)
        try:
            yield gateway
        finally:
            for session in clients:
                clients.close(session)
            services.cancel_scope.cancel()


def guardrails_of(
    config: GatewayConfig, metrics: Metrics, activity: Activity | None
) -> Guardrails | None:
    """The filter chains (None when no filter is configured), counted and shown in the console."""
    guardrails = Guardrails.from_config(config, counter=metrics.filter_decisions)
    if guardrails is not None and activity is not None:
        record = activity.filter_decision
        guardrails.on_decision = lambda name, decision, subject, reason: record(
            name, decision, subject.point, subject.item, subject.backend, reason
        )
    return guardrails


def pin_settings(
    config: GatewayConfig,
) -> tuple[Callable[[str], tuple[PinMode, bool]], Callable[[str], str]]:
    """Each backend's pinning mode and public prefix, by name, as ``config`` says.

    A reload hands the new ones to the guard (``PinGuard.configure``); a
    backend whose mode changed is restarted by the reload, so its next
    listing is judged under the new mode.
    """
    top = config.pins
    by_name = {b.name: b for b in config.backends}

    def modes(name: str) -> tuple[PinMode, bool]:
        backend = by_name.get(name)
        mode, hold_new = (
            backend.pin_mode(top) if backend is not None else (top.mode_name, top.hold_new)
        )
        return PinMode(mode), hold_new

    def prefix(name: str) -> str:
        backend = by_name.get(name)
        return backend.public_prefix if backend is not None else name

    return modes, prefix


def read_baseline(config: GatewayConfig) -> Baseline | None:
    """``pinning.baseline``, verified with ``pinning.signing_key_file``; None without one.

    Raises:
        ConfigError: the file or the key cannot be read, or does not verify.
    """
    pins = config.pins
    if not pins.baseline:
        return None
    # Here, not at the top: a baseline loads cryptography (Ed25519), a start-up
    # cost only a gateway that imports one pays (tests/test_start_path.py).
    from gateway.pinning.baseline import BaselineError, decode_baseline, load_signing_key

    try:
        with open(pins.signing_key_file, "rb") as key_file:
            key = load_signing_key(key_file.read())
        with open(pins.baseline, "rb") as baseline_file:
            return decode_baseline(baseline_file.read(), key)
    except OSError as exc:
        raise ConfigError([f"pinning: cannot read {exc.filename}: {exc.strerror}"]) from exc
    except BaselineError as exc:
        raise ConfigError([f"pinning.baseline: {exc}"]) from exc


async def _authenticate(identity: IdentityService, config: GatewayConfig) -> AuthHolder:
    """Put the configured authenticator in force; a JWKS file it cannot use is a config error."""
    try:
        await identity.apply(config.auth, config.server.resource_url)
    except JwksError as exc:
        raise ConfigError([f"auth.jwt.jwks_file: {exc}"]) from None
    assert identity.holder is not None
    return identity.holder


def consent_backends(configs: Iterable[BackendConfig]) -> dict[str, ConsentBackend]:
    """The ``user_consent`` backends among ``configs``, by name."""
    found = [
        backend
        for backend in configs
        if isinstance(backend, NetworkBackend)
        and backend.auth is not None
        and backend.auth.type == "user_consent"
    ]
    if not found:
        return {}
    from gateway.backends.credentials.consent_tokens import ConsentBackend

    return {
        backend.name: ConsentBackend(backend.name, backend.url, backend.auth)
        for backend in found
        if backend.auth is not None
    }


def consent_flow(
    config: GatewayConfig,
    store: Store,
    live: Callable[[], Iterable[BackendConfig]] | None = None,
    environ: Mapping[str, str] | None = None,
) -> ConsentTokens | None:
    """The consent flow of the ``user_consent`` backends; None without any at start.

    Args:
        config: the config in force.
        store: the state store.
        live: the backends' configs now (the pool's, which a reload
            changes); None: ``config``'s.
        environ: where ``consent.vault_key_env`` is looked up (the process's).

    Raises:
        ConfigError: the vault's keys cannot be read or none is usable.
    """
    at_start = consent_backends(config.backends)
    if not at_start:
        return None
    # Here, not at the top: the vault loads cryptography, which a gateway
    # without user_consent backends never needs (tests/test_start_path.py).
    from gateway.backends.credentials.consent_tokens import ConsentTokens

    vault = _vault(config.consent, os.environ if environ is None else environ)
    url = config.server.resource_url
    scheme, _, rest = url.partition("://")
    return ConsentTokens(
        (lambda: at_start) if live is None else (lambda: consent_backends(live())),
        store,
        vault,
        public_origin=f"{scheme}://{rest.split('/', 1)[0]}",
        callback_path=config.consent.callback_path,
        login_timeout=config.consent.login_timeout,
        bind_login=_login_binding(config),
    )


def _login_binding(config: GatewayConfig) -> LoginBinding | None:
    """``consent.bind_login`` with its issuer resolved (``auth.jwt.issuer`` when unset)."""
    binding = config.consent.bind_login
    if binding is None or binding.issuer:
        return binding
    return msgspec.structs.replace(binding, issuer=config.auth.jwt.issuer)


def _vault(consent: ConsentConfig, environ: Mapping[str, str]) -> Vault:
    """The token vault from ``consent.vault_key_env``'s variable or ``vault_key_file``.

    Raises:
        ConfigError: the variable is unset, the file cannot be read, or
            either holds no usable key (never the key itself in the message).
    """
    from gateway.consent.vault import Vault, VaultError

    name = consent.vault_key_env
    if name:
        value = environ.get(name)
        if value is None:
            raise ConfigError(
                [f"consent.vault_key_env: the environment variable {name} is not set"]
            )
        try:
            return Vault.from_variable(value)
        except VaultError as exc:
            raise ConfigError([f"consent.vault_key_env: ${name}: {exc}"]) from None
    path = consent.vault_key_file
    try:
        return Vault.from_text(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError([f"consent.vault_key_file: cannot read {path}: {exc.strerror}"]) from None
    except (UnicodeDecodeError, VaultError) as exc:
        reason = "not UTF-8" if isinstance(exc, UnicodeDecodeError) else str(exc)
        raise ConfigError([f"consent.vault_key_file: {reason}"]) from None


def _consent_pages(consent: ConsentTokens, config: GatewayConfig) -> SubApp:
    """The browser's paths of the consent flow (loaded only when a backend needs them)."""
    from gateway.frontend.consent_pages import ConsentPages

    return ConsentPages(consent, config.consent.callback_path)


def _store_sample(health: StoreHealth) -> StoreSample:
    """The store's health as its metrics read it."""
    return StoreSample(health.kind, health.state is StoreState.OK, health.reconnects)


def _input_bound(pool: Pool, name: str) -> float:
    """A backend's ``timeouts.input`` (an MRTR round's default bound)."""
    backend = pool.get(name)
    return DEFAULT_LIFETIME if backend is None else backend.config.timeouts.input


def _console(
    config: GatewayConfig,
    gateway: Callable[[], Gateway],
    pool: Pool,
    clients: ClientRegistry,
    router: Router,
    auth: AuthHolder,
    activity: Activity,
    store: Store,
) -> ConsoleApp:
    """The operator console (``admin.enabled``), showing what ``activity`` watches."""
    # Loaded only with the console on: its pages (jinja2) are no part of a start without it.
    from gateway.console.handler import ConsoleApp, ConsoleParts

    async def reload() -> object:
        path = gateway().config_path
        return path is not None and await reload_config(gateway(), path)

    def last_reload() -> live_reload.ReloadOutcome | None:
        live = gateway().live
        return None if live is None else live.last

    parts = ConsoleParts(
        pool,
        clients,
        router,
        activity,
        config=lambda: gateway().config,
        auth=auth,
        policy=lambda: router.access.policy,
        last_reload=last_reload,
        reload=reload,
        can_reload=lambda: gateway().config_path is not None,
        stopping=lambda: gateway().stopping,
        pins=lambda: gateway().pins,
        consents=_consent_counts(pool),
        metrics=lambda: gateway().metrics,
        revoke_consent=_consent_revoke(pool),
    )
    return ConsoleApp(config.admin.path, parts, store=store)


def _consent_revoke(pool: Pool) -> Callable[[str, str], Awaitable[tuple[bool, str]]] | None:
    """The console's consent revoke (``ConsentTokens.revoke``); None without the flow."""
    from gateway.backends.credentials.consent_tokens import ConsentTokens

    personal = pool.personal
    if not isinstance(personal, ConsentTokens):
        return None

    async def revoke(principal: str, backend: str) -> tuple[bool, str]:
        deleted, at_server = await personal.revoke(principal, backend)
        return deleted, at_server.name

    return revoke


def _consent_counts(pool: Pool) -> Callable[[], Awaitable[dict[str, int]]] | None:
    """The console's consent counts (``ConsentTokens.counts``); None without the flow."""
    from gateway.backends.credentials.consent_tokens import ConsentTokens

    personal = pool.personal
    return personal.counts if isinstance(personal, ConsentTokens) else None


async def _watch_loop_lag(metrics: Metrics) -> None:
    """Measure how late timers fire: a stalled event loop stalls every session."""
    while True:
        due = trio.current_time() + LAG_PROBE_INTERVAL
        await trio.sleep_until(due)
        metrics.loop_lag.observe(max(0.0, trio.current_time() - due))


async def _expire_sessions(gateway: Gateway) -> None:
    while True:
        idle = gateway.config.server.session_idle_timeout  # a reload may change it
        await trio.sleep(min(EXPIRY_SWEEP_INTERVAL, idle))
        for session in gateway.clients.expire_idle(trio.current_time(), idle):
            logger.info(
                "client.session.closed", client_session=session.session_id[:8], reason="idle"
            )


async def serve(
    config: GatewayConfig,
    *,
    registry: CollectorRegistry | None = None,
    connect: ChannelOpener | None = None,
    config_path: str | None = None,
    task_status: trio.TaskStatus[tuple[Gateway, list[str]]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the gateway until cancelled.

    ``task_status.started`` receives the gateway and the bound addresses
    (``http://127.0.0.1:PORT``) once the socket is listening.
    """
    async with (
        open_gateway(
            config, registry=registry, connect=connect, config_path=config_path
        ) as gateway,
        trio.open_nursery() as nursery,
    ):
        # The engine's graceful shutdown runs when the drain starts (stopping):
        # it closes its listeners at once (a new connection is refused, not
        # accepted and kept waiting) and lets requests in flight finish.
        # Cancelling it instead would keep accepting until the end.
        binds: list[str] = await nursery.start(
            serve_http,
            gateway.app,
            config.server,
            config.shutdown.drain_timeout,
            gateway.stopping,
        )
        if config.metrics.port:
            # The operations listener: plain HTTP on the same engine, no TLS.
            ops_server = msgspec.structs.replace(
                config.server,
                host=config.metrics.host,
                port=config.metrics.port,
                tls=TlsConfig(),
            )
            binds += await nursery.start(
                serve_http,
                OperationsApp(gateway.readiness, gateway.metrics),
                ops_server,
                config.shutdown.drain_timeout,
                gateway.stopping,
            )
        nursery.start_soon(_expire_sessions, gateway)
        nursery.start_soon(_watch_loop_lag, gateway.metrics)
        logger.info(
            "gateway.listening", binds=binds, path=config.server.path, backends=len(config.backends)
        )
        task_status.started((gateway, binds))


async def reload_config(gateway: Gateway, path: str, *, announce: bool = True) -> bool:
    """Re-read the config file and apply it; the old one stays on any problem.

    With a shared store, an applied reload is announced to the other
    replicas, which reload their own file (``runtime.reload_news``);
    ``announce`` False is how they follow without announcing again.

    Returns True when the new config was applied (``gateway/runtime/reload.py``).
    """
    assert gateway.live is not None
    new = await live_reload.reload_file(gateway.live, gateway.metrics, gateway.config, path)
    if new is None:
        return False
    gateway.config = new
    if gateway.pins is not None:
        gateway.pins.configure(*pin_settings(new))
        gateway.pins.republish(None)  # every listing judged under the new modes
    if announce and gateway.reload_news is not None:
        await gateway.reload_news.announce()
    return True


async def drain(gateway: Gateway) -> int:
    """Refuse new work, then wait (up to ``shutdown.drain_timeout``) for calls to finish.

    New connections are refused from here on (the engine's shutdown trigger);
    a request on a connection already open is answered 503.

    Returns how many calls were still in flight when the time ran out.
    """
    gateway.draining = True
    gateway.stopping.set()
    gateway.clients.listeners.close_all()  # each ends with its final result
    with trio.move_on_after(gateway.config.shutdown.drain_timeout):
        for backend in list(gateway.pool.backends.values()):
            await backend.drained()
        # Then until every response computed is also written.
        await gateway.endpoint.activity.wait_idle()
    if gateway.router.tasks.records is not None:
        # Tasks still running end failed now, on every replica (not a timeout later).
        await gateway.router.tasks.records.stop()
    return gateway.calls_in_flight()
