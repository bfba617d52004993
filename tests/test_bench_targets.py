"""Which call figures ``make bench`` judges, as issue 17 sets its targets.

The table prints every figure; a verdict on the wrong one (a proxy's rate
against a 20 µs pipelined backend, or the cross-check engine's CPU) would
bury the targets that matter under misses that mean nothing, and dropping
one would hide a miss. No timing is measured here.
"""

from __future__ import annotations

from benchmarks import lean
from benchmarks.run import DEFAULT_ENGINE, _call_rows, call_targets


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
