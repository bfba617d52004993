"""Metric families read at scrape time: the backends' state, the task table, the cache.

What the backends and the task runner already count for themselves (plain
integers and ``collections.Counter``s they keep anyway) is read when
Prometheus scrapes, so the request path pays for no label lookup at all:
the collectors below turn a sample of those counts into metric families.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping

PREFIX: Final = "mcp_gateway_"
BACKEND_STATES: Final = ("starting", "up", "down", "incompatible", "stopped")
#: The eras a leg speaks: ``modern`` is 2026-07-28 (stateless), ``legacy`` the handshake.
ERAS: Final = ("modern", "legacy")
#: How a task ends (the 2026-07-28 tasks extension's terminal statuses).
TASK_ENDINGS: Final = ("completed", "failed", "cancelled")


@dataclass(frozen=True, slots=True)
class BackendSample:
    """One backend's state at scrape time.

    ``era`` is the era of its current session ("" before its first
    handshake); ``sessions_by_era`` counts handshakes by the era they
    settled on, ``requests_by_era`` the requests sent on sessions of each.
    """

    name: str
    state: str
    in_flight: int
    restarts: int
    initializations: int
    list_guard_trips: Mapping[str, int] = field(default_factory=dict)
    token_requests: Mapping[tuple[str, str], int] = field(default_factory=dict)
    era: str = ""
    sessions_by_era: Mapping[str, int] = field(default_factory=dict)
    requests_by_era: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TaskSample:
    """The task table at scrape time (``router.tasks.TaskRunner.sample``).

    Attributes:
        created: tasks ever created.
        running: tasks whose call has not ended.
        ended: tasks ended, by terminal status.
    """

    created: int
    running: int
    ended: Mapping[str, int] = field(default_factory=dict)


class BackendCollector(Collector):
    """The per-backend families, from a sample taken at each scrape."""

    def __init__(self, sample: Callable[[], Iterable[BackendSample]]) -> None:
        self._sample = sample

    def collect(self) -> Iterator[Metric]:
        """One family per backend figure, every backend a sample."""
        state = GaugeMetricFamily(
            PREFIX + "backend_state",
            "1 for the backend's current state.",
            labels=["backend", "state"],
        )
        in_flight = GaugeMetricFamily(
            PREFIX + "backend_requests_in_flight",
            "Requests waiting on the backend.",
            labels=["backend"],
        )
        restarts = CounterMetricFamily(
            PREFIX + "backend_restarts",
            "Times the backend's session was lost after being up.",
            labels=["backend"],
        )
        inits = CounterMetricFamily(
            PREFIX + "backend_initializations",
            "Backend sessions initialized (first start, restarts, per-client sessions).",
            labels=["backend"],
        )
        guards = CounterMetricFamily(
            PREFIX + "list_guard_trips",
            "Backend listings cut short by a guard (repeated cursor, max pages, max items).",
            labels=["backend", "reason"],
        )
        tokens = CounterMetricFamily(
            PREFIX + "backend_token_requests",
            "Token requests for a backend's credential (auth:), by grant and outcome.",
            labels=["backend", "grant", "outcome"],
        )
        era = GaugeMetricFamily(
            PREFIX + "backend_era",
            "1 for the era the backend's current session speaks (modern: 2026-07-28).",
            labels=["backend", "era"],
        )
        sessions = CounterMetricFamily(
            PREFIX + "backend_sessions_by_era",
            "Backend sessions opened, by the era the handshake settled on.",
            labels=["backend", "era"],
        )
        requests = CounterMetricFamily(
            PREFIX + "backend_requests_by_era",
            "Requests the gateway sent the backend, by the era of the session they went on.",
            labels=["backend", "era"],
        )
        for backend in self._sample():
            name = backend.name
            for (grant, outcome), count in backend.token_requests.items():
                tokens.add_metric([name, grant, outcome], count)
            for reason, count in backend.list_guard_trips.items():
                guards.add_metric([name, reason], count)
            for value in BACKEND_STATES:
                state.add_metric([name, value], 1.0 if backend.state == value else 0.0)
            in_flight.add_metric([name], backend.in_flight)
            restarts.add_metric([name], backend.restarts)
            inits.add_metric([name], backend.initializations)
            if backend.era:
                for value in ERAS:
                    era.add_metric([name, value], 1.0 if backend.era == value else 0.0)
            for value, count in backend.sessions_by_era.items():
                sessions.add_metric([name, value], count)
            for value, count in backend.requests_by_era.items():
                requests.add_metric([name, value], count)
        yield from (state, in_flight, restarts, inits, guards, tokens, era, sessions, requests)


class TaskCollector(Collector):
    """The task families (2026-07-28 tasks extension), from the runner's own counts."""

    def __init__(self, sample: Callable[[], TaskSample]) -> None:
        self._sample = sample

    def collect(self) -> Iterator[Metric]:
        """Created and ended as counters, running as a gauge."""
        sample = self._sample()
        created = CounterMetricFamily(
            PREFIX + "tasks_created", "Tasks the gateway created (tools/call as a task)."
        )
        created.add_metric([], sample.created)
        running = GaugeMetricFamily(PREFIX + "tasks_running", "Tasks whose call is still running.")
        running.add_metric([], sample.running)
        ended = CounterMetricFamily(
            PREFIX + "tasks_ended",
            "Tasks ended, by status (completed, failed, cancelled).",
            labels=["status"],
        )
        for status in TASK_ENDINGS:
            ended.add_metric([status], sample.ended.get(status, 0))
        yield from (created, running, ended)


