"""Specification tests for ``gateway.catalog.search`` (the BM25 tool index).

Properties (STYLE rule 10): no request raises, and an index brought up to
date backend by backend answers every request exactly as one built afresh.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.catalog.naming import NamingRules
from gateway.catalog.search import (
    MAX_LIMIT,
    FieldWeights,
    SearchHit,
    ToolIndex,
    clamp_limit,
    diff_backends,
    index_snapshot,
    sync_index,
    tools_by_backend,
)
from gateway.catalog.snapshot import EMPTY_SNAPSHOT, BackendListing, Snapshot, build_snapshot

RULES = NamingRules()


def tool(name: str, description: str = "", **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": {"type": "object"}, **extra}


FILES = BackendListing(
    "files",
    "files",
    tools=(
        tool("read_text_file", "Read the complete contents of a file as text."),
        tool("list_directory", "Get a detailed listing of all files and directories."),
        tool("move_file", "Move or rename files and directories."),
    ),
)
NOTES = BackendListing(
    "notes",
    "notes",
    tools=(
        tool("add_note", "Store a new note.", title="Add note"),
        tool("delete_note", "Delete one note for good."),
    ),
)


def snapshot(*listings: BackendListing) -> Snapshot:
    return build_snapshot(listings, RULES)


@pytest.fixture(name="index")
def _index() -> Iterator[ToolIndex]:
    index = index_snapshot(snapshot(FILES, NOTES))
    yield index
    index.close()


def names(hits: list[SearchHit]) -> list[str]:
    return [hit.name for hit in hits]


# --- ranking ----------------------------------------------------------------


def test_a_request_finds_the_tool_whose_name_says_it() -> None:
    """Gateway choice: BM25 over the split name, title, description and parameters."""
    index = index_snapshot(snapshot(FILES, NOTES))
    assert names(index.search("delete a note", 1)) == ["notes__delete_note"]
    assert names(index.search("readTextFile", 1)) == ["files__read_text_file"]


def test_stemming_matches_plural_and_gerund_forms() -> None:
    """Gateway choice: porter stemming, so "files" finds "file" and "listing" finds "list"."""
    index = index_snapshot(
        snapshot(
            BackendListing(
                "b", "b", tools=(tool("list_directory", "Show a directory."), tool("other"))
            ),
            BackendListing("c", "c", tools=(tool("get_file", "Return a file."),)),
        ),
        synonyms={},
    )
    assert names(index.search("listing")) == ["b__list_directory"]
    assert names(index.search("files")) == ["c__get_file"]


def test_a_match_in_the_name_outweighs_one_in_the_description() -> None:
    """Gateway choice: field weights; the same word counts more where it names the tool."""
    listing = BackendListing(
        "b",
        "b",
        tools=(
            tool("archive", "Compress a folder for a later upload."),
            tool("upload", "Send an archive somewhere."),
        ),
    )
    weighted = index_snapshot(snapshot(listing), synonyms={})
    assert names(weighted.search("upload")) == ["b__upload", "b__archive"]
    flipped = index_snapshot(
        snapshot(listing), weights=FieldWeights(name=0.1, description=10.0), synonyms={}
    )
    assert names(flipped.search("upload")) == ["b__archive", "b__upload"]


def test_parameter_names_and_descriptions_are_searchable() -> None:
    """Gateway choice: a tool may be found by what it takes, nested properties included."""
    schema = {
        "type": "object",
        "properties": {
            "edits": {
                "type": "array",
                "items": {"properties": {"oldText": {"description": "exact line to replace"}}},
            }
        },
    }
    listing = BackendListing("b", "b", tools=({"name": "edit", "inputSchema": schema}, tool("x")))
    assert names(index_snapshot(snapshot(listing)).search("replace a line")) == ["b__edit"]


def test_the_backend_prefix_is_searchable() -> None:
    """Gateway choice: "notes" finds the notes server's tools even where they say "note"."""
    listing = BackendListing("notes", "memo", tools=(tool("add", "Store it."),))
    other = BackendListing("other", "other", tools=(tool("add", "Store it."),))
    assert names(index_snapshot(snapshot(listing, other)).search("memo add", 1)) == ["memo__add"]


