"""The last stderr lines a stdio backend's exit is explained with (issue 24 item 9)."""

from __future__ import annotations

from gateway.transports.stdio import STDERR_TAIL_LINE_LIMIT, STDERR_TAIL_LINES, StderrTail


def tail_of(*lines: str) -> StderrTail:
    """A tail that has seen these lines."""
    tail = StderrTail()
    for line in lines:
        tail.add(line)
    return tail


def test_a_child_that_wrote_nothing_adds_nothing_to_its_exit() -> None:
    """Gateway choice: "process exited with code 1" stays as it is."""
    assert tail_of().explain() == ""


def test_the_last_line_comes_first_then_the_ones_before_it_bounded() -> None:
    """Gateway choice: a traceback's last line is the error; only the last few are kept."""
    lines = [f"line {n}" for n in range(10)]
    tail = tail_of(*lines)
    assert len(tail.lines) == STDERR_TAIL_LINES
    assert tail.explain() == ": line 9; before it: line 7 | line 8"


def test_a_long_line_is_cut_to_keep_the_reason_one_readable_line() -> None:
    """Gateway choice: a child's stderr is not ours to print whole in a status row."""
    (kept,) = tail_of("x" * 10_000).lines
    assert len(kept) == STDERR_TAIL_LINE_LIMIT and kept.endswith("…")


def test_a_missing_module_of_an_extra_names_the_extra_that_installs_it() -> None:
    """Issue 24: a bare install's demo backend fails to import the SDK: say how to fix it."""
    said = tail_of("ModuleNotFoundError: No module named 'mcp'").explain()
    assert said == (
        ": ModuleNotFoundError: No module named 'mcp' "
        "(install the demo extra: pip install 'trio-mcp-gateway[demo]')"
    )
    other = tail_of("ModuleNotFoundError: No module named 'numpy'").explain()
    assert other == ": ModuleNotFoundError: No module named 'numpy'"
    submodule = tail_of("ModuleNotFoundError: No module named 'mcp.server'").explain()
    assert "install the demo extra" in submodule
