"""Specification tests for ``gateway.protocol.mcp`` (payload rewrites, sans-IO).

The gateway namespaces resource URIs in results it forwards (tools/call,
resources/read, prompts/get) and touches nothing else: every other field,
known or not, survives (STYLE rule 5).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from gateway.errors import INVALID_PARAMS, LocalProtocolError
from gateway.protocol import mcp


def prefixed(uri: str) -> str:
    """The URI map under test: the namespacing of a backend with prefix ``p``."""
    return "p+" + uri


def raw(value: Any) -> msgspec.Raw:
    return msgspec.Raw(json.dumps(value).encode())


def loads(result: msgspec.Raw) -> Any:
    return json.loads(bytes(result))


# --- tools/call results -----------------------------------------------------


def test_call_result_resource_link_and_embedded_resource_uris_are_rewritten() -> None:
    """Spec: resource_link blocks and embedded resources carry URIs a host may read back."""
    result = {
        "content": [
            {"type": "text", "text": "hello"},
            {"type": "resource_link", "uri": "file:///a.txt", "name": "a", "x-new": 1},
            {
                "type": "resource",
                "resource": {"uri": "mem://b", "text": "B", "mimeType": "text/plain"},
                "annotations": {"priority": 1},
            },
        ],
        "isError": False,
    }
    out = loads(mcp.rewrite_call_result(raw(result), prefixed))
    expected = json.loads(json.dumps(result))
    expected["content"][1]["uri"] = "p+file:///a.txt"
    expected["content"][2]["resource"]["uri"] = "p+mem://b"
    assert out == expected


def test_call_result_unknown_fields_structured_content_and_meta_are_preserved() -> None:
    """Spec: only content-block URIs change; structuredContent is the tool's own data."""
    result = {
        "content": [{"type": "resource_link", "uri": "u://1", "name": "n"}],
        "structuredContent": {"uri": "u://not-a-resource", "rows": [1, 2.5, None]},
        "_meta": {"progressToken": "tok", "uri": "u://meta"},
        "isError": True,
        "x-future-field": {"nested": [{"uri": "u://deep"}]},
    }
    out = loads(mcp.rewrite_call_result(raw(result), prefixed))
    assert out["content"] == [{"type": "resource_link", "uri": "p+u://1", "name": "n"}]
    for key in ("structuredContent", "_meta", "isError", "x-future-field"):
        assert out[key] == result[key]
    assert set(out) == set(result)


def test_call_result_without_uri_is_returned_as_the_same_object() -> None:
    """Gateway choice: nothing to rewrite means no decode and the very Raw given back."""
    result = raw({"content": [{"type": "text", "text": "no links here"}], "x": {"y": 1}})
    assert mcp.rewrite_call_result(result, prefixed) is result


def test_call_result_with_uri_only_in_unrelated_places_keeps_everything() -> None:
    """Spec: a "uri" outside content blocks (text, structuredContent) is left alone."""
    result = {
        "content": [{"type": "text", "text": "uri"}, {"type": "image", "data": "AA==", "uri": "x"}],
        "structuredContent": {"uri": "keep"},
    }
    assert loads(mcp.rewrite_call_result(raw(result), prefixed)) == result


def test_call_result_with_single_content_block_is_rewritten() -> None:
    """Gateway choice: a lone block where a list is expected is still rewritten."""
    result = {"content": {"type": "resource_link", "uri": "u://x", "name": "x"}}
    out = loads(mcp.rewrite_call_result(raw(result), prefixed))
    assert out == {"content": {"type": "resource_link", "uri": "p+u://x", "name": "x"}}


def test_call_result_with_junk_blocks_keeps_them_and_rewrites_the_rest() -> None:
    """Gateway choice: non-object blocks and non-string URIs are passed through untouched."""
    result = {
        "content": [
            "junk",
            3,
            None,
            {"type": "resource_link", "uri": 5},
            {"type": "resource", "resource": "not-an-object"},
            {"type": "resource", "resource": {"uri": None}},
            {"type": "resource_link", "uri": "u://ok"},
        ]
    }
    out = loads(mcp.rewrite_call_result(raw(result), prefixed))
    expected = json.loads(json.dumps(result))
    expected["content"][-1]["uri"] = "p+u://ok"
    assert out == expected


