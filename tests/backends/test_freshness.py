"""gateway.backends.stateless.freshness: a modern backend's ttl honoured, in virtual time."""

from __future__ import annotations

import random

import trio
from trio.testing import MockClock

from gateway.backends.stateless.freshness import (
    JITTER,
    MIN_INTERVAL,
    deadlines,
    pushed,
    relist_when_stale,
)
from gateway.catalog.snapshot import Kind
from gateway.protocol.stateless.cache_hints import CacheHint


def test_announced_lists_are_those_the_backend_declares_list_changed_for() -> None:
    """Rule 1: resources cover templates and skills; anything but ``true`` announces nothing."""
    caps = {"tools": {"listChanged": True}, "resources": {"listChanged": True}, "prompts": {}}
    assert pushed(caps) == {Kind.TOOLS, Kind.RESOURCES, Kind.TEMPLATES, Kind.SKILLS}
    assert pushed({"tools": {"listChanged": "yes"}}) == frozenset()


def test_only_unannounced_lists_with_a_positive_ttl_get_a_deadline() -> None:
    """Rules 1-4: announced and ttl 0 lists none; others at ttl plus up to 10 %."""
    listed = {Kind.TOOLS: 100.0, Kind.PROMPTS: 100.0, Kind.RESOURCES: 100.0, Kind.TEMPLATES: 50.0}
    hints = {
        Kind.TOOLS: CacheHint(ttl_ms=60_000),
        Kind.PROMPTS: CacheHint(ttl_ms=60_000),
        Kind.RESOURCES: CacheHint(ttl_ms=0),
        Kind.TEMPLATES: CacheHint(ttl_ms=10),  # 10 ms: the floor applies
    }
    due = deadlines(listed, hints, frozenset({Kind.PROMPTS}), random.Random(1))
    assert set(due) == {Kind.TOOLS, Kind.TEMPLATES}
    assert 160.0 <= due[Kind.TOOLS] <= 160.0 + 60 * JITTER
    assert due[Kind.TEMPLATES] == 50.0 + MIN_INTERVAL


async def test_a_stale_list_is_relisted_once_its_ttl_has_run_out(autojump_clock: MockClock) -> None:
    """Rule 2: not before the ttl; then once per walk, the deadline moving with it."""
    listed_at = {Kind.TOOLS: trio.current_time()}
    hints = {Kind.TOOLS: CacheHint(ttl_ms=30_000)}
    relisted = [trio.Event()]
    marks: list[tuple[float, tuple[Kind, ...]]] = []

    def mark(kinds: tuple[Kind, ...]) -> None:
        marks.append((trio.current_time(), kinds))
        # What the supervisor's refresher does: walk, record the time, signal.
        listed_at[Kind.TOOLS] = trio.current_time()
        done, relisted[0] = relisted[0], trio.Event()
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            relist_when_stale, {}, listed_at, hints, lambda: relisted[0], mark, random.Random(3)
        )
        await trio.sleep(100)
        nursery.cancel_scope.cancel()
    times = [t for t, _ in marks]
    assert [k for _, k in marks] == [(Kind.TOOLS,)] * len(marks)
    assert len(marks) == 3  # at ~30, ~60, ~90 s (plus jitter), never sooner
    gaps = [b - a for a, b in zip([0.0, *times], times, strict=False)]
    assert all(30.0 <= gap <= 30.0 * (1 + JITTER) for gap in gaps), gaps


async def test_nothing_is_polled_for_announced_lists_or_lists_without_a_promise(
    autojump_clock: MockClock,
) -> None:
    """Rules 1 and 3: a pushed list and a ttl-0 list are never re-listed by the clock."""
    listed_at = {Kind.TOOLS: 0.0, Kind.PROMPTS: 0.0}
    hints = {Kind.TOOLS: CacheHint(ttl_ms=1_000), Kind.PROMPTS: CacheHint(ttl_ms=0)}
    marks: list[tuple[Kind, ...]] = []
    never = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            relist_when_stale,
            {"tools": {"listChanged": True}},
            listed_at,
            hints,
            lambda: never,
            marks.append,
        )
        await trio.sleep(3600)
        nursery.cancel_scope.cancel()
    assert marks == []