def test_hits_carry_the_public_item_and_a_positive_score(index: ToolIndex) -> None:
    """Gateway choice: a hit is the tool as tools/list shows it, ready for search_tools."""
    (hit,) = index.search("add note", 1)
    assert hit.item == {
        "name": "notes__add_note",
        "description": "Store a new note.",
        "inputSchema": {"type": "object"},
        "title": "Add note",
    }
    assert hit.score > 0


def test_equal_scores_are_ordered_by_public_name() -> None:
    """Gateway choice: ties do not depend on the order tools were indexed in."""
    same = tuple(tool(name, "Do the thing.") for name in ("zeta", "alpha", "mid"))
    index = index_snapshot(snapshot(BackendListing("b", "b", tools=same)))
    assert names(index.search("thing")) == ["b__alpha", "b__mid", "b__zeta"]


def test_ties_past_the_cut_are_ordered_by_public_name_too() -> None:
    """Gateway choice: with more tied tools than fit, the first names win, not the first rows."""
    tied = tuple(tool(f"t{i:02d}", "Do the thing.") for i in range(20))
    late, early = BackendListing("z", "z", tools=tied), BackendListing("a", "a", tools=tied)
    index = ToolIndex()
    # z's rows are written first, so row order and name order disagree.
    sync_index(index, EMPTY_SNAPSHOT, snapshot(late))
    sync_index(index, snapshot(late), snapshot(late, early))
    assert names(index.search("thing", 3)) == ["a__t00", "a__t01", "a__t02"]
    odd = {f"a__t{i:02d}" for i in range(1, 20, 2)}
    assert names(index.search("thing", 2, within=odd)) == ["a__t01", "a__t03"]


# --- limits, empty and hostile requests ---------------------------------------


@pytest.mark.parametrize("query", ["", "   ", "\t\n", "!!!", "()", '""'])
def test_a_request_without_words_finds_nothing(index: ToolIndex, query: str) -> None:
    """Gateway choice: an empty request is an empty answer, never an error."""
    assert index.search(query) == []


def test_a_request_nothing_matches_finds_nothing(index: ToolIndex) -> None:
    """Gateway choice: no fallback to "everything"."""
    assert index.search("kubernetes") == []


def test_an_empty_index_finds_nothing() -> None:
    """Gateway choice: searching before any backend is up is not an error."""
    assert ToolIndex().search("anything") == []


@pytest.mark.parametrize(("asked", "used"), [(-5, 1), (0, 1), (1, 1), (50, 50), (10**9, MAX_LIMIT)])
def test_limit_is_forced_into_one_to_fifty(asked: int, used: int) -> None:
    """Gateway choice: a request never asks for everything (search_tools' schema says 1..50)."""
    assert clamp_limit(asked) == used
    many = tuple(tool(f"t{i}", "common") for i in range(60))
    index = index_snapshot(snapshot(BackendListing("b", "b", tools=many)))
    assert len(index.search("common", asked)) == used


def test_within_restricts_hits_to_a_view(index: ToolIndex) -> None:
    """Gateway choice: a profile filters the shared index instead of owning one."""
    everywhere = names(index.search("files note delete move"))
    allowed = {"files__move_file", "notes__delete_note"}
    assert names(index.search("files note delete move", within=allowed)) == [
        name for name in everywhere if name in allowed
    ]
    many = tuple(tool(f"t{i:03d}", "common") for i in range(200))
    big = index_snapshot(snapshot(BackendListing("b", "b", tools=many)))
    assert names(big.search("common", 2, within={"b__t150", "b__t199"})) == ["b__t150", "b__t199"]


@settings(max_examples=300, deadline=None)
@given(query=st.text(max_size=80))
def test_no_request_raises(query: str) -> None:
    """Property: any text is a valid request (FTS5 syntax included)."""
    index = index_snapshot(snapshot(FILES, NOTES))
    hits = index.search(query, 5)
    assert len(hits) <= 5
    index.close()


