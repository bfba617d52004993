"""MRTR bridge, over HTTP: a legacy backend's elicitation becomes ``input_required``.

A real gateway in front of the ``headers`` test peer (official SDK 1.x,
handshake era), spoken to with ``httpx`` as a 2026-07-28 host: the
backend's ``elicitation/create`` during ``tools/call`` comes back as
``input_required``, the retry with ``inputResponses`` completes with the
backend's real result, and a bad ``requestState`` is -32602
(``S/basic/patterns/mrtr.mdx``; ``gateway/router/stateless/held_calls.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import pytest
import trio

from tests.frontend.test_modern_http import HEADERS, envelope, send
from tests.frontend.test_streamable_http import error_of, http_client, request
from tests.harness import Running, gateway_config, start_gateway

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    import httpx


pytestmark = pytest.mark.usefixtures("engine")

ELICIT_CAPS: Final[dict[str, Any]] = {"elicitation": {"form": {}}}


def call(msg_id: int, name: str, **extra: Any) -> dict[str, Any]:
    """A modern tools/call that declares elicitation; ``extra`` adds params."""
    meta = envelope(**{"io.modelcontextprotocol/clientCapabilities": ELICIT_CAPS})
    return request(msg_id, "tools/call", {"name": name, "arguments": {}, **extra, "_meta": meta})


@pytest.fixture(name="running")
async def _running(nursery: trio.Nursery) -> Running:
    return await start_gateway(nursery, gateway_config([HEADERS]))


@pytest.fixture(name="client")
async def _client(running: Running) -> AsyncIterator[httpx.AsyncClient]:
    async with http_client(running) as client:
        yield client


async def _ask(client: httpx.AsyncClient, msg_id: int) -> dict[str, Any]:
    response = await send(client, call(msg_id, "headers__ask"))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["id"] == msg_id
    return dict(body["result"])


async def test_an_elicitation_becomes_input_required_and_the_retry_completes(
    client: httpx.AsyncClient, running: Running
) -> None:
    """mrtr.mdx: input_required, then the retry (new id) gets the backend's own result."""
    first = await _ask(client, 1)
    assert first["resultType"] == "input_required"
    assert "ttlMs" not in first
    ((key, entry),) = first["inputRequests"].items()
    assert entry["method"] == "elicitation/create"
    assert entry["params"]["message"] == "Name?"
    assert "id" not in entry and "jsonrpc" not in entry
    state = first["requestState"]
    retry = call(2, "headers__ask", inputResponses={key: {"action": "decline"}}, requestState=state)
    response = await send(client, retry)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["id"] == 2
    assert body["result"]["resultType"] == "complete"
    assert body["result"]["content"][0]["text"] == "decline"
    assert len(running.gateway.router._held) == 0  # nothing left pending
    # Single use: the same state again names no held call.
    again = await send(client, {**retry, "id": 3})
    assert (again.status_code, error_of(again)["code"]) == (400, -32602)


async def test_a_tampered_or_foreign_state_is_32602_and_the_call_stays_held(
    client: httpx.AsyncClient, running: Running
) -> None:
    """mrtr.mdx §Security: tampered state, or state for another request, is rejected."""
    first = await _ask(client, 10)
    key, state = next(iter(first["inputRequests"])), first["requestState"]
    answer = {key: {"action": "accept", "content": {"name": "x"}}}
    flipped = state[:-2] + ("A" if state[-2] != "A" else "B") + state[-1]
    for bad in (flipped, state + "x", "nonsense"):
        response = await send(
            client, call(11, "headers__ask", inputResponses=answer, requestState=bad)
        )
        assert (response.status_code, error_of(response)["code"]) == (400, -32602)
        assert error_of(response)["message"].startswith("Invalid or expired requestState")
    other = call(12, "headers__lookup", inputResponses=answer, requestState=state)
    other["params"]["arguments"] = {"region": "x"}
    response = await send(client, other, **{"Mcp-Param-Region": "x"})
    assert (response.status_code, error_of(response)["code"]) == (400, -32602)
    # The genuine retry still completes the held call.
    good = call(13, "headers__ask", inputResponses=answer, requestState=state)
    response = await send(client, good)
    assert response.json()["result"]["content"][0]["text"] == "accept"


async def test_a_retry_missing_the_answer_is_asked_again(client: httpx.AsyncClient) -> None:
    """mrtr.mdx §Error Handling: missing responses are asked again, not failed."""
    first = await _ask(client, 20)
    key = next(iter(first["inputRequests"]))
    retry = call(21, "headers__ask", inputResponses={}, requestState=first["requestState"])
    second = (await send(client, retry)).json()["result"]
    assert second["resultType"] == "input_required"
    assert list(second["inputRequests"]) == [key]
    assert second["requestState"] != first["requestState"]
    done = call(
        22,
        "headers__ask",
        inputResponses={key: {"action": "cancel"}},
        requestState=second["requestState"],
    )
    assert (await send(client, done)).json()["result"]["content"][0]["text"] == "cancel"


async def test_a_state_from_another_gateway_names_no_held_call(
    client: httpx.AsyncClient, nursery: trio.Nursery
) -> None:
    """docs/eras.md: held calls need the same replica; another one says so clearly."""
    other = await start_gateway(
        nursery, gateway_config([HEADERS], mrtr={"state_secret": "shared-secret"})
    )
    async with http_client(other) as elsewhere:
        first = await _ask(elsewhere, 30)
    same_secret = await start_gateway(
        nursery, gateway_config([HEADERS], mrtr={"state_secret": "shared-secret"})
    )
    async with http_client(same_secret) as replica:
        retry = call(31, "headers__ask", inputResponses={}, requestState=first["requestState"])
        response = await send(replica, retry)
    error = error_of(response)
    assert (response.status_code, error["code"]) == (400, -32602)
    assert "holds no call" in error["message"] and "another replica" in error["message"]


async def test_an_abandoned_held_call_does_not_block_the_next_calls_question(
    client: httpx.AsyncClient,
) -> None:
    """to_clients rule 1: a call waiting for its retry is no candidate owner."""
    abandoned = await _ask(client, 40)
    assert abandoned["resultType"] == "input_required"
    second = await _ask(client, 41)  # the backend asks again, for the new call
    assert second["resultType"] == "input_required"
    key = next(iter(second["inputRequests"]))
    retry = call(
        42,
        "headers__ask",
        inputResponses={key: {"action": "accept"}},
        requestState=second["requestState"],
    )
    assert (await send(client, retry)).json()["result"]["content"][0]["text"] == "accept"
