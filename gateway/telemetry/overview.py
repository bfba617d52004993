"""The gateway's overview as typed data: what ``/readyz`` details carry.

One model, three readers: the ``/readyz`` JSON (``overview`` key), the
``mcp-gateway status`` command, and the operator console to come (issue 18).
Keeping it a handful of frozen Structs in a leaf module means the command
decodes exactly what the daemon encodes, and the command's import stays
cheap (msgspec only: it must answer in under a second).

Times are of two kinds on purpose: an *age* (``uptime_seconds``) is measured
on the daemon's monotonic clock and sent as seconds, so the reader's clock
does not matter; a *moment* (``LastError.at``) is wall-clock Unix seconds,
since the operator wants to match it against log lines.
"""

from __future__ import annotations

import msgspec


class LastError(msgspec.Struct, frozen=True, kw_only=True):
    """The last failure that took a backend down or kept it from starting.

    Args:
        message: what went wrong, as the backend's ``down`` log line says it.
        at: when, in Unix seconds (wall clock).
    """

    message: str
    at: float


class BackendStatus(msgspec.Struct, frozen=True, kw_only=True):
    """One configured backend as an operator sees it.

    Args:
        name: the configured name.
        transport: ``stdio``, ``http`` (Streamable HTTP), ``sse`` or ``websocket``.
        state: ``starting``, ``up``, ``down``, ``incompatible`` or ``stopped``.
        reason: why it is in that state (human text).
        required: whether the gateway is not ready while it is not up.
        era: ``modern`` (2026-07-28) or ``legacy`` (the handshake), from its
            last ``initialize`` or ``server/discover``; None before one.
        era_reason: why a backend that offers 2026-07-28 is served in the
            handshake era (its 2026-07-28 leg failed: what was wrong, and
            that it is retried with backoff); None otherwise.
        protocol_version: the revision in use; None before the handshake.
        uptime_seconds: how long the current session has been up; None
            unless up.
        restarts: times the session was lost after being up.
        in_flight: calls waiting on it right now.
        last_error: the last failure; kept after it came back up.
    """

    name: str
    transport: str
    state: str
    reason: str
    required: bool
    era: str | None = None
    era_reason: str | None = None
    protocol_version: str | None = None
    uptime_seconds: float | None = None
    restarts: int = 0
    in_flight: int = 0
    last_error: LastError | None = None


class SessionGroup(msgspec.Struct, frozen=True, kw_only=True):
    """Open client sessions of one era, revision and profile.

    Args:
        era: ``legacy`` for handshake sessions; a 2026-07-28 host keeps no
            session, so it is in no group.
        protocol_version: the revision the sessions negotiated.
        profile: the profile they are served (``default`` at ``server.path``).
        count: how many.
    """

    era: str
    protocol_version: str
    profile: str
    count: int


class StoreStatus(msgspec.Struct, frozen=True, kw_only=True):
    """The state store as ``/readyz`` shows it (``gateway.store.api.StoreHealth``).

    Args:
        kind: ``embedded`` or ``redis``.
        state: ``ok`` or ``down``.
        location: the SQLite file, ``memory``, or the server's address.
        detail: why it is down.
        reconnects: how often the connection to the server came back.
    """

    kind: str
    state: str
    location: str
    detail: str = ""
    reconnects: int = 0


class ConsentCount(msgspec.Struct, frozen=True, kw_only=True):
    """One ``user_consent`` backend's consents, counted: how many, never who.

    Attributes:
        backend: the backend's name.
        consented: principals holding tokens there that open.
        expiring_soon: of those, the ones whose access token ends within an
            hour (or ended) with no refresh token: they will be asked to sign
            in again.
        refresh_failures: refresh tokens the authorization server refused
            since this gateway started, each sending its person back through
            consent.
    """

    backend: str
    consented: int = 0
    expiring_soon: int = 0
    refresh_failures: int = 0


class ConsentSurvey(msgspec.Struct, frozen=True, kw_only=True):
    """Every ``user_consent`` backend's consent counts at one moment
    (``ConsentTokens.survey``).

    Attributes:
        counted_at: wall-clock seconds of the count.
        backends: one row per backend, by name.
    """

    counted_at: float
    backends: list[ConsentCount]


class Overview(msgspec.Struct, frozen=True, kw_only=True):
    """The whole gateway at one moment.

    Args:
        version: the gateway's version.
        uptime_seconds: since the process started serving.
        ready: what ``/readyz`` answers (also its status code).
        draining: shutting down: ready turns false, calls in flight finish.
        backends: every configured backend, by name.
        sessions: open client sessions, grouped.
        calls_in_flight: host requests being handled, over every session.
        store: the state store; None from an older gateway.
        consent: the ``user_consent`` backends' counts (the last survey);
            None without any, or before the first count.
    """

    version: str
    uptime_seconds: float
    ready: bool
    draining: bool
    backends: list[BackendStatus]
    sessions: list[SessionGroup]
    calls_in_flight: int = 0
    store: StoreStatus | None = None
    consent: ConsentSurvey | None = None


class Readyz(msgspec.Struct, frozen=True, kw_only=True):
    """The detailed ``/readyz`` body, as a reader decodes it.

    ``backends``/``down``/``required_down`` are the keys ``/readyz`` had
    before the overview; they stay for the scripts that read them.

    Args:
        ready: whether every required backend is up and no drain is on.
        backends: backend name to state.
        down: backends not up.
        required_down: required backends not up (what makes it not ready).
        overview: the full picture; absent from an older gateway.
    """

    ready: bool
    backends: dict[str, str] = msgspec.field(default_factory=dict)
    down: list[str] = msgspec.field(default_factory=list)
    required_down: list[str] = msgspec.field(default_factory=list)
    overview: Overview | None = None


def sessions_total(overview: Overview) -> int:
    """Open client sessions over every group."""
    return sum(group.count for group in overview.sessions)
