"""What each console page shows, read off the running parts (no I/O).

Each function takes the parts it reads and the moment (``now`` on the
trio clock, ``wall`` in Unix seconds) and returns plain rows for a
template, so the pages are tested without HTTP and the templates only lay
things out. Nothing here returns a secret or a full session id: sessions
are named by their first :data:`SHORT_ID` characters, the config comes
through :func:`~gateway.console.redact.redacted`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import msgspec
import yaml

from gateway.catalog.profiles import DEFAULT_PROFILE
from gateway.catalog.snapshot import Kind
from gateway.console.forms import FormField, form_fields
from gateway.console.redact import redacted
from gateway.runtime.readiness import backend_status, session_groups

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from gateway.backends.backend import Backend
    from gateway.catalog.snapshot import Entry, Snapshot
    from gateway.config import GatewayConfig
    from gateway.console.activity import Activity
    from gateway.console.recent import FailedRequest
    from gateway.frontend.clients import ClientSession
    from gateway.router import Router
    from gateway.router.response_cache import RouterCache
    from gateway.runtime.reload import ReloadOutcome
    from gateway.telemetry.overview import SessionGroup

SHORT_ID: Final = 8
SEARCH_LIMIT: Final = 50
KIND_LABELS: Final = {
    Kind.TOOLS: "tool",
    Kind.PROMPTS: "prompt",
    Kind.RESOURCES: "resource",
    Kind.TEMPLATES: "template",
    Kind.SKILLS: "skill",
}


def short_id(session_id: str) -> str:
    """The part of a session id the console shows (never the whole: it is a credential)."""
    return session_id[:SHORT_ID]


@dataclass(frozen=True, slots=True)
class BackendRow:
    """One backend on the overview (``status.backend_status`` plus the window's figures)."""

    name: str
    transport: str
    era: str
    state: str
    reason: str
    uptime_seconds: float | None
    restarts: int
    in_flight: int
    calls: int
    p50_ms: float | None
    p99_ms: float | None
    error_rate: float | None
    last_error: str
    last_error_at: float | None


def backend_rows(backends: Iterable[Backend], activity: Activity, now: float) -> list[BackendRow]:
    """Every backend, by name, with its last five minutes."""
    rows = []
    for backend in sorted(backends, key=lambda b: b.name):
        status = backend_status(backend, now)
        stats = activity.window.stats(backend.name, now)
        last = status.last_error
        rows.append(
            BackendRow(
                name=status.name,
                transport=status.transport,
                era=(status.era or "none yet")
                + (f" ({status.era_reason})" if status.era_reason else ""),
                state=status.state,
                reason=status.reason,
                uptime_seconds=status.uptime_seconds,
                restarts=status.restarts,
                in_flight=status.in_flight,
                calls=0 if stats is None else stats.calls,
                p50_ms=None if stats is None else stats.p50 * 1000,
                p99_ms=None if stats is None else stats.p99 * 1000,
                error_rate=None if stats is None else stats.error_rate,
                last_error="" if last is None else last.message,
                last_error_at=None if last is None else last.at,
            )
        )
    return rows


@dataclass(frozen=True, slots=True)
class CacheRow:
    """One backend's response-cache figures on the overview."""

    backend: str
    hit_ratio: float | None
    hits: int
    misses: int
    evictions: int
    bytes: int


def cache_rows(cache: RouterCache | None) -> list[CacheRow] | None:
    """The response cache per backend, hit ratio first; None while the cache is off."""
    if cache is None:
        return None
    rows = []
    for sample in cache.samples():
        hits = sample.hits + (sample.shared_hits or 0)  # the store's hits spared the backend too
        lookups = hits + sample.misses
        ratio = hits / lookups if lookups else None
        rows.append(
            CacheRow(sample.backend, ratio, hits, sample.misses, sample.evictions, sample.bytes)
        )
    return rows


def live_figures(backends: Iterable[Backend], activity: Activity, now: float) -> dict[str, Any]:
    """The small JSON the SSE stream sends every few seconds (``live``)."""
    figures: dict[str, Any] = {}
    for row in backend_rows(backends, activity, now):
        figures[row.name] = {
            "state": row.state,
            "in_flight": row.in_flight,
            "calls": row.calls,
            "p50_ms": row.p50_ms,
            "p99_ms": row.p99_ms,
            "error_rate": row.error_rate,
        }
    return {"backends": figures}


def session_summary(sessions: Iterable[ClientSession]) -> list[SessionGroup]:
    """Open sessions counted by era, revision and profile (the overview's table)."""
    return session_groups(sessions)


@dataclass(frozen=True, slots=True)
class CatalogRow:
    """One public item."""

    kind: str
    public: str
    original: str
    backend: str
    profiles: tuple[str, ...]


def catalog_rows(router: Router, snapshot: Snapshot, query: str = "") -> list[CatalogRow]:
    """Every item of every kind; with ``query``, the matching ones.

    Tools are ranked by the gateway's own tool search (the BM25 index the
    search-mode profiles use) first; then every item whose public or
    original name, or backend, contains the query (case-insensitive).
    """
    profiles = sorted(router.profiles.names, key=lambda name: (name != DEFAULT_PROFILE, name))
    views = {name: router.view(name) for name in profiles}

    def row(kind: Kind, entry: Entry) -> CatalogRow:
        member = tuple(p for p in profiles if entry.key in views[p].view(kind))
        return CatalogRow(KIND_LABELS[kind], entry.key, entry.original, entry.backend, member)

    text = query.strip().lower()
    if not text:
        return [row(kind, entry) for kind in Kind for entry in snapshot.view(kind)]
    found: list[CatalogRow] = []
    seen: set[tuple[Kind, str]] = set()
    tools = snapshot.view(Kind.TOOLS)
    for hit in router.search.index().search(query, SEARCH_LIMIT):
        entry = tools.get(hit.name)
        if entry is not None:
            found.append(row(Kind.TOOLS, entry))
            seen.add((Kind.TOOLS, entry.key))
    for kind in Kind:
        for entry in snapshot.view(kind):
            if (kind, entry.key) in seen:
                continue
            if any(text in value.lower() for value in (entry.key, entry.original, entry.backend)):
                found.append(row(kind, entry))
    return found


@dataclass(frozen=True, slots=True)
class ToolPage:
    """One tool: where it comes from, what it is, and its call form."""

    public: str
    original: str
    backend: str
    description: str
    schema_text: str
    fields: list[FormField]


def tool_page(snapshot: Snapshot, public: str) -> ToolPage | None:
    """The tool's page; None when no such tool is in the catalog."""
    entry = snapshot.resolve(Kind.TOOLS, public)
    if entry is None:
        return None
    item = msgspec.json.decode(entry.encoded)
    schema = item.get("inputSchema") if isinstance(item, dict) else None
    description = item.get("description") if isinstance(item, dict) else None
    return ToolPage(
        public=entry.key,
        original=entry.original,
        backend=entry.backend,
        description=description if isinstance(description, str) else "",
        schema_text=json.dumps(schema, indent=2, ensure_ascii=False),
        fields=form_fields(schema),
    )


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One open client session, named by a short id."""

    short_id: str
    era: str
    protocol_version: str
    profile: str
    principal: str
    client: str
    calls: int
    in_flight: int
    age_seconds: float
    idle_seconds: float


def session_rows(sessions: Iterable[ClientSession], now: float) -> list[SessionRow]:
    """Initialized, open sessions, oldest first."""
    rows = [
        SessionRow(
            short_id=short_id(s.session_id),
            era="legacy",  # a 2026-07-28 host keeps no session (status_model.SessionGroup)
            protocol_version=s.protocol_version,
            profile=s.profile,
            principal=s.principal or "anonymous",
            client=str(s.client_info.get("name", ""))[:64],
            calls=s.calls,
            in_flight=len(s.inflight),
            age_seconds=max(0.0, now - s.opened_at),
            idle_seconds=max(0.0, now - s.last_seen),
        )
        for s in sessions
        if s.initialized and not s.closed
    ]
    return sorted(rows, key=lambda r: -r.age_seconds)


def find_session(sessions: Iterable[ClientSession], short: str) -> list[ClientSession]:
    """The open sessions whose id starts with ``short`` (exactly :data:`SHORT_ID` chars)."""
    if len(short) != SHORT_ID:
        return []
    return [s for s in sessions if s.session_id.startswith(short) and not s.closed]


def error_rows(activity: Activity, text: str = "", backend: str = "") -> list[FailedRequest]:
    """The recent failed requests, newest first, filtered."""
    return activity.errors.newest(text, backend)


@dataclass(frozen=True, slots=True)
class ConfigPage:
    """The effective config, redacted, and the last reload."""

    text: str
    last_reload: ReloadOutcome | None
    can_reload: bool


def config_page(
    config: GatewayConfig, last_reload: ReloadOutcome | None, can_reload: bool
) -> ConfigPage:
    """The config in force with every secret replaced (``redact``), as YAML like the file."""
    text = yaml.safe_dump(redacted(config), sort_keys=False, allow_unicode=True, width=100)
    return ConfigPage(text, last_reload, can_reload)


def backend_names(rows: Sequence[BackendRow]) -> list[str]:
    """The backends' names (the errors page's filter)."""
    return [row.name for row in rows]


@dataclass(frozen=True, slots=True)
class StoreLatencyRow:
    """One store operation's figures on the store page, since the gateway started.

    ``p50_ms`` and ``p99_ms`` are the histogram bucket bounds the quantile falls
    under (an upper bound, as Prometheus's ``histogram_quantile`` reads it);
    None when it is past the last bucket.
    """

    operation: str
    count: int
    mean_ms: float
    p50_ms: float | None
    p99_ms: float | None
    errors: int


def _bound_under(buckets: list[tuple[float, float]], rank: float) -> float | None:
    for bound, cumulative in buckets:
        if cumulative >= rank:
            return None if bound == float("inf") else bound * 1000
    return None


def store_latency_rows(durations: Any, errors: Any) -> list[StoreLatencyRow]:
    """The store's operations as its metrics counted them, busiest first.

    Args:
        durations: ``Metrics.store_operation_duration`` (a histogram by operation).
        errors: ``Metrics.store_errors`` (a counter by operation).
    """
    failed: dict[str, int] = {}
    for metric in errors.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total"):
                failed[sample.labels["operation"]] = int(sample.value)
    counts: dict[str, float] = {}
    sums: dict[str, float] = {}
    buckets: dict[str, list[tuple[float, float]]] = {}
    for metric in durations.collect():
        for sample in metric.samples:
            operation = sample.labels.get("operation", "")
            if sample.name.endswith("_count"):
                counts[operation] = sample.value
            elif sample.name.endswith("_sum"):
                sums[operation] = sample.value
            elif sample.name.endswith("_bucket"):
                bound = float(sample.labels["le"])
                buckets.setdefault(operation, []).append((bound, sample.value))
    rows = []
    for operation, count in counts.items():
        ordered = sorted(buckets.get(operation, []))
        rows.append(
            StoreLatencyRow(
                operation=operation,
                count=int(count),
                mean_ms=round(sums.get(operation, 0.0) / count * 1000, 3) if count else 0.0,
                p50_ms=_bound_under(ordered, count * 0.5) if count else None,
                p99_ms=_bound_under(ordered, count * 0.99) if count else None,
                errors=failed.get(operation, 0),
            )
        )
    return sorted(rows, key=lambda row: (-row.count, row.operation))
