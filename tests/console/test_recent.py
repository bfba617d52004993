"""The recent-errors ring: bounded, newest first, filterable."""

from __future__ import annotations

from gateway.console.recent import CAPACITY, MESSAGE_CHARS, FailedRequest, RecentErrors, cut


def failure(
    n: int, backend: str = "notes", message: str = "boom", code: int = -32603
) -> FailedRequest:
    return FailedRequest(
        at=float(n),
        method="tools/call",
        item=f"notes__tool{n}",
        backend=backend,
        outcome="error",
        code=code,
        message=message,
        duration_ms=1.0,
    )


def test_bounded_to_capacity_oldest_dropped() -> None:
    ring = RecentErrors()
    for n in range(CAPACITY + 20):
        ring.add(failure(n))
    assert len(ring) == CAPACITY == 500
    assert ring.total == CAPACITY + 20
    newest = ring.newest()
    assert newest[0].at == CAPACITY + 19
    assert newest[-1].at == 20


def test_filters_by_text_and_backend() -> None:
    ring = RecentErrors()
    ring.add(failure(1, "notes", "Backend unavailable"))
    ring.add(failure(2, "toolbox", "Unknown tool: x", code=-32602))
    ring.add(failure(3, "toolbox", "timed out"))
    assert [f.at for f in ring.newest("unknown")] == [2.0]
    assert [f.at for f in ring.newest(backend="toolbox")] == [3.0, 2.0]
    assert [f.at for f in ring.newest("-32602")] == [2.0]
    assert [f.at for f in ring.newest("TOOL2")] == [2.0]  # item, case-insensitive
    assert ring.newest("nothing like it") == []
    assert len(ring.newest(limit=2)) == 2


def test_messages_are_cut() -> None:
    long = "x" * 1000
    assert len(cut(long)) == MESSAGE_CHARS
    assert cut("short") == "short"
