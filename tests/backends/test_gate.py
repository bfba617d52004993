"""Specification tests for ``gateway.backends.gate.Gate``: admission, queue and drain.

Every call here is a task that holds its admission until the test releases
it, so which call is in, waiting or refused is decided by explicit
handshakes, never by timing (robustness B18).
"""

from __future__ import annotations

import pytest
import trio
from trio.testing import MockClock, wait_all_tasks_blocked

from gateway.backends.gate import Gate
from gateway.errors import BackendUnavailable


async def hold(gate: Gate, release: trio.Event, admitted: list[int], number: int) -> None:
    """One call: admitted, then held until ``release``."""
    async with gate.admit():
        admitted.append(number)
        await release.wait()


async def test_a_gate_without_limit_admits_every_call_and_counts_them(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice: max_in_flight 0 means no limit; in_flight still counts (a metric)."""
    gate = Gate("alpha", max_in_flight=0, max_pending=0)
    release, admitted = trio.Event(), list[int]()
    async with trio.open_nursery() as nursery:
        for number in range(50):
            nursery.start_soon(hold, gate, release, admitted, number)
        await wait_all_tasks_blocked()
        assert len(admitted) == 50
        assert gate.in_flight == 50
        release.set()
    assert gate.in_flight == 0


async def test_past_max_in_flight_calls_wait_and_past_max_pending_they_are_refused_at_once(
    autojump_clock: MockClock,
) -> None:
    """Robustness B18: 2 in flight, 1 waiting, the 4th refused as overloaded, no time passing."""
    gate = Gate("alpha", max_in_flight=2, max_pending=1)
    release, admitted = trio.Event(), list[int]()
    async with trio.open_nursery() as nursery:
        for number in range(3):
            nursery.start_soon(hold, gate, release, admitted, number)
        await wait_all_tasks_blocked()
        assert len(admitted) == 2  # trio starts tasks in no fixed order
        assert gate.in_flight == 2
        with pytest.raises(BackendUnavailable) as refused:
            async with gate.admit():
                pytest.fail("admitted past max_pending")
        assert refused.value.kind == "overloaded"
        assert refused.value.backend == "alpha"
        assert trio.current_time() == 0.0
        release.set()
    assert sorted(admitted) == [0, 1, 2]
    assert gate.in_flight == 0


async def test_a_gate_that_stopped_accepting_refuses_new_calls_and_lets_the_others_finish(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice (reload): removal refuses new calls; ``drained`` waits for the rest."""
    gate = Gate("alpha", max_in_flight=0, max_pending=0)
    release, admitted = trio.Event(), list[int]()
    drained_at: list[float] = []

    async def drain() -> None:
        await gate.drained()
        drained_at.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold, gate, release, admitted, 1)
        await wait_all_tasks_blocked()
        gate.accepting = False
        with pytest.raises(BackendUnavailable, match="being removed"):
            async with gate.admit():
                pytest.fail("admitted after removal")
        nursery.start_soon(drain)
        await trio.sleep(5)
        assert drained_at == []
        release.set()
    assert drained_at == [5.0]


async def test_drained_returns_at_once_when_nothing_is_in_flight() -> None:
    """Gateway choice: an idle backend is drained already."""
    gate = Gate("alpha", max_in_flight=1, max_pending=0)
    with trio.move_on_after(1) as scope:
        await gate.drained()
    assert not scope.cancelled_caught
