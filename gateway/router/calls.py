"""Host requests for one named item: find its backend, forward, rewrite the answer.

Rules:

1. Every public name or URI is resolved through one catalog snapshot, taken
   at the start of the request; a refresh in the middle changes nothing for
   that request.
2. A request for something the catalog does not know is answered by the
   gateway (-32602, or -32002 for resources/read on revisions that use it)
   and never reaches a backend; so is a call to a tool or prompt whose
   change awaits approval under ``pinning: block`` (-32602,
   ``AwaitingApproval``).
3. A request for an item of a backend that is down fails at once with
   -32603 and ``data.reason = "backend_unavailable"`` naming the backend;
   except a tool or prompt name under the prefix of a ``user_consent``
   backend that refused the catalog session (HTTP 401) and serves each
   principal on its own session: the catalog cannot know its items, so
   the name after the prefix goes to the caller's session there (after
   the consent gate), and the backend says whether it knows it. The name
   must be one the caller's profile and access policy admit
   (``Call.admits_personal``); any other is "Unknown tool" (prompt), as
   for a catalog item the caller's view leaves out.
4. Payloads are forwarded as Raw bytes; the router decodes params only to
   swap a public name, URI or progress token for the backend's, and results
   only when they carry URIs to namespace.
5. Backend errors pass through with their own code, message and data,
   in public names: a URI under ``data.uri`` (or any ``data`` member ending
   in ``uri``/``Uri``) becomes the public URI, and a ``data`` member naming
   the requested item by its backend name names it by its public one; the
   requested URI in the message is the public one too.
6. Progress reaches only the client whose request asked for it, under that
   client's own token, with ``progress`` strictly increasing, and never
   after the response (the session drops it once the answer is in).
7. A request to a 2026-07-28 backend carries the envelope built for its
   caller (``protocol.backend_leg``): the caller's bridgeable capabilities,
   its log level, the gateway's client info; trace context and the
   remapped progress token ride in ``_meta`` as for any backend. A task
   call routed to a backend that runs its own tasks declares the tasks
   extension too (``router/stateless/native_tasks``).
8. A 2026-07-28 backend's ``input_required`` is sealed for a modern host
   and driven for a legacy one (``router/modern_backend``).
9. A 2026-07-28 backend's -32022 is never relayed (``envelope_refused``);
   its results reach a legacy host without ``resultType``, ``ttlMs`` and
   ``cacheScope``.
10. The response cache keeps what the backend answered; the guardrail
    chains run after it, on every answer, hit or miss, since they are the
    caller's profile's and a shared entry may serve another profile.
11. Under ``pinning: hold`` a changed tool is listed with its pinned
    definition; a call to it whose arguments that pinned ``inputSchema``
    does not allow never reaches the backend (``OutsideShownDefinition``):
    the call means what the host was shown, never the unapproved change.

Theory of operation: ``Targets`` turns a public name or URI into a backend
and its original name (rules 1-3). ``Forwarder.forward`` swaps the progress
token, registers the call in ``Owners`` for its duration (which is what
``to_clients`` consults to find the owner of a backend's own request) and
sends it. ``Calls`` holds the handlers of the forwarded methods.

Past 450 lines and still one idea: every forwarded method of a named item
(tools, prompts, resources, completion) goes through the same lookup,
forward and rewrite; the per-method parts are a few lines each around that
one path, which splitting would copy.
"""

from __future__ import annotations

import itertools
from functools import partial
from typing import TYPE_CHECKING, Any

import msgspec
import structlog
import trio

