"""Fakes the router runs on: they satisfy BackendView, PoolView and ClientPeer.

Each records what the router asked of it, and answers through a handler the
test sets per method, so a test reads as "the backend answers X" and then
"the backend was sent Y", without a transport or a session.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import trio

from gateway.backends.call_clock import CallClock
from gateway.backends.state import (
    BackendNotificationHandler,
    BackendRequestHandler,
    BackendState,
    ProgressListener,
    ServerInfo,
)
from gateway.catalog.catalog import Catalog
from gateway.catalog.cursor import CursorCodec
from gateway.catalog.naming import NamingRules
from gateway.catalog.snapshot import BackendListing, Kind, Snapshot
from gateway.config import BackendConfig, StdioBackend, Timeouts
from gateway.errors import BackendUnavailable, RequestTimeout
from gateway.identity.principal import Principal
from gateway.protocol import jsonrpc
from gateway.protocol.stateless.cache_hints import NO_CACHE, CacheHint
from gateway.protocol.versions import LATEST_VERSION
from gateway.router import NO_METRICS, Emit, Router, RouterMetrics
from gateway.router.call_metrics import Counter

# Answers one request: (params, client) -> result.
Answer = Callable[[dict[str, Any], str | None], Awaitable[msgspec.Raw]]


def decoded(raw: msgspec.Raw | bytes | None) -> Any:
    """A Raw or an encoded message as plain JSON values."""
    return None if raw is None else msgspec.json.decode(raw)


async def ok(params: dict[str, Any], client: str | None) -> msgspec.Raw:
    """The default answer: an empty result."""
    return jsonrpc.EMPTY_OBJECT


@dataclass(frozen=True)
class Sent:
    """One request the router sent to a backend."""

    method: str
    params: Any
    client: str | None


@dataclass(eq=False)
class FakeBackend:
    """A backend as the router sees it, answering from ``answers``."""

    name: str
    capabilities: dict[str, Any] = field(
        default_factory=lambda: {"tools": {}, "resources": {"subscribe": True}, "logging": {}}
    )
    prefix: str = ""
    per_client: bool = False
    keyed_by_roots: bool = False
    request_timeout: float = 60.0
    input_timeout: float = 600.0
    state: BackendState = BackendState.UP
    reason: str = "up"
    instructions: str | None = None
    answers: dict[str, Answer] = field(default_factory=dict)
    sent: list[Sent] = field(default_factory=list)
    notified: list[Sent] = field(default_factory=list)
    links: set[str] = field(default_factory=set)
    closed_clients: list[str] = field(default_factory=list)
    rekeyed_clients: list[str] = field(default_factory=list)
    refused: frozenset[str] = frozenset()
    refused_listing: bool = False
    config: BackendConfig = field(init=False)
    info: ServerInfo | None = field(init=False)

    def __post_init__(self) -> None:
        self.prefix = self.prefix or self.name
        self.config = StdioBackend(
            name=self.name,
            command="fake",
            prefix=self.prefix,
            timeouts=Timeouts(request=self.request_timeout, input=self.input_timeout),
        )
        self.info = ServerInfo(
            protocol_version=LATEST_VERSION,
            capabilities=self.capabilities,
            instructions=self.instructions,
            name=self.name,
            version="1",
        )

    def list_hint(self, kind: Kind) -> CacheHint:
        """A handshake-era backend's hint: none (``{0, private}``)."""
        return NO_CACHE

    def offers(self, capability: str) -> bool:
        """Whether the fake declared that capability (and has not refused it)."""
        info = self.info
        return (
            info is not None and capability in info.capabilities and capability not in self.refused
        )

    def has_link(self, client: str) -> bool:
        """Whether a per-client session is open for ``client``."""
        return client in self.links

    def close_client(self, client: str) -> None:
        """Record that the router closed a client's backend session."""
        self.closed_clients.append(client)
        self.links.discard(client)

    def rekey_client(self, client: str) -> None:
        """Record that the router learnt a client's roots anew."""
        self.rekeyed_clients.append(client)

    async def request(
        self,
        method: str,
        params: msgspec.Raw | None = None,
        *,
        client: str | None = None,
        progress_token: str | None = None,
        on_progress: ProgressListener | None = None,
        clock: CallClock | None = None,
    ) -> msgspec.Raw:
        """Record the request, then answer it as ``answers`` says (or with ``{}``)."""
        if self.state is not BackendState.UP and not (
            self.refused_listing and self.per_client and client is not None
        ):  # a backend refused to the catalog still serves a principal's own session
            raise BackendUnavailable(self.name, self.reason)
        body = decoded(params) or {}
        self.sent.append(Sent(method, body, client))
        return await self.answers.get(method, ok)(body, client)

    async def notify(
        self, method: str, params: msgspec.Raw | None = None, *, client: str | None = None
    ) -> None:
        """Record a notification the router forwarded."""
        self.notified.append(Sent(method, decoded(params), client))

    def methods(self) -> list[str]:
        """The methods of the requests sent so far, in order."""
        return [s.method for s in self.sent]

    def hang_until_timeout(self, method: str) -> None:
        """Make ``method`` behave like a real backend that never answers.

        The real ``Backend.request`` bounds every call by its own request
        timeout and then raises ``RequestTimeout``; so does this.
        """

        async def hang(params: dict[str, Any], client: str | None) -> msgspec.Raw:
            await trio.sleep(self.request_timeout)
            raise RequestTimeout(self.name, self.request_timeout)

        self.answers[method] = hang