@dataclass(frozen=True, slots=True)
class CacheSample:
    """One backend's response-cache counters at scrape time (``router.response_cache``).

    Attributes:
        backend: the backend whose answers they are.
        hits: lookups answered from the cache.
        misses: lookups that went to the backend.
        evictions: entries dropped to stay within ``cache.max_bytes``.
        bytes: the bytes of its entries kept now.
        shared_hits: lookups answered from the state store (``cache.shared``);
            None when answers are not shared.
    """

    backend: str
    hits: int
    misses: int
    evictions: int
    bytes: int
    shared_hits: int | None = None


class CacheCollector(Collector):
    """The response cache's families, from the cache's own counts (none while it is off)."""

    def __init__(self, sample: Callable[[], Iterable[CacheSample]]) -> None:
        self._sample = sample

    def collect(self) -> Iterator[Metric]:
        """Requests by result and evictions as counters, bytes as a gauge."""
        requests = CounterMetricFamily(
            PREFIX + "cache_requests",
            "Lookups in the response cache, by backend and result (hit, hit_shared "
            "with cache.shared: answered from the state store, or miss: asked the "
            "backend); they start again from 0 when a reload renews the cache.",
            labels=["backend", "result"],
        )
        evictions = CounterMetricFamily(
            PREFIX + "cache_evictions",
            "Response-cache entries evicted to stay within cache.max_bytes, by backend.",
            labels=["backend"],
        )
        size = GaugeMetricFamily(
            PREFIX + "cache_bytes",
            "Bytes of the answers the response cache holds now, by backend.",
            labels=["backend"],
        )
        for sample in self._sample():
            requests.add_metric([sample.backend, "hit"], sample.hits)
            requests.add_metric([sample.backend, "miss"], sample.misses)
            if sample.shared_hits is not None:
                requests.add_metric([sample.backend, "hit_shared"], sample.shared_hits)
            evictions.add_metric([sample.backend], sample.evictions)
            size.add_metric([sample.backend], sample.bytes)
        yield from (requests, evictions, size)


@dataclass(frozen=True, slots=True)
class StoreSample:
    """The state store at scrape time (its ``health()``).

    Attributes:
        kind: ``embedded`` or ``redis``.
        up: whether its last operation succeeded.
        reconnects: how often it came back after failing.
    """

    kind: str
    up: bool
    reconnects: int


class StoreCollector(Collector):
    """The store's state and reconnects, from what its health already says."""

    def __init__(self, sample: Callable[[], StoreSample]) -> None:
        self._sample = sample

    def collect(self) -> Iterator[Metric]:
        """Up as a gauge (labelled by kind), reconnects as a counter."""
        sample = self._sample()
        up = GaugeMetricFamily(
            PREFIX + "store_up",
            "1 while the state store answers, 0 while it is down (by kind).",
            labels=["kind"],
        )
        up.add_metric([sample.kind], 1 if sample.up else 0)
        reconnects = CounterMetricFamily(
            PREFIX + "store_reconnects",
            "Times the state store answered again after failing.",
        )
        reconnects.add_metric([], sample.reconnects)
        yield from (up, reconnects)


class Deferred(Collector):
    """The request path's counter increments, applied when the registry is read.

    A labelled child's ``inc`` in prometheus-client is four Python calls and
    a lock, and a routed call made three of them. Here an increment is a
    ``collections.Counter`` update (no call); ``collect`` applies them to the
    children. Registered before any family (``FeatureSeries``), it is
    collected first, so every read of the registry (a scrape,
    ``get_sample_value``) sees every increment, as when each was applied at
    once. What it holds is bounded by the children, one entry each.
    Single-threaded: the gateway's trio thread both counts and scrapes.
    """

    def __init__(self) -> None:
        # Labelled counter child -> increments not yet applied.
        self.counts: collections.Counter[Any] = collections.Counter()

    def apply(self) -> None:
        """Apply every increment held to its child."""
        counts, self.counts = self.counts, collections.Counter()
        for child, amount in counts.items():
            child.inc(amount)

    def collect(self) -> Iterator[Metric]:
        """No family of its own: applies what is held before the families are read."""
        self.apply()
        return iter(())
