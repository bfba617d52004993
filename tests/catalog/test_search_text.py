"""Specification tests for ``gateway.catalog.search_text`` (what the tool search reads)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.catalog.search_text import (
    MAX_PARAMS_CHARS,
    MAX_QUERY_WORDS,
    MAX_SCHEMA_PROPERTIES,
    match_expression,
    tool_text,
    words,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("read_text_file", ["read", "text", "file"]),
        ("read-text-file", ["read", "text", "file"]),
        ("readTextFile", ["read", "text", "file"]),
        ("HTTPServer", ["http", "server"]),
        ("base64 sha256sum", ["base", "64", "sha", "256", "sum"]),
        ("files__list_directory", ["files", "list", "directory"]),
        ("Grüße, Ünïcode!", ["grüsse", "ünïcode"]),
        ("  ", []),
    ],
)
def test_words_split_on_underscores_dashes_case_changes_and_digits(
    text: str, expected: list[str]
) -> None:
    """Gateway choice: every spelling of a name is the same words (search_text rule 1)."""
    assert words(text) == expected


def test_tool_text_reads_name_title_description_parameters_and_prefix_into_columns() -> None:
    """Gateway choice: five columns, so each can carry its own BM25 weight."""
    item = {
        "name": "files__list_directory_with_sizes",
        "title": "List Directory with Sizes",
        "description": "Get a detailed listing.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "sortBy": {"description": "Sort entries", "enum": ["name", "size", 3]},
            },
        },
    }
    text = tool_text(item, original="list_directory_with_sizes", prefix="files")
    assert text.name == "list directory with sizes"
    assert text.title == "list directory with sizes"
    assert text.description == "get a detailed listing"
    assert text.params == "path sort by sort entries name size"
    assert text.backend == "files"


def test_tool_text_walks_nested_objects_and_array_items() -> None:
    """Gateway choice: edit_file's ``edits[].oldText`` is searchable, as its schema nests it."""
    schema = {
        "properties": {
            "edits": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"oldText": {"description": "Text to search for"}},
                },
            }
        }
    }
    text = tool_text({"inputSchema": schema}, original="edit_file", prefix="")
    assert text.params == "edits old text text to search for"
    assert text.backend == ""


def test_tool_text_takes_the_annotation_title_when_the_tool_has_none() -> None:
    """Spec (tools): a display name may sit in ``annotations.title`` (2025-03-26 era)."""
    text = tool_text({"annotations": {"title": "Run Query"}}, original="q", prefix="")
    assert text.title == "run query"


def test_tool_text_ignores_fields_of_the_wrong_type() -> None:
    """Gateway choice: a misbehaving backend's odd item is indexed as far as it makes sense."""
    item: dict[str, Any] = {
        "title": 7,
        "description": ["x"],
        "inputSchema": {"properties": {"a": "not a schema", "b": {"enum": "x"}}},
    }
    text = tool_text(item, original="odd", prefix="p")
    assert (text.title, text.description, text.params) == ("", "", "a b")


def test_tool_text_is_bounded_however_large_the_schema() -> None:
    """Gateway choice: a hostile schema costs a bounded row (search_text rule 3)."""
    wide = {"properties": {f"p{i}": {"description": "x " * 10_000} for i in range(1000)}}
    deep: dict[str, Any] = {"properties": {}}
    node = deep
    for depth in range(100):
        child: dict[str, Any] = {"properties": {}}
        node["properties"][f"level{depth}"] = child
        node = child
    wide_text = tool_text({"inputSchema": wide}, original="w", prefix="")
    assert wide_text.params.count("p ") <= MAX_SCHEMA_PROPERTIES
    assert len(wide_text.params) <= MAX_PARAMS_CHARS
    deep_text = tool_text({"inputSchema": deep}, original="d", prefix="")
    assert deep_text.params.split() == ["level", "0", "level", "1", "level", "2", "level", "3"]


@pytest.mark.parametrize(
    "query",
    [
        'files" OR "x',
        "name: read",
        "read*",
        "NEAR(read file)",
        "read AND NOT file",
        "^start (of) {col}",
        "-minus +plus",
    ],
)
def test_a_query_is_plain_quoted_words_whatever_syntax_it_holds(query: str) -> None:
    """Gateway choice: no FTS5 operator survives (search_text rule 2)."""
    expression = match_expression(query, {})
    assert expression is not None
    for term in expression.split(" OR "):
        assert term.startswith('"')
        assert term.endswith('"')
        assert term[1:-1].isalnum()


def test_stop_words_and_short_numbers_are_dropped_unless_nothing_else_is_left() -> None:
    """Gateway choice: "add 3 and 4" searches for "add"; "what is it" still searches."""
    assert match_expression("please add 3 and 4", {}) == '"add"'
    assert match_expression("timestamp in ISO 8601", {}) == '"timestamp" OR "iso" OR "8601"'
    assert match_expression("what is it", {}) == '"what" OR "is" OR "it"'


def test_synonyms_join_the_query_and_plurals_find_them() -> None:
    """Gateway choice: "folders" also searches "directory" (and "dir")."""
    assert match_expression("folders", {"folder": ("directory", "dir")}) == (
        '"folders" OR "directory" OR "dir"'
    )


@pytest.mark.parametrize("query", ["", "   ", "\n\t", "?!.,", "___", "--"])
def test_a_query_without_words_has_no_expression(query: str) -> None:
    """Gateway choice: an empty request finds nothing rather than everything."""
    assert match_expression(query) is None


def test_a_long_query_is_cut_to_a_bounded_number_of_words() -> None:
    """Gateway choice: a pasted essay costs a bounded query."""
    expression = match_expression(" ".join(f"word{i}x" for i in range(500)), {})
    assert expression is not None
    assert expression.count(" OR ") + 1 == MAX_QUERY_WORDS
