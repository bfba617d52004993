"""The frontend's request count, which a drain waits on before it closes connections."""

from __future__ import annotations

import trio
import trio.testing

from gateway.frontend import http_util as h


async def test_wait_idle_returns_at_once_when_nothing_is_handled() -> None:
    """Gateway choice: a drain with no request in flight does not wait."""
    activity = h.Activity()
    with trio.fail_after(1):
        await activity.wait_idle()


async def test_wait_idle_returns_when_the_last_of_several_requests_ends(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice (graceful shutdown): the drain waits for every response
    being written, not for the first to end."""
    activity = h.Activity()
    done = trio.Event()

    async def drain() -> None:
        await activity.wait_idle()
        done.set()

    with activity:
        with activity:  # a second request, which ends first
            nursery.start_soon(drain)
            await trio.testing.wait_all_tasks_blocked()
        await trio.testing.wait_all_tasks_blocked()
        assert not done.is_set()
    with trio.fail_after(1):
        await done.wait()
    assert activity.active == 0
