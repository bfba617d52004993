"""router.profiles: the budget figures a profile costs (issue 15, step 5)."""

from __future__ import annotations

import pytest

from gateway.catalog.naming import NamingRules
from gateway.catalog.pages import render_page
from gateway.catalog.profiles import SEARCH, Globs, Profile, ProfileViews
from gateway.catalog.snapshot import BackendListing, Kind, build_snapshot
from gateway.router.profile_setup import budget, list_bytes, report


@pytest.mark.parametrize("count", [0, 1, 2, 50])
def test_the_counted_tools_list_size_is_the_rendered_size(count: int) -> None:
    """Gateway choice: counted without rendering, and exactly what render_page gives."""
    snap = build_snapshot(
        [
            BackendListing(
                backend="b",
                prefix="b",
                tools=tuple({"name": f"t{i}", "description": "é" * i} for i in range(count)),
            )
        ],
        NamingRules(),
    )
    entries = snap.view(Kind.TOOLS)
    rendered = bytes(render_page("tools", [e.encoded for e in entries], None))
    assert list_bytes(entries) == len(rendered)


def test_budget_counts_served_items_and_the_listed_tools_bytes_per_mode() -> None:
    """Issue 15: items per kind; tools/list bytes and tokens at 4 bytes a token."""
    snap = build_snapshot(
        [
            BackendListing(
                backend="b",
                prefix="b",
                tools=tuple({"name": f"t{i}", "description": "x" * 300} for i in range(20)),
                prompts=({"name": "p"},),
            )
        ],
        NamingRules(),
    )
    views = ProfileViews(
        [
            Profile("few", tools=Globs(include=("b__t1",))),
            Profile("find", mode=SEARCH),
        ]
    )
    full = budget(views, "default", snap)
    few = budget(views, "few", snap)
    find = budget(views, "find", snap)
    assert full.items[Kind.TOOLS] == 20 and few.items[Kind.TOOLS] == 1
    assert find.items[Kind.TOOLS] == 20  # served, though only two are listed
    assert few.tools_list_bytes < find.tools_list_bytes < full.tools_list_bytes
    assert full.tools_list_tokens == -(-full.tools_list_bytes // 4)
    lines = report([full, few]).splitlines()
    assert lines[1].split()[:3] == ["default", "20", "1"]
    assert lines[-1] == "(~tokens: bytes / 4, an estimate)"
