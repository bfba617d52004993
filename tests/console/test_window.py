"""The latency window: five minutes of calls per backend, with explicit timestamps."""

from __future__ import annotations

import math

import pytest

from gateway.console.activity import Activity
from gateway.console.window import BOUNDS, GROWTH, SLOT_SECONDS, SLOTS, LatencyWindow


def test_no_calls_no_figures() -> None:
    window = LatencyWindow()
    assert window.stats("notes", 100.0) is None
    window.record("notes", 0.01, False, 100.0)
    assert window.stats("toolbox", 100.0) is None


def test_percentiles_within_one_bin_above_the_truth() -> None:
    window = LatencyWindow()
    # 98 calls of 10 ms, 2 of 2 s: p50 is about 10 ms, p99 about 2 s.
    for _ in range(98):
        window.record("notes", 0.010, False, 1000.0)
    window.record("notes", 2.0, True, 1000.0)
    window.record("notes", 2.0, True, 1000.0)
    stats = window.stats("notes", 1000.0)
    assert stats is not None
    assert stats.calls == 100 and stats.errors == 2
    assert stats.error_rate == pytest.approx(0.02)
    assert 0.010 <= stats.p50 <= 0.010 * GROWTH
    assert 2.0 <= stats.p99 <= 2.0 * GROWTH


def test_old_calls_age_out_without_a_timer() -> None:
    window = LatencyWindow()
    window.record("notes", 0.5, True, 0.0)
    window.record("notes", 0.001, False, 200.0)
    later = window.stats("notes", 200.0)
    assert later is not None and later.calls == 2
    # Five minutes after the first call it is gone; the second stays.
    after = window.stats("notes", SLOTS * SLOT_SECONDS + 1.0)
    assert after is not None and after.calls == 1 and after.errors == 0
    assert after.p99 <= 0.001 * GROWTH
    assert window.stats("notes", 200.0 + SLOTS * SLOT_SECONDS + SLOT_SECONDS) is None


def test_a_reused_slot_forgets_its_old_epoch() -> None:
    window = LatencyWindow()
    window.record("notes", 1.0, True, 5.0)
    # Exactly one ring later the same slot index is reused: the old call must not count.
    reuse = 5.0 + SLOTS * SLOT_SECONDS
    window.record("notes", 0.002, False, reuse)
    stats = window.stats("notes", reuse)
    assert stats is not None and (stats.calls, stats.errors) == (1, 0)


def test_beyond_the_largest_bound_is_infinite() -> None:
    window = LatencyWindow()
    window.record("slow", BOUNDS[-1] * 2, False, 1.0)
    stats = window.stats("slow", 1.0)
    assert stats is not None and math.isinf(stats.p50)


def test_forget_drops_a_backend() -> None:
    window = LatencyWindow()
    window.record("gone", 0.1, False, 1.0)
    window.forget("gone")
    assert window.stats("gone", 1.0) is None


def test_activity_feeds_window_and_errors() -> None:
    now = [50.0]
    activity = Activity(clock=lambda: now[0], wall=lambda: 1_700_000_000.0)
    activity.observe("tools/call", "toolbox__echo", "toolbox", "ok", 0.004, None, "")
    activity.observe("tools/call", "toolbox__nope", "", "error", 0.001, -32602, "unknown tool")
    activity.observe("tools/call", "toolbox__echo", "toolbox", "timeout", 60.0, -32001, "timed out")
    stats = activity.window.stats("toolbox", 50.0)
    # The failure that reached no backend is not a backend's latency.
    assert stats is not None and (stats.calls, stats.errors) == (2, 1)
    failures = activity.errors.newest()
    assert [f.outcome for f in failures] == ["timeout", "error"]
    assert failures[1].code == -32602 and failures[1].backend == ""
    assert failures[0].at == 1_700_000_000.0 and failures[0].duration_ms == 60000.0