@dataclass(eq=False)
class FakePool:
    """The pool as the router sees it: backends by name and their catalog."""

    backends: dict[str, FakeBackend] = field(default_factory=dict)
    request_handler: BackendRequestHandler | None = None
    notification_listeners: list[BackendNotificationHandler] = field(default_factory=list)
    state_listeners: list[Callable[[FakeBackend], None]] = field(default_factory=list)
    catalog: Catalog = field(default_factory=lambda: Catalog(NamingRules()))

    @property
    def snapshot(self) -> Snapshot:
        """The current catalog."""
        return self.catalog.snapshot

    def get(self, name: str) -> FakeBackend | None:
        """The backend of that name."""
        return self.backends.get(name)

    def pin_refused(self, backend: str, kind: Kind, name: str) -> bool:
        """No pins in the router's tests."""
        return False

    def pin_withheld(self, backend: str, kind: Kind, name: str) -> bool:
        """No pins in the router's tests."""
        return False

    def on_request(self, handler: BackendRequestHandler) -> None:
        """Remember the relay for backends' own requests (the router's)."""
        self.request_handler = handler

    def on_notification(self, listener: BackendNotificationHandler) -> None:
        """Remember a notification listener (the router's)."""
        self.notification_listeners.append(listener)

    def on_state_change(self, listener: Callable[[FakeBackend], None]) -> None:
        """Remember a state listener (the router's)."""
        self.state_listeners.append(listener)

    def add(
        self,
        backend: FakeBackend,
        tools: tuple[dict[str, Any], ...] = (),
        resources: tuple[dict[str, Any], ...] = (),
    ) -> FakeBackend:
        """Configure a backend and publish its items."""
        self.backends[backend.name] = backend
        self.catalog.set_prefixes({b.prefix: b.name for b in self.backends.values()})
        if backend.state is BackendState.UP:
            listing = BackendListing(
                backend=backend.name, prefix=backend.prefix, tools=tools, resources=resources
            )
            self.catalog.publish(listing)
        return backend

    def set_state(self, backend: FakeBackend, state: BackendState, reason: str = "") -> None:
        """Move a backend to ``state`` and tell the listeners, as the pool does."""
        backend.state = state
        backend.reason = reason or state.value
        if state is not BackendState.UP:
            self.catalog.withdraw(backend.name)
        for listener in self.state_listeners:
            listener(backend)


# Answers one server-to-client request: (method, params) -> result.
ClientAnswer = Callable[[str, msgspec.Raw | None], Awaitable[msgspec.Raw]]


