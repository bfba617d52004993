"""``protocol.listen``: the filter, the acknowledgement and the tags, without I/O."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.errors import INVALID_PARAMS, LocalProtocolError
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.stateless.listen import (
    LIST_CHANGED_FIELDS,
    SUBSCRIPTION_ID_KEY,
    ListenFilter,
    honour,
    parse_filter,
)

OFFERED = frozenset(LIST_CHANGED_FIELDS.values())
TOOLS = "notifications/tools/list_changed"
PROMPTS = "notifications/prompts/list_changed"


def decoded(message: bytes | None) -> dict[str, Any]:
    assert message is not None
    body: dict[str, Any] = json.loads(message)
    return body


def notification(method: str, params: dict[str, Any] | None = None) -> bytes:
    return jsonrpc.encode_notification(method, None if params is None else mcp.encode(params))


def test_the_filter_reads_every_field_and_drops_repeated_uris() -> None:
    asked = parse_filter(
        {
            "notifications": {
                "toolsListChanged": True,
                "promptsListChanged": False,
                "resourceSubscriptions": ["u1", "u2", "u1"],
            }
        }
    )
    assert asked == ListenFilter(frozenset({TOOLS}), ("u1", "u2"))
    assert parse_filter({}) == ListenFilter()


@pytest.mark.parametrize(
    "notifications",
    [
        [],
        {"toolsListChanged": "yes"},
        {"resourceSubscriptions": "u1"},
        {"resourceSubscriptions": [1]},
        {"taskIds": "t1"},
        {"taskIds": [7]},
    ],
)
def test_a_malformed_filter_is_invalid_params(notifications: object) -> None:
    with pytest.raises(LocalProtocolError) as caught:
        parse_filter({"notifications": notifications})
    assert caught.value.code == INVALID_PARAMS


def test_the_ack_names_only_the_honoured_subset_in_the_asked_order() -> None:
    asked = ListenFilter(frozenset({TOOLS}), ("u2", "nope", "u1"))
    ack = decoded(honour(5, asked, OFFERED, ["u1", "u2"]).acknowledgement())
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"] == {
        "_meta": {SUBSCRIPTION_ID_KEY: 5},
        "notifications": {"toolsListChanged": True, "resourceSubscriptions": ["u2", "u1"]},
    }


def test_with_no_uri_honoured_the_field_is_omitted() -> None:
    ack = decoded(honour("s", ListenFilter(uris=("nope",)), OFFERED, []).acknowledgement())
    assert ack["params"]["notifications"] == {}


def test_a_kind_the_gateway_does_not_offer_is_not_honoured() -> None:
    sub = honour(1, ListenFilter(frozenset({TOOLS, PROMPTS})), frozenset({TOOLS}), [])
    assert sub.list_changed == {TOOLS}
    assert sub.tag(notification(PROMPTS)) is None


def test_tags_add_the_subscription_id_and_keep_other_meta() -> None:
    sub = honour("L", ListenFilter(frozenset({TOOLS}), ("u1",)), OFFERED, ["u1"])
    assert decoded(sub.tag(notification(TOOLS)))["params"] == {"_meta": {SUBSCRIPTION_ID_KEY: "L"}}
    updated = notification("notifications/resources/updated", {"uri": "u1", "_meta": {"k": 1}})
    assert decoded(sub.tag(updated))["params"] == {
        "uri": "u1",
        "_meta": {"k": 1, SUBSCRIPTION_ID_KEY: "L"},
    }


@pytest.mark.parametrize(
    "message",
    [
        notification(PROMPTS),
        notification("notifications/resources/updated", {"uri": "u2"}),
        notification("notifications/message", {"level": "error", "data": "x"}),
        notification("notifications/progress", {"progressToken": 1, "progress": 1}),
        jsonrpc.encode_request(1, "sampling/createMessage"),
        b"not json",
    ],
)
def test_what_was_not_asked_for_never_goes_on_the_stream(message: bytes) -> None:
    sub = honour(1, ListenFilter(frozenset({TOOLS}), ("u1",)), OFFERED, ["u1"])
    assert sub.tag(message) is None


def test_the_final_result_is_complete_with_the_subscription_id() -> None:
    sub = honour(7, ListenFilter(), OFFERED, [])
    assert decoded(sub.complete()) == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"resultType": "complete", "_meta": {SUBSCRIPTION_ID_KEY: 7}},
    }


def test_task_ids_are_honoured_only_for_the_callers_tasks_and_tag_only_their_news() -> None:
    """Rule 5: another's or an unknown task is left out; only its own task's news passes."""
    asked = parse_filter({"notifications": {"taskIds": ["t2", "t1", "t2", "other"]}})
    assert asked.task_ids == ("t2", "t1", "other")
    subscription = honour(9, asked, OFFERED, [], frozenset({"t1", "t2"}))
    ack = decoded(subscription.acknowledgement())
    assert ack["params"]["notifications"] == {"taskIds": ["t2", "t1"]}
    mine = subscription.tag(
        notification("notifications/tasks", {"taskId": "t1", "status": "working"})
    )
    assert mine is not None
    assert decoded(mine)["params"]["_meta"] == {SUBSCRIPTION_ID_KEY: 9}
    theirs = notification("notifications/tasks", {"taskId": "other", "status": "working"})
    assert subscription.tag(theirs) is None
    plain = honour(9, ListenFilter(), OFFERED, [])
    assert plain.tag(notification("notifications/tasks", {"taskId": "t1"})) is None
