"""The configuration schema, part two: one backend, whatever its transport.

The backend kinds form a tagged union on the YAML key ``transport``
(:data:`BackendConfig`); :data:`BACKEND_CLASSES` and :data:`TRANSPORTS` are
read off that union, so a new kind is added in one place.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Annotated, Final, Literal, TypeAlias

import msgspec
from msgspec import Meta

from gateway.config.schema import (
    MIB,
    NAME,
    Base,
    Invalid,
    Name,
    Off,
    OffInt,
    Positive,
    PositiveInt,
    SessionMode,
    tag_table,
)
from gateway.config.schema_backend_auth import BackendAuth
from gateway.config.schema_cache import BackendCache
from gateway.config.schema_filters import FilterConfig
from gateway.config.schema_pinning import BackendPinning, PinModeName, PinningConfig, mode_name

__all__ = [
    "Timeouts",
    "ItemFilter",
    "ResourceFilter",
    "RestartPolicy",
    "HealthConfig",
    "SessionLimits",
    "BackendBase",
    "StdioBackend",
    "NetworkBackend",
    "HttpLikeBackend",
    "HttpBackend",
    "SseBackend",
    "WebSocketBackend",
    "BackendConfig",
    "BACKEND_CLASSES",
    "TRANSPORTS",
]

# A prefix is "" (unprefixed) or a name.
Prefix: TypeAlias = Annotated[
    str,
    Meta(
        pattern=f"^(?:{NAME})?$",
        extra={
            "problem": '{value!r} is not a valid prefix ("" or lowercase letters, digits '
            "and '-', starting with a letter or digit)"
        },
    ),
]
NoLimit: TypeAlias = Annotated[int, Meta(ge=0, extra={"problem": "must be 0 (no limit) or more"})]
HttpUrl: TypeAlias = Annotated[
    str,
    Meta(
        pattern="(?i)^https?://",
        extra={"problem": "must start with http:// or https:// (got {value!r})"},
    ),
]
WsUrl: TypeAlias = Annotated[
    str,
    Meta(
        pattern="(?i)^wss?://", extra={"problem": "must start with ws:// or wss:// (got {value!r})"}
    ),
]


class Timeouts(Base, frozen=True, kw_only=True):
    """Per-backend time limits in seconds, applied as cancel scopes by callers.

    Attributes:
        connect: to open the transport (spawn, TCP/TLS, WebSocket handshake).
        initialize: for the MCP ``initialize`` exchange that opens a
            handshake-era session.
        probe: for the answer to the 2026-07-28 probe (``server/discover``)
            of a backend whose ``protocol`` is ``auto`` or ``modern``. A
            backend that answers late is still modern: the gateway never
            takes silence for a refusal, so this covers a slow start (many
            interpreters starting on a few cores), not a round trip.
        request: for one forwarded request without progress; the clock
            stands still while the backend waits on the host for input.
        input: for one question the backend asks the host (sampling,
            elicitation, roots, an MRTR round): the time a person has to
            answer. It is not spent from ``request``.
        max_total: hard ceiling for one request, progress, input or not.
        reset_on_progress: whether a progress notification restarts the
            ``request`` clock (long tools that report progress keep going).
    """

    connect: Positive = 5.0
    initialize: Positive = 30.0
    # 50 SDK 2.x interpreters starting at once on 2 cores answer within
    # about 40 s (each costs about 1.2 s of CPU to import); twice that and
    # some, since a backend that misses it starts its next attempt from scratch.
    probe: Positive = 120.0
    request: Positive = 60.0
    input: Positive = 600.0
    max_total: Positive = 600.0
    reset_on_progress: bool = True

    def __post_init__(self) -> None:
        if self.request > self.max_total:
            raise Invalid(("request", f"must not exceed max_total ({self.max_total})"))


class ItemFilter(Base, frozen=True, kw_only=True):
    """Which of a backend's items (by original name) the gateway exposes.

    Attributes:
        include: fnmatch globs; an item must match one.
        exclude: fnmatch globs; an item matching one is hidden even if
            included.
    """

    include: list[str] = msgspec.field(default_factory=lambda: ["*"])
    exclude: list[str] = msgspec.field(default_factory=list)

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

    initial_delay: Positive = 0.5
    max_delay: Positive = 60.0
    multiplier: Annotated[float, Meta(ge=1)] = 2.0

    def __post_init__(self) -> None:
        if self.initial_delay > self.max_delay:
            raise Invalid(("initial_delay", f"must not exceed max_delay ({self.max_delay})"))


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

    ping_interval: Off = 30.0
    ping_timeout: Positive = 10.0
    eject_after_timeouts: OffInt = 5


class SessionLimits(Base, frozen=True, kw_only=True):
    """Bounds on a backend's own sessions for principals or clients.

    Attributes:
        max: most such sessions open at once for this backend (0: no limit);
            a call that would open one more fails with an error naming this
            setting.
        idle_timeout: seconds without a call after which such a session
            closes (0: only when its client goes); it reopens on the next
            call. A session holding a resource subscription is not idle.
    """

    max: NoLimit = 100
    idle_timeout: Off = 600.0


class BackendBase(Base, tag_field="transport", frozen=True, kw_only=True):
    """What every backend has, whatever its transport.

    The concrete classes form a tagged union on the YAML key ``transport``.

    Attributes:
        name: unique, ``[a-z0-9][a-z0-9-]*``; used in logs, metrics and as the
            default prefix.
        prefix: namespace for this backend's items; None means the name, ""
            mounts the backend unprefixed.
        session: ``shared`` multiplexes every client over one backend
            session; ``per_principal`` opens one per principal and set of
            declared host capabilities; ``per_client`` opens one per client
            session; ``auto`` picks by transport and auth (see
            :meth:`effective_session`).
        sessions: bounds on the per-principal or per-client sessions.
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
        protocol: which MCP era the gateway speaks to this backend. ``auto``
            probes with ``server/discover`` at 2026-07-28 and falls back to
            ``initialize`` when the backend does not answer it as a modern
            server; ``modern`` only probes (a refusal fails the attempt);
            ``legacy`` only runs ``initialize``. The legacy HTTP+SSE
            transport is handshake-era only, so ``auto`` means ``legacy``
            there and ``modern`` is refused.
        filters: guardrail filters for this backend's calls, results and
            requests, run after the top-level and the profile's ones.
        cache: keep this backend's reads although it sends no cache hints
            (a 2025-11-25 backend; ``gateway.config.schema_cache``); None
            keeps only what a 2026-07-28 backend's own hints allow.
        pinning: this backend's pinning mode, overriding the top level's
            (``gateway.config.schema_pinning``): a mode name, ``false``
            (``off``), or ``{mode, hold_new}``; None follows ``pinning:``.
    """

    name: Name
    prefix: Prefix | None = None
    session: SessionMode = "auto"
    sessions: SessionLimits = msgspec.field(default_factory=SessionLimits)
    required: bool = False
    enabled: bool = True
    timeouts: Timeouts = msgspec.field(default_factory=Timeouts)
    restart: RestartPolicy = msgspec.field(default_factory=RestartPolicy)
    health: HealthConfig = msgspec.field(default_factory=HealthConfig)
    tools: ItemFilter = msgspec.field(default_factory=ItemFilter)
    prompts: ItemFilter = msgspec.field(default_factory=ItemFilter)
    resources: ResourceFilter = msgspec.field(default_factory=ResourceFilter)
    max_list_pages: PositiveInt = 100
    max_list_items: PositiveInt = 100_000
    max_in_flight: NoLimit = 0
    max_pending: NoLimit = 0
    on_collision: Literal["error", "skip", "rename"] = "error"
    protocol: Literal["auto", "modern", "legacy"] = "auto"
    filters: list[FilterConfig] = msgspec.field(default_factory=list)
    cache: BackendCache | None = None
    pinning: BackendPinning | PinModeName | bool | None = None

    @property
    def transport(self) -> str:
        """The ``transport`` tag of this backend's class (for logs and metrics)."""
        tag = type(self).__struct_config__.tag
        return tag if isinstance(tag, str) else type(self).__name__

    def pin_mode(self, top: PinningConfig) -> tuple[PinModeName, bool]:
        """This backend's pinning mode and ``hold_new``, its override over ``top``'s."""
        own = self.pinning
        if own is None:
            return top.mode_name, top.hold_new
        if isinstance(own, BackendPinning):
            hold_new = top.hold_new if own.hold_new is None else own.hold_new
            return mode_name(own.mode), hold_new
        return mode_name(own), top.hold_new

    @property
    def public_prefix(self) -> str:
        """The prefix actually used: ``prefix``, or the name when unset."""
        return self.prefix if self.prefix is not None else self.name

    def effective_session(
        self, authenticated: bool = False
    ) -> Literal["shared", "per_principal", "per_client"]:
        """The session mode after resolving ``auto``.

        ``auto`` means per_client for network backends, where an initialize
        is cheap and per-client state is then never mixed up. For stdio,
        where a process per client is not cheap, it means per_principal when
        the gateway authenticates its callers (one person's backend state
        never reaches another) and shared when it does not (DESIGN "Backend
        sessions", "Trust between people").

        Args:
            authenticated: whether ``auth`` is configured.
        """
        if self.session != "auto":
            return self.session
        if not isinstance(self, StdioBackend):
            return "per_client"
        return "per_principal" if authenticated else "shared"


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

    command: Annotated[str, Meta(min_length=1)]
    args: list[str] = msgspec.field(default_factory=list)
    env: dict[str, str] = msgspec.field(default_factory=dict)
    cwd: str | None = None
    max_line_bytes: PositiveInt = 16 * MIB
    inherit_env: bool = True
    stop_grace: Positive = 2.0