from gateway.backends.call_clock import CallClock
from gateway.backends.state import BackendState
from gateway.catalog.naming import public_uri
from gateway.catalog.snapshot import Kind
from gateway.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    UNSUPPORTED_PROTOCOL_VERSION,
    AwaitingApproval,
    BackendUnavailable,
    LocalProtocolError,
    OutsideShownDefinition,
    RemoteProtocolError,
)
from gateway.protocol import jsonrpc, mcp, revisions, skills
from gateway.protocol.stateless import backend_leg
from gateway.protocol.stateless.native_tasks import with_task_extension
from gateway.protocol.versions import resource_not_found_code
from gateway.router.context import Call, ModernRequest, Target
from gateway.router.filtering import filter_input_requests, filter_request, filter_result
from gateway.router.stateless import input_required as modern_backend
from gateway.router.stateless.requests import with_read_hint

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from gateway.backends.state import BackendView
    from gateway.catalog.snapshot import Snapshot
    from gateway.guardrails.chains import Guardrails
    from gateway.protocol.tables import LogLevels, Owners
    from gateway.router.call_metrics import RouterMetrics
    from gateway.router.consent_gate import ConsentGate
    from gateway.router.host_roots import HostRoots
    from gateway.router.neighbours import Emit, PoolView
    from gateway.router.response_cache import RouterCache
    from gateway.router.stateless.held_calls import HeldCalls

logger = structlog.get_logger("gateway.router")


class Targets:
    """Resolves public names and URIs to their backend (rules 1-3).

    Args:
        pool: the backends, to tell "unknown" from "its backend is down".
        separator: the naming separator, to recognise a down backend's names.
    """

    def __init__(self, pool: PoolView, separator: str) -> None:
        self._pool = pool
        self._separator = separator

    def backend(self, name: str) -> BackendView:
        """The backend of that name.

        Raises:
            BackendUnavailable: the snapshot outlived a reload that removed it.
        """
        backend = self._pool.get(name)
        if backend is None:
            raise BackendUnavailable(name, "removed from the configuration")
        return backend

    def named(
        self,
        kind: Kind,
        public: str,
        snap: Snapshot,
        what: str,
        *,
        personal: Callable[[Kind, str, str], bool] | None = None,
    ) -> Target:
        """The target of a public tool or prompt name.

        ``personal``: which items a backend lists to the caller's principal
        alone the caller may reach (rule 3's exception; ``Call.admits_personal``).

        Raises:
            LocalProtocolError: -32602, no such item.
            AwaitingApproval: -32602, its change awaits approval (``pinning: block``).
            BackendUnavailable: the name is under the prefix of a backend that is down.
        """
        entry = snap.resolve(kind, public)
        if entry is None:
            # A name under the prefix of a backend that is down is not
            # unknown: say the backend is unavailable, at once (A31).
            head, sep, _ = public.partition(self._separator)
            owner = snap.prefixes.get(head) if sep else None
            backend = self._pool.get(owner) if owner is not None else None
            if (
                personal is not None
                and backend is not None
                and kind in (Kind.TOOLS, Kind.PROMPTS)
                and backend.refused_listing
                and backend.per_client
            ):
                if not personal(kind, public, backend.name):
                    # Left out by the caller's profile or policy: no such item.
                    raise LocalProtocolError(f"Unknown {what}: {public}", INVALID_PARAMS)
                return Target(backend, public[len(head) + len(sep) :])  # rule 3
            if backend is not None and backend.state is not BackendState.UP:
                raise BackendUnavailable(backend.name, backend.reason)
            raise LocalProtocolError(f"Unknown {what}: {public}", INVALID_PARAMS)
        if self._pool.pin_refused(entry.backend, kind, entry.original):
            raise AwaitingApproval(what, public, entry.backend)  # pinning: block
        return Target(self.backend(entry.backend), entry.original)

    def refused(self, backend: str, kind: Kind, original: str) -> bool:
        """Whether that item's change awaits approval and it is not served (``pinning: block``)."""
        return self._pool.pin_refused(backend, kind, original)

    def withheld(self, backend: str, kind: Kind, original: str) -> bool:
        """Whether hosts are shown that item's pin, or nothing, instead of it (``hold``)."""
        return self._pool.pin_withheld(backend, kind, original)

    def uri(self, public: str, call: Call) -> Target:
        """The target of a public resource URI.

        Raises:
            LocalProtocolError: resource not found, with the code the client's
                revision uses.
        """
        resolved = call.snapshot.resolve_uri(public)
        backend = None if resolved is None else self._pool.get(resolved[0])
        # The backend's own include/exclude applies to URIs routed by prefix
        # too (a template's instances): excluded is exactly "not found".
        if resolved is None or (
            backend is not None and not backend.config.resources.allows(resolved[1])
        ):
            raise LocalProtocolError(
                f"Resource not found: {public}",
                resource_not_found_code(call.client.protocol_version),
                data={"uri": public},
            )
        backend_name, original = resolved
        return Target(self.backend(backend_name), original)


