"""Held calls under a virtual clock: expiry and bounds (``gateway/router/stateless/held_calls.py``).

The backend is a fake whose own request runs in a task of its own, as a
real backend's does (the reader's task, not the call's), so the tests see
both what the backend was answered and whether its call was cancelled, at
exact virtual times.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import trio
import trio.lowlevel

from gateway.errors import LocalProtocolError
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.jsonrpc import Request
from gateway.protocol.stateless.envelope import Envelope
from gateway.protocol.stateless.error_codes import ModernProtocolError
from gateway.router.context import ModernRequest
from gateway.router.stateless.held_calls import GATHER_WINDOW, HeldCalls, sealer_for

LIFETIME = 30.0
PARAMS: dict[str, Any] = {"name": "t", "arguments": {}}


class FakeBackend:
    """A legacy backend whose tool asks for roots once, then answers with them."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self.nursery = nursery
        self.refused: list[tuple[float, int]] = []
        self.cancelled: list[float] = []

    async def run(self, request: ModernRequest, message: Request, params: dict[str, Any]) -> bytes:
        done = trio.Event()
        box: dict[str, msgspec.Raw] = {}

        async def own_request() -> None:
            try:
                box["roots"] = await request.ask("b", "roots/list", None)
            except LocalProtocolError as exc:
                self.refused.append((trio.current_time(), exc.code))
            done.set()

        self.nursery.start_soon(own_request)
        try:
            with request.scope:
                await done.wait()
                return jsonrpc.encode_response(message.id, box.get("roots", mcp.encode({})))
        except trio.Cancelled:
            self.cancelled.append(trio.current_time())
            raise
        failure = request.failure
        assert failure is not None
        return jsonrpc.encode_error(message.id, failure.code, failure.message, failure.data)


def _request(principal: str | None = None) -> ModernRequest:
    caps = {"roots": {}}
    return ModernRequest(
        envelope=Envelope(protocol_version="2026-07-28", client_capabilities=caps),
        emit=lambda m: True,
        principal=principal,
    )


async def _first(
    table: HeldCalls, backend: FakeBackend, msg_id: int = 1, principal: str | None = None
) -> dict[str, Any]:
    reply = await table.serve(
        _request(principal), Request(msg_id, "tools/call", None), PARAMS, backend.run
    )
    message = jsonrpc.decode(reply)
    assert isinstance(message, jsonrpc.Response)
    result = mcp.decode_object(message.result)
    assert result is not None
    return result


async def _retry(
    table: HeldCalls, backend: FakeBackend, state: str, key: str, principal: str | None = None
) -> bytes:
    params = {**PARAMS, "inputResponses": {key: {"roots": []}}, "requestState": state}
    return await table.serve(
        _request(principal), Request(9, "tools/call", None), params, backend.run
    )


