"""Robustness rows D1-D12, B5 and B6: what the gateway does with a stdio backend that misbehaves.

Each test runs the real gateway in-process (``tests/harness.py``) in front of
``tests/servers/misbehaving.py``, a real child process whose misbehaviour is
chosen by flags, and talks to ``/mcp`` in raw HTTP as a host would. The
docstring of each test starts with the row of docs/robustness.md it checks.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import trio
from structlog.testing import capture_logs

from gateway.backends.state import BackendState
from gateway.catalog.naming import NamingRules, public_name
from gateway.catalog.snapshot import Kind
from gateway.transports.stdio import STDERR_LINE_LIMIT
from tests.harness import Running, gateway_config, start_gateway, wait_for_states
from tests.robustness.support import (
    MIB,
    Host,
    Reply,
    misbehaving,
    open_host,
    peak_rss_growth,
    wait_until,
)
from tests.servers.misbehaving import WEIRD_NAMES

HOST_SAFE: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
INTERNAL_ERROR: Final = -32603
METHOD_NOT_FOUND: Final = -32601


def events(logs: Sequence[Mapping[str, Any]], name: str) -> list[Mapping[str, Any]]:
    """The captured log entries of one event."""
    return [entry for entry in logs if entry.get("event") == name]


def assert_unavailable(reply: Reply, backend: str) -> None:
    """The answer is -32603 with data.reason backend_unavailable naming ``backend``."""
    error = reply.error
    assert error is not None, reply.answer
    assert error["code"] == INTERNAL_ERROR, error
    assert error["data"]["reason"] == "backend_unavailable", error
    assert error["data"]["backend"] == backend, error


async def list_all_tools(host: Host) -> list[str]:
    """Walk tools/list to the end as a host does; return every public name."""
    names: list[str] = []
    params: dict[str, Any] | None = None
    with trio.fail_after(30):
        while True:
            reply = await host.request("tools/list", params)
            result = reply.answer["result"]
            names.extend(tool["name"] for tool in result["tools"])
            cursor = result.get("nextCursor")
            if cursor is None:
                return names
            params = {"cursor": cursor}


# -- D1 / B5: junk on stdout ---------------------------------------------------


async def test_banner_and_log_lines_on_stdout_are_dropped_counted_and_calls_succeed(
    nursery: trio.Nursery,
) -> None:
    """D1: non-JSON lines on a backend's stdout are dropped and counted, the warning about
    them is rate-limited, and the session stays up."""
    with capture_logs() as logs:
        config = gateway_config([misbehaving("noisy", "--banner", "3", "--junk-per-message")])
        running = await start_gateway(nursery, config)
        async with open_host(running) as host:
            for i in range(20):
                assert (await host.call("noisy__echo", {"text": f"n{i}"})).text == f"n{i}"
            written = int((await host.call("noisy__stats")).text)
    backend = running.gateway.pool.backends["noisy"]
    # No metric counts dropped lines yet (dropped_stdout_lines_total{server}):
    # the session's own counter is what there is.
    assert backend._peer is not None
    # 3 banner lines, then one per message: the answer to the 2026-07-28
    # probe, initialize, the lists, 20 calls and the stats call.
    assert backend._peer.junk_lines == written == 3 + 24
    assert backend.state is BackendState.UP
    assert backend.initializations == 1
    warnings = events(logs, "session.junk_dropped")
    assert 1 <= len(warnings) <= 5, warnings


async def test_a_thousand_calls_through_junk_interleaved_on_stdout_all_succeed(
    nursery: trio.Nursery,
) -> None:
    """B5: with a banner and one junk line before every message, 1 000 calls all succeed and
    the dropped-lines count equals the junk lines the backend wrote."""
    config = gateway_config([misbehaving("noisy", "--banner", "2", "--junk-per-message")])
    running = await start_gateway(nursery, config)
    answered: list[str] = []

    async def worker(host: Host, first: int) -> None:
        for i in range(first, first + 100):
            reply = await host.call("noisy__echo", {"text": str(i)})
            answered.append(reply.text)

    async with open_host(running) as host:
        with trio.fail_after(60):
            async with trio.open_nursery() as workers:
                for first in range(0, 1000, 100):
                    workers.start_soon(worker, host, first)
        written = int((await host.call("noisy__stats")).text)
    assert sorted(answered, key=int) == [str(i) for i in range(1000)]
    peer = running.gateway.pool.backends["noisy"]._peer
    assert peer is not None
    # banner, the probe's answer, initialize, tools/list, 1000 calls, stats.
    assert peer.junk_lines == written == 2 + 1 + 1 + 1 + 1000 + 1


# -- D2 / B6: an endless line ----------------------------------------------------


async def test_an_endless_stdout_line_fails_pending_calls_fast_bounds_memory_and_restarts(
    nursery: trio.Nursery,
) -> None:
    """D2/B6: a 20 MiB line past max_line_bytes (4 MiB) closes that backend connection: every
    pending call fails with -32603 within 1 s, the gateway's memory grows by less than three
    times the limit (the buffer, the copy a reallocation of it makes, and the rest of the
    test process: 5.3 MiB alone, 8.6 MiB once under coverage in a loaded full run), far
    below the 20 MiB line, and the backend restarts (with backoff) and serves again."""
    limit = 4 * MIB
    backend_entry = misbehaving(
        "huge", max_line_bytes=limit, restart={"initial_delay": 0.1, "max_delay": 1}
    )
    running = await start_gateway(nursery, gateway_config([backend_entry]))
    backend = running.gateway.pool.backends["huge"]
    replies: dict[str, tuple[Reply, float]] = {}

    async def call(host: Host, tool: str, arguments: dict[str, Any]) -> None:
        reply = await host.call(tool, arguments)
        replies[tool] = (reply, trio.current_time())

    async with open_host(running) as host:
        assert (await host.call("huge__echo", {"text": "warm-up"})).text == "warm-up"
        with trio.fail_after(10):
            async with peak_rss_growth() as growth, trio.open_nursery() as calls:
                calls.start_soon(call, host, "huge__hang", {})
                with trio.fail_after(5):
                    await wait_until(lambda: backend.in_flight == 1)
                started = trio.current_time()
                calls.start_soon(call, host, "huge__huge", {"mib": 20})
        for tool in ("huge__hang", "huge__huge"):
            reply, at = replies[tool]
            assert_unavailable(reply, "huge")
            assert at - started <= 1.0, (tool, at - started)
        assert growth() < 3 * limit, f"RSS grew by {growth() / MIB:.1f} MiB"
        with trio.fail_after(10):
            await wait_until(lambda: backend.restarts == 1 and backend.state is BackendState.UP)
        assert (await host.call("huge__echo", {"text": "after"})).text == "after"


async def test_a_chunked_upload_past_the_body_limit_is_413_and_memory_stays_bounded(
    nursery: trio.Nursery,
) -> None:
    """B6: a 5 MiB chunked body (no Content-Length) against a 2 MiB limit gets 413; the
    gateway's memory grows by less than twice the limit; the next call succeeds."""
    limit = 2 * MIB
    config = gateway_config([misbehaving("plain")], server={"max_body_bytes": limit})
    running = await start_gateway(nursery, config)
    chunk = b"x" * (64 * 1024)

    async def body() -> AsyncIterator[bytes]:
        yield b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"'
        for _ in range(80):  # 5 MiB, generated as it is sent
            yield chunk
        yield b'"}}'

    async with open_host(running) as host:
        assert (await host.call("plain__echo", {"text": "warm-up"})).text == "warm-up"
        async with peak_rss_growth() as growth:
            response = await host.client.post(host.path, content=body(), headers=host.headers())
        assert response.status_code == 413
        assert growth() < 3 * limit, f"RSS grew by {growth() / MIB:.1f} MiB"
        assert (await host.call("plain__echo", {"text": "next"})).text == "next"


