"""Specification of the jsonc reader (VS Code's JSON with comments) and of host key names."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.config.hosts import make_name
from gateway.config.jsonc import JsoncError, has_comments, loads
from gateway.config.schema import MAX_NAME_LENGTH, NAME_PATTERN


def test_comments_and_trailing_commas_are_set_aside_but_strings_are_kept() -> None:
    """Issue 19: VS Code's mcp.json may hold // and /* */ comments and trailing commas."""
    text = """{
      // a comment
      "url": "http://x//y", /* block
      comment */ "s": "a /* not a comment */, ]",
      "list": [1, 2,],
      "escaped": "quote \\" // still a string",
    }"""
    assert loads(text) == {
        "url": "http://x//y",
        "s": "a /* not a comment */, ]",
        "list": [1, 2],
        "escaped": 'quote " // still a string',
    }
    assert has_comments(text)
    assert not has_comments('{"a": "// in a string"}')


def test_an_error_points_at_the_line_and_column_of_the_original_text() -> None:
    """Issue 19: comments are blanked, not removed, so positions stay right."""
    with pytest.raises(JsoncError, match=r"^line 3, column 10: Expecting"):
        loads('{\n  /* two\n  */ "a" 1}')


@given(st.text())
def test_a_host_key_becomes_a_valid_name_or_nothing(key: str) -> None:
    """Issue 19: the prefix (the name) defaults to the server's key made valid."""
    name = make_name(key)
    assert name == "" or re.fullmatch(NAME_PATTERN, name)
    assert len(name) <= MAX_NAME_LENGTH


def test_a_valid_key_is_its_own_name() -> None:
    """Issue 19: a key that is a valid name already is kept as it is."""
    assert make_name("github") == "github"
    assert make_name("GitHub Tools") == "github-tools"
    assert make_name("my_server.v2") == "my-server-v2"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@given(JSON_VALUES, st.sampled_from([None, 2]))
def test_plain_json_reads_as_json_does(value: object, indent: int | None) -> None:
    """Issue 19: Claude Desktop's, Cursor's and Claude Code's plain JSON is read unchanged,
    strings holding // or /* included."""
    text = json.dumps(value, indent=indent)
    assert loads(text) == value
    assert not has_comments(text)
