"""Robustness row E18: an unexpected exception on any request path ends no process.

A real gateway (both HTTP engines, and the stdio frontend) in front of the ``headers`` test peer
(official SDK 1.x). Before it starts, one router handler is made to raise
``sqlite3.OperationalError`` (a broken disk under a search index is the
kind of fault no peer can produce); a host of each era then calls that
route. The gateway runs in the test's nursery, so an exception escaping
into the router's nursery would end the test the way it ends the process.
Each request gets one -32603 and one ``request.internal_error`` line; the
next request on another route is answered.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any, Final

import pytest
from structlog.testing import capture_logs

from gateway.router.calls import Calls
from gateway.router.lists import Lists
from gateway.router.search_mode import SearchMode
from tests.frontend.test_modern_http import HEADERS, modern, send
from tests.frontend.test_stdio_modern import serve
from tests.frontend.test_streamable_http import initialize_request, request
from tests.harness import gateway_config, start_gateway
from tests.robustness.support import http_client, initialize

if TYPE_CHECKING:
    import trio

pytestmark = pytest.mark.usefixtures("engine")

INTERNAL_ERROR: Final = -32603
# Route -> (the handler planted with the fault, the request's params).
ROUTES: Final[dict[str, tuple[type, str, dict[str, Any]]]] = {
    "tools/call": (SearchMode, "call_tool", {"name": "headers__ask", "arguments": {}}),
    "tools/list": (Lists, "list_tools", {}),
    "prompts/get": (Calls, "get_prompt", {"name": "headers__p"}),
    "resources/read": (Calls, "read_resource", {"uri": "headers+x://y"}),
}


def _plant_all(monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(self: object, call: object, params: object) -> Any:
        raise sqlite3.OperationalError("disk I/O error")

    for owner, name, _ in ROUTES.values():
        monkeypatch.setattr(owner, name, broken)


def _internal_errors(logs: list[Any]) -> list[Any]:
    return [line for line in logs if line["event"] == "request.internal_error"]


async def test_a_fault_planted_in_each_handshake_era_route_is_one_minus_32603_and_all_else_works(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gateway choice (E18): -32603 and one log line per request; the gateway answers on."""
    _plant_all(monkeypatch)
    running = await start_gateway(nursery, gateway_config([HEADERS]))
    async with http_client(running) as client:
        host = await initialize(client)
        for route, (_, _, params) in ROUTES.items():
            with capture_logs() as logs:
                reply = await host.request(route, params)
            assert reply.error is not None and reply.error["code"] == INTERNAL_ERROR, route
            assert reply.error["message"] == "internal error"
            [line] = _internal_errors(logs)
            assert isinstance(line["exc_info"], sqlite3.OperationalError)
        assert (await host.ping()).error is None
        assert (await host.request("resources/templates/list", {})).error is None


async def test_a_fault_planted_in_each_2026_07_28_route_is_one_minus_32603_and_all_else_works(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gateway choice (E18): also where the call runs in the router's nursery (a held call)."""
    _plant_all(monkeypatch)
    running = await start_gateway(nursery, gateway_config([HEADERS]))
    async with http_client(running) as client:
        for number, (route, (_, _, params)) in enumerate(ROUTES.items(), start=1):
            with capture_logs() as logs:
                response = await send(client, modern(number, route, params))
            body = response.json()
            assert body["error"]["code"] == INTERNAL_ERROR, (route, body)
            [line] = _internal_errors(logs)
            assert isinstance(line["exc_info"], sqlite3.OperationalError)
        after = await send(client, modern(9, "resources/templates/list", {}))
        assert "result" in after.json(), after.text


async def test_a_fault_planted_in_each_route_over_stdio_is_one_minus_32603_in_both_eras(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gateway choice (E18): the stdio frontend, a legacy session then modern requests."""
    _plant_all(monkeypatch)
    running = await start_gateway(nursery, gateway_config([HEADERS]))
    host = await serve(nursery, running)
    assert "result" in await host.ask(initialize_request())
    await host.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    for number, (route, (_, _, params)) in enumerate(ROUTES.items(), start=1):
        with capture_logs() as logs:
            legacy = await host.ask(request(number, route, params))
        assert legacy["error"]["code"] == INTERNAL_ERROR, (route, legacy)
        assert len(_internal_errors(logs)) == 1
    assert "result" in await host.ask(request(9, "ping", {}))
    stateless = await serve(nursery, running)
    for number, (route, (_, _, params)) in enumerate(ROUTES.items(), start=11):
        with capture_logs() as logs:
            answer = await stateless.ask(modern(number, route, params))
        assert answer["error"]["code"] == INTERNAL_ERROR, (route, answer)
        assert len(_internal_errors(logs)) == 1
    assert "result" in await stateless.ask(modern(19, "resources/templates/list", {}))
