"""``gateway.catalog.search`` with a profile's overrides (rule 5, issue 15 follow-up).

A profile that renames or redescribes a tool is searched by the text it
shows: found by the override's words, not by the replaced ones, while other
profiles still search the catalog's text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gateway.catalog.naming import NamingRules
from gateway.catalog.profiles import SEARCH, Override, Profile, restrict
from gateway.catalog.search import (
    SearchHit,
    ToolIndex,
    index_snapshot,
    overridden_entries,
    sync_overrides,
)
from gateway.catalog.snapshot import BackendListing, Kind, Snapshot, build_snapshot

RULES = NamingRules()


def tool(name: str, description: str) -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": {"type": "object"}}


FILES = BackendListing(
    "files",
    "files",
    tools=(
        tool("read_text_file", "Read the complete contents of a file as text."),
        tool("move_file", "Move or rename files and directories."),
    ),
)
NOTES = BackendListing(
    "notes",
    "notes",
    tools=(
        tool("add_note", "Store a new note."),
        tool("delete_note", "Delete one note for good."),
    ),
)
PROFILE = Profile(
    "desk",
    mode=SEARCH,
    overrides={
        Kind.TOOLS: {
            # redescribed only
            "notes__add_note": Override(description="Jot down a reminder for later."),
            # renamed and redescribed
            "files__move_file": Override("relocate", "Relocate a document to another folder."),
        }
    },
)


@pytest.fixture(name="shared")
def _shared() -> Snapshot:
    return build_snapshot((FILES, NOTES), RULES)


@pytest.fixture(name="index")
def _index(shared: Snapshot) -> Iterator[ToolIndex]:
    index = index_snapshot(shared)
    yield index
    index.close()


class _Shown:
    """``within`` as search mode builds it: the view's tools it does not override."""

    def __init__(self, view: Snapshot) -> None:
        self._view = view

    def __contains__(self, name: object) -> bool:
        tools = self._view.view(Kind.TOOLS)
        return isinstance(name, str) and name in tools and name not in self._view.overridden_tools


def search(index: ToolIndex, view: Snapshot, query: str, scope: str = "desk") -> list[str]:
    hits: list[SearchHit] = index.search(query, 8, within=_Shown(view), scope=scope)
    return [hit.name for hit in hits]


def test_the_view_records_every_override_applied(shared: Snapshot) -> None:
    view = restrict(shared, PROFILE)
    assert view.overridden_tools == {
        "notes__add_note": "notes__add_note",
        "files__move_file": "relocate",
    }
    assert sorted((catalog, e.key) for catalog, e in overridden_entries(view)) == [
        ("files__move_file", "relocate"),
        ("notes__add_note", "notes__add_note"),
    ]


def test_an_override_is_found_by_its_words_and_not_by_the_replaced_ones(
    shared: Snapshot, index: ToolIndex
) -> None:
    view = restrict(shared, PROFILE)
    sync_overrides(index, "desk", view)
    assert search(index, view, "jot down a reminder")[:1] == ["notes__add_note"]
    # The name still says "note"; the replaced description's own words find nothing.
    assert search(index, view, "store something new") == []
    assert search(index, view, "relocate a document to a folder")[:1] == ["relocate"]
    assert search(index, view, "relocate")[:1] == ["relocate"]
    assert search(index, view, "move or rename") == []
    # "files" was the catalog name's prefix; the profile's name drops it.
    found = search(index, view, "files")
    assert "relocate" not in found and "files__move_file" not in found
    assert search(index, view, "complete contents")[:1] == ["files__read_text_file"]


def test_a_hit_on_an_override_carries_the_profiles_item(shared: Snapshot, index: ToolIndex) -> None:
    view = restrict(shared, PROFILE)
    sync_overrides(index, "desk", view)
    hits = index.search("jot down a reminder", 1, within=_Shown(view), scope="desk")
    assert hits[0].item["description"] == "Jot down a reminder for later."


def test_other_profiles_search_the_catalogs_text(shared: Snapshot, index: ToolIndex) -> None:
    view = restrict(shared, PROFILE)
    sync_overrides(index, "desk", view)
    # Another profile, and a search with no scope, never see desk's rows.
    assert "notes__add_note" not in [h.name for h in index.search("jot down a reminder")]
    assert "relocate" not in search(index, shared, "relocate a document", scope="other")
    assert [h.name for h in index.search("store something new", 1)] == ["notes__add_note"]
    assert len(index) == 6  # four catalog rows, two of desk's


def test_override_rows_follow_the_view_and_rewrite_only_what_changed(
    shared: Snapshot, index: ToolIndex
) -> None:
    view = restrict(shared, PROFILE)
    sync_overrides(index, "desk", view)
    before = index.overrides("desk")
    notes = BackendListing("notes", "notes", tools=(tool("add_note", "Store a new note."),))
    newer = restrict(build_snapshot((FILES, notes), RULES), PROFILE)
    sync_overrides(index, "desk", newer)
    assert index.overrides("desk") == before  # the same JSON: nothing rewritten
    without = restrict(build_snapshot((NOTES,), RULES), PROFILE)
    sync_overrides(index, "desk", without)
    assert set(index.overrides("desk")) == {"notes__add_note"}
    assert search(index, without, "relocate a document") == []
    sync_overrides(index, "desk", restrict(build_snapshot((), RULES), PROFILE))
    assert index.overrides("desk") == {}


def test_an_override_not_applied_leaves_the_catalogs_row_in_use(shared: Snapshot) -> None:
    """A rename onto a name the profile shows is refused (profiles rule 7): nothing changes."""
    taken = Profile(
        "desk",
        mode=SEARCH,
        overrides={Kind.TOOLS: {"notes__add_note": Override("notes__delete_note", "Jot down.")}},
    )
    view = restrict(shared, taken)
    assert view.overridden_tools == {}
    assert view.problems
    index = index_snapshot(shared)
    sync_overrides(index, "desk", view)
    assert index.overrides("desk") == {}
    assert search(index, view, "store something new") == ["notes__add_note"]
    assert search(index, view, "jot down") == []
    index.close()


def test_override_rows_updated_step_by_step_score_as_rows_written_afresh(shared: Snapshot) -> None:
    """Rule 2 holds for a profile's rows too: the same hits and scores either way."""
    stepped = index_snapshot(shared)
    for description in ("First words.", "Jot down a reminder for later.", "Second words."):
        redescribed = Profile(
            "desk",
            mode=SEARCH,
            overrides={Kind.TOOLS: {"notes__add_note": Override(description=description)}},
        )
        sync_overrides(stepped, "desk", restrict(shared, redescribed))
    sync_overrides(stepped, "desk", restrict(shared, PROFILE))
    fresh = index_snapshot(shared)
    sync_overrides(fresh, "desk", restrict(shared, PROFILE))
    view = restrict(shared, PROFILE)
    for query in ("jot down a reminder", "relocate a document", "note", "read the file"):
        a = stepped.search(query, 8, within=_Shown(view), scope="desk")
        b = fresh.search(query, 8, within=_Shown(view), scope="desk")
        assert [(h.name, round(h.score, 9)) for h in a] == [(h.name, round(h.score, 9)) for h in b]
        assert a  # every query matches something
    stepped.close()
    fresh.close()
