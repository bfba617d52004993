"""The response cache's metric families, read from the cache's own counters at scrape time."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from gateway.config.schema_cache import CacheConfig
from gateway.console.page_data import cache_rows
from gateway.console.render import Renderer
from gateway.router.response_cache import cache_for
from gateway.telemetry.metrics import Metrics


def test_hits_misses_evictions_and_bytes_are_exported_per_backend() -> None:
    """Gateway choice: mcp_gateway_cache_* by backend, no bookkeeping on the request path."""
    cache = cache_for(CacheConfig(max_bytes=24), [], [], clock=lambda: 0.0)
    assert cache is not None
    metrics = Metrics(CollectorRegistry())
    metrics.watch_cache(cache.samples)
    responses = cache.responses
    for uri in "abcdefghi":  # nine answers of 3 bytes in 24: one evicted
        params = {"uri": uri}
        assert responses.lookup("m", "resources/read", params, "", now=0) is None
        responses.store(
            "m",
            "resources/read",
            params,
            principal="",
            ttl=5,
            scope="public",
            value=b"012",
            now=0,
        )
    assert responses.lookup("m", "resources/read", {"uri": "i"}, "", now=1) == b"012"
    get = metrics.registry.get_sample_value
    assert get("mcp_gateway_cache_requests_total", {"backend": "m", "result": "hit"}) == 1
    assert get("mcp_gateway_cache_requests_total", {"backend": "m", "result": "miss"}) == 9
    assert get("mcp_gateway_cache_evictions_total", {"backend": "m"}) == 1
    assert get("mcp_gateway_cache_bytes", {"backend": "m"}) == 24


def test_an_off_cache_exports_no_series() -> None:
    """Gateway choice: no cache, no cache series (and nothing counted)."""
    assert cache_for(None, [], []) is None
    assert cache_for(CacheConfig(max_bytes=0), [], []) is None
    metrics = Metrics(CollectorRegistry())
    metrics.watch_cache(tuple)
    assert metrics.registry.get_sample_value("mcp_gateway_cache_bytes", {"backend": "m"}) is None


def test_the_console_overview_shows_the_hit_ratio_per_backend() -> None:
    """Gateway choice: the operator sees each backend's hit ratio; no table while off."""
    cache = cache_for(CacheConfig(), [], [], clock=lambda: 0.0)
    assert cache is not None
    responses = cache.responses
    responses.store(
        "m", "resources/read", {}, principal="", ttl=5, scope="public", value=b"x", now=0
    )
    for _ in range(3):
        responses.lookup("m", "resources/read", {}, "", now=1)
    responses.lookup("m", "resources/read", {"uri": "other"}, "", now=1)
    rows = cache_rows(cache)
    assert rows is not None
    assert [(r.backend, r.hit_ratio, r.hits, r.misses) for r in rows] == [("m", 0.75, 3, 1)]
    common = {"base": "/admin", "csrf": "", "active": "overview", "nav": True}
    page = (
        Renderer()
        .page(
            "overview.html",
            **common,
            backends=[],
            groups=[],
            sessions=0,
            can_reload=False,
            consent_column=False,
            consents=None,
            cache=rows,
        )
        .decode()
    )
    assert "Response cache" in page and "75" in page
    off = (
        Renderer()
        .page(
            "overview.html",
            **common,
            backends=[],
            groups=[],
            sessions=0,
            can_reload=False,
            consent_column=False,
            consents=None,
            cache=None,
        )
        .decode()
    )
    assert "Response cache" not in off
