"""The collector policy (``gateway.cli.collector``): set by ``serve`` only, young trigger only."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any, cast

import pytest

from gateway.cli import collector, process


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    """The test process's own thresholds, restored afterwards whatever happens."""
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # CPython's defaults, whatever the runner set
    try:
        yield gc.get_threshold()
    finally:
        gc.set_threshold(*saved)


def test_tune_raises_the_young_trigger_and_keeps_the_older_ratios(
    thresholds: tuple[int, int, int],
) -> None:
    collector.tune()
    assert gc.get_threshold() == (collector.YOUNG_THRESHOLD, thresholds[1], thresholds[2])
    assert gc.isenabled()  # cycles are still collected


def test_the_serve_command_tunes_before_the_loop_starts(
    thresholds: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[int, int, int]] = []

    def fake_run(*_args: Any) -> None:
        seen.append(gc.get_threshold())

    monkeypatch.setattr("gateway.cli.process.trio.run", fake_run)
    process.run(cast(Any, None))
    assert seen == [(collector.YOUNG_THRESHOLD, 10, 10)]
