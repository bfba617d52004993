"""Specification tests for ``gateway.backends.supervision.backoff.Backoff`` (sans-IO).

Gateway choice: exponential backoff with full jitter between restarts of a
failed backend, so backends that failed together do not return in lockstep.
"""

from __future__ import annotations

import math
import random
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.backends.supervision.backoff import Backoff


def test_defaults_are_half_a_second_doubling_to_a_minute() -> None:
    """Gateway choice: the defaults match config's RestartPolicy defaults."""
    assert Backoff() == Backoff(initial=0.5, maximum=60.0, multiplier=2.0)


def test_ceiling_doubles_per_attempt_and_caps_at_the_maximum() -> None:
    """Gateway choice: attempt n (0-based) may wait up to initial * multiplier**n, capped."""
    backoff = Backoff(initial=0.5, maximum=60.0, multiplier=2.0)
    assert [backoff.ceiling(n) for n in range(10)] == [
        0.5,
        1.0,
        2.0,
        4.0,
        8.0,
        16.0,
        32.0,
        60.0,
        60.0,
        60.0,
    ]


def test_ceiling_follows_a_custom_multiplier() -> None:
    """Gateway choice: the growth factor comes from restart.multiplier."""
    backoff = Backoff(initial=1.0, maximum=100.0, multiplier=3.0)
    assert [backoff.ceiling(n) for n in range(6)] == [1.0, 3.0, 9.0, 27.0, 81.0, 100.0]


def test_multiplier_of_one_is_a_constant_ceiling() -> None:
    """Gateway choice: multiplier 1 (allowed by config) means no growth."""
    backoff = Backoff(initial=2.0, maximum=60.0, multiplier=1.0)
    assert {backoff.ceiling(n) for n in (0, 1, 10, 10**9)} == {2.0}


@pytest.mark.parametrize("attempt", [65, 1_000, 10**6, sys.maxsize, 10**100])
def test_huge_attempt_numbers_do_not_overflow(attempt: int) -> None:
    """Gateway choice: a backend failing for days still gets the capped delay."""
    backoff = Backoff()
    assert backoff.ceiling(attempt) == 60.0
    assert 0.0 <= backoff.delay(attempt, random.Random(1)) <= 60.0


@pytest.mark.parametrize("multiplier", [1e3, 1e6, 1e100])
def test_large_multipliers_that_config_accepts_do_not_overflow(multiplier: float) -> None:
    """Gateway choice: config accepts any multiplier >= 1; the ceiling still caps."""
    backoff = Backoff(initial=0.5, maximum=60.0, multiplier=multiplier)
    assert backoff.ceiling(10**6) == 60.0
    assert backoff.ceiling(1) == 60.0


def test_delay_is_within_zero_and_the_ceiling_with_a_seeded_random() -> None:
    """Gateway choice: full jitter draws uniformly from [0, ceiling]."""
    rng = random.Random(1234)
    backoff = Backoff()
    for attempt in range(50):
        delay = backoff.delay(attempt, rng)
        assert 0.0 <= delay <= backoff.ceiling(attempt)


def test_delay_is_the_draw_times_the_ceiling() -> None:
    """Gateway choice: delay = rng.random() * ceiling, reproducible under a seed."""
    backoff = Backoff()
    expected = random.Random(7).random() * backoff.ceiling(3)
    assert backoff.delay(3, random.Random(7)) == expected


def test_same_seed_gives_the_same_delays() -> None:
    """Gateway choice: tests can pin the jitter by passing a seeded Random."""
    backoff = Backoff()
    first = [backoff.delay(n, random.Random(42)) for n in range(10)]
    second = [backoff.delay(n, random.Random(42)) for n in range(10)]
    assert first == second


def test_delays_are_jittered_not_identical() -> None:
    """Gateway choice: backends failing together spread their restarts."""
    rng = random.Random(99)
    delays = {Backoff().delay(5, rng) for _ in range(20)}
    assert len(delays) > 1


def test_delay_without_an_rng_uses_the_module_random() -> None:
    """Gateway choice: production passes no rng."""
    delay = Backoff().delay(2)
    assert 0.0 <= delay <= 2.0


@settings(max_examples=300, deadline=None)
@given(
    initial=st.floats(min_value=1e-3, max_value=10.0),
    extra=st.floats(min_value=0.0, max_value=3600.0),
    multiplier=st.floats(min_value=1.0, max_value=10.0),
    attempt=st.integers(min_value=0, max_value=10**12),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_delay_is_always_finite_and_bounded(
    initial: float, extra: float, multiplier: float, attempt: int, seed: int
) -> None:
    """Gateway choice: for any policy and attempt, 0 <= delay <= ceiling <= maximum."""
    backoff = Backoff(initial=initial, maximum=initial + extra, multiplier=multiplier)
    ceiling = backoff.ceiling(attempt)
    assert initial <= ceiling <= backoff.maximum
    delay = backoff.delay(attempt, random.Random(seed))
    assert math.isfinite(delay)
    assert 0.0 <= delay <= ceiling


@given(
    multiplier=st.floats(min_value=1.0, max_value=10.0),
    attempt=st.integers(min_value=0, max_value=200),
)
def test_ceiling_never_decreases_as_attempts_grow(multiplier: float, attempt: int) -> None:
    """Gateway choice: consecutive failures never shorten the wait."""
    backoff = Backoff(initial=0.5, maximum=60.0, multiplier=multiplier)
    assert backoff.ceiling(attempt) <= backoff.ceiling(attempt + 1)