def test_call_result_with_unrepresentable_number_is_not_emptied() -> None:
    """Spec: a rewrite never loses fields; a number msgspec cannot hold must survive (STYLE 5)."""
    original = (
        b'{"content":[{"type":"resource_link","uri":"u://x","name":"x"}],'
        b'"structuredContent":{"huge":1e400},"isError":false}'
    )
    out = bytes(mcp.rewrite_call_result(msgspec.Raw(original), prefixed))
    assert set(json.loads(out)) == {"content", "structuredContent", "isError"}


def test_non_object_call_result_containing_uri_is_returned_unchanged() -> None:
    """Gateway choice: a result that is not an object has no content to rewrite; keep it."""
    original = msgspec.Raw(b'["uri"]')
    assert bytes(mcp.rewrite_call_result(original, prefixed)) == b'["uri"]'


BIG_TEXT = "x" * 100_000  # past the size where blocks are typed instead of searched


def test_large_call_result_without_links_is_returned_as_the_same_object() -> None:
    """Gateway choice (issue 17): a 100 kB text result is passed on as it came, not rebuilt,
    even with a "uri" key outside its content blocks (which the marker search would decode)."""
    result = raw(
        {
            "content": [{"type": "text", "text": BIG_TEXT}],
            "structuredContent": {"uri": "keep"},
            "isError": False,
        }
    )
    assert mcp.rewrite_call_result(result, prefixed) is result


def test_large_call_result_with_a_link_after_a_large_block_is_rewritten() -> None:
    """Spec: a resource link is namespaced whatever precedes it in the result."""
    result = {
        "content": [
            {"type": "text", "text": BIG_TEXT},
            {"type": "resource", "resource": {"uri": "mem://b", "text": BIG_TEXT}},
            {"type": "resource_link", "uri": "u://x", "name": "x"},
        ]
    }
    out = loads(mcp.rewrite_call_result(raw(result), prefixed))
    assert out["content"][1]["resource"]["uri"] == "p+mem://b"
    assert out["content"][2]["uri"] == "p+u://x"
    assert out["content"][0] == result["content"][0]


@pytest.mark.parametrize(
    "content",
    [
        ["junk", {"type": "resource_link", "uri": "u://x", "name": "x", "pad": BIG_TEXT}],
        {"type": "resource_link", "uri": "u://x", "name": "x", "pad": BIG_TEXT},
    ],
)
def test_large_call_result_with_junk_or_a_lone_block_still_gets_its_links_rewritten(
    content: object,
) -> None:
    """Gateway choice: what the typed read cannot rule out goes the general way."""
    out = loads(mcp.rewrite_call_result(raw({"content": content}), prefixed))
    blocks = out["content"] if isinstance(out["content"], list) else [out["content"]]
    assert blocks[-1]["uri"] == "p+u://x"


# --- resources/read results -------------------------------------------------


def test_read_result_content_uris_are_rewritten_and_other_fields_kept() -> None:
    """Spec: each item of resources/read contents names its URI; the gateway namespaces it."""
    result = {
        "contents": [
            {"uri": "file:///a", "mimeType": "text/plain", "text": "A", "_meta": {"k": 1}},
            {"uri": "file:///b", "blob": "AAEC"},
            "junk",
            {"uri": 7, "text": "non-string uri kept"},
        ],
        "_meta": {"uri": "meta-untouched"},
        "x-extra": True,
    }
    out = loads(mcp.rewrite_read_result(raw(result), prefixed))
    expected = json.loads(json.dumps(result))
    expected["contents"][0]["uri"] = "p+file:///a"
    expected["contents"][1]["uri"] = "p+file:///b"
    assert out == expected


