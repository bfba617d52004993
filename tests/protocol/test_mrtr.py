"""Specification tests for ``gateway.protocol.stateless.mrtr`` (sans-IO).

2026-07-28 ``basic/patterns/mrtr.mdx``: ``input_required`` results, retries
with ``inputResponses``, the capability rule, and the gateway's bridge from
legacy server-to-client requests.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.errors import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY
from gateway.protocol.stateless.error_codes import (
    MissingClientCapability,
    ModernProtocolError,
)
from gateway.protocol.stateless.mrtr import (
    INPUT_KEY_META,
    InputRequired,
    MalformedInputRequired,
    check_responses,
    from_legacy_request,
    id_for,
    input_required_result,
    key_for,
    legacy_result,
    missing_for,
    parse_input_required,
    require_capabilities,
    required_capability,
    without_key_hint,
)

FORM = {"method": "elicitation/create", "params": {"message": "Name?", "requestedSchema": {}}}
URL = {
    "method": "elicitation/create",
    "params": {"mode": "url", "message": "Go", "url": "https://x"},
}
SAMPLE = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
ROOTS = {"method": "roots/list"}


def test_an_input_required_result_needs_requests_or_state() -> None:
    """Spec: at least one of inputRequests and requestState (Server Requirements 6)."""
    assert input_required_result({"a": FORM}) == {
        "resultType": "input_required",
        "inputRequests": {"a": FORM},
    }
    assert input_required_result(request_state="s") == {
        "resultType": "input_required",
        "requestState": "s",
    }
    with pytest.raises(ValueError, match="inputRequests"):
        input_required_result({}, None)


def test_a_backend_input_required_result_is_parsed() -> None:
    """Spec: keyed request objects plus the opaque state."""
    parsed = parse_input_required(
        "tools/call",
        {"resultType": "input_required", "inputRequests": {"a": FORM}, "requestState": "s"},
    )
    assert parsed == InputRequired(input_requests={"a": FORM}, request_state="s")
    assert parse_input_required("resources/read", {"requestState": "s"}).input_requests == {}


@pytest.mark.parametrize(
    ("method", "result"),
    [
        ("tools/list", {"requestState": "s"}),
        ("tools/call", {}),
        ("tools/call", {"requestState": 5}),
        ("tools/call", {"inputRequests": []}),
        ("tools/call", {"inputRequests": {"a": {"method": "ping"}}}),
        ("tools/call", {"inputRequests": {"a": {**FORM, "id": 1}}}),
        ("prompts/get", {"inputRequests": {"a": "elicit"}}),
    ],
)
def test_malformed_backend_input_required_results_are_refused(
    method: str, result: dict[str, Any]
) -> None:
    """Spec: only three methods; known input methods; no id or jsonrpc in entries."""
    with pytest.raises(MalformedInputRequired):
        parse_input_required(method, result)


@pytest.mark.parametrize(
    ("input_request", "need"),
    [
        (FORM, {"elicitation": {"form": {}}}),
        (URL, {"elicitation": {"url": {}}}),
        (SAMPLE, {"sampling": {}}),
        (
            {"method": "sampling/createMessage", "params": {"tools": []}},
            {"sampling": {"tools": {}}},
        ),
        (
            {"method": "sampling/createMessage", "params": {"includeContext": "thisServer"}},
            {"sampling": {"context": {}}},
        ),
        (ROOTS, {"roots": {}}),
    ],
)
def test_each_input_request_needs_its_capability(input_request: dict[str, Any], need: Any) -> None:
    """Spec (schema.ts ClientCapabilities): modes, tools and context are sub-capabilities."""
    assert required_capability(input_request) == need


def test_a_client_is_never_asked_for_an_undeclared_capability() -> None:
    """Spec: MUST NOT request what this request's clientCapabilities lack → -32021."""
    require_capabilities({"a": FORM}, {"elicitation": {}})
    require_capabilities({"a": SAMPLE, "b": ROOTS}, {"sampling": {}, "roots": {}})
    assert missing_for({"a": FORM, "b": URL}, {"elicitation": {}}) == {"elicitation": {"url": {}}}
    with pytest.raises(MissingClientCapability) as info:
        require_capabilities({"a": SAMPLE, "b": ROOTS}, {})
    assert info.value.code == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert info.value.data == {"requiredCapabilities": {"sampling": {}, "roots": {}}}


def test_a_retry_reports_missing_keys_and_ignores_extra_ones() -> None:
    """Spec (Error Handling): extra keys ignored; missing ones are re-asked, not an error."""
    asked = {"a": FORM, "b": SAMPLE}
    check = check_responses({"inputResponses": {"a": {"action": "accept"}, "zz": {}}}, asked)
    assert check.responses == {"a": {"action": "accept"}}
    assert check.missing == ("b",)
    assert check_responses({}, asked).missing == ("a", "b")


@pytest.mark.parametrize("bad", [{"inputResponses": []}, {"inputResponses": {"a": "yes"}}])
def test_malformed_input_responses_are_minus_32602(bad: dict[str, Any]) -> None:
    """Spec: a malformed InputResponses object is a JSON-RPC error."""
    with pytest.raises(ModernProtocolError) as info:
        check_responses(bad, {"a": FORM})
    assert info.value.code == INVALID_PARAMS


