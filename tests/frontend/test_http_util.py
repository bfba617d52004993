"""Raw ASGI helpers: the request count a drain waits on, the headers an endpoint reads."""

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


def test_the_endpoint_headers_are_each_the_first_value_sent_or_none() -> None:
    """Gateway choice: read in one pass, a header sent twice counts by its first
    value, as a scan for it did (an Origin sent twice is judged by the first)."""
    scope = {
        "headers": [
            (b"origin", b"http://localhost"),
            (b"mcp-session-id", b"abc"),
            (b"origin", b"https://evil.example"),
            (b"user-agent", b"test"),
        ]
    }
    headers = h.mcp_headers(scope)
    assert headers.origin == b"http://localhost" == h.header(scope, b"origin")
    assert headers.session_id == b"abc"
    assert headers.host is None
    assert headers.protocol_version is None