def test_read_result_without_uri_is_returned_as_the_same_object() -> None:
    """Gateway choice: no "uri" anywhere means the very Raw given back."""
    result = raw({"contents": []})
    assert mcp.rewrite_read_result(result, prefixed) is result


def test_read_result_with_contents_not_a_list_is_kept() -> None:
    """Gateway choice: an unexpected shape is forwarded, not repaired."""
    result = {"contents": {"uri": "u://x"}}
    assert loads(mcp.rewrite_read_result(raw(result), prefixed)) == result


# --- prompts/get results ----------------------------------------------------


def test_prompt_result_with_single_block_content_is_rewritten() -> None:
    """Spec: a PromptMessage's content is a single content block."""
    result = {
        "description": "d",
        "messages": [
            {"role": "user", "content": {"type": "resource_link", "uri": "u://1", "name": "1"}},
            {"role": "assistant", "content": {"type": "text", "text": "hi"}},
            {
                "role": "user",
                "content": {"type": "resource", "resource": {"uri": "u://2", "text": "t"}},
            },
        ],
        "_meta": {"a": 1},
    }
    out = loads(mcp.rewrite_prompt_result(raw(result), prefixed))
    expected = json.loads(json.dumps(result))
    expected["messages"][0]["content"]["uri"] = "p+u://1"
    expected["messages"][2]["content"]["resource"]["uri"] = "p+u://2"
    assert out == expected


def test_prompt_result_with_list_content_is_rewritten() -> None:
    """Gateway choice: some servers send a list of blocks; each block is rewritten."""
    result = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "see"},
                    {"type": "resource_link", "uri": "u://1", "name": "1"},
                ],
            },
            "junk-message",
        ]
    }
    out = loads(mcp.rewrite_prompt_result(raw(result), prefixed))
    expected = json.loads(json.dumps(result))
    expected["messages"][0]["content"][1]["uri"] = "p+u://1"
    assert out == expected


def test_prompt_result_without_uri_is_returned_as_the_same_object() -> None:
    """Gateway choice: no "uri" anywhere means the very Raw given back."""
    result = raw({"messages": [{"role": "user", "content": {"type": "text", "text": "x"}}]})
    assert mcp.rewrite_prompt_result(result, prefixed) is result


# --- list pages -------------------------------------------------------------


def test_list_items_returns_items_and_next_cursor() -> None:
    """Spec: a list page has the items under its key and an optional nextCursor."""
    page, cursor = mcp.list_items(
        raw({"tools": [{"name": "a"}, {"name": "b", "x": 1}], "nextCursor": "c1"}), "tools"
    )
    assert page == [{"name": "a"}, {"name": "b", "x": 1}]
    assert cursor == "c1"


def test_list_items_without_next_cursor_is_the_last_page() -> None:
    """Spec: no nextCursor means no more pages."""
    assert mcp.list_items(raw({"prompts": [{"name": "p"}]}), "prompts") == ([{"name": "p"}], None)


@pytest.mark.parametrize("cursor", [None, 5, ["c"], {"c": 1}])
def test_list_items_ignores_a_non_string_next_cursor(cursor: Any) -> None:
    """Gateway choice: a cursor that is not a string cannot be sent back; treat as last page."""
    assert mcp.list_items(raw({"tools": [], "nextCursor": cursor}), "tools") == ([], None)


def test_list_items_drops_items_that_are_not_objects() -> None:
    """Gateway choice: junk items are dropped here; the catalog reports unnamed ones."""
    page, _ = mcp.list_items(raw({"tools": [1, "x", None, [], {"name": "ok"}, {}]}), "tools")
    assert page == [{"name": "ok"}, {}]


@pytest.mark.parametrize(
    "body",
    [b"{}", b'{"tools": "nope"}', b'{"tools": null}', b"[]", b"42", b'{"other": []}'],
)
def test_list_items_of_a_malformed_page_is_empty(body: bytes) -> None:
    """Gateway choice: a page without an items list contributes nothing."""
    assert mcp.list_items(msgspec.Raw(body), "tools") == ([], None)


