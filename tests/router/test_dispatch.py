"""The method table and the one answer, metric and log line per host request."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import pytest
import trio
from structlog.testing import capture_logs

from gateway.backends.state import BackendState
from gateway.catalog.naming import public_uri
from gateway.errors import RemoteProtocolError
from gateway.protocol import jsonrpc
from tests.router.fakes import (
    FakeBackend,
    FakeClient,
    FakePool,
    RecordingMetrics,
    ask,
    make_router,
)

TOOL = {"name": "echo", "inputSchema": {"type": "object"}}


def _routed(logs: list[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry["event"] == "request.routed"]


@pytest.mark.usefixtures("debug_logs")
async def test_an_unknown_method_is_method_not_found_and_reaches_no_backend(
    nursery: trio.Nursery,
) -> None:
    """Spec (JSON-RPC): -32601; gateway choice: its metric label is "other", not the method."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha"), tools=(TOOL,))
    metrics = RecordingMetrics()
    router = await make_router(pool, nursery, metrics=metrics)
    with capture_logs() as logs:
        answer = await ask(router, FakeClient("c1"), "tools/frobnicate")
    assert answer["error"]["code"] == -32601
    assert alpha.sent == []
    assert metrics.requests == [("other", "error", "")]
    [line] = _routed(logs)
    assert line["method"] == "tools/frobnicate"
    assert line["outcome"] == "error"


@pytest.mark.usefixtures("debug_logs")
async def test_a_known_tool_is_forwarded_under_its_original_name(nursery: trio.Nursery) -> None:
    """Gateway rule: the public name is swapped for the backend's; the result passes through."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha"), tools=(TOOL,))

    async def answer(params: dict[str, Any], client: str | None) -> Any:
        return jsonrpc.to_raw({"content": [{"type": "text", "text": "hi"}], "isError": False})

    alpha.answers["tools/call"] = answer
    router = await make_router(pool, nursery)
    with capture_logs() as logs:
        reply = await ask(router, FakeClient("c1"), "tools/call", name="alpha__echo", arguments={})
    assert reply["result"]["content"] == [{"type": "text", "text": "hi"}]
    [sent] = alpha.sent
    assert (sent.method, sent.params["name"], sent.client) == ("tools/call", "echo", "c1")
    [line] = _routed(logs)
    assert (line["backend"], line["outcome"]) == ("alpha", "ok")


async def test_an_unknown_tool_is_invalid_params_and_reaches_no_backend(
    nursery: trio.Nursery,
) -> None:
    """Router rule (calls 2): -32602 "Unknown tool", answered by the gateway."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha"), tools=(TOOL,))
    router = await make_router(pool, nursery)
    answer = await ask(router, FakeClient("c1"), "tools/call", name="alpha__nope")
    assert answer["error"]["code"] == -32602
    assert answer["error"]["message"] == "Unknown tool: alpha__nope"
    assert alpha.sent == []


async def test_a_tool_of_a_backend_that_is_down_is_backend_unavailable_at_once(
    nursery: trio.Nursery,
) -> None:
    """Router rule (calls 3): -32603 with data.reason backend_unavailable naming the backend."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha"), tools=(TOOL,))
    pool.set_state(alpha, BackendState.DOWN, "exited with code 1")
    router = await make_router(pool, nursery)
    answer = await ask(router, FakeClient("c1"), "tools/call", name="alpha__echo")
    assert answer["error"]["code"] == -32603
    assert answer["error"]["data"] == {"reason": "backend_unavailable", "backend": "alpha"}
    assert "exited with code 1" in answer["error"]["message"]


async def test_a_backend_error_passes_through_with_its_own_code_and_data(
    nursery: trio.Nursery,
) -> None:
    """Router rule (calls 5)."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha"), tools=(TOOL,))

    async def refuse(params: dict[str, Any], client: str | None) -> Any:
        raise RemoteProtocolError("no such thing", -32099, data={"why": "because"})

    alpha.answers["tools/call"] = refuse
    router = await make_router(pool, nursery)
    answer = await ask(router, FakeClient("c1"), "tools/call", name="alpha__echo")
    assert answer["error"] == {
        "code": -32099,
        "message": "no such thing",
        "data": {"why": "because"},
    }


