"""gateway.session.peer.Peer over a scripted MessageChannel, no network.

A channel written for the test decides exactly what the peer reads and
when the link breaks, so orderings that a real transport produces only now
and then (an answer, then at once the break) happen every run.
"""

from __future__ import annotations

import pytest
import trio

from gateway.errors import SessionExpired, TransportBroken
from gateway.protocol import jsonrpc
from gateway.session.peer import open_session

DEADLINE = 5.0


class AnswerThenBreak:
    """Answers the first request it is sent, then breaks with ``reason`` at once."""

    def __init__(self, reason: TransportBroken) -> None:
        self.reason = reason
        self._sent = trio.Event()
        self._answered = False

    async def send(self, message: bytes) -> None:
        self._sent.set()

    async def receive(self) -> bytes:
        if self._answered:
            raise self.reason  # no checkpoint: the break follows the answer at once
        await self._sent.wait()
        self._answered = True
        return jsonrpc.encode_response(1, jsonrpc.to_raw({"ok": True}))

    async def aclose(self) -> None:
        pass


async def test_an_answer_that_arrived_before_the_link_broke_is_kept() -> None:
    """Rule 2: the answer ends the wait; the break that follows it does not replace it."""
    channel = AnswerThenBreak(TransportBroken("gone"))
    with trio.fail_after(DEADLINE):
        async with open_session(channel) as peer:
            result = await peer.request("tools/list")
            await peer.closed.wait()
    assert jsonrpc.from_raw(result) == {"ok": True}
    assert isinstance(peer.close_reason, TransportBroken)


async def test_a_request_sent_after_the_session_expired_raises_session_expired() -> None:
    """The close reason keeps its type: a later request sees SessionExpired itself."""
    channel = AnswerThenBreak(SessionExpired("session expired (404)"))
    with trio.fail_after(DEADLINE):
        async with open_session(channel) as peer:
            await peer.request("tools/list")
            await peer.closed.wait()
            with pytest.raises(SessionExpired):
                await peer.request("tools/list")
