"""The route between a gateway task id and a 2026-07-28 backend's own task, sans-IO.

Rules: ``gateway/protocol/stateless/native_tasks.py``.
"""

from __future__ import annotations

from typing import Any, Final

import pytest

from gateway.errors import LocalProtocolError
from gateway.protocol.stateless.native_tasks import (
    UNLIMITED_TTL,
    NativeRoute,
    backend_params,
    backend_task,
    declares_extension,
    decode_route,
    encode_route,
    for_host,
    in_public_text,
    is_native_id,
    new_task_id,
    route_key,
    route_ttl,
    undeclared_need,
    unknown_task,
    with_task_extension,
)
from gateway.protocol.stateless.tasks import EXTENSION, TaskTable

ROUTE: Final = NativeRoute(
    backend="t",
    task_id="backend-7",
    principal="alice",
    tool="t__countdown",
    capabilities={"elicitation": {"form": {}}, "extensions": {EXTENSION: {}}},
)
ELICIT: Final = {"method": "elicitation/create", "params": {"mode": "form", "message": "?"}}


def test_gateway_ids_are_marked_random_and_never_the_backends() -> None:
    """Rule 2: ``n.`` and 128 random bits; a gateway-run id is not taken for one."""
    ids = {new_task_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(is_native_id(task_id) and len(task_id) == 24 for task_id in ids)
    assert not is_native_id(TaskTable().new(None, "x", 0.0, ttl_ms=1, poll_interval_ms=1).task_id)
    assert not is_native_id(7)
    assert not is_native_id("n." + "x" * 80)  # longer than any id we make


def test_a_route_round_trips_through_the_store_bytes_and_damage_is_no_route() -> None:
    """Rule 3: the record is the route; bytes that are not one read as none (unknown id)."""
    assert decode_route(encode_route(ROUTE)) == ROUTE
    assert decode_route(b"not json") is None
    assert decode_route(b'{"backend": "t"}') is None
    assert route_key("n.abc") == "tasks-native:n.abc"


def test_only_a_flat_create_task_result_with_an_id_is_the_backends_task() -> None:
    """ext tasks: ``resultType: task`` and a non-empty ``taskId``; anything else is the answer."""
    assert backend_task({"resultType": "task", "taskId": "b1", "status": "working"}) == "b1"
    assert backend_task({"resultType": "complete", "content": []}) is None
    assert backend_task({"resultType": "task", "taskId": ""}) is None
    assert backend_task({"resultType": "task", "taskId": 5}) is None
    assert backend_task({"task": {"taskId": "b1"}}) is None  # 2025-11-25's shape
    assert backend_task(None) is None


@pytest.mark.parametrize(
    ("ttl_ms", "expected"),
    [(60_000, 60.0), (None, UNLIMITED_TTL), (True, UNLIMITED_TTL), ("9", UNLIMITED_TTL), (10, 1.0)],
)
def test_the_route_lives_as_long_as_the_backend_keeps_the_task(
    ttl_ms: object, expected: float
) -> None:
    """Rule 3: the backend's ``ttlMs``; unlimited or unreadable is a day; at least a second."""
    assert route_ttl({"ttlMs": ttl_ms}) == expected
    assert route_ttl({}) == UNLIMITED_TTL
    assert route_ttl({"ttlMs": 10**12}) == UNLIMITED_TTL


def test_answers_carry_the_gateway_id_and_errors_lose_the_backends() -> None:
    """Rule 2: the backend's id is swapped on answers and in error text; inputs untouched."""
    detailed = {"resultType": "complete", "taskId": "backend-7", "status": "working"}
    shown = for_host(detailed, "n.gw")
    assert shown == {"resultType": "complete", "taskId": "n.gw", "status": "working"}
    assert detailed["taskId"] == "backend-7"
    assert for_host({"resultType": "complete"}, "n.gw") == {"resultType": "complete"}
    text = "unknown taskId: backend-7 (backend-7 expired)"
    assert in_public_text(text, ROUTE, "n.gw") == "unknown taskId: n.gw (n.gw expired)"


def test_a_hosts_tasks_method_reaches_the_backend_with_its_id_and_its_answers() -> None:
    """Rule 5: the backend's id, the host's envelope left out, inputResponses unchanged."""
    params: dict[str, Any] = {
        "taskId": "n.gw",
        "inputResponses": {"confirm": {"action": "accept"}},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
    }
    out = backend_params(params, ROUTE)
    assert out == {"taskId": "backend-7", "inputResponses": {"confirm": {"action": "accept"}}}
    assert params["taskId"] == "n.gw"


def test_an_unknown_id_and_another_principals_are_one_answer() -> None:
    """Rule 4: -32602 with the text a gateway-run task's unknown id gets."""
    error = unknown_task("n.x")
    assert isinstance(error, LocalProtocolError)
    assert (error.code, error.message) == (-32602, "unknown taskId: n.x")
    with pytest.raises(LocalProtocolError) as table:
        TaskTable().find("n.x", None, 0.0)
    assert table.value.message == error.message
    assert unknown_task(["a"]).message == "unknown taskId: ['a']"


def test_the_extension_is_declared_to_the_backend_beside_what_the_host_declared() -> None:
    """Rule 1: other extensions and capabilities stay; the input is not changed."""
    host = {"elicitation": {}, "extensions": {"x.example/other": {"a": 1}}}
    assert with_task_extension(host) == {
        "elicitation": {},
        "extensions": {"x.example/other": {"a": 1}, EXTENSION: {}},
    }
    assert host["extensions"] == {"x.example/other": {"a": 1}}
    assert with_task_extension({}) == {"extensions": {EXTENSION: {}}}
    assert declares_extension({"extensions": {EXTENSION: {}}})
    assert not declares_extension({"extensions": {EXTENSION: True}})
    assert not declares_extension({"tasks": {"requests": {"tools": {"call": {}}}}})


def test_a_backend_may_ask_only_for_what_the_creating_call_declared() -> None:
    """Rule 5 (mrtr.mdx): form elicitation declared passes; sampling is named."""
    assert undeclared_need({"inputRequests": {"confirm": ELICIT}}, ROUTE) is None
    sample = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 1}}
    assert undeclared_need({"inputRequests": {"s": sample}}, ROUTE) == "sampling"
    assert undeclared_need({"status": "working"}, ROUTE) is None
