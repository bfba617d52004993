"""Loaded by a gateway the task-steps benchmark starts (``PYTHONPATH``): counts trio's work.

An instrument is added to every ``trio.run`` of the process when
``GATEWAY_BENCH_STEPS`` names a file: each task step and each pass through
the I/O wait (one per scheduler batch) is counted, and the counts are
written to that file every ``FLUSH_EVERY`` steps, so the benchmark reads
them between load windows without talking to the gateway. Nothing here is
imported by the gateway itself.
"""

from __future__ import annotations

import os
import sys
from typing import Any

FLUSH_EVERY = 128

_target = os.environ.get("GATEWAY_BENCH_STEPS")
if _target:
    import trio

    class _Counter(trio.abc.Instrument):
        def __init__(self, path: str) -> None:
            self.path = path
            self.steps = 0
            self.batches = 0

        def before_task_step(self, task: trio.lowlevel.Task) -> None:
            self.steps += 1
            if self.steps % FLUSH_EVERY == 0:
                # Whole or not at all: the benchmark may read it at any moment.
                partial = f"{self.path}.part"
                with open(partial, "w", encoding="ascii") as out:
                    out.write(f"{self.steps} {self.batches}\n")
                os.replace(partial, self.path)

        def before_io_wait(self, timeout: float) -> None:
            self.batches += 1

    _run = trio.run

    def _counted_run(*args: Any, **kwargs: Any) -> Any:
        instruments = [*kwargs.pop("instruments", ()), _Counter(_target)]
        return _run(*args, instruments=instruments, **kwargs)

    trio.run = _counted_run

# Python and builtin function calls, counted by cProfile when
# ``GATEWAY_BENCH_PROFILE`` names a file: each SIGUSR1 writes the profile so
# far there (pstats' format), so the benchmark takes the difference of two
# dumps around a load window: calls per tool call, which no machine's speed
# bends (the instructions a call retires, where the kernel exposes no
# counters to measure them).
# Only the gateway (``-m gateway serve``) is profiled, not its backends.
_profile_target = os.environ.get("GATEWAY_BENCH_PROFILE")
if _profile_target and "serve" in sys.argv:
    import cProfile
    import signal

    _profiler = cProfile.Profile()

    def _dump(signum: int, frame: Any) -> None:
        _profiler.disable()
        partial = f"{_profile_target}.part"
        _profiler.dump_stats(partial)
        os.replace(partial, _profile_target)
        _profiler.enable()

    signal.signal(signal.SIGUSR1, _dump)
    _profiler.enable()