def test_list_items_keeps_tools_whose_schema_has_an_unrepresentable_number() -> None:
    """Spec: one odd number in one tool's schema must not silently empty the whole page."""
    body = (
        b'{"tools":[{"name":"a","inputSchema":{"type":"number","maximum":1e400}},'
        b'{"name":"b"}],"nextCursor":"n"}'
    )
    page, cursor = mcp.list_items(msgspec.Raw(body), "tools")
    assert [item["name"] for item in page] == ["a", "b"]
    assert cursor == "n"


# --- params -----------------------------------------------------------------


def test_require_str_returns_the_string() -> None:
    """Gateway choice: a present string param is returned as is."""
    assert mcp.require_str({"name": "echo"}, "name", "tool") == "echo"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "invalid params: tool 'name' missing"),
        ({"name": None}, "invalid params: tool 'name' missing"),
        ({"name": 5}, "invalid params: tool 'name' must be a string, not int"),
        ({"name": ["x"]}, "invalid params: tool 'name' must be a string, not list"),
        ({"name": True}, "invalid params: tool 'name' must be a string, not bool"),
    ],
)
def test_require_str_says_which_param_and_why(params: dict[str, Any], message: str) -> None:
    """Spec: a missing or mistyped required param is -32602 Invalid params."""
    with pytest.raises(LocalProtocolError) as info:
        mcp.require_str(params, "name", "tool")
    assert info.value.code == INVALID_PARAMS
    assert info.value.message == message


def test_decode_params_of_absent_params_is_an_empty_dict() -> None:
    """Spec: params are optional; absent params read as no arguments."""
    assert mcp.decode_params(None) == {}


def test_decode_params_decodes_an_object() -> None:
    """Gateway choice: params are decoded to a plain dict, unknown keys included."""
    assert mcp.decode_params(raw({"name": "x", "y": [1]})) == {"name": "x", "y": [1]}


@pytest.mark.parametrize("body", [b"[1, 2]", b'"s"', b"3", b"null", b"{", b"{'a':1}"])
def test_decode_params_that_are_not_an_object_is_invalid_params(body: bytes) -> None:
    """Spec: MCP params are an object; anything else is -32602."""
    with pytest.raises(LocalProtocolError) as info:
        mcp.decode_params(msgspec.Raw(body))
    assert info.value.code == INVALID_PARAMS
    assert "expected a JSON object" in info.value.message


def test_decode_object_of_a_non_object_is_none() -> None:
    """Gateway choice: a result that is not an object reads as None, never a guess."""
    assert mcp.decode_object(msgspec.Raw(b"[1]")) is None
    assert mcp.decode_object(msgspec.Raw(b'{"a": 1}')) == {"a": 1}


def test_encode_produces_raw_json() -> None:
    """Gateway choice: a patched payload is re-encoded to Raw."""
    assert bytes(mcp.encode({"a": [1, None]})) == b'{"a":[1,null]}'


def test_decode_meta_reads_only_meta_and_tells_objects_from_the_rest() -> None:
    """The era check reads ``_meta`` alone: other params are skipped (not returned),
    absent or null ``_meta`` is ``{}``, and params that are not an object are None."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    raw = msgspec.json.encode({"_meta": meta, "arguments": {"big": list(range(100))}})
    assert mcp.decode_meta(msgspec.Raw(raw)) == {"_meta": meta}
    assert mcp.decode_meta(msgspec.Raw(b'{"name": "x"}')) == {}
    assert mcp.decode_meta(msgspec.Raw(b'{"_meta": null}')) == {}
    assert mcp.decode_meta(None) == {}
    assert mcp.decode_meta(msgspec.Raw(b"[1, 2]")) is None
    assert mcp.decode_meta(msgspec.Raw(b'"text"')) is None