@dataclass(eq=False)
class FakeClient:
    """A client session as the router sees it; keeps what reaches it."""

    session_id: str
    protocol_version: str = LATEST_VERSION
    capabilities: dict[str, Any] = field(default_factory=dict)
    profile: str = "default"
    answer: ClientAnswer | None = None
    notifications: list[Any] = field(default_factory=list)
    asked: list[tuple[str, Any, Emit | None]] = field(default_factory=list)
    principal: str | None = None
    caller: Principal | None = None

    def notify_nowait(self, message: bytes) -> None:
        """Keep an unsolicited message, decoded."""
        self.notifications.append(decoded(message))

    async def request(
        self, method: str, params: msgspec.Raw | None, emit: Emit | None
    ) -> msgspec.Raw:
        """Record a server-to-client request and answer it (``{}`` by default)."""
        self.asked.append((method, decoded(params), emit))
        if self.answer is None:
            return jsonrpc.EMPTY_OBJECT
        return await self.answer(method, params)


class _Series:
    """One counter series of RecordingMetrics."""

    def __init__(self, counts: dict[tuple[str, ...], int], key: tuple[str, ...]) -> None:
        self._counts = counts
        self._key = key

    def labels(self, **labels: str) -> Counter:
        """The child series for these label values."""
        return _Series(self._counts, (*self._key, *sorted(labels.values())))

    def inc(self) -> None:
        """Count one."""
        self._counts[self._key] = self._counts.get(self._key, 0) + 1


class RecordingMetrics:
    """RouterMetrics that keep what was recorded, for assertions."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, ...], int] = {}
        self.requests: list[tuple[str, str, str]] = []
        self.tool_calls: list[tuple[str, str]] = []
        # The FeatureSeries calls (eras, search, MRTR), apart from ``counts``.
        self.features: dict[tuple[str, ...], int] = {}
        self.timeouts = _Series(self.counts, ("timeouts",))
        self.cancellations = _Series(self.counts, ("cancellations",))
        self.invalid_cursors = _Series(self.counts, ("invalid_cursors",))
        self.pages_served = _Series(self.counts, ("pages_served",))
        self.internal_errors = _Series(self.counts, ("internal_errors",))

    def observe_request(self, method: str, outcome: str, seconds: float, backend: str = "") -> None:
        """Keep (method, outcome, backend); durations are not asserted."""
        self.requests.append((method, outcome, backend))

    def count_tool_call(self, backend: str, tool: str) -> None:
        """Keep (backend, tool)."""
        self.tool_calls.append((backend, tool))

    def _add(self, *key: str) -> None:
        self.features[key] = self.features.get(key, 0) + 1

    def count_client_request(self, version: str) -> None:
        """Count by revision."""
        self._add("client_requests", version)

    def count_tool_search(self, profile: str, hits: int | None) -> None:
        """Count by profile and hits."""
        self._add("tool_search", profile, str(hits))

    def count_input_required(self, origin: str) -> None:
        """Count by origin."""
        self._add("input_required", origin)

    def count_retry(self) -> None:
        """Count."""
        self._add("retries")

    def count_state_rejection(self, reason: str) -> None:
        """Count by reason."""
        self._add("state_rejections", reason)

    def count_policy_denial(self, reason: str) -> None:
        """Count by reason."""
        self._add("policy_denials", reason)


async def started(nursery: trio.Nursery, router: Router) -> Router:
    """``router`` running in ``nursery`` (its held calls, tasks and follow-up work)."""
    await nursery.start(router.run)
    return router


async def make_router(
    pool: FakePool, nursery: trio.Nursery, page_size: int = 0, metrics: RouterMetrics = NO_METRICS
) -> Router:
    """A router over ``pool`` with a fixed cursor key (and no metrics unless given)."""
    return await started(nursery, Router(pool, CursorCodec("test"), page_size, metrics=metrics))


_ids = iter(range(1, 1_000_000))


async def ask(router: Router, client: FakeClient, method: str, **params: Any) -> Any:
    """Send one host request through the router; the decoded response."""
    request = jsonrpc.Request(id=next(_ids), method=method, params=jsonrpc.to_raw(params))
    return decoded(await router.handle_request(client, request))
