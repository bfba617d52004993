"""Time for people: a question a backend asks the host does not spend ``timeouts.request``.

Robustness row E15. A real ``Backend`` in front of an in-memory fake server
whose tool asks the host one question (``elicitation/create``) and answers
with what it got back; a fake host answers after a set delay. Virtual time
(``autojump_clock``) makes "a person answers after 61 s" exact and instant.
"""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

import msgspec
import trio

from gateway.backends.backend import Backend, BackendState
from gateway.protocol import jsonrpc
from tests.backends.test_supervision import SEED, Transitions, one_backend
from tests.fakes import AskHost, FakeConnector, FakeMcpServer
from tests.router.fakes import FakeClient, FakePool, ask, make_router

REQUEST: Final = 60.0
INPUT: Final = 600.0
ANSWER: Final = {"action": "accept", "content": {"name": "Ada"}}


@asynccontextmanager
async def _gateway(
    nursery: trio.Nursery, answer_after: float, **timeouts: float
) -> AsyncIterator[tuple[Any, FakeClient, FakeMcpServer]]:
    """A router over one real backend whose tool ``ask`` elicits; a host answering late."""
    server = FakeMcpServer("alpha", tools={"ask": AskHost()})
    pool = FakePool()
    router = await make_router(pool, nursery)
    config = one_backend("alpha", timeouts={"request": REQUEST, "input": INPUT, **timeouts})

    async def on_request(
        backend: Backend, method: str, params: msgspec.Raw | None, client: str | None
    ) -> msgspec.Raw:
        return await router.backend_request(backend, method, params, client)

    transitions = Transitions()
    backend = Backend(
        config,
        on_change=transitions,
        on_request=on_request,
        connect=FakeConnector({"alpha": server}),
        rng=random.Random(SEED),
    )

    async def person(method: str, params: msgspec.Raw | None) -> msgspec.Raw:
        await trio.sleep(answer_after)
        return jsonrpc.to_raw(ANSWER)

    host = FakeClient("c1", capabilities={"elicitation": {}}, answer=person)
    async with trio.open_nursery() as inner:
        await inner.start(backend.run)
        await transitions.wait_for("alpha", BackendState.UP)
        pool.add(backend, tools=({"name": "ask", "inputSchema": {"type": "object"}},))  # type: ignore[arg-type]
        router.client_opened(host)
        yield router, host, server
        inner.cancel_scope.cancel()


async def test_an_elicitation_answered_after_the_request_timeout_completes_the_call(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Gateway choice (E15): the request clock stands still while a person answers."""
    async with _gateway(nursery, answer_after=REQUEST + 1) as (router, host, server):
        started = trio.current_time()
        answer = await ask(router, host, "tools/call", name="alpha__ask", arguments={})
        assert trio.current_time() - started == REQUEST + 1
        [block] = answer["result"]["content"]
        assert json.loads(block["text"]) == ANSWER
        assert server.messages("notifications/cancelled") == []


async def test_an_elicitation_unanswered_past_timeouts_input_ends_with_minus_32001(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Gateway choice (E15): at ``timeouts.input`` the backend's question gets -32001."""
    async with _gateway(nursery, answer_after=INPUT + 1, max_total=3600) as (router, host, _):
        started = trio.current_time()
        answer = await ask(router, host, "tools/call", name="alpha__ask", arguments={})
        assert trio.current_time() - started == INPUT
        [block] = answer["result"]["content"]
        assert block["text"] == "error -32001"


async def test_max_total_still_caps_a_call_that_waits_on_a_person(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Gateway choice (E15): ``timeouts.max_total`` caps the whole call, input time included."""
    async with _gateway(nursery, answer_after=INPUT + 1, max_total=300) as (router, host, server):
        started = trio.current_time()
        answer = await ask(router, host, "tools/call", name="alpha__ask", arguments={})
        assert trio.current_time() - started == 300
        assert answer["error"]["code"] == -32001
        await trio.testing.wait_all_tasks_blocked()
        [cancel] = server.messages("notifications/cancelled")
        assert cancel.time == started + 300