class _Progress:
    """Relays one call's progress to its client under the client's token."""

    def __init__(self, token: Any, emit: Emit) -> None:
        self._token = token
        self._emit = emit
        self._last: float | None = None

    def __call__(self, body: dict[str, Any]) -> None:
        progress = body.get("progress")
        if isinstance(progress, bool) or not isinstance(progress, int | float):
            return
        if self._last is not None and progress <= self._last:
            return  # spec: progress increases; a backend that goes back is dropped (D8)
        self._last = progress
        body["progressToken"] = self._token
        if not self._emit(jsonrpc.encode_notification("notifications/progress", mcp.encode(body))):
            logger.debug("progress.dropped", reason="stream full or gone")


class Forwarder:
    """Sends a host request on to a backend (rules 4-6).

    Args:
        owners: the calls in flight, by backend and client.
        levels: the log levels hosts asked for (the modern envelope's).
        held: the held calls (a modern host's ``input_required``).
        consent: asks a person to sign in before a call to a backend that
            acts for them (``router.consent_gate``).

    Attributes:
        guard: the guardrail chains a 2026-07-28 backend's input requests go
            through (``router.filtering`` rule 4); None when none is
            configured (``Router.set_guardrails``).
    """

    def __init__(
        self,
        owners: Owners[Call],
        levels: LogLevels | None = None,
        held: HeldCalls | None = None,
        roots: HostRoots | None = None,
        consent: ConsentGate | None = None,
    ) -> None:
        self._owners = owners
        self._consent = consent
        self._levels = levels
        self._held = held
        self._roots = roots
        self._tokens = itertools.count(1)
        self.guard: Guardrails | None = None

    def _envelope(self, call: Call, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` with the 2026-07-28 envelope for this caller (rule 7).

        Capabilities: the modern request's own, or what the legacy host
        declared at initialize, cut to what the gateway can bridge. The log
        level: the modern request's ``logLevel``, or the legacy session's
        ``logging/setLevel``.
        """
        client = call.client
        if isinstance(client, ModernRequest):
            level = client.envelope.log_level
        else:
            level = self._levels.level_of(client.session_id) if self._levels else None
        capabilities = backend_leg.bridgeable_capabilities(client.capabilities)
        if isinstance(client, ModernRequest) and client.task_extension:
            capabilities = with_task_extension(capabilities)  # a routed task call
        return backend_leg.with_envelope(params, capabilities=capabilities, log_level=level)

    async def forward(
        self,
        call: Call,
        backend: BackendView,
        method: str,
        params: dict[str, Any],
        *,
        keep_modern: bool = False,
    ) -> msgspec.Raw:
        """Send one request to a backend on behalf of a host request.

        Swaps the client's progress token for one unique on the backend's
        link, and records the call as in flight for the owner lookup. A
        backend that acts for people first has the caller sign in, when it
        has not (``router.consent_gate``). ``keep_modern`` leaves a modern
        backend's ``resultType`` and hints on the result whatever the host
        (the response cache reads them and shapes the answer itself).
        """
        if self._consent is not None:
            await self._consent.ensure(call, backend.name)
        progress: _Progress | None = None
        token: str | None = None
        meta = params.get("_meta")
        if isinstance(meta, dict) and "progressToken" in meta:
            client_token = meta["progressToken"]
            if call.emit is not None:
                token = f"gw-{next(self._tokens)}"
                progress = _Progress(client_token, call.emit)
                params["_meta"] = {**meta, "progressToken": token}
            else:
                params["_meta"] = {k: v for k, v in meta.items() if k != "progressToken"}
        client_id = call.client.session_id
        call.backend = backend.name
        clock = call.clock = CallClock(trio.current_time)
        info = backend.info
        modern = info is not None and info.modern
        if isinstance(call.client, ModernRequest) and call.client.backend_state is not None:
            # A retry of a modern backend's round: only that backend may get it.
            modern_backend.for_backend(call.client, backend.name if modern else "", params)
        if modern:
            params = self._envelope(call, params)

        async def send(body: dict[str, Any]) -> msgspec.Raw:
            """One request to the backend (the first, or an MRTR retry)."""
            try:
                return await backend.request(
                    method,
                    mcp.encode(body),
                    client=client_id,
                    progress_token=token,
                    on_progress=progress,
                    clock=clock,
                )
            except RemoteProtocolError as exc:
                if modern and exc.code == UNSUPPORTED_PROTOCOL_VERSION:
                    raise envelope_refused(backend.name, exc) from None
                raise

        legacy_host = not isinstance(call.client, ModernRequest)
        if self._roots is not None and backend.keyed_by_roots and not modern and legacy_host:
            # Its principal's session is keyed by its roots (host_roots rule 1).
            await self._roots.ensure(call.client, call.emit)
        self._owners.add(backend.name, client_id, call)
        try:
            result = await send(params)
            if modern:
                result = await self._input_required(call, backend, method, params, result, send)
        finally:
            self._owners.remove(backend.name, client_id, call)
        if modern and not keep_modern and not isinstance(call.client, ModernRequest):
            return for_legacy_host(result)
        return result

    async def _input_required(
        self,
        call: Call,
        target: BackendView,
        method: str,
        params: dict[str, Any],
        result: msgspec.Raw,
        send: Callable[[dict[str, Any]], Awaitable[msgspec.Raw]],
    ) -> msgspec.Raw:
        """A modern backend's ``input_required``: sealed for a modern host, driven
        for a legacy one (``router/modern_backend``); any other result as it is."""
        body = mcp.decode_object(result)
        if not modern_backend.is_input_required(body):
            return result
        backend = target.name
        assert body is not None
        client = call.client
        guard = self.guard

        async def screen(round_body: dict[str, Any]) -> dict[str, Any]:
            """Each round's input requests through the backend-request chain."""
            assert guard is not None
            return await filter_input_requests(guard, call, target, round_body)

        if isinstance(client, ModernRequest):
            if guard is not None:
                body = await screen(body)
            if self._held is None:
                raise LocalProtocolError("no requestState sealer configured", INTERNAL_ERROR)
            self._held.metrics.count_input_required("backend")
            return mcp.encode(
                modern_backend.seal_for_host(
                    self._held.sealer,
                    now=self._held.wall_clock(),
                    lifetime=self._held.lifetime_for(backend),
                    backend=backend,
                    request=client,
                    method=method,
                    body=body,
                )
            )
        return await modern_backend.drive(
            client,
            call.emit,
            backend=backend,
            method=method,
            params=params,
            body=body,
            send=send,
            input_timeout=target.config.timeouts.input,
            screen=None if guard is None else screen,
        )


def envelope_refused(backend: str, exc: RemoteProtocolError) -> LocalProtocolError:
    """What a host gets when a modern backend refused the gateway's envelope (rule 10).

    The -32022 is about our request, not the host's: relaying it would make a
    modern host fall back to ``initialize`` against a gateway that serves it
    fine. It is logged, and the host gets -32603 naming the backend.
    """
    logger.error(
        "backend.envelope_refused", backend=backend, code=exc.code, error=exc.message[:256]
    )
    return LocalProtocolError(
        f"backend {backend!r} refused the gateway's 2026-07-28 request envelope "
        f"({exc.message}); see the gateway's log",
        INTERNAL_ERROR,
        data={"backend": backend},
    )


def in_public_names(exc: RemoteProtocolError, target: Target, public: str) -> RemoteProtocolError:
    """A backend's error about ``target`` as the host must read it (rule 5).

    The host never saw the backend's names: a URI in ``data`` (members
    named ``uri`` or ending in ``Uri``) is made public under the backend's
    prefix, a member equal to the item's backend name becomes its public
    name, and the requested URI in the message becomes the public one.
    """
    data = exc.data
    message = exc.message
    if "://" in target.original and target.original in message:
        message = message.replace(target.original, public)
    if isinstance(data, dict):
        prefix = target.backend.prefix
        data = {
            key: _public_value(key, value, prefix, target.original, public)
            for key, value in data.items()
        }
    if data is exc.data and message is exc.message:
        return exc
    return RemoteProtocolError(message, exc.code, data)


def _public_value(key: object, value: object, prefix: str, original: str, public: str) -> object:
    if not isinstance(value, str):
        return value
    if value == original:
        return public
    if isinstance(key, str) and (key == "uri" or key.endswith(("Uri", "_uri"))):
        return public_uri(prefix, value)
    return value


def for_legacy_host(result: msgspec.Raw) -> msgspec.Raw:
    """A modern backend's result without the fields a handshake-era host does not know."""
    body = mcp.decode_object(result)
    if body is None or not any(key in body for key in backend_leg.MODERN_ONLY_FIELDS):
        return result
    return mcp.encode(backend_leg.for_legacy_host(body))


def _input_schema(call: Call, public: str) -> dict[str, Any] | None:
    """The public tool's ``inputSchema`` in the call's view (for a ``schema`` filter)."""
    entry = call.snapshot.resolve(Kind.TOOLS, public)
    definition = None if entry is None else mcp.decode_object(msgspec.Raw(entry.encoded))
    schema = None if definition is None else definition.get("inputSchema")
    return schema if isinstance(schema, dict) else None


def _fit_shown_definition(
    call: Call, public: str, target: Target, arguments: dict[str, Any] | None
) -> None:
    """Rule 11: a held tool's call fits the pinned schema the host was shown.

    Raises:
        OutsideShownDefinition: -32602, with the first violation's path.
    """
    # Here, not at the top: jsonschema loads only once a tool is held.
    from gateway.guardrails.filters import schema_violation

    schema = _input_schema(call, public)
    problem = None if schema is None else schema_violation(schema, arguments or {})
    if problem is not None:
        raise OutsideShownDefinition(public, target.backend.name, problem)


def _uri_mapper(backend: BackendView) -> mcp.UriMap:
    prefix = backend.prefix
    return lambda uri: public_uri(prefix, uri)


def downgraded(
    result: msgspec.Raw,
    version: str,
    adapt: Callable[[dict[str, Any], str], dict[str, Any]],
) -> msgspec.Raw:
    """The result as a host on an older revision may see it (revisions.py)."""
    if not revisions.needs_downgrade(version):
        return result
    body = mcp.decode_object(result)
    return result if body is None else mcp.encode(adapt(body, version))


class Calls:
    """Handlers of the methods that name one item and go to its backend.

    Args:
        targets: public name and URI lookup.
        forwarder: sends the call on.
        metrics: where tool calls are counted.
        guard: the guardrail chains (``router.filtering``); None when no
            filter is configured, and then no call pays for them.
    """

    def __init__(
        self,
        targets: Targets,
        forwarder: Forwarder,
        metrics: RouterMetrics,
        guard: Guardrails | None = None,
    ) -> None:
        self._targets = targets
        self._forward = forwarder.forward
        self._metrics = metrics
        self.guard = guard
        #: The response cache (``router.response_cache``); None when it is off.
        self.cache: RouterCache | None = None

    async def _named(
        self,
        call: Call,
        target: Target,
        public: str,
        method: str,
        params: dict[str, Any],
        *,
        keep_modern: bool = False,
    ) -> msgspec.Raw:
        """Forward a request for one item; the backend's error in public names (rule 5)."""
        try:
            return await self._forward(
                call, target.backend, method, params, keep_modern=keep_modern
            )
        except RemoteProtocolError as exc:
            raise in_public_names(exc, target, public) from None

    async def call_tool(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        """``tools/call``: forward under the original name, namespace URIs in the result."""
        name = mcp.require_str(params, "name", "tool")
        arguments = params.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            raise LocalProtocolError(
                f"invalid params: tool arguments must be an object, not {type(arguments).__name__}",
                INVALID_PARAMS,
            )
        target = self._targets.named(
            Kind.TOOLS,
            name,
            call.snapshot,
            "tool",
            personal=partial(call.admits_personal, listed=False),
        )
        if self._targets.withheld(target.backend.name, Kind.TOOLS, target.original):
            _fit_shown_definition(call, name, target, arguments)
        params["name"] = target.original
        guard = self.guard
        if guard is not None:
            await filter_request(
                guard, call, target.backend, name, params, lambda: _input_schema(call, name)
            )
        self._metrics.count_tool_call(target.backend.name, target.original)
        cache = self.cache
        rule = None
        if cache is not None:
            rule = cache.tool_rule(call.client.profile, name, call.snapshot)
        if cache is not None and rule is not None:
            fetch = partial(self._call_tool, call, target, name, params)
            result = await cache.call_tool(call, target.backend, params, rule, fetch)
        else:
            result = await self._call_tool(call, target, name, params)
        # After the cache, on every answer: what the cache keeps is the
        # backend's, and the chains are the caller's profile's (rule 10).
        if guard is not None:
            result = await filter_result(guard, call, target.backend, name, result, tool=True)
        return result

    async def _call_tool(
        self, call: Call, target: Target, name: str, params: dict[str, Any]
    ) -> msgspec.Raw:
        """Forward a ``tools/call`` and rewrite its result for the host."""
        result = await self._named(call, target, name, "tools/call", params)
        result = mcp.rewrite_call_result(result, _uri_mapper(target.backend))
        return downgraded(result, call.client.protocol_version, revisions.call_result)

    async def get_prompt(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        """``prompts/get``: forward under the original name, namespace URIs in the result."""
        name = mcp.require_str(params, "name", "prompt")
        target = self._targets.named(
            Kind.PROMPTS,
            name,
            call.snapshot,
            "prompt",
            personal=partial(call.admits_personal, listed=False),
        )
        params["name"] = target.original
        result = await self._named(call, target, name, "prompts/get", params)
        result = mcp.rewrite_prompt_result(result, _uri_mapper(target.backend))
        if self.guard is not None:
            result = await filter_result(self.guard, call, target.backend, name, result, tool=False)
        return downgraded(result, call.client.protocol_version, revisions.prompt_result)

    async def read_resource(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        """``resources/read``: forward the backend's URI, namespace the contents' URIs."""
        uri = mcp.require_str(params, "uri", "resource")
        target = self._targets.uri(uri, call)
        params["uri"] = target.original
        cache = self.cache
        if cache is not None:
            fetch = partial(self._read_kept, call, target, uri, params)
            result = await cache.read(call, target.backend, params, fetch)
        else:
            result = await self._named(call, target, uri, "resources/read", params)
            result = mcp.rewrite_read_result(result, _uri_mapper(target.backend))
            if isinstance(call.client, ModernRequest):
                result = with_read_hint(result, target.backend, per_principal=call.per_principal)
        # After the cache, on every answer, as for tool calls (rule 10).
        if self.guard is not None:
            result = await filter_result(self.guard, call, target.backend, uri, result, tool=False)
        return result

    async def _read_kept(
        self, call: Call, target: Target, uri: str, params: dict[str, Any]
    ) -> msgspec.Raw:
        """A read for the cache: public content URIs, the backend's own hints kept."""
        result = await self._named(call, target, uri, "resources/read", params, keep_modern=True)
        return mcp.rewrite_read_result(result, _uri_mapper(target.backend))

    def _skill_target(self, call: Call, public: str, what: str) -> Target:
        """The backend of a public skill or skill-directory URI (-32602 when unknown).

        A listed skill goes to whoever listed it; any other URI is routed by
        prefix as a resource URI is (SEP-2640: a server answers for skills
        its listing leaves out). Only a backend that serves the extension
        is asked.
        """
        entry = call.snapshot.resolve(Kind.SKILLS, public)
        if entry is not None:
            return Target(self._targets.backend(entry.backend), entry.original)
        try:
            target = self._targets.uri(public, call)
        except LocalProtocolError:
            target = None
        if target is None or (
            target.backend.state is BackendState.UP and not target.backend.offers(skills.EXTENSION)
        ):
            raise LocalProtocolError(f"Unknown {what}: {public}", INVALID_PARAMS)
        return target

    async def get_skill(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        """``skills/get`` (SEP-2640): forward the backend's URI, namespace the entry's URIs."""
        uri = mcp.require_str(params, "uri", "skill")
        target = self._skill_target(call, uri, "skill")
        backend = target.backend.name
        if self._targets.refused(backend, Kind.SKILLS, target.original):
            raise AwaitingApproval("skill", uri, backend)  # pinning: block
        # Under ``pinning: hold`` a changed skill is the pinned entry the
        # list shows, and a new one held for approval is unknown.
        pinned = None
        if self._targets.withheld(backend, Kind.SKILLS, target.original):
            pinned = call.snapshot.resolve(Kind.SKILLS, uri)
            if pinned is None:
                raise LocalProtocolError(f"Unknown skill: {uri}", INVALID_PARAMS)
        params["uri"] = target.original
        result = await self._named(call, target, uri, skills.GET_METHOD, params)
        result = skills.rewrite_get_result(result, _uri_mapper(target.backend))
        if pinned is not None:
            result = skills.with_entry(result, pinned.encoded)
        # Every era gets the hint: the extension's result schema requires it.
        return with_read_hint(result, target.backend, per_principal=call.per_principal)

    async def read_directory(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        """``resources/directory/read`` (SEP-2640): to a backend with ``directoryRead``."""
        uri = mcp.require_str(params, "uri", "directory")
        target = self._skill_target(call, uri, "directory")
        info = target.backend.info
        if target.backend.state is BackendState.UP and (
            info is None or not skills.reads_directories(info.capabilities)
        ):
            raise LocalProtocolError(f"Not a directory resource: {uri}", INVALID_PARAMS)
        params["uri"] = target.original
        result = await self._named(call, target, uri, skills.DIRECTORY_READ_METHOD, params)
        result = skills.rewrite_directory_result(result, _uri_mapper(target.backend))
        return with_read_hint(result, target.backend, per_principal=call.per_principal)

    async def complete(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        """``completion/complete``: route by the prompt or resource reference."""
        ref = params.get("ref")
        if not isinstance(ref, dict):
            raise LocalProtocolError("invalid params: completion 'ref' missing", INVALID_PARAMS)
        ref_type = ref.get("type")
        if ref_type == "ref/prompt":
            target = self._targets.named(
                Kind.PROMPTS,
                mcp.require_str(ref, "name", "prompt reference"),
                call.snapshot,
                "prompt",
            )
            ref["name"] = target.original
        elif ref_type == "ref/resource":
            target = self._targets.uri(mcp.require_str(ref, "uri", "resource reference"), call)
            ref["uri"] = target.original
        else:
            raise LocalProtocolError(
                f"invalid params: unknown completion reference type {ref_type!r}", INVALID_PARAMS
            )
        if not target.backend.offers("completions"):
            # Nothing to complete is an answer, not an error (spec: completion).
            return mcp.encode({"completion": {"values": [], "hasMore": False}})
        return await self._forward(call, target.backend, "completion/complete", params)

    async def ping(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        """``ping``: the gateway itself answers."""
        return jsonrpc.EMPTY_OBJECT
