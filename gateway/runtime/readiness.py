"""The ``/readyz`` answer: readiness and the overview, read off the running parts.

Read at request time, never kept up to date on the hot path: a call pays
nothing for the overview, a ``/readyz`` walks the backends and the client
sessions once (both bounded by configuration: ``server.max_sessions``).
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from gateway import __version__
from gateway.backends.state import BackendState
from gateway.telemetry.overview import (
    BackendStatus,
    LastError,
    Overview,
    SessionGroup,
    StoreStatus,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from gateway.backends.backend import Backend
    from gateway.backends.pool import Pool
    from gateway.frontend.clients import ClientSession
    from gateway.store.api import StoreHealth
    from gateway.telemetry.overview import ConsentSurvey


def backend_status(backend: Backend, now: float) -> BackendStatus:
    """One backend's row; ``now`` is the trio clock."""
    info = backend.info
    up_since = backend.up_since
    last = backend.last_error
    return BackendStatus(
        name=backend.name,
        transport=backend.config.transport,
        state=backend.state.value,
        reason=backend.reason,
        required=backend.config.required,
        era=None if info is None else ("modern" if info.modern else "legacy"),
        era_reason=backend.era_reason,
        protocol_version=None if info is None else info.protocol_version,
        uptime_seconds=None if up_since is None else round(now - up_since, 3),
        restarts=backend.restarts,
        in_flight=backend.in_flight,
        last_error=None if last is None else LastError(message=last[0][:500], at=last[1]),
    )


def session_groups(sessions: Iterable[ClientSession]) -> list[SessionGroup]:
    """Initialized client sessions counted by (revision, profile), in a stable order."""
    counts = collections.Counter(
        (session.protocol_version, session.profile)
        for session in sessions
        if session.initialized and not session.closed
    )
    return [
        SessionGroup(era="legacy", protocol_version=version, profile=profile, count=count)
        for (version, profile), count in sorted(counts.items())
    ]


def readiness(
    pool: Pool,
    sessions: Iterable[ClientSession],
    started: float,
    draining: bool,
    store: StoreHealth | None = None,
    consent: ConsentSurvey | None = None,
) -> tuple[bool, dict[str, Any]]:
    """(ready, details) for ``/readyz``.

    Ready when every backend marked ``required`` is up and no drain is on.
    The details keep the keys ``/readyz`` always had (``backends`` as name
    to state, ``down``, ``required_down``) and add ``overview``
    (:class:`~gateway.telemetry.overview.Overview`), ``store`` (the state
    store's kind, state and location) and ``degraded``: a store that is
    down makes the gateway degraded, not unready, since requests that do not
    need it are served as before and those that do fail with a typed error.

    Args:
        pool: the backends.
        sessions: the open client sessions.
        started: when the gateway started serving (trio clock).
        draining: whether shutdown has begun.
        store: the state store's health; None when there is none.
        consent: the last consent counts of the ``user_consent`` backends
            (``ConsentTokens.last_survey``; counts only, never who).
    """
    now = trio.current_time()
    rows = sorted(
        (backend_status(b, now) for b in pool.backends.values()), key=lambda row: row.name
    )
    sessions = list(sessions)
    down = [row.name for row in rows if row.state != BackendState.UP.value]
    required_down = [row.name for row in rows if row.required and row.name in down]
    ready = not required_down and not draining
    store_status = (
        None
        if store is None
        else StoreStatus(
            kind=store.kind,
            state=store.state.value,
            location=store.location,
            detail=store.detail,
            reconnects=store.reconnects,
        )
    )
    overview = Overview(
        version=__version__,
        uptime_seconds=round(now - started, 3),
        ready=ready,
        draining=draining,
        backends=rows,
        sessions=session_groups(sessions),
        calls_in_flight=sum(len(session.inflight) for session in sessions),
        store=store_status,
        consent=consent,
    )
    details: dict[str, Any] = {
        "backends": {row.name: row.state for row in rows},
        "down": down,
        "required_down": required_down,
        "overview": msgspec.to_builtins(overview),
    }
    if store_status is not None:
        details["store"] = msgspec.to_builtins(store_status)
        details["degraded"] = store_status.state != "ok"
    return ready, details
