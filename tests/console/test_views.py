"""Sessions as the console names them: short ids, and a short id finds exactly one."""

from __future__ import annotations

from gateway.console.page_data import SHORT_ID, find_session, session_rows, short_id
from gateway.frontend.clients import ClientRegistry


async def test_rows_are_short_and_find_needs_the_exact_prefix() -> None:
    registry = ClientRegistry()
    one = registry.open("2025-11-25", {"name": "host-a"}, {}, principal="ci")
    two = registry.open("2025-06-18", {"name": "host-b"}, {})
    hidden = registry.open("2025-11-25", {}, {})  # never initialized: not listed
    one.initialized = two.initialized = True
    one.calls = 3
    rows = session_rows(registry, now=one.opened_at + 10)
    assert {r.short_id for r in rows} == {short_id(one.session_id), short_id(two.session_id)}
    assert all(len(r.short_id) == SHORT_ID == 8 for r in rows)
    first = next(r for r in rows if r.short_id == short_id(one.session_id))
    assert (first.principal, first.client, first.calls, first.age_seconds) == (
        "ci",
        "host-a",
        3,
        10,
    )
    assert next(r for r in rows if r is not first).principal == "anonymous"
    assert find_session(registry, short_id(one.session_id)) == [one]
    assert find_session(registry, one.session_id[:7]) == []  # not a short id
    assert find_session(registry, one.session_id) == []  # nor a full one
    registry.close(one)
    assert find_session(registry, short_id(one.session_id)) == []
    assert hidden.session_id[:8] not in {r.short_id for r in session_rows(registry, 0.0)}