def test_a_legacy_elicitation_becomes_an_input_request_and_its_answer_a_result() -> None:
    """Gateway bridge: keyed by the backend's id; backend-only fields removed."""
    message = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "elicitation/create",
        "params": {
            "mode": "url",
            "message": "Go",
            "url": "https://x",
            "elicitationId": "e1",
            "_meta": {"progressToken": 3, "com.example/x": 1},
        },
    }
    key, entry = from_legacy_request(message)
    assert key == "7"
    assert entry == {
        "method": "elicitation/create",
        "params": {
            "mode": "url",
            "message": "Go",
            "url": "https://x",
            "_meta": {"com.example/x": 1},
        },
    }
    assert id_for(key) == 7
    assert legacy_result({"action": "accept"}) == {"action": "accept"}


def test_roots_and_sampling_bridge_too() -> None:
    """Gateway bridge: roots/list may have no params; sampling keeps its params."""
    assert from_legacy_request({"id": "r", "method": "roots/list"}) == (
        '"r"',
        {"method": "roots/list"},
    )
    _, entry = from_legacy_request(
        {"id": 1, "method": "sampling/createMessage", "params": SAMPLE["params"]}
    )
    assert entry == SAMPLE
    assert id_for('"r"') == "r"
    assert legacy_result({"roots": [], "resultType": "complete"}) == {"roots": []}


def _named(key: object) -> dict[str, Any]:
    """A backend's elicitation naming ``key`` in ``_meta``, beside a key of its own."""
    meta = {INPUT_KEY_META: key, "com.example/x": 1}
    return {"id": 4, "method": "elicitation/create", "params": {"message": "Name?", "_meta": meta}}


def test_a_backend_may_name_its_input_key_in_meta() -> None:
    """Gateway convention (issue 14): the spec lets the server choose keys; a
    handshake-era backend names one in ``_meta``, which the host never sees."""
    key, entry = from_legacy_request(_named("user_name"))
    assert key == "user_name"
    assert entry == {
        "method": "elicitation/create",
        "params": {"message": "Name?", "_meta": {"com.example/x": 1}},
    }
    assert legacy_result({"action": "accept", "resultType": "complete"}) == {"action": "accept"}


@pytest.mark.parametrize(
    ("named", "taken"),
    [
        ("user_name", {"user_name"}),  # already taken in the round / the task's life
        ("", set()),
        ("x" * 129, set()),
        (7, set()),
        ("7", set()),  # the key of backend id 7: could collide
        ('"r"', set()),  # the key of backend id "r"
        (None, set()),
    ],
)
def test_an_unusable_named_key_falls_back_to_the_ids_key(named: object, taken: set[str]) -> None:
    """Gateway convention: a named key never collides, so the id's key is used instead."""
    key, entry = from_legacy_request(_named(named), taken)
    assert key == "4"
    assert INPUT_KEY_META not in entry["params"]["_meta"]


@given(st.text(min_size=1, max_size=128))
def test_a_usable_named_key_never_looks_like_a_bridged_id(named: str) -> None:
    """Property: a named key is either refused or no :func:`key_for` key."""
    key, _ = from_legacy_request(_named(named))
    if key != "4":
        assert key == named
        with pytest.raises(ValueError, match="bridged"):
            id_for(key)


def test_a_legacy_host_gets_the_request_without_the_key_hint() -> None:
    """Gateway convention: the hint is removed, other ``_meta`` kept; params without
    it pass byte for byte."""
    hinted = msgspec.Raw(msgspec.json.encode(_named("user_name")["params"]))
    out = without_key_hint(hinted)
    assert out is not None
    assert msgspec.json.decode(out) == {"message": "Name?", "_meta": {"com.example/x": 1}}
    alone = msgspec.Raw(msgspec.json.encode({"message": "m", "_meta": {INPUT_KEY_META: "k"}}))
    assert msgspec.json.decode(without_key_hint(alone) or b"") == {"message": "m"}
    plain = msgspec.Raw(b'{"message": "m", "_meta": {"x": 1}}')
    assert without_key_hint(plain) is plain
    mentioned = msgspec.Raw(b'{"message": "dev.mcp-gateway/inputKey"}')
    assert without_key_hint(mentioned) is mentioned
    assert without_key_hint(None) is None


@pytest.mark.parametrize(
    "message",
    [
        {"id": 1, "method": "ping"},
        {"method": "roots/list"},
        {"id": True, "method": "roots/list"},
        {"id": None, "method": "roots/list"},
    ],
)
def test_only_the_three_input_requests_with_ids_bridge(message: dict[str, Any]) -> None:
    """Spec: inputRequests hold elicitation, sampling or roots requests only."""
    with pytest.raises(ValueError, match="bridge"):
        from_legacy_request(message)


@given(st.integers() | st.text())
def test_bridged_keys_give_back_the_exact_id(request_id: int | str) -> None:
    """Property: ``1`` and ``"1"`` stay apart; every id round-trips."""
    assert id_for(key_for(request_id)) == request_id
    assert type(id_for(key_for(request_id))) is type(request_id)


@pytest.mark.parametrize("key", ["x", "1.5", "true", "null", "[1]"])
def test_foreign_keys_are_not_ids(key: str) -> None:
    """Gateway choice: a key we did not mint names no backend request."""
    with pytest.raises(ValueError, match="bridged"):
        id_for(key)
