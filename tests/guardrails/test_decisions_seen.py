"""Where a guardrail decision shows: the metric and the console's recent errors."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from gateway.config import parse
from gateway.config.schema_filters import SecretsFilter
from gateway.console.activity import Activity
from gateway.guardrails.filters import Subject
from gateway.runtime.app import guardrails_of
from gateway.telemetry.metrics import Metrics

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"


async def test_a_decision_is_counted_by_filter_and_decision_and_joins_the_recent_errors() -> None:
    """Issue 29: mcp_gateway_filter_decisions_total{filter,decision}; the console lists it."""
    config = parse("filters: [{type: secrets, name: dlp}]\n", env={})
    metrics = Metrics(CollectorRegistry())
    activity = Activity(lambda: 0.0, wall=lambda: 1000.0)
    guard = guardrails_of(config, metrics, activity)
    assert guard is not None
    subject = Subject(
        point="results",
        item="web__fetch",
        backend="web",
        payload={"content": [{"type": "text", "text": f"k {AWS_KEY}"}]},
    )
    await guard.check(guard.steps("results", "default", "web", []), subject)
    sample = metrics.registry.get_sample_value(
        "mcp_gateway_filter_decisions_total", {"filter": "dlp", "decision": "modify"}
    )
    assert sample == 1.0
    [seen] = list(activity.errors)
    assert (seen.method, seen.item, seen.backend, seen.outcome) == (
        "results", "web__fetch", "web", "filter:modify",
    )  # fmt: skip
    assert seen.message == "dlp: secret: AWS Access Key"
    assert AWS_KEY not in repr(seen)


def test_no_filters_means_no_guardrails_even_with_the_console_on() -> None:
    """Gateway choice: nothing to count, nothing built."""
    config = parse("backends: []\n", env={})
    assert guardrails_of(config, Metrics(CollectorRegistry()), Activity(lambda: 0.0)) is None
    assert SecretsFilter().points() == ("results", "backend_requests")
