"""The response to one POSTed request: the plain JSON path and the SSE path.

Issue 17: a request that cannot have related messages (no progress token,
a client without the capabilities a backend's question needs) is routed in
the POST's own task, with no nursery, and answered with one JSON body; the
others keep the nursery and switch to SSE on their first related message.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import trio

from gateway.frontend.streamable.post_response import may_emit_related, respond_to_request

ANSWER = b'{"jsonrpc":"2.0","id":1,"result":{}}'
PROGRESS = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{}}'


class Recorder:
    """An ASGI ``send`` that keeps every message."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def __call__(self, message: Any) -> None:
        self.messages.append(dict(message))

    @property
    def start(self) -> dict[str, Any]:
        return self.messages[0]

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages[1:])

    def header(self, name: bytes) -> bytes | None:
        return dict(self.start["headers"]).get(name)


def _open_nurseries() -> int:
    """Nurseries open in the current task (pytest-trio may hold some of its own)."""
    return len(trio.lowlevel.current_task().child_nurseries)


def _raw(text: str) -> msgspec.Raw:
    return msgspec.Raw(text.encode())


@pytest.mark.parametrize(
    ("capabilities", "params", "expected"),
    [
        ({}, None, False),
        ({}, _raw('{"name":"echo","arguments":{"text":"hi"}}'), False),
        ({"experimental": {}}, _raw('{"name":"echo"}'), False),
        ({}, _raw('{"name":"echo","_meta":{"progressToken":7}}'), True),
        # An escaped key is still the key once decoded: the plain path must not guess.
        ({}, _raw('{"name":"echo","_meta":{"progress\\u0054oken":7}}'), True),
        ({}, _raw('{"name":"echo","arguments":{"text":"caf\\u00e9"}}'), True),
        ({}, _raw('{"name":"echo","arguments":{"text":"progressToken"}}'), True),
        ({"sampling": {}}, None, True),
        ({"elicitation": {}}, _raw('{"name":"echo"}'), True),
        ({"roots": {"listChanged": True}}, _raw('{"name":"echo"}'), True),
    ],
)
def test_only_a_progress_token_or_an_askable_capability_may_emit(
    capabilities: dict[str, Any], params: msgspec.Raw | None, expected: bool
) -> None:
    assert may_emit_related(capabilities, params) is expected


async def test_the_plain_path_routes_in_the_posts_own_task_and_answers_json() -> None:
    send = Recorder()
    seen: dict[str, Any] = {}

    async def route(emit: Any) -> bytes:
        seen["nurseries"] = _open_nurseries() - before
        seen["emitted"] = emit(PROGRESS)
        return ANSWER

    before = _open_nurseries()
    await respond_to_request(send, "sid", route, may_emit=False)
    assert seen == {"nurseries": 0, "emitted": False}
    assert send.start["status"] == 200
    assert send.header(b"content-type") == b"application/json"
    assert send.body == ANSWER
    assert len(send.messages) == 2  # head and body, nothing streamed


async def test_the_plain_path_keeps_the_answers_own_status() -> None:
    send = Recorder()

    async def route(emit: Any) -> bytes:
        return ANSWER

    await respond_to_request(send, None, route, lambda reply: 404, may_emit=False)
    assert send.start["status"] == 404
    assert send.body == ANSWER


async def test_a_request_cancelled_by_the_host_gets_no_answer_on_the_plain_path() -> None:
    send = Recorder()

    async def route(emit: Any) -> bytes:
        return b""

    await respond_to_request(send, "sid", route, may_emit=False)
    assert send.header(b"content-type") == b"text/event-stream"
    assert send.body == b""
    assert send.messages[-1]["more_body"] is False


async def test_a_request_that_may_emit_keeps_its_nursery_and_streams_the_answer_last() -> None:
    send = Recorder()
    seen: dict[str, Any] = {}

    async def route(emit: Any) -> bytes:
        seen["nurseries"] = _open_nurseries() - before
        seen["emitted"] = emit(PROGRESS)
        await trio.lowlevel.checkpoint()  # the writer runs while the call is in flight
        return ANSWER

    before = _open_nurseries()
    await respond_to_request(send, "sid", route, may_emit=True)
    assert seen == {"nurseries": 1, "emitted": True}
    assert send.header(b"content-type") == b"text/event-stream"
    assert send.header(b"mcp-session-id") == b"sid"
    assert send.body.index(PROGRESS) < send.body.index(ANSWER)


async def test_a_request_that_may_emit_but_does_not_still_answers_json() -> None:
    send = Recorder()

    async def route(emit: Any) -> bytes:
        return ANSWER

    await respond_to_request(send, "sid", route)
    assert send.header(b"content-type") == b"application/json"
    assert send.body == ANSWER
