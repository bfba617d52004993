"""The metric objects: every series the gateway exports, on one registry.

Metrics live on an injected ``CollectorRegistry`` so each test gets its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

from gateway import __version__
from gateway.telemetry.scrape import (
    BACKEND_STATES,
    PREFIX,
    BackendCollector,
    BackendSample,
    CacheCollector,
    CacheSample,
    StoreCollector,
    StoreSample,
    TaskCollector,
    TaskSample,
)
from gateway.telemetry.series import FeatureSeries

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
# Sub-millisecond (a catalog page) to minutes (a long tool call).
LATENCY_BUCKETS: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
)


class Metrics(FeatureSeries):
    """Every metric the gateway exports, on one registry.

    The series of the eras, profiles, search mode, MRTR and auth decisions
    are :class:`~gateway.telemetry.series.FeatureSeries`'s.
    """

    def __init__(
        self, registry: CollectorRegistry | None = None, *, tool_label_cap: int = 1000
    ) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        super().__init__(r)
        self.requests = Counter(
            PREFIX + "requests_total",
            "Requests from hosts, by backend, method and outcome.",
            ["backend", "method", "outcome"],
            registry=r,
        )
        self.request_duration = Histogram(
            PREFIX + "request_duration_seconds",
            "Time to answer a host request.",
            ["backend", "method"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.backend_up = Gauge(
            PREFIX + "backend_up", "1 when the backend is serving, else 0.", ["backend"], registry=r
        )
        ProcessCollector(registry=r)
        self.build_info = Gauge(
            PREFIX + "build_info", "Always 1; the gateway's version.", ["version"], registry=r
        )
        self.build_info.labels(version=__version__).set(1)
        self.ready = Gauge(PREFIX + "ready", "1 when /readyz would answer 200, else 0.", registry=r)
        self.config_last_reload_successful = Gauge(
            PREFIX + "config_last_reload_successful",
            "1 when the last config reload was applied (or none was tried), 0 when rejected.",
            registry=r,
        )
        self.config_last_reload_successful.set(1)
        self.client_sessions_open = Gauge(
            PREFIX + "client_sessions_open", "Client sessions currently open.", registry=r
        )
        self.client_sessions_opened = Counter(
            PREFIX + "client_sessions_opened_total", "Client sessions ever opened.", registry=r
        )
        self.pins_pending = Gauge(
            PREFIX + "pins_pending",
            "Items whose changed definition awaits approval (pinning), by backend.",
            ["backend"],
            registry=r,
        )
        self.drift_detected = Counter(
            PREFIX + "drift_detected_total",
            "Changed definitions detected (pinning), by backend and drift class.",
            ["backend", "class"],
            registry=r,
        )
        self.catalog_items = Gauge(
            PREFIX + "catalog_items",
            "Items in the merged catalog, by backend and kind.",
            ["backend", "kind"],
            registry=r,
        )
        self.profile_items = Gauge(
            PREFIX + "profile_items",
            "Items a profile shows, by profile and kind (issue 15).",
            ["profile", "kind"],
            registry=r,
        )
        self.profile_tools_list_bytes = Gauge(
            PREFIX + "profile_tools_list_bytes",
            "Bytes of a profile's whole tools/list result.",
            ["profile"],
            registry=r,
        )
        self.profile_tools_list_tokens = Gauge(
            PREFIX + "profile_tools_list_tokens",
            "Estimated tokens of a profile's tools/list result (4 bytes a token).",
            ["profile"],
            registry=r,
        )
        self.notifications_sent = Counter(
            PREFIX + "notifications_fanned_out_total",
            "Notifications queued to client sessions.",
            ["kind"],
            registry=r,
        )
        self.pages_served = Counter(
            PREFIX + "list_pages_served_total",
            "List pages served to hosts, by list kind.",
            ["kind"],
            registry=r,
        )
        self.tool_calls = Counter(
            PREFIX + "tool_calls_total",
            "tools/call requests by backend and tool "
            '(tools past the cap are counted as tool="_other").',
            ["backend", "tool"],
            registry=r,
        )
        self._tool_label_cap = tool_label_cap
        self._request_children: dict[tuple[str, str, str], Any] = {}
        self._duration_children: dict[tuple[str, str], Any] = {}
        self._tool_labels: set[tuple[str, str]] = set()
        # The labelled child of each counted (backend, tool): labels() costs
        # more than the increment.
        self._tool_children: dict[tuple[str, str], Any] = {}
        self.loop_lag = Histogram(
            PREFIX + "event_loop_lag_seconds",
            "How late a 0.5 s timer fires: time the event loop spent on other work.",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
            registry=r,
        )
        self.config_reloads = Counter(
            PREFIX + "config_reloads_total",
            "Config reloads, by outcome (applied, rejected).",
            ["outcome"],
            registry=r,
        )
        self.cancellations = Counter(
            PREFIX + "cancellations_total",
            "Cancellations by direction: client (a host cancelled) or timeout (the gateway "
            "gave up on a backend).",
            ["direction"],
            registry=r,
        )
        self.timeouts = Counter(
            PREFIX + "request_timeouts_total",
            "Forwarded requests that timed out, by backend.",
            ["backend"],
            registry=r,
        )
        self.invalid_cursors = Counter(
            PREFIX + "invalid_cursors_total", "List requests refused for a bad cursor.", registry=r
        )
        self.rejected = Counter(
            PREFIX + "rejected_requests_total",
            "Requests refused before routing, by reason.",
            ["reason"],
            registry=r,
        )
        self.jwks_refreshes = Counter(
            PREFIX + "jwks_refresh",
            "JWKS fetches, by outcome (ok, http_error, invalid, unreachable).",
            ["outcome"],
            registry=r,
        )
        self.jwks_keys = Gauge(
            PREFIX + "jwks_keys", "Usable signing keys in the JWKS in force.", registry=r
        )
        self.store_operation_duration = Histogram(
            PREFIX + "store_operation_duration_seconds",
            "State store operations, by operation (get, put, spend, ...), failed ones too.",
            ["operation"],
            buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 1.0),
            registry=r,
        )
        self.store_errors = Counter(
            PREFIX + "store_errors_total",
            "State store operations that failed (timed out, refused, server error).",
            ["operation"],
            registry=r,
        )
        self.store_fallbacks = Counter(
            PREFIX + "store_fallbacks_total",
            "Decisions a replica took alone because the shared store did not answer, by "
            "tenant (rate_limits: the local bucket admitted or refused; cache: a shared "
            "response-cache lookup was a miss, or a write or a drop waited).",
            ["tenant"],
            registry=r,
        )
        self.internal_errors = Counter(
            PREFIX + "internal_errors_total",
            "Unexpected exceptions on a request path (a gateway bug), by component: "
            "router (while routing a host request) or http (the HTTP frontend itself).",
            ["component"],
            registry=r,
        )
        # Filter names come from the config file, never from a request: bounded.
        self.filter_decisions = Counter(
            PREFIX + "filter_decisions_total",
            "Guardrail decisions other than allow, by filter and decision "
            "(modify, deny, unavailable).",
            ["filter", "decision"],
            registry=r,
        )

    def watch_backends(self, sample: Callable[[], Iterable[BackendSample]]) -> None:
        """Export per-backend state read at scrape time (no bookkeeping on the hot path)."""
        self.registry.register(BackendCollector(sample))

    def watch_store(self, sample: Callable[[], StoreSample]) -> None:
        """Export the store's state and reconnects, read at scrape time."""
        self.registry.register(StoreCollector(sample))

    def watch_tasks(self, sample: Callable[[], TaskSample]) -> None:
        """Export the task table's counts, read at scrape time."""
        self.registry.register(TaskCollector(sample))

    def watch_cache(self, sample: Callable[[], Iterable[CacheSample]]) -> None:
        """Export the response cache's counts per backend, read at scrape time."""
        self.registry.register(CacheCollector(sample))

    def observe_request(self, method: str, outcome: str, seconds: float, backend: str = "") -> None:
        """Count one routed host request and record its duration.

        The labelled children are cached: ``labels()`` costs more than the
        increment itself, on every call (profiled in benchmarks/run.py); the
        increment waits for the registry's next read (``scrape.Deferred``).
        """
        key = (backend, method, outcome)
        counter = self._request_children.get(key)
        if counter is None:
            counter = self._request_children[key] = self.requests.labels(*key)
        self.deferred.counts[counter] += 1
        timing_key = (backend, method)
        histogram = self._duration_children.get(timing_key)
        if histogram is None:
            histogram = self._duration_children[timing_key] = self.request_duration.labels(
                *timing_key
            )
        histogram.observe(seconds)

    def count_tool_call(self, backend: str, tool: str) -> None:
        """Count a tool call; distinct (backend, tool) labels are capped."""
        key = (backend, tool)
        counter = self._tool_children.get(key)
        if counter is None:  # a new pair: the cap decides its label (children cached)
            label = key
            if key not in self._tool_labels:
                if len(self._tool_labels) >= self._tool_label_cap:
                    label = (backend, "_other")
                else:
                    self._tool_labels.add(key)
            counter = self.tool_calls.labels(backend=label[0], tool=label[1])
            if label == key:
                self._tool_children[key] = counter
        self.deferred.counts[counter] += 1


__all__ = [
    "BACKEND_STATES",
    "PREFIX",
    "BackendSample",
    "CacheSample",
    "Metrics",
    "StoreSample",
    "TaskSample",
]
