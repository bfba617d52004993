"""Issue 5: list_changed on the GET stream, and resuming it with Last-Event-ID.

The real peer is the bundled notes demo: adding a note makes it send
``notifications/resources/list_changed``; the gateway re-lists, sees the
merged view changed and tells every host on its GET stream.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import httpx
import trio

from tests.harness import gateway_config, initialize_message, start_gateway, stdio_backend

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


async def _open_session(http: httpx.AsyncClient, url: str) -> dict[str, str]:
    body = initialize_message("g")
    init = await http.post(url, headers=HEADERS, content=json.dumps(body))
    headers = {
        **HEADERS,
        "mcp-session-id": init.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-11-25",
    }
    note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    assert (await http.post(url, headers=headers, content=note)).status_code == 202
    return headers


async def _add_note(http: httpx.AsyncClient, url: str, headers: dict[str, str], title: str) -> None:
    call = {
        "jsonrpc": "2.0",
        "id": title,
        "method": "tools/call",
        "params": {"name": "notes__add_note", "arguments": {"title": title, "text": "x"}},
    }
    response = await http.post(url, headers=headers, content=json.dumps(call))
    assert response.status_code == 200


async def _next_event(lines: Any) -> tuple[int, dict[str, Any]]:
    event_id = None
    async for line in lines:
        if line.startswith("id: "):
            event_id = int(line[4:])
        elif line.startswith("data: "):
            assert event_id is not None
            return event_id, json.loads(line[6:])
    raise AssertionError("stream ended")


async def test_list_changed_reaches_the_get_stream_and_a_reconnect_resumes_after_its_last_id(
    nursery: trio.Nursery,
) -> None:
    """Spec (issue 5): events carry ids; Last-Event-ID replays what was missed, once."""
    config = gateway_config(
        [stdio_backend("notes", [sys.executable, "-m", "mcp_gateway_demo.notes"])],
        notifications={"debounce": 0.05},
    )
    running = await start_gateway(nursery, config)
    url = running.url
    async with httpx.AsyncClient(timeout=10) as http:
        headers = await _open_session(http, url)
        stream_headers = {**headers, "accept": "text/event-stream"}
        with trio.fail_after(10):
            async with http.stream("GET", url, headers=stream_headers) as stream:
                assert stream.status_code == 200
                lines = stream.aiter_lines()
                await _add_note(http, url, headers, "first")
                first_id, first = await _next_event(lines)
                assert first["method"] == "notifications/resources/list_changed"
            # The stream is closed; two more changes happen while it is away.
            await _add_note(http, url, headers, "second")
            session = running.gateway.clients.get(headers["mcp-session-id"])
            assert session is not None
            # The change reaches the outbox through the backend's re-list, in
            # the gateway's own tasks; nothing here can wait on it but a poll.
            with trio.fail_after(10):
                while session.outbox.last_id <= first_id:  # noqa: ASYNC110
                    await trio.sleep(0.02)
            resume = {**stream_headers, "last-event-id": str(first_id)}
            async with http.stream("GET", url, headers=resume) as stream:
                missed_id, missed = await _next_event(stream.aiter_lines())
        assert missed_id == first_id + 1
        assert missed["method"] == "notifications/resources/list_changed"
