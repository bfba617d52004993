"""The instruction totals the valgrind benchmarks read (no valgrind run here)."""

from __future__ import annotations

import pytest

from benchmarks.common import cachegrind_total


def test_the_total_is_read_from_cachegrinds_stderr() -> None:
    stderr = (
        "==12== Cachegrind, a cache and branch-prediction profiler\n"
        "==12==\n"
        "==12== I   refs:      3,142,022,249\n"
    )
    assert cachegrind_total(stderr) == 3_142_022_249


def test_the_total_is_read_from_the_out_files_summary_line() -> None:
    out = "cmd: python -m gateway serve\nevents: Ir\nfl=x.c\n10 4\nsummary: 3214564923\n"
    assert cachegrind_total(out) == 3_214_564_923


def test_output_without_a_total_is_refused() -> None:
    with pytest.raises(ValueError, match="no instruction count"):
        cachegrind_total("==12== valgrind: failed to start tool\n")