async def test_a_backend_error_names_the_resource_by_its_public_uri(
    nursery: trio.Nursery,
) -> None:
    """Router rule (calls 5): the host never saw ``py2://nope``; it reads ``py2+py2://nope``."""
    pool = FakePool()
    backend = pool.add(
        FakeBackend("py2"),
        resources=({"uri": "py2://known", "name": "known"},),
    )

    async def not_found(params: dict[str, Any], client: str | None) -> Any:
        uri = params["uri"]
        raise RemoteProtocolError(f"Resource not found: {uri}", -32002, data={"uri": uri})

    backend.answers["resources/read"] = not_found
    router = await make_router(pool, nursery)
    public = public_uri("py2", "py2://nope")
    answer = await ask(router, FakeClient("c1"), "resources/read", uri=public)
    assert backend.sent[-1].params["uri"] == "py2://nope"
    assert answer["error"] == {
        "code": -32002,
        "message": f"Resource not found: {public}",
        "data": {"uri": public},
    }


async def test_a_backend_error_names_the_tool_by_its_public_name(
    nursery: trio.Nursery,
) -> None:
    """Router rule (calls 5): a ``data`` member naming the tool uses its public name."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha"), tools=(TOOL,))

    async def refuse(params: dict[str, Any], client: str | None) -> Any:
        raise RemoteProtocolError("tool is disabled", -32602, data={"tool": params["name"]})

    alpha.answers["tools/call"] = refuse
    router = await make_router(pool, nursery)
    answer = await ask(router, FakeClient("c1"), "tools/call", name="alpha__echo")
    assert answer["error"]["data"] == {"tool": "alpha__echo"}


async def test_a_backend_timeout_is_answered_with_the_timeout_code_and_counted(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Gateway choice: -32001 with data.reason timeout; counted as a timeout cancellation."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha", request_timeout=2.5), tools=(TOOL,))
    alpha.hang_until_timeout("tools/call")
    metrics = RecordingMetrics()
    router = await make_router(pool, nursery, metrics=metrics)
    answer = await ask(router, FakeClient("c1"), "tools/call", name="alpha__echo")
    assert answer["error"]["code"] == -32001
    assert answer["error"]["data"] == {"reason": "timeout", "backend": "alpha", "seconds": 2.5}
    assert metrics.counts == {("timeouts", "alpha"): 1, ("cancellations", "timeout"): 1}
    assert metrics.requests == [("tools/call", "timeout", "alpha")]
    assert metrics.tool_calls == [("alpha", "echo")]


async def test_an_unknown_resource_uri_is_resource_not_found(nursery: trio.Nursery) -> None:
    """Spec 2025-06-18: resources/read of an unknown URI is -32002 with the URI in data."""
    pool = FakePool()
    pool.add(FakeBackend("alpha"))
    router = await make_router(pool, nursery)
    answer = await ask(router, FakeClient("c1"), "resources/read", uri="nowhere://x")
    assert answer["error"]["code"] == -32002
    assert answer["error"]["data"] == {"uri": "nowhere://x"}


async def test_a_resource_read_goes_to_the_backend_of_its_prefix_under_its_own_uri(
    nursery: trio.Nursery,
) -> None:
    """Router rule (calls 4): the public URI is swapped for the backend's."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha"))
    router = await make_router(pool, nursery)
    await ask(router, FakeClient("c1"), "resources/read", uri=public_uri("alpha", "file:///a.txt"))
    [sent] = alpha.sent
    assert (sent.method, sent.params) == ("resources/read", {"uri": "file:///a.txt"})


async def test_a_router_without_metrics_records_nothing_and_still_answers(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice: metrics default to a no-op object, never None."""
    pool = FakePool()
    router = await make_router(pool, nursery)
    answer = await ask(router, FakeClient("c1"), "tools/list", cursor="forged")
    assert answer["error"]["code"] == -32602
    assert (await ask(router, FakeClient("c1"), "ping"))["result"] == {}
