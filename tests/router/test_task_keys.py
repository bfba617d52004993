"""Keys of a task's input requests (``gateway/router/stateless/gateway_tasks.py`` ``TaskRequest``).

A task's input keys are unique over its whole life (sep-2663); a key a
handshake-era backend names in ``_meta["dev.mcp-gateway/inputKey"]`` is
used once, and asked again later the gateway's own key stands in.
"""

from __future__ import annotations

from typing import Any

import trio

from gateway.protocol import mcp
from gateway.protocol.stateless.envelope import Envelope
from gateway.protocol.stateless.mrtr import INPUT_KEY_META
from gateway.protocol.stateless.tasks import TaskTable
from gateway.router.context import TaskRequest


def _elicit(key: str) -> Any:
    return mcp.encode(
        {"message": "Name?", "requestedSchema": {"type": "object"}, "_meta": {INPUT_KEY_META: key}}
    )


async def test_a_named_key_is_used_once_over_the_tasks_life() -> None:
    """Spec (sep-2663): task input keys are unique over the task's life."""
    task = TaskTable(4).new(None, "t", 0.0, ttl_ms=1000, poll_interval_ms=100)
    request = TaskRequest(
        envelope=Envelope(protocol_version="2026-07-28", client_capabilities={"elicitation": {}}),
        task=task,
    )
    keys: list[str] = []
    answers: list[Any] = []
    async with trio.open_nursery() as nursery:
        for round_no in range(2):
            done = trio.Event()

            async def ask(done: trio.Event = done) -> None:
                answers.append(await request.ask("b", "elicitation/create", _elicit("user_name")))
                done.set()

            nursery.start_soon(ask)
            await trio.testing.wait_all_tasks_blocked()
            (key,) = task.input_requests
            assert INPUT_KEY_META not in task.input_requests[key]["params"].get("_meta", {})
            keys.append(key)
            request.update(
                {"inputResponses": {key: {"action": "accept", "content": {"n": round_no}}}}
            )
            await done.wait()
    assert keys == ["user_name", "2"]
    assert [mcp.decode_object(a) for a in answers] == [
        {"action": "accept", "content": {"n": 0}},
        {"action": "accept", "content": {"n": 1}},
    ]
