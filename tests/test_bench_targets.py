"""Which call figures ``make bench`` judges, as issue 17 sets its targets.

The table prints every figure; a verdict on the wrong one (a proxy's rate
against a 20 µs pipelined backend, or the cross-check engine's CPU) would
bury the targets that matter under misses that mean nothing, and dropping
one would hide a miss. No timing is measured here.
"""

from __future__ import annotations

from benchmarks import lean
from benchmarks.run import DEFAULT_ENGINE, _call_rows, call_targets
from benchmarks.single_caller import DIRECTS, GATEWAY, rows_of


def test_the_default_engine_is_the_one_the_gateway_ships_with() -> None:
    assert DEFAULT_ENGINE == "h11"


def test_gateway_cpu_is_judged_against_the_fast_backend_at_every_concurrency() -> None:
    for concurrency in (1, 8, 64):
        assert call_targets("bench", concurrency, default_engine=True) == {"cpu"}


def test_the_sdk_backend_rate_is_judged_everywhere_and_its_p50_at_c1_only() -> None:
    assert call_targets("sdk", 1, default_engine=True) == {"rate", "p50"}
    assert call_targets("sdk", 8, default_engine=True) == {"rate"}
    assert call_targets("sdk", 64, default_engine=True) == {"rate"}


def test_the_cross_check_engine_is_reported_without_verdicts() -> None:
    assert call_targets("bench", 1, default_engine=False) == frozenset()
    assert call_targets("sdk", 1, default_engine=False) == frozenset()


def _load(calls: int, seconds: float, latency_ms: float, cpu: float) -> lean.LoadResult:
    return lean.LoadResult(
        concurrency=8,
        calls=calls,
        seconds=seconds,
        errors=0,
        latencies=[latency_ms / 1e3] * calls,
        client_cpu_seconds=0.1,
        target_cpu_seconds=cpu,
    )


def test_rows_outside_the_targets_carry_no_verdict_but_keep_their_figures() -> None:
    rows: list[dict[str, object]] = []
    runs: list[dict[str, object]] = []
    gateway = _load(700, 1.0, 1.3, 0.25)
    direct = _load(1_000, 1.0, 1.0, 0.0)
    _call_rows("sdk c=8 [h11]", gateway, direct, 0.5, rows, runs, [], targets=frozenset({"rate"}))
    verdicts = {str(r["metric"]).rsplit(" ", 1)[-1]: r["verdict"] for r in rows}
    assert verdicts["calls/s"].startswith("MISS")
    assert verdicts["p50"] == verdicts["p99"] == verdicts["CPU/call"] == "-"
    assert all(r["gateway"] is not None for r in rows)


def _window(calls_per_s: float) -> dict[str, object]:
    return {"calls_per_s": calls_per_s, "target_cpu_us_per_call": 400.0}


def test_the_single_caller_is_judged_against_the_issues_baseline_at_c1_only() -> None:
    """Issue 31 names the SDK server over Streamable HTTP; the other baselines are printed."""
    windows = {
        GATEWAY: [_window(400), _window(300), _window(500)],
        "http-sse": [_window(500), _window(200), _window(400)],
        "http-json": [_window(800)] * 3,
        "stdio": [_window(1_000)] * 3,
    }
    rows = rows_of(1, windows)
    by_baseline = dict(zip(DIRECTS, rows, strict=False))
    # The median of the rounds' own ratios (0.8, 1.5, 1.25), not the medians' ratio (1.0).
    assert by_baseline["http-sse"]["ratio"] == 1.25
    assert by_baseline["http-sse"]["verdict"].startswith("PASS")
    assert by_baseline["http-json"]["verdict"] == by_baseline["stdio"]["verdict"] == "-"
    assert all(row["verdict"] == "-" for row in rows_of(8, windows))
    windows["http-sse"] = [_window(600)] * 3
    assert rows_of(1, windows)[0]["verdict"].startswith("MISS")
