"""The router: one method table, one answer and one log line per host request.

Rules:

1. Every host request gets exactly one encoded response for its id: a
   result, or a JSON-RPC error; nothing a handler raises other than
   cancellation escapes ``handle_request``. An exception nobody expected
   (a bug, a broken disk under the search index) is one -32603
   ``internal error`` answer and one ``request.internal_error`` line with
   its traceback, counted in ``internal_errors_total{component="router"}``:
   on every path, also a held or background call that runs in the router's
   nursery, where an escaping exception would end the process.
2. A method the gateway does not route is -32601 and reaches no backend.
3. ``BackendUnavailable`` becomes -32603 with ``data.reason`` (the
   condition's kind) and ``data.backend``; ``RequestTimeout`` becomes
   -32001 with ``data.reason = "timeout"``; a ``ProtocolError`` keeps its
   own code, message and data.
4. Each request leaves one ``request.routed`` log line and one metrics
   observation, whatever its outcome, cancellation included (also when it
   reaches us as a group from a handler's own nursery). Only methods the
   gateway knows become metric labels (bounded labels).

Theory of operation: ``handle_request`` takes the catalog snapshot, looks the
method up in the table and awaits its handler, which returns a Raw result or
raises; the handlers live by job in ``calls``, ``lists``, ``levels`` and
``subscriptions``, and what flows back to clients in ``to_clients``. The
``Router`` also keeps the per-client state in step with client sessions and
backends coming and going.

Past 450 lines and still one idea: the ``Router`` is the place where the
method table, the per-request invariants above and the parts' wiring meet;
every handler already lives in a module of its own job, and splitting the
table from the invariants it enforces would put rule 1 in two places.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import structlog
import trio

from gateway.backends.state import BackendState
from gateway.catalog.profiles import DEFAULT_PROFILE, ProfileViews
from gateway.errors import (
    METHOD_NOT_FOUND,
    BackendUnavailable,
    GatewayError,
    GuardrailError,
    LocalProtocolError,
    ProtocolError,
    RequestTimeout,
    to_protocol_error,
)
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.stateless.error_codes import ModernProtocolError
from gateway.protocol.stateless.tasks import EXTENSION as TASKS_EXTENSION
from gateway.protocol.stateless.tasks import TASK_METHODS, starts_task
from gateway.protocol.tables import LogLevels, Owners, Subscriptions
from gateway.router import initialize
from gateway.router.access import AccessControl, item_of, list_changes
from gateway.router.call_metrics import NO_METRICS
from gateway.router.calls import Calls, Forwarder, Targets
from gateway.router.consent_gate import ConsentDesk, ConsentGate
from gateway.router.context import Call, ModernRequest
from gateway.router.host_roots import HostRoots
from gateway.router.levels import Levels
from gateway.router.lists import Lists
from gateway.router.outcomes import internal_error, server_span
from gateway.router.search_mode import SearchMode
from gateway.router.stateless import requests as modern
from gateway.router.stateless.gateway_tasks import HandOff, TaskRunner
from gateway.router.stateless.held_calls import HeldCalls, holdable, sealer_for
from gateway.router.stateless.native_tasks import NativeTasks
from gateway.router.subscriptions import SubscriptionRelay
from gateway.router.to_clients import ToClients
from gateway.telemetry import logs, tracing

if TYPE_CHECKING:
    import msgspec

    from gateway.backends.state import BackendView
    from gateway.catalog.cursor import CursorCodec
    from gateway.catalog.snapshot import Kind, Snapshot
    from gateway.config.schema_gateway import TasksConfig
    from gateway.guardrails.chains import Guardrails
    from gateway.identity.principal import Principal
    from gateway.protocol.jsonrpc import Request
    from gateway.router.call_metrics import RequestObserver, RouterMetrics
    from gateway.router.neighbours import ClientPeer, Emit, PoolView
    from gateway.router.response_cache import RouterCache

logger = structlog.get_logger("gateway.router")

#: Seconds chains replaced by a reload stay open for the calls that started
#: under them (longer than an external filter's timeout), before their policy
#: clients close.
RETIRED_CHAINS_CLOSE: Final = 60.0


async def _retire(old: Guardrails) -> None:
    """Close chains a reload replaced, once the calls under way have had their time."""
    try:
        await trio.sleep(RETIRED_CHAINS_CLOSE)
    finally:
        await old.aclose()  # shielded and bounded, also when the router stops


Handler = Callable[[Call, dict[str, Any]], Awaitable["msgspec.Raw"]]


class Router:
    """Routes host requests to backends and backend messages to hosts.

    A service: ``run`` (started with ``nursery.start``) owns the nursery of
    the router's follow-up work (renewing subscriptions and log levels when
    a backend comes back, releasing what a closed client held) and runs the
    held calls and the tasks it routes to, each a service of its own.

    Args:
        pool: the live backends and their catalog.
        cursors: signs and checks pagination cursors.
        page_size: items per list page; 0 means everything in one page.
        metrics: where request counts and latencies go; none by default.
        separator: the naming separator, to recognise a down backend's names.
        log_requests: log each routed request at info level (else debug).
        held: the table of modern calls held for MRTR; a default one (random
            key, default bounds) when none is given.
        profiles: the profiles served; each request is routed through its
            client's profile view of the snapshot (``catalog.profiles``).
            Only ``default``, selecting everything, when none is given.
        tasks: bounds of the tasks the gateway runs for modern hosts.
        access: the access policy; each request is routed through its
            principal's effective view of the profile (``router.access``).
        task_notices: where ``notifications/tasks`` go (the listen streams).
        observer: watches every routed request (the console's, when it is on).
        guardrails: the filter chains (``router.filtering``); None when no
            filter is configured anywhere.
        consent: the consent flow of ``user_consent`` backends
            (``router.consent_gate``); none when no backend acts for people.
    """

    def __init__(
        self,
        pool: PoolView,
        cursors: CursorCodec,
        page_size: int,
        *,
        metrics: RouterMetrics = NO_METRICS,
        separator: str = "__",
        log_requests: bool = False,
        held: HeldCalls | None = None,
        profiles: ProfileViews | None = None,
        tasks: TasksConfig | None = None,
        access: AccessControl | None = None,
        task_notices: Callable[[bytes], object] | None = None,
        observer: RequestObserver | None = None,
        guardrails: Guardrails | None = None,
        consent: ConsentDesk | None = None,
    ) -> None:
        self._pool = pool
        self.access = (
            access if access is not None else AccessControl(metrics=metrics, separator=separator)
        )
        self.profiles = profiles if profiles is not None else ProfileViews(separator=separator)
        self._held = held if held is not None else HeldCalls(sealer_for(""), metrics=metrics)
        self._metrics = metrics
        self.observer = observer
        self._log_request = logger.info if log_requests else logger.debug
        self._log_level = logging.INFO if log_requests else logging.DEBUG
        # Follow-up work, run in ``run``'s nursery (queued until it runs).
        self._follow_ups, self._follow_up_queue = trio.open_memory_channel[
            Callable[[], Awaitable[None]]
        ](math.inf)
        owners: Owners[Call] = Owners()
        subscriptions = Subscriptions()
        wanted = LogLevels()
        targets = Targets(pool, separator)
        self._roots = HostRoots(self._rekey)
        forwarder = self._forwarder = Forwarder(
            owners,
            wanted,
            self._held,
            self._roots,
            None if consent is None else ConsentGate(consent),
        )
        calls = self._calls = Calls(targets, forwarder, metrics, guardrails)
        self._guardrails: Guardrails | None = None
        self._lists = Lists(pool, cursors, page_size, metrics, guardrails)
        self._lists.consent = consent
        self._lists.separator = separator
        self.search = SearchMode(
            lambda: pool.snapshot,
            calls.call_tool,
            separator,
            self.profiles,
            metrics=metrics,
            on_hidden=lambda call, name: self.access.denied_search_target(
                call.client, self.view(call.client.profile), name
            ),
        )
        self.search.filters_of = self._lists.filters_of
        self._levels = Levels(pool, wanted)
        self._wanted = wanted
        self._subscriptions = SubscriptionRelay(pool, subscriptions, targets, forwarder)
        self._to_clients = ToClients(
            owners, subscriptions, wanted, sees=self._sees, guardrails=guardrails
        )
        self._up: set[str] = set()
        # The snapshot the profiles' hosts were last told of (``catalog_changed``).
        self._shown = pool.snapshot
        self.tasks = TaskRunner(
            self._run_modern,
            tasks,
            handoff=HandOff(self._held, pool, owners, self._to_clients),
            on_change=task_notices,
        )
        # A 2026-07-28 backend's own tasks (routed once the app sets the store).
        self.tasks.native = NativeTasks(self._held, self._run_modern, pool)
        self.set_guardrails(guardrails)
        self._handlers: dict[str, Handler] = {
            "ping": calls.ping,
            "tools/list": self._lists.list_tools,
            "prompts/list": self._lists.list_prompts,
            "resources/list": self._lists.list_resources,
            "resources/templates/list": self._lists.list_templates,
            "tools/call": self.search.call_tool,
            "prompts/get": calls.get_prompt,
            "resources/read": calls.read_resource,
            "completion/complete": calls.complete,
            "logging/setLevel": self._levels.set_level,
            "resources/subscribe": self._subscriptions.subscribe,
            "resources/unsubscribe": self._subscriptions.unsubscribe,
            "skills/list": self._lists.list_skills,
            "skills/get": calls.get_skill,
            "resources/directory/read": calls.read_directory,
        }
        pool.on_request(self.backend_request)
        pool.on_notification(self.backend_notification)
        pool.on_state_change(self._backend_state_changed)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the held calls, the tasks and the follow-up work until cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self._held.run)
                await nursery.start(self.tasks.run)
                task_status.started()
                async for job in self._follow_up_queue:
                    nursery.start_soon(job)
        finally:
            if self._guardrails is not None:
                await self._guardrails.aclose()

    @property
    def guardrails(self) -> Guardrails | None:
        """The filter chains in force (None: no filter is configured)."""
        return self._guardrails

    def set_guardrails(self, guardrails: Guardrails | None) -> None:
        """Put ``guardrails`` in force at every point (at start, and after a reload).

        Each point keeps its own reference, so a call with no chain still pays
        one ``is None``. Calls already under way finish with the chains they
        started with; the old chains' policy clients close after
        ``RETIRED_CHAINS_CLOSE`` seconds.
        """
        old = self._guardrails
        self._guardrails = guardrails
        self._calls.guard = guardrails
        self._forwarder.guard = guardrails
        self._lists.guard = guardrails
        self.search.guard = guardrails
        self._to_clients.guardrails = guardrails
        if self.tasks.handoff is not None:
            self.tasks.handoff.guard = guardrails
        if self.tasks.native is not None:
            self.tasks.native.guard = guardrails
        if old is not None and old is not guardrails:
            self._follow_up(lambda: _retire(old))

    def _follow_up(self, job: Callable[[], Awaitable[None]]) -> None:
        """Run ``job`` in the router's nursery (after the current request, not under it)."""
        self._follow_ups.send_nowait(job)

    def catalog_changed(
        self, snapshot: Snapshot, peers: Iterable[ClientPeer]
    ) -> list[tuple[str, str | None, frozenset[Kind]]]:
        """The catalog swapped to ``snapshot``: (profile, view tag, kinds) for each list_changed.

        Each profile's view is refreshed and compared with the one shown so
        far (``router.access.list_changes``: under a policy, only the peers
        whose effective view changed). The search index follows here, where
        the snapshot swaps, so no search pays for indexing (only the changed
        backends are rewritten).
        """
        shown, self._shown = self._shown, snapshot
        refreshed = self.profiles.refresh(shown, snapshot)
        changes = list_changes(self.access, self.profiles, peers, shown, snapshot, refreshed)
        self.search.follow(snapshot)
        return changes

    @property
    def cache(self) -> RouterCache | None:
        """The response cache (``router.response_cache``); None when it is off."""
        return self._calls.cache

    def set_cache(self, cache: RouterCache | None) -> None:
        """Use ``cache`` from now on (start, reload): nothing kept so far is served again."""
        self._calls.cache = cache

    def set_page_size(self, page_size: int) -> None:
        """Change the list page size (on reload); walks in progress stay exact."""
        self._lists.page_size = page_size

    # -- clients -----------------------------------------------------------

    def client_opened(self, client: ClientPeer) -> None:
        """A client session was created."""
        self._to_clients.opened(client)

    def client_closed(self, session_id: str) -> None:
        """A client session ended: release what it held at the backends.

        Its calls in flight are cancelled by the frontend; here its
        subscriptions, its log level and its per-client backend sessions go.
        Unsubscribes that must reach backends run in the router's nursery.
        """
        self._to_clients.closed(session_id)
        self._roots.closed(session_id)
        self._subscriptions.client_closed(session_id, self._follow_up)
        self._wanted.drop_client(session_id)
        self._follow_up(self._levels.apply)
        for backend in self._pool.backends.values():
            backend.close_client(session_id)

    def client_level(self, session_id: str) -> str | None:
        """The log level a client session asked for (None: none yet), for its shared record."""
        return self._wanted.level_of(session_id)

    def restore_client_level(self, session_id: str, level: str) -> None:
        """Give a client session the log level it asked for on another replica.

        Backends follow as after a ``logging/setLevel``, in the router's nursery.
        """
        try:
            self._wanted.set(session_id, level)
        except ValueError:
            return  # not a level the spec defines: a record no gateway wrote
        self._follow_up(self._levels.apply)

    def host_of(self, session_id: str) -> tuple[str | None, dict[str, Any], str | None] | None:
        """A client session's principal, declared capabilities and roots digest; None once gone.

        The backends key their per-principal sessions on it (DESIGN "Trust
        between people"; ``router/host_roots``).
        """
        client = self._to_clients.get(session_id)
        if client is None:
            return None
        return client.principal, client.capabilities, self._roots.digest_of(session_id)

    def _rekey(self, session_id: str) -> None:
        """A host's roots changed: every backend's session key for it follows."""
        for backend in self._pool.backends.values():
            backend.rekey_client(session_id)

    async def client_notification(
        self, client: ClientPeer, method: str, params: msgspec.Raw | None
    ) -> None:
        """A notification from a host other than initialized/cancelled."""
        if method == "notifications/roots/list_changed":
            self._roots.changed(client.session_id)  # asked again before its next call
            for backend in self._pool.backends.values():
                if backend.state is BackendState.UP:
                    await backend.notify(method, params, client=client.session_id)

    # -- profiles ----------------------------------------------------------

    def view(self, profile: str) -> Snapshot:
        """The current snapshot as the profile's clients see it."""
        return self.profiles.view(profile, self._pool.snapshot)

    def _sees(self, client: ClientPeer, uri: str) -> bool:
        """Whether ``uri`` is in the client's effective view (always, with no policy)."""
        return self.access.policy is None or self.effective(client)[1].resolve_uri(uri) is not None

    def effective(self, client: ClientPeer) -> tuple[Snapshot, Snapshot, str]:
        """(the profile's view, the client's effective view of it, that view's tag)."""
        base = self.view(client.profile)
        return (base, *self.access.effective(client, base))

    def _shows(self, profile: str) -> Callable[[str], bool]:
        """Which backends a profile's clients may learn of (capabilities, instructions)."""
        selected = self.profiles.profile(profile)
        return (lambda name: False) if selected is None else selected.backends.allows

    # -- initialize ------------------------------------------------------

    def server_capabilities(self, profile: str = DEFAULT_PROFILE) -> dict[str, Any]:
        """Capabilities to advertise to a host (see ``initialize``)."""
        return initialize.server_capabilities(self._pool, self._shows(profile))

    def instructions(self, profile: str = DEFAULT_PROFILE) -> str | None:
        """The profile's backends' own instructions, each under its prefix."""
        return initialize.instructions(self._pool, self._shows(profile))

    def initialize_result(self, version: str, profile: str = DEFAULT_PROFILE) -> msgspec.Raw:
        """The InitializeResult for a host that negotiated ``version``."""
        return initialize.initialize_result(self._pool, version, self._shows(profile))

    # -- modern requests -------------------------------------------------

    def discover_result(self, profile: str = DEFAULT_PROFILE) -> dict[str, Any]:
        """The gateway's ``server/discover`` answer (``modern.discover``)."""
        result = modern.discover(
            self._pool, self._shows(profile), per_principal=self.access.policy is not None
        )
        if self.tasks.offered(self.view(profile)):
            result["capabilities"].setdefault("extensions", {})[TASKS_EXTENSION] = {}
        return result

    def public_tool_schema(
        self, name: object, profile: str = DEFAULT_PROFILE, caller: Principal | None = None
    ) -> object:
        """The public tool's ``inputSchema`` (for ``Mcp-Param-*``), or None.

        Looked up in the caller's effective view of the profile: a tool
        outside it has no schema to check headers against, exactly like an
        unknown one (no header error may hint that it exists).
        """
        view = self.access.view_of(caller, profile, self.view(profile))[0]
        return modern.public_tool_schema(view, name)

    async def handle_modern(
        self, request: ModernRequest, message: Request, params: object
    ) -> bytes:
        """Answer one modern request: like ``handle_request``, with no session.

        ``tools/call``, ``prompts/get`` and ``resources/read`` run as held calls, so
        a legacy backend's own request becomes ``input_required`` (``router/held``);
        a retry's ``requestState`` that does not verify is -32602.
        """
        if message.method in TASK_METHODS or starts_task(message.method, params):
            assert isinstance(params, dict)
            try:
                # The caller's own view: a tool the policy hides starts no task.
                view = self.effective(request)[1]
                answer = await self.tasks.serve(request, message, params, view)
            except (ModernProtocolError, LocalProtocolError) as exc:
                return jsonrpc.encode_error(message.id, exc.code, exc.message, exc.data)
            if answer is not None:
                return answer
        if holdable(message.method, params):
            assert isinstance(params, dict)
            try:
                native = self.tasks.native
                if native is not None and "requestState" in params:
                    # A round of a task call that the backend may turn into its task.
                    view = self.effective(request)[1]
                    routed = await native.retry(request, message, params, view)
                    if routed is not None:
                        return routed
                return await self._held.serve(request, message, params, self._run_modern)
            except ModernProtocolError as exc:
                return jsonrpc.encode_error(message.id, exc.code, exc.message, exc.data)
        return await self._run_modern(request, message, params)

    async def _run_modern(self, request: ModernRequest, message: Request, params: object) -> bytes:
        """One modern request routed to the end.

        The request is known to the fan-out (for its log messages) only
        while it runs; afterwards nothing of it is left, per-client backend
        sessions included.
        """
        client_id = request.session_id
        self._to_clients.opened(request)
        if request.envelope.log_level is not None:
            self._wanted.set(client_id, request.envelope.log_level)
        reply = b""
        try:
            with request.scope:
                reply = await self.handle_request(
                    request, modern.backend_request(message, params), request.emit
                )
            failure = request.failure
            if failure is not None:
                return jsonrpc.encode_error(message.id, failure.code, failure.message, failure.data)
            return reply
        finally:
            self._to_clients.closed(client_id)
            self._wanted.drop_client(client_id)
            for backend in self._pool.backends.values():
                if backend.per_client:
                    backend.close_client(client_id)

    # -- listen streams (frontend.listen) ----------------------------------

    async def listen(self, listener: ClientPeer, uris: Sequence[str]) -> list[str]:
        """Register a listen stream with the fan-out; returns the URIs subscribed.

        From here on ``listener`` hears what every client session hears
        (``resources/updated`` for what it holds); each URI is subscribed
        through the same refcounted table as ``resources/subscribe``, and
        one that cannot be (unknown, not subscribable, refused) is left out.
        ``listener_closed`` undoes all of it.
        """
        self._to_clients.opened(listener)
        call = Call(listener, self.effective(listener)[1])
        held: list[str] = []
        for uri in uris:
            try:
                await self._subscriptions.subscribe(call, {"uri": uri})
            except GatewayError as exc:
                logger.info("listen.uri_refused", uri=uri[:256], error=str(exc)[:256])
                continue
            held.append(uri)
        return held

    def listener_closed(self, session_id: str) -> None:
        """A listen stream ended: release its subscriptions, in the router's nursery."""
        self.client_closed(session_id)

    # -- dispatch --------------------------------------------------------

    async def handle_request(
        self, client: ClientPeer, request: Request, emit: Emit | None = None
    ) -> bytes:
        """Answer ``client``'s ``request``; always returns exactly one encoded response.

        ``emit`` is where messages related to it go before its response
        (progress, server-to-client requests): the POST's SSE stream, or None.
        """
        started = time.perf_counter()
        handler = self._handlers.get(request.method)
        outcome = "ok"
        base, effective, tag = self.effective(client)
        call = Call(
            client,
            effective,
            emit,
            view_tag=tag,
            per_principal=self.access.policy is not None,
            personal=self.access.personal(client, self.profiles.profile(client.profile)),
        )
        err: ProtocolError | None = None
        span: tracing.ServerSpan | None = None
        params: dict[str, Any] | None = None
        named: tuple[Kind, str] | None = None  # before a handler rewrites the name
        try:
            if handler is None:
                raise LocalProtocolError(f"method not found: {request.method}", METHOD_NOT_FOUND)
            params = mcp.decode_params(request.params)
            if tracing.active is not None:  # the only cost when tracing is off (tracing rule 1)
                span = server_span(tracing.active, client, request.method, params)
            named = item_of(request.method, params)
            result = await handler(call, params)
            return jsonrpc.encode_response(request.id, result)
        except BackendUnavailable as exc:
            outcome = "unavailable"
            err = to_protocol_error(exc)
        except GuardrailError as exc:
            outcome = "filtered"
            err = to_protocol_error(exc)
        except RequestTimeout as exc:
            outcome = "timeout"
            err = to_protocol_error(exc)
            self._metrics.timeouts.labels(backend=exc.backend).inc()
            self._metrics.cancellations.labels(direction="timeout").inc()
        except ProtocolError as exc:
            outcome, err = "error", exc
        except Exception as exc:
            outcome = "internal_error"
            err = internal_error(exc, self._metrics, request.method, client.session_id)
        except trio.Cancelled:
            outcome = "cancelled"
            self._metrics.cancellations.labels(direction="client").inc()
            raise
        except BaseExceptionGroup as group:
            # A handler's own nursery (setLevel) is cancelled as a group: still a cancellation.
            if group.split(trio.Cancelled)[1] is None:
                outcome = "cancelled"
                self._metrics.cancellations.labels(direction="client").inc()
            raise
        finally:
            elapsed = time.perf_counter() - started
            if span is not None:
                span.finish(outcome, call.backend, None if err is None else err.code)
            # Only methods the gateway knows become label values: a host
            # must not be able to mint time series (bounded labels).
            method = request.method if handler is not None else "other"
            self._metrics.observe_request(method, outcome, elapsed, call.backend)
            self._metrics.count_client_request(client.protocol_version)
            if self._log_level >= logs.threshold["level"]:
                # Built only when the level gate would write it: logged at debug
                # (the default) under an info threshold, it would be dropped
                # after costing about ten calls (docs/performance.md).
                self._log_request(
                    "request.routed",
                    client_session=client.session_id[:8],
                    method=request.method[:64],
                    backend=call.backend or None,
                    outcome=outcome,
                    duration_ms=round(elapsed * 1000, 3),
                )
            code = None if err is None else err.code
            self.access.audit(client, request.method, params, named, (base, effective), code)
            if self.observer is not None:
                item, why = "" if named is None else named[1], "" if err is None else err.message
                self.observer.observe(
                    request.method, item, call.backend, outcome, elapsed, code, why
                )
        assert err is not None
        return jsonrpc.encode_error(request.id, err.code, err.message, err.data)

    # -- from backends ---------------------------------------------------

    def backend_notification(
        self, backend: BackendView, method: str, params: msgspec.Raw | None, client: str | None
    ) -> None:
        """Fan a backend's notification out to the clients it concerns.

        The response cache hears it first: what it makes stale goes. A
        ``list_changed`` is for the cache only (the catalog follows it in
        the backend's supervisor; hosts hear the catalog's own change).
        """
        cache = self._calls.cache
        if cache is not None:
            cache.backend_notified(backend.name, method, params)
        if method.endswith("/list_changed"):
            return
        self._to_clients.backend_notification(backend, method, params, client)

    async def backend_request(
        self, backend: BackendView, method: str, params: msgspec.Raw | None, client: str | None
    ) -> msgspec.Raw:
        """Relay a backend's own request to the client that owns it."""
        return await self._to_clients.backend_request(backend, method, params, client)

    def _backend_state_changed(self, backend: BackendView) -> None:
        cache = self._calls.cache
        if backend.state is not BackendState.UP:
            self._levels.backend_down(backend.name)
            self._up.discard(backend.name)
            if cache is not None:
                cache.backend_restarted(backend.name)
            return
        if backend.name in self._up:
            return  # a listing refresh, not a new session
        self._up.add(backend.name)
        if cache is not None:
            cache.backend_restarted(backend.name)
        self._follow_up(partial(self._renew, backend))

    async def _renew(self, backend: BackendView) -> None:
        """A backend came (back) up: give it the subscriptions and log level it lost."""
        await self._subscriptions.renew(backend)
        await self._levels.apply()
