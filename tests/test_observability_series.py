"""The feature series' label rules (gateway/telemetry/series.py), without a gateway.

What the end-to-end tests (tests/e2e/test_feature_metrics.py) cannot provoke
on cue: a revision the gateway does not know, and the scrape-time families
before a backend's first handshake.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from gateway.telemetry.metrics import BackendSample, Metrics, TaskSample


def test_an_unknown_revision_is_counted_as_other_so_hosts_cannot_mint_series() -> None:
    """STYLE rule 11 (bounded labels): the revision label takes known values only."""
    metrics = Metrics(CollectorRegistry())
    for version in ("2026-07-28", "2025-11-25", "1999-01-01", "x" * 200, "2026-07-28"):
        metrics.count_client_request(version)
    samples = {
        (s.labels["era"], s.labels["revision"]): s.value
        for family in metrics.registry.collect()
        if family.name == "mcp_gateway_client_requests_by_era"
        for s in family.samples
        if s.name.endswith("_total")
    }
    assert samples == {
        ("modern", "2026-07-28"): 2,
        ("legacy", "2025-11-25"): 1,
        ("legacy", "other"): 2,
    }


def test_a_backend_before_its_first_handshake_has_no_era_sample() -> None:
    """Gateway choice: backend_era is absent (not 0 for both eras) until a session exists."""
    metrics = Metrics(CollectorRegistry())
    metrics.watch_backends(
        lambda: [
            BackendSample("new", "starting", 0, 0, 0),
            BackendSample(
                "old",
                "up",
                0,
                0,
                1,
                era="modern",
                sessions_by_era={"modern": 2, "legacy": 0},
                requests_by_era={"modern": 5},
            ),
        ]
    )
    get = metrics.registry.get_sample_value
    assert get("mcp_gateway_backend_era", {"backend": "new", "era": "legacy"}) is None
    assert get("mcp_gateway_backend_era", {"backend": "old", "era": "modern"}) == 1
    assert get("mcp_gateway_backend_era", {"backend": "old", "era": "legacy"}) == 0
    sessions = "mcp_gateway_backend_sessions_by_era_total"
    assert get(sessions, {"backend": "old", "era": "modern"}) == 2
    requests = "mcp_gateway_backend_requests_by_era_total"
    assert get(requests, {"backend": "old", "era": "modern"}) == 5


def test_every_task_ending_is_exported_even_at_zero() -> None:
    """Gateway choice: the three statuses always exist, so a rate() over them starts at 0."""
    metrics = Metrics(CollectorRegistry())
    metrics.watch_tasks(lambda: TaskSample(3, 1, {"completed": 2}))
    get = metrics.registry.get_sample_value
    assert get("mcp_gateway_tasks_created_total") == 3
    assert get("mcp_gateway_tasks_running") == 1
    for status, count in (("completed", 2), ("failed", 0), ("cancelled", 0)):
        assert get("mcp_gateway_tasks_ended_total", {"status": status}) == count


def test_a_routed_requests_count_and_duration_are_in_the_next_read_of_the_registry() -> None:
    """Gateway choice: the request path's counter increments wait for the registry's
    next read (telemetry/scrape.py ``Deferred``); every read sees all of them."""
    metrics = Metrics(CollectorRegistry())
    sample = metrics.registry.get_sample_value
    metrics.observe_request("tools/call", "ok", 0.002, "b")
    metrics.count_tool_call("b", "echo")
    metrics.count_client_request("2025-11-25")
    labels = {"backend": "b", "method": "tools/call"}
    assert sample("mcp_gateway_requests_total", {**labels, "outcome": "ok"}) == 1
    assert sample("mcp_gateway_request_duration_seconds_count", labels) == 1
    assert sample("mcp_gateway_request_duration_seconds_bucket", {**labels, "le": "0.0025"}) == 1
    assert sample("mcp_gateway_request_duration_seconds_bucket", {**labels, "le": "0.001"}) == 0
    assert sample("mcp_gateway_tool_calls_total", {"backend": "b", "tool": "echo"}) == 1
    metrics.observe_request("tools/call", "ok", 0.002, "b")
    assert sample("mcp_gateway_requests_total", {**labels, "outcome": "ok"}) == 2
    assert sample("mcp_gateway_request_duration_seconds_sum", labels) == 0.004