async def test_a_retry_completes_the_held_call_with_the_backends_answer(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    table = HeldCalls(sealer_for("k"), lifetime=LIFETIME)
    await nursery.start(table.run)
    backend = FakeBackend(nursery)
    first = await _first(table, backend)
    assert first["resultType"] == "input_required"
    ((key, entry),) = first["inputRequests"].items()
    assert entry == {"method": "roots/list"}
    assert len(table) == 1
    await trio.sleep(LIFETIME - 1)  # still inside the lifetime
    reply = jsonrpc.decode(await _retry(table, backend, first["requestState"], key))
    assert isinstance(reply, jsonrpc.Response) and reply.id == 9
    assert mcp.decode_object(reply.result) == {"roots": []}
    await trio.lowlevel.checkpoint()
    assert len(table) == 0
    assert backend.refused == [] and backend.cancelled == []


async def test_expiry_answers_the_backend_cancels_its_call_and_leaves_nothing(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    table = HeldCalls(sealer_for("k"), lifetime=LIFETIME)
    await nursery.start(table.run)
    backend = FakeBackend(nursery)
    start = trio.current_time()
    first = await _first(table, backend)
    await trio.sleep(LIFETIME + 5)
    expired_at = start + GATHER_WINDOW + LIFETIME  # the round answers after gathering
    assert backend.cancelled == [expired_at]
    assert backend.refused == [(expired_at, -32001)]
    assert len(table) == 0
    key = next(iter(first["inputRequests"]))
    with pytest.raises(ModernProtocolError) as caught:
        await _retry(table, backend, first["requestState"], key)
    assert caught.value.code == -32602
    assert caught.value.message.startswith("Invalid or expired requestState")


async def test_the_table_is_bounded_and_a_call_beyond_it_fails_at_once(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    table = HeldCalls(sealer_for("k"), max_held=1, lifetime=LIFETIME)
    await nursery.start(table.run)
    backend = FakeBackend(nursery)
    start = trio.current_time()
    first = await _first(table, backend, 1)
    reply = await table.serve(_request(), Request(2, "tools/call", None), PARAMS, backend.run)
    error = jsonrpc.decode(reply)
    assert isinstance(error, jsonrpc.ErrorResponse) and error.id == 2
    assert error.code == -32603 and "too many" in error.message
    # the backend is answered at once, when the first round has answered
    assert backend.refused == [(start + GATHER_WINDOW, -32603)]
    assert len(table) == 1  # only the first call is held
    key = next(iter(first["inputRequests"]))
    assert jsonrpc.decode(await _retry(table, backend, first["requestState"], key))
    await trio.lowlevel.checkpoint()
    assert len(table) == 0


async def test_the_host_leaving_mid_round_cancels_the_call(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    table = HeldCalls(sealer_for("k"), lifetime=LIFETIME)
    await nursery.start(table.run)
    started = trio.Event()
    cancelled: list[float] = []

    async def slow(request: ModernRequest, message: Request, params: dict[str, Any]) -> bytes:
        try:
            started.set()
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.append(trio.current_time())
            raise
        raise AssertionError  # pragma: no cover

    with trio.move_on_after(5):
        await table.serve(_request(), Request(1, "tools/call", None), PARAMS, slow)
    await trio.sleep(1)
    assert started.is_set() and len(cancelled) == 1
    assert len(table) == 0


async def test_requests_sent_together_are_asked_in_one_round(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    table = HeldCalls(sealer_for("k"), lifetime=LIFETIME)
    await nursery.start(table.run)

    async def two_at_once(
        request: ModernRequest, message: Request, params: dict[str, Any]
    ) -> bytes:
        got: list[msgspec.Raw] = []

        async def one(delay: float) -> None:
            await trio.sleep(delay)
            got.append(await request.ask("b", "roots/list", None))

        async with trio.open_nursery() as inner:
            inner.start_soon(one, 0)
            inner.start_soon(one, GATHER_WINDOW / 2)  # within the window of the first
        return jsonrpc.encode_response(message.id, mcp.encode({"n": len(got)}))

    reply = await table.serve(_request(), Request(1, "tools/call", None), PARAMS, two_at_once)
    message = jsonrpc.decode(reply)
    assert isinstance(message, jsonrpc.Response)
    first = mcp.decode_object(message.result)
    assert first is not None and len(first["inputRequests"]) == 2
    answers = {key: {"roots": []} for key in first["inputRequests"]}
    params = {**PARAMS, "inputResponses": answers, "requestState": first["requestState"]}
    done = jsonrpc.decode(
        await table.serve(_request(), Request(2, "tools/call", None), params, two_at_once)
    )
    assert isinstance(done, jsonrpc.Response)
    assert mcp.decode_object(done.result) == {"n": 2}


async def test_a_request_state_made_for_one_principal_does_not_verify_for_another(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """A45: Issue 16 item 5: sealed requestState is bound to the principal that got it."""
    table = HeldCalls(sealer_for("k"), lifetime=LIFETIME)
    await nursery.start(table.run)
    backend = FakeBackend(nursery)
    first = await _first(table, backend, principal="token:alice")
    key = next(iter(first["inputRequests"]))
    for other in ("token:bob", None):
        with pytest.raises(ModernProtocolError) as caught:
            await _retry(table, backend, first["requestState"], key, principal=other)
        assert caught.value.code == -32602
    reply = jsonrpc.decode(
        await _retry(table, backend, first["requestState"], key, principal="token:alice")
    )
    assert isinstance(reply, jsonrpc.Response)
    assert mcp.decode_object(reply.result) == {"roots": []}


class NamingBackend:
    """A legacy backend whose tool elicits twice at once, one request naming its key."""

    async def run(self, request: ModernRequest, message: Request, params: dict[str, Any]) -> bytes:
        answers: dict[str, Any] = {}

        async def elicit(label: str, meta: dict[str, Any]) -> None:
            asked = {"message": label, "requestedSchema": {"type": "object"}, "_meta": meta}
            answers[label] = mcp.decode_object(
                await request.ask("b", "elicitation/create", mcp.encode(asked))
            )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(elicit, "named", {"dev.mcp-gateway/inputKey": "user_name"})
            nursery.start_soon(elicit, "plain", {})
        return jsonrpc.encode_response(message.id, mcp.encode(answers))


async def test_a_key_the_backend_names_is_the_hosts_key_and_its_answer_comes_back(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Gateway convention (issue 14): ``_meta["dev.mcp-gateway/inputKey"]`` names the
    inputRequests key (input-required-result-basic-elicitation wants ``user_name``)."""
    table = HeldCalls(sealer_for("k"), lifetime=LIFETIME)
    await nursery.start(table.run)
    request = ModernRequest(
        envelope=Envelope(protocol_version="2026-07-28", client_capabilities={"elicitation": {}}),
        emit=lambda m: True,
    )
    reply = jsonrpc.decode(
        await table.serve(request, Request(1, "tools/call", None), PARAMS, NamingBackend().run)
    )
    assert isinstance(reply, jsonrpc.Response)
    first = mcp.decode_object(reply.result)
    assert first is not None
    asked = first["inputRequests"]
    (other,) = set(asked) - {"user_name"}
    assert other in ("1", "2")  # the plain request's: the gateway's counter
    assert asked["user_name"]["params"] == {
        "message": "named",
        "requestedSchema": {"type": "object"},
    }
    responses = {
        key: {"action": "accept", "content": {"who": key}, "resultType": "complete"}
        for key in asked
    }
    retry = {**PARAMS, "inputResponses": responses, "requestState": first["requestState"]}
    final = jsonrpc.decode(
        await table.serve(
            ModernRequest(envelope=request.envelope, emit=lambda m: True),
            Request(2, "tools/call", None),
            retry,
            NamingBackend().run,
        )
    )
    assert isinstance(final, jsonrpc.Response)
    result = mcp.decode_object(final.result)
    assert result is not None
    assert result["named"] == {"action": "accept", "content": {"who": "user_name"}}
    assert result["plain"] == {"action": "accept", "content": {"who": other}}


async def test_a_round_waits_for_the_backends_timeouts_input_when_no_lifetime_is_set(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Gateway choice (E15): ``mrtr.held_call_lifetime`` unset follows ``timeouts.input``."""
    table = HeldCalls(sealer_for("k"), input_bound=lambda backend: 45.0)
    await nursery.start(table.run)
    backend = FakeBackend(nursery)
    start = trio.current_time()
    await _first(table, backend)
    await trio.sleep(100)
    assert backend.refused == [(start + GATHER_WINDOW + 45.0, -32001)]
