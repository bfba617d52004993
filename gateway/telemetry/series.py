"""The series of the protocol features added since the first dashboard (issue 18 item 4).

Eras (which revision hosts speak), profiles (sessions per endpoint, search
mode), multi-round-trip requests, the front door's auth decisions and the
access policy's refusals. Every
``count_*`` method is on a request path, so each keeps the labelled children
it made: ``labels()`` costs more than the increment (the same cache as
``Metrics.observe_request``). Every label value is bounded: eras and
revisions come from fixed lists (anything else is ``other``), profiles from
the config, reasons from the fixed vocabularies documented in
docs/operations.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from prometheus_client import Counter, Gauge

from gateway.protocol.stateless.envelope import MODERN_VERSIONS
from gateway.protocol.versions import SUPPORTED_VERSIONS
from gateway.telemetry.scrape import PREFIX, Deferred

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

_REVISIONS: Final = frozenset(SUPPORTED_VERSIONS) | frozenset(MODERN_VERSIONS)


def era_of(version: str) -> str:
    """``modern`` for 2026-07-28, else ``legacy`` (the handshake era)."""
    return "modern" if version in MODERN_VERSIONS else "legacy"


def _revision(version: str) -> str:
    return version if version in _REVISIONS else "other"


class FeatureSeries:
    """Counters for eras, profiles, tool search, MRTR and auth; base of ``Metrics``.

    Args:
        registry: where the families are registered.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        # The request path's increments, applied when the registry is read:
        # registered first, so it is collected before every family.
        self.deferred = Deferred()
        r.register(self.deferred)
        self.client_requests_by_era = Counter(
            PREFIX + "client_requests_by_era",
            "Host requests routed, by the era and revision the host spoke.",
            ["era", "revision"],
            registry=r,
        )
        self.client_sessions_by_era = Counter(
            PREFIX + "client_sessions_by_era",
            "Client sessions opened (the handshake), by era, revision and profile.",
            ["era", "revision", "profile"],
            registry=r,
        )
        self.profile_sessions_open = Gauge(
            PREFIX + "profile_sessions_open",
            "Client sessions open now, by the profile endpoint they were opened on.",
            ["profile"],
            registry=r,
        )
        self.tool_search_calls = Counter(
            PREFIX + "tool_search_calls",
            "Search-mode gateway__search_tools calls, by profile and result "
            "(hit: at least one tool found, miss: none, invalid: bad arguments).",
            ["profile", "result"],
            registry=r,
        )
        self.tool_search_hits = Counter(
            PREFIX + "tool_search_hits",
            "Tools returned by search-mode gateway__search_tools calls, by profile.",
            ["profile"],
            registry=r,
        )
        self.mrtr_input_required = Counter(
            PREFIX + "mrtr_input_required",
            "input_required rounds answered to modern hosts, by origin (bridge: a "
            "handshake-era backend's own request; backend: a modern backend's round).",
            ["origin"],
            registry=r,
        )
        self.mrtr_retries = Counter(
            PREFIX + "mrtr_retries",
            "Modern retries that carried a requestState (accepted or not).",
            registry=r,
        )
        self.mrtr_rejections = Counter(
            PREFIX + "mrtr_rejections",
            "Retries whose requestState was refused (-32602), by reason (tampered, expired, "
            "foreign, mismatched, unknown).",
            ["reason"],
            registry=r,
        )
        self.auth_decisions = Counter(
            PREFIX + "auth_decisions",
            "Front-door authentication decisions while auth is on, by decision "
            "(allowed, denied) and reason.",
            ["decision", "reason"],
            registry=r,
        )
        self.token_validation_failures = Counter(
            PREFIX + "token_validation_failures",
            "Bearer tokens sent but refused, by reason (a subset of the denied decisions).",
            ["reason"],
            registry=r,
        )
        self.policy_denials = Counter(
            PREFIX + "policy_denials",
            "Access-policy refusals, by what was refused (profile: opening a profile's "
            "endpoint; item: a call, read or get of an item hidden from the caller; "
            "search_target: gateway__call_tool naming a hidden tool).",
            ["reason"],
            registry=r,
        )
        self._children: dict[tuple[object, ...], Any] = {}
        self._by_version: dict[str, Any] = {}

    def _child(self, family: Counter | Gauge, key: tuple[str, ...]) -> Any:
        """The cached labelled child of ``family`` for ``key`` (label values in order)."""
        cache_key = (id(family), *key)
        cached = self._children.get(cache_key)
        if cached is None:
            cached = self._children[cache_key] = family.labels(*key)
        return cached

    def count_client_request(self, version: str) -> None:
        """One host request routed, spoken in ``version``.

        Once per request: one lookup by the version itself (bounded: an
        unknown one is keyed ``other``), not by the label tuple.
        """
        child = self._by_version.get(version)
        if child is None:
            key = _revision(version)
            child = self._child(self.client_requests_by_era, (era_of(key), key))
            self._by_version[key] = child
        self.deferred.counts[child] += 1

    def session_opened(self, version: str, profile: str) -> None:
        """A client session opened (handshake) on ``profile``'s endpoint."""
        key = (era_of(version), _revision(version), profile)
        self._child(self.client_sessions_by_era, key).inc()
        self._child(self.profile_sessions_open, (profile,)).inc()

    def session_closed(self, profile: str) -> None:
        """A client session opened on ``profile``'s endpoint ended."""
        self._child(self.profile_sessions_open, (profile,)).dec()

    def count_tool_search(self, profile: str, hits: int | None) -> None:
        """A ``gateway__search_tools`` call; ``hits`` None when its arguments were refused."""
        result = "invalid" if hits is None else "hit" if hits else "miss"
        self._child(self.tool_search_calls, (profile, result)).inc()
        if hits:
            self._child(self.tool_search_hits, (profile,)).inc(hits)

    def count_input_required(self, origin: str) -> None:
        """An ``input_required`` round answered: ``bridge`` or ``backend``."""
        self._child(self.mrtr_input_required, (origin,)).inc()

    def count_retry(self) -> None:
        """A retry carrying ``requestState`` arrived."""
        self.mrtr_retries.inc()

    def count_state_rejection(self, reason: str) -> None:
        """A retry's ``requestState`` was refused, for ``reason``."""
        self._child(self.mrtr_rejections, (reason,)).inc()

    def count_policy_denial(self, reason: str) -> None:
        """The access policy refused something: ``profile``, ``item`` or ``search_target``."""
        self._child(self.policy_denials, (reason,)).inc()

    def count_auth(self, allowed: bool, reason: str, *, token_sent: bool = False) -> None:
        """One authentication decision; a refused token is a validation failure too."""
        self._child(self.auth_decisions, ("allowed" if allowed else "denied", reason)).inc()
        if not allowed and token_sent:
            self._child(self.token_validation_failures, (reason,)).inc()