class NetworkBackend(BackendBase, frozen=True, kw_only=True):
    """Fields shared by every backend reached through a URL.

    Attributes:
        url: the endpoint; each transport bounds its scheme.
        headers: sent with every request (``Authorization``, typically
            through ``${ENV}`` expansion).
        auth: the gateway's credential for this backend (docs/security.md,
            "Credentials to backends"); it sets ``Authorization``, so
            ``headers`` may not set it too.
    """

    url: str
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    auth: BackendAuth | None = None

    def __post_init__(self) -> None:
        if self.auth is not None and any(k.lower() == "authorization" for k in self.headers):
            raise Invalid(("headers", "Authorization is set by auth: remove one of them"))
        if self.auth is not None and self.auth.acts_for_callers and self.session == "shared":
            # One shared session has no caller: the exchange would never
            # happen, and one person's consent would serve everyone.
            raise Invalid(
                (
                    "session",
                    f"{self.auth.type} acts for each caller: use per_principal, "
                    "per_client (or auto)",
                )
            )


class HttpLikeBackend(NetworkBackend, frozen=True, kw_only=True):
    """Fields shared by the HTTP-based transports (Streamable HTTP and SSE).

    Attributes:
        url: an ``http://`` or ``https://`` endpoint.
        verify_tls: whether to verify the server certificate.
        ca_file: PEM bundle to verify against instead of the system store.
        client_cert: PEM client certificate for mutual TLS.
        client_key: PEM key for ``client_cert`` when it is not in that file.
    """

    url: HttpUrl
    verify_tls: bool = True
    ca_file: str | None = None
    client_cert: str | None = None
    client_key: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.client_key and not self.client_cert:
            raise Invalid(("client_key", "needs client_cert as well"))


class HttpBackend(HttpLikeBackend, tag="http", frozen=True, kw_only=True):
    """A backend speaking MCP Streamable HTTP (2025-03-26 and later)."""


class SseBackend(HttpLikeBackend, tag="sse", frozen=True, kw_only=True):
    """A backend speaking the legacy HTTP+SSE transport (2024-11-05)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.protocol == "modern":
            raise Invalid(
                ("protocol", "the HTTP+SSE transport is handshake-era only: use auto or legacy")
            )


class WebSocketBackend(NetworkBackend, tag="websocket", frozen=True, kw_only=True):
    """A backend reached over a WebSocket.

    Attributes:
        url: a ``ws://`` or ``wss://`` endpoint.
    """

    url: WsUrl


BackendConfig: TypeAlias = StdioBackend | HttpBackend | SseBackend | WebSocketBackend

# Which class each `transport` value decodes into, read off the union above.
BACKEND_CLASSES: Final = tag_table(BackendConfig)
# The valid values of a backend's `transport`, in the order messages list them.
TRANSPORTS: Final = tuple(BACKEND_CLASSES)