# -- D3: stderr flood ---------------------------------------------------------------


async def test_a_stderr_flood_is_drained_and_truncated_while_calls_are_answered_promptly(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """D3: 100 MiB of stderr in 1 MiB lines (plus 1 MiB more before every answer) is drained
    continuously and logged truncated, and calls are answered promptly meanwhile."""
    done = tmp_path / "flood-done"
    entry = misbehaving(
        "chatty",
        "--stderr-flood",
        "100",
        "--flood-done-file",
        str(done),
        "--stderr-per-message",
        "1",
    )
    with capture_logs() as logs:
        running = await start_gateway(nursery, gateway_config([entry]))
        async with open_host(running) as host:
            for i in range(20):
                with trio.fail_after(5):  # not blocked, with room for a loaded machine
                    assert (await host.call("chatty__echo", {"text": str(i)})).text == str(i)
            # The whole flood got through the pipe: nothing blocked the writer.
            with trio.fail_after(20):
                await wait_until(done.exists)
    lines = [entry["line"] for entry in events(logs, "backend.stderr")]
    assert lines
    assert max(len(line) for line in lines) <= STDERR_LINE_LIMIT + len("... [999999999 more chars]")


# -- D4: invalid UTF-8 ----------------------------------------------------------------


async def test_invalid_utf8_on_stdout_is_rejected_and_counted_without_crashing(
    nursery: trio.Nursery,
) -> None:
    """D4: lines of invalid UTF-8 (raw, and inside a would-be response for the pending id)
    are dropped and counted; the call gets the backend's clean answer; nothing crashes."""
    with capture_logs() as logs:
        running = await start_gateway(nursery, gateway_config([misbehaving("garbled")]))
        async with open_host(running) as host:
            assert (await host.call("garbled__bad_utf8")).text == "clean answer"
            assert (await host.call("garbled__echo", {"text": "still"})).text == "still"
    backend = running.gateway.pool.backends["garbled"]
    assert backend._peer is not None
    assert backend._peer.junk_lines == 3
    assert backend.initializations == 1
    assert not [e for e in logs if e.get("log_level") in ("error", "critical")]


# -- D5 / D7: responses nobody is waiting for --------------------------------------------


async def test_responses_to_ids_never_issued_are_dropped_and_never_reach_the_host(
    nursery: trio.Nursery,
) -> None:
    """D5: responses (and an error) for ids the gateway never issued, one of them the id it
    will use next, are dropped; the host gets exactly the real answers."""
    with capture_logs() as logs:
        running = await start_gateway(nursery, gateway_config([misbehaving("stray")]))
        async with open_host(running) as host:
            reply = await host.call("stray__stray_ids")
            assert reply.text == "the real answer"
            assert reply.messages == [reply.answer]
            following = await host.call("stray__echo", {"text": "mine"})
            assert following.text == "mine"
            assert following.messages == [following.answer]
    # No counter exists for these yet; the session logs each drop.
    assert len(events(logs, "session.unmatched_response_dropped")) == 5


async def test_a_response_after_the_gateway_timed_out_is_dropped(nursery: trio.Nursery) -> None:
    """D7: the backend answers after the gateway gave up (timeouts.request 0.5 s, answer at
    1 s): the host got the timeout, the late answer is dropped, later calls get their own."""
    entry = misbehaving("late", timeouts={"request": 0.5})
    with capture_logs() as logs:
        running = await start_gateway(nursery, gateway_config([entry]))
        async with open_host(running) as host:
            timed_out = await host.call("late__sleep", {"seconds": 1.0})
            assert timed_out.error is not None
            assert timed_out.error["data"]["reason"] == "timeout"
            with trio.fail_after(5):  # the late answer arrives, and is dropped
                await wait_until(lambda: bool(events(logs, "session.unmatched_response_dropped")))
            following = await host.call("late__echo", {"text": "fresh"})
            assert following.text == "fresh"
    dropped = events(logs, "session.unmatched_response_dropped")
    assert len(dropped) == 1


# -- D8: progress that goes wrong --------------------------------------------------------


async def test_progress_for_unknown_or_finished_tokens_or_going_backwards_is_dropped(
    nursery: trio.Nursery,
) -> None:
    """D8: of progress 5, 3, 5, 6 (plus one for a token nobody issued, and 7 after the
    answer), the host sees exactly 5 and 6, under its own token, before the answer."""
    running = await start_gateway(nursery, gateway_config([misbehaving("prog")]))
    token = "host-token-\u00e9"
    async with open_host(running) as host:
        reply = await host.call("prog__progress_back", _meta={"progressToken": token})
        assert reply.text == "progress done"
        progress = [
            m["params"] for m in reply.messages if m.get("method") == "notifications/progress"
        ]
        assert [p["progress"] for p in progress] == [5, 6]
        assert all(p["progressToken"] == token for p in progress)
        assert reply.messages[-1] == reply.answer
        assert (await host.call("prog__echo", {"text": "ok"})).messages[0]["result"]


# -- D9: server-to-client requests without the capability ---------------------------------


async def test_server_requests_the_host_cannot_answer_get_method_not_found_from_the_gateway(
    nursery: trio.Nursery,
) -> None:
    """D9: sampling, elicitation and roots requests from a backend, while the calling host
    declared none of those capabilities, are answered -32601 by the gateway at once."""
    running = await start_gateway(nursery, gateway_config([misbehaving("asker")]))
    async with open_host(running, capabilities={}) as host:
        for method in ("sampling/createMessage", "elicitation/create", "roots/list"):
            with trio.fail_after(5):
                reply = await host.call("asker__ask", {"method": method})
            answer = json.loads(reply.text)
            assert answer["error"]["code"] == METHOD_NOT_FOUND, (method, answer)
            assert [m for m in reply.messages if "method" in m] == []  # host was never asked


# -- D10: names hosts cannot take -------------------------------------------------------


async def test_duplicate_and_unsafe_tool_names_get_deterministic_safe_names_and_are_reported(
    nursery: trio.Nursery,
) -> None:
    """D10: duplicates, names with spaces or "/", and a 200-character name: every public name
    matches ^[A-Za-z0-9_-]{1,64}$ and is the same each time, each reaches its original, and
    the duplicates are left out and logged."""
    with capture_logs() as logs:
        running = await start_gateway(
            nursery, gateway_config([misbehaving("weird", "--tools", "weird")])
        )
        async with open_host(running) as host:
            first = await list_all_tools(host)
            second = await list_all_tools(host)
            originals = {name: (await host.call(name)).text for name in first}
    rules = NamingRules()
    unique = list(dict.fromkeys(WEIRD_NAMES))
    assert first == second == sorted(public_name("weird", original, rules) for original in unique)
    assert all(HOST_SAFE.match(name) for name in first), first
    assert sorted(originals.values()) == sorted(unique)
    assert all(originals[public_name("weird", o, rules)] == o for o in unique)
    problems = running.gateway.pool.snapshot.problems
    assert any("'echo'" in p for p in problems), problems
    assert any("'dup'" in p for p in problems), problems
    skipped = {entry["problem"] for entry in events(logs, "catalog.item_skipped")}
    assert set(problems) <= skipped


# -- D11: lists without end ----------------------------------------------------------------


async def test_a_hundred_thousand_tools_are_cut_to_max_list_items_with_a_warning(
    nursery: trio.Nursery,
) -> None:
    """D11: a tools/list of 100 000 tools with max_list_items 1 000 gives a partial list of
    1 000 tools and a warning; the backend serves."""
    entry = misbehaving("many", "--tools", "many", max_list_items=1000)
    with capture_logs() as logs:
        running = await start_gateway(nursery, gateway_config([entry]))
        async with open_host(running) as host:
            names = await list_all_tools(host)
            assert (await host.call(names[0])).text.startswith("tool_")
    assert len(names) == 1000
    assert running.gateway.pool.backends["many"].state is BackendState.UP
    [warning] = events(logs, "backend.list.max_items")
    assert warning["limit"] == 1000


async def test_a_next_cursor_that_never_ends_stops_at_max_list_pages_with_a_warning(
    nursery: trio.Nursery,
) -> None:
    """D11: a nextCursor that never ends stops after max_list_pages (5 pages of 10): a
    partial list and a warning; the backend serves."""
    entry = misbehaving("endless", "--tools", "endless", max_list_pages=5)
    with capture_logs() as logs:
        running = await start_gateway(nursery, gateway_config([entry]))
        async with open_host(running) as host:
            names = await list_all_tools(host)
    assert len(names) == 50
    snapshot = running.gateway.pool.snapshot
    assert len(snapshot.view(Kind.TOOLS).keys()) == 50
    [warning] = events(logs, "backend.list.max_pages")
    assert warning["pages"] == 5


# -- D12: a revision nobody speaks -------------------------------------------------------------


async def test_a_backend_answering_an_unsupported_protocol_version_is_incompatible_not_retried(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """D12: initialize answered with protocolVersion 1999-01-01 marks the backend
    incompatible; it is not retried in a loop (at most 2 spawns in 2.5 s)."""
    starts = tmp_path / "starts"
    entry = misbehaving(
        "ancient",
        "--protocol-version",
        "1999-01-01",
        "--start-log",
        str(starts),
        restart={"initial_delay": 0.05, "max_delay": 60},
    )
    running: Running = await start_gateway(nursery, gateway_config([entry]), wait_up=[])
    await wait_for_states(running.gateway, {"ancient": BackendState.INCOMPATIBLE})
    backend = running.gateway.pool.backends["ancient"]
    assert "1999-01-01" in backend.reason
    await trio.sleep(2.5)
    assert backend.state is BackendState.INCOMPATIBLE
    assert len(starts.read_text().split()) <= 2
    _, details = running.gateway.readiness()
    assert details["backends"]["ancient"] == "incompatible"