@pytest.mark.parametrize(
    "query",
    ['"', "'", "*", "NEAR", "NEAR(a b, 3)", "name:file", "- file", "a OR", "AND", "NOT file", "^"],
)
def test_fts5_syntax_in_a_request_is_plain_text(index: ToolIndex, query: str) -> None:
    """Gateway choice: operators, quotes and column filters never reach FTS5 as syntax."""
    index.search(query)


# --- incremental updates ------------------------------------------------------


def test_replacing_one_backend_leaves_the_others_alone(index: ToolIndex) -> None:
    """Gateway choice: a backend's list_changed rewrites only that backend's rows."""
    newer = BackendListing("notes", "notes", tools=(tool("archive_note", "Archive a note."),))
    changed = sync_index(index, snapshot(FILES, NOTES), snapshot(FILES, newer))
    assert changed == {"notes"}
    assert names(index.search("note")) == ["notes__archive_note"]
    assert names(index.search("move file", 1)) == ["files__move_file"]
    assert len(index) == 4


def test_a_withdrawn_backend_leaves_the_index(index: ToolIndex) -> None:
    """Gateway choice: a backend that went down is no longer found."""
    assert sync_index(index, snapshot(FILES, NOTES), snapshot(FILES)) == {"notes"}
    assert index.search("note") == []
    assert index.backends() == {"files"}
    index.remove_backend("files")
    assert len(index) == 0
    assert index.backends() == frozenset()


def test_diff_names_only_backends_whose_tools_changed() -> None:
    """Gateway choice: an unchanged backend is absent; a gone one maps to no tools."""
    before = snapshot(FILES, NOTES)
    changed_files = BackendListing("files", "files", tools=(*FILES.tools, tool("new")))
    after = snapshot(changed_files)
    diff = diff_backends(before, after)
    assert set(diff) == {"files", "notes"}
    assert diff["notes"] == ()
    assert diff["files"] == tools_by_backend(after)["files"]
    assert diff_backends(before, snapshot(FILES, NOTES)) == {}
    assert diff_backends(EMPTY_SNAPSHOT, before).keys() == {"files", "notes"}


WORDS = st.sampled_from(
    ["read", "file", "files", "list", "note", "delete", "move", "image", "time", "sum", "x"]
)
TOOL = st.builds(
    lambda name, words, title: {
        "name": name,
        "description": " ".join(words),
        **({"title": title} if title else {}),
    },
    st.sampled_from(["read", "list_dir", "moveFile", "note-add", "t1", "t2", "sum"]),
    st.lists(WORDS, max_size=6),
    st.one_of(st.none(), WORDS),
)
LISTING = st.builds(
    lambda backend, tools: BackendListing(backend, backend, tools=tuple(tools)),
    st.sampled_from(["a", "b", "c"]),
    st.lists(TOOL, max_size=5, unique_by=lambda t: t["name"]),
)
QUERIES = ("read file", "list", "note", "delete move", "sum image time", "x")


def answers(index: ToolIndex) -> list[list[tuple[str, float]]]:
    return [[(h.name, round(h.score, 9)) for h in index.search(q, 50)] for q in QUERIES]


@settings(max_examples=150, deadline=None)
@given(steps=st.lists(st.one_of(LISTING, st.sampled_from(["a", "b", "c"])), max_size=8))
def test_incremental_updates_answer_exactly_like_a_full_rebuild(
    steps: list[BackendListing | str],
) -> None:
    """Property: publishing/withdrawing backends one by one == indexing the result afresh."""
    listings: dict[str, BackendListing] = {}
    incremental = ToolIndex()
    current = EMPTY_SNAPSHOT
    for step in steps:
        if isinstance(step, str):
            listings.pop(step, None)
        else:
            listings[step.backend] = step
        new = snapshot(*listings.values())
        sync_index(incremental, current, new)
        current = new
    rebuilt = index_snapshot(current)
    assert len(incremental) == len(rebuilt)
    assert answers(incremental) == answers(rebuilt)
    incremental.close()
    rebuilt.close()
