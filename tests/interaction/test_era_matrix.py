"""The era matrix (issue 14): legacy/modern host x legacy/modern backend x feature.

Each cell starts one gateway in front of one real backend named ``b``:

* **legacy backend**: ``tests/servers/era_legacy.py`` (official SDK 1.x,
  handshake era: the gateway sends ``initialize``);
* **modern backend**: ``tests/servers/modern_sdk2.py`` on the official SDK 2.x
  (the gateway's probe finds 2026-07-28 and speaks it).

Both have tools of the same contract (``add``, progress, ``wait_forever``,
``ask_name``, ``ask_sample``, ``grow``), so one assertion reads both. Hosts:

* **legacy host**: the official SDK 1.x ``ClientSession`` with callbacks
  (``initialize``, ``Mcp-Session-Id``, server-to-client requests on the
  call's stream, list_changed on the GET stream), and raw ``httpx`` for
  ``notifications/cancelled`` (the SDK gives no handle on its request id);
* **modern host**: raw ``httpx`` with the 2026-07-28 envelope and headers,
  answering ``input_required`` with a retry carrying ``inputResponses`` and
  ``requestState``, list_changed on ``subscriptions/listen``.

A cell the gateway does not serve yet is ``xfail(strict=True)`` naming the gap
(``GAPS``), never skipped. One gateway per cell: pytest-trio's nursery is
function-scoped, and one backend per gateway keeps each start to one child.
Rules: ``docs/eras.md``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Final

import httpx
import mcp.types as types
import pytest
import trio

from tests.e2e.test_modern_backend import (
    META,
    SDK2_PYTHON,
    SERVER,
    modern_call,
    sdk2_stdio,
    text_of,
)
from tests.e2e.test_modern_backend import pytestmark as pytestmark  # skip without .venv-sdk2
from tests.frontend.test_listen_http import SUB_ID, listen
from tests.frontend.test_modern_http import modern, send
from tests.frontend.test_streamable_http import http_client
from tests.harness import Running, gateway_config, open_client, sdk_backend, start_gateway
from tests.interaction.test_beside_a_call import messages_of, open_raw
from tests.subprocess_servers import RunningServer, free_port, run_server

WAIT: Final = 10.0  # the bound on anything a real peer does at once (2 shared cores)
HEARD_WAIT: Final = 5.0  # how long a host waits for a list_changed (debounce: 0.2 s)
HOSTS: Final = ("legacy", "modern")
BACKENDS: Final = ("legacy", "modern")
FEATURES: Final = (
    "list",
    "call",
    "progress",
    "cancel",
    "list_changed",
    "elicitation",
    "sampling",
)
NO_LISTEN: Final = (
    "gap: the gateway opens no subscriptions/listen stream to a 2026-07-28 backend, "
    "so its tools list_changed is not followed (docs/eras.md, backend leg, 'Not yet')"
)
GAPS: Final[dict[tuple[str, str, str], str]] = {
    ("legacy", "modern", "list_changed"): NO_LISTEN,
    ("modern", "modern", "list_changed"): NO_LISTEN,
}
# The progress tool of each backend (same contract: ``steps`` reports, then "done").
PROGRESS_TOOL: Final = {"legacy": "b__progress", "modern": "b__slow"}
NAME_ANSWER: Final = {"action": "accept", "content": {"name": "Ada"}}
SAMPLED: Final = {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m1"}


class ListChangedNotHeard(AssertionError):
    """The host heard no list_changed after the backend's list changed: the xfail's cause."""


# The only failure a gap cell may have (pytest-trio's nursery wraps it in a group).
NOT_HEARD: Final = pytest.RaisesGroup(ListChangedNotHeard)

Cell = Callable[[Running, str, Path], Awaitable[None]]


def _cells() -> list[Any]:
    cells = []
    for host in HOSTS:
        for backend in BACKENDS:
            for feature in FEATURES:
                gap = GAPS.get((host, backend, feature))
                marks = (
                    [pytest.mark.xfail(strict=True, raises=NOT_HEARD, reason=gap)] if gap else []
                )
                cell_id = f"{host}_host-{backend}_backend-{feature}"
                cells.append(pytest.param(host, backend, feature, marks=marks, id=cell_id))
    return cells


def _backend(era: str) -> dict[str, Any]:
    return sdk_backend("era_legacy", "b") if era == "legacy" else sdk2_stdio("b")


async def _wait_for_text(path: Path, text: str) -> None:
    """Poll the backend's marker file until it says ``text`` (a real process writes it)."""
    marker = trio.Path(path)
    with trio.fail_after(WAIT):
        while not (await marker.exists() and await marker.read_text() == text):  # noqa: ASYNC110
            await trio.sleep(0.05)


def _answer(text: str) -> dict[str, Any]:
    """What a backend's ``ask_*`` tool received, in one shape for both backends.

    The SDK 2.x peer reports ``{"state", "answer"}``; the SDK 1.x peer the answer.
    """
    seen: dict[str, Any] = json.loads(text)
    answer: dict[str, Any] = seen.get("answer", seen)
    if "text" not in answer and isinstance(answer.get("content"), dict):
        answer = {**answer, "text": answer["content"].get("text")}
    return answer


# -- legacy host -----------------------------------------------------------------


def _call_text(result: types.CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    return first.text


async def legacy_list(running: Running, era: str, tmp_path: Path) -> None:
    """tools/list: every tool under the backend's prefix, nothing of 2026-07-28."""
    async with open_client(running.url) as session:
        listed = await session.list_tools()
    names = {tool.name for tool in listed.tools}
    assert {"b__add", PROGRESS_TOOL[era], "b__wait_forever", "b__ask_name", "b__grow"} <= names
    assert not set(listed.model_extra or {}) & {"resultType", "ttlMs", "cacheScope"}


async def legacy_call(running: Running, era: str, tmp_path: Path) -> None:
    """tools/call answers with the backend's result and no modern fields."""
    async with open_client(running.url) as session:
        added = await session.call_tool("b__add", {"a": 20, "b": 22})
    assert _call_text(added) == "42"
    assert not set(added.model_extra or {}) & {"resultType", "ttlMs", "cacheScope"}


async def legacy_progress(running: Running, era: str, tmp_path: Path) -> None:
    """Progress reaches the SDK's callback, which matches on the host's own token."""
    reported: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append(progress)

    async with open_client(running.url) as session:
        done = await session.call_tool(
            PROGRESS_TOOL[era], {"steps": 3}, progress_callback=on_progress
        )
    assert _call_text(done) == "done"
    assert reported == [1, 2, 3]


async def legacy_cancel(running: Running, era: str, tmp_path: Path) -> None:
    """notifications/cancelled reaches the backend (its tool is cancelled); no response."""
    marker = tmp_path / "marker"
    answers = []
    async with open_raw(running.url) as raw:

        async def call() -> None:
            params = {"name": "b__wait_forever", "arguments": {"marker": str(marker)}}
            answers.append(
                await raw.post(
                    {"jsonrpc": "2.0", "id": "c-1", "method": "tools/call", "params": params}
                )
            )

        with trio.fail_after(WAIT):
            async with trio.open_nursery() as calls:
                calls.start_soon(call)
                await _wait_for_text(marker, "started")
                assert await raw.notify("notifications/cancelled", {"requestId": "c-1"}) == 202
        await _wait_for_text(marker, "cancelled")
    (answer,) = answers
    assert answer.status_code == 200
    assert [m for m in messages_of(answer) if "result" in m or "error" in m] == []


async def legacy_list_changed(running: Running, era: str, tmp_path: Path) -> None:
    """The backend's list change reaches the session (GET stream) and the new list."""
    heard = trio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            heard.set()

    async with open_client(running.url, message_handler=on_message) as session:
        assert _call_text(await session.call_tool("b__grow", {})) == "grown_1"
        with trio.move_on_after(HEARD_WAIT):
            await heard.wait()
        names = {tool.name for tool in (await session.list_tools()).tools}
    if not heard.is_set():
        raise ListChangedNotHeard(f"no tools list_changed within {HEARD_WAIT} s")
    assert "b__grown_1" in names


async def legacy_elicitation(running: Running, era: str, tmp_path: Path) -> None:
    """The host is asked with elicitation/create; the backend gets its answer."""
    asked: list[str] = []

    async def on_elicit(context: Any, params: Any) -> Any:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async with open_client(running.url, elicitation_callback=on_elicit) as session:
        result = await session.call_tool("b__ask_name", {})
    assert asked == ["What is your name?"]
    answer = _answer(_call_text(result))
    assert (answer["action"], answer["content"]) == ("accept", {"name": "Ada"})


async def legacy_sampling(running: Running, era: str, tmp_path: Path) -> None:
    """The host is asked with sampling/createMessage; the backend gets its answer."""
    prompts: list[str] = []

    async def on_sample(context: Any, params: Any) -> Any:
        prompts.append(params.messages[0].content.text)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="hi"), model="m1"
        )

    async with open_client(running.url, sampling_callback=on_sample) as session:
        result = await session.call_tool("b__ask_sample", {})
    assert prompts == ["Say hi"]
    answer = _answer(_call_text(result))
    assert (answer["model"], answer["text"]) == ("m1", "hi")


# -- modern host -----------------------------------------------------------------


async def modern_list(running: Running, era: str, tmp_path: Path) -> None:
    """tools/list with resultType and cache hints, every tool under the prefix."""
    result = (await modern_call(running, 1, "tools/list", {}))["result"]
    assert result["resultType"] == "complete"
    # A handshake-era backend counts as {0, private}; the SDK 2.x peer's own hint is
    # {0, private} too (its default), so the merge is that for both.
    assert (result["ttlMs"], result["cacheScope"]) == (0, "private")
    names = {tool["name"] for tool in result["tools"]}
    assert {"b__add", PROGRESS_TOOL[era], "b__wait_forever", "b__ask_name", "b__grow"} <= names


async def modern_call_cell(running: Running, era: str, tmp_path: Path) -> None:
    """tools/call: the backend's result, marked complete."""
    params = {"name": "b__add", "arguments": {"a": 20, "b": 22}}
    result = (await modern_call(running, 1, "tools/call", params))["result"]
    assert result["resultType"] == "complete"
    assert text_of(result) == "42"


async def modern_progress(running: Running, era: str, tmp_path: Path) -> None:
    """Progress on the request's stream under the host's own token."""
    params = {"name": PROGRESS_TOOL[era], "arguments": {"steps": 3}}
    async with http_client(running) as client:
        response = await send(client, modern(1, "tools/call", params, progressToken="host-7"))
    assert response.status_code == 200, response.text
    messages = messages_of(response)
    progress = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    assert [(p["progressToken"], p["progress"]) for p in progress] == [
        ("host-7", 1),
        ("host-7", 2),
        ("host-7", 3),
    ]
    assert text_of(messages[-1]["result"]) == "done"


async def modern_cancel(running: Running, era: str, tmp_path: Path) -> None:
    """Closing the response stream cancels the call at the backend; no result came."""
    marker = tmp_path / "marker"
    params = {"name": "b__wait_forever", "arguments": {"marker": str(marker)}}
    answers = []

    async def call() -> None:
        answers.append(await send(client, modern(1, "tools/call", params)))

    async with http_client(running) as client:
        with trio.fail_after(WAIT):
            async with trio.open_nursery() as calls:
                calls.start_soon(call)
                await _wait_for_text(marker, "started")
                calls.cancel_scope.cancel()  # the host closes the response stream
        await _wait_for_text(marker, "cancelled")
        assert answers == []
        # The gateway goes on serving this backend.
        after = await send(
            client, modern(2, "tools/call", {"name": "b__add", "arguments": {"a": 1, "b": 1}})
        )
    assert text_of(messages_of(after)[-1]["result"]) == "2"


async def modern_list_changed(running: Running, era: str, tmp_path: Path) -> None:
    """subscriptions/listen: the backend's list change arrives tagged; the list grew."""
    async with (
        http_client(running) as client,
        listen(client, "L1", {"toolsListChanged": True}) as stream,
    ):
        ack = await stream.next()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        grown = await modern_call(running, 2, "tools/call", {"name": "b__grow", "arguments": {}})
        assert text_of(grown["result"]) == "grown_1"
        changed: dict[str, Any] = {}
        with trio.move_on_after(HEARD_WAIT):
            changed = await stream.next()
    if not changed:
        raise ListChangedNotHeard(f"no tools list_changed within {HEARD_WAIT} s")
    assert changed["method"] == "notifications/tools/list_changed"
    assert changed["params"]["_meta"] == {SUB_ID: "L1"}
    listed = (await modern_call(running, 3, "tools/list", {}))["result"]
    assert "b__grown_1" in {tool["name"] for tool in listed["tools"]}


async def _mrtr(
    running: Running, tool: str, capabilities: dict[str, Any], reply: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One input_required round answered with ``reply``: (the asked entry, the final result)."""
    caps = {META + "clientCapabilities": capabilities}
    ask = {"name": tool, "arguments": {}}
    first = (await modern_call(running, 1, "tools/call", ask, **caps))["result"]
    assert first["resultType"] == "input_required"
    ((key, entry),) = first["inputRequests"].items()
    retry = {**ask, "requestState": first["requestState"], "inputResponses": {key: reply}}
    second = (await modern_call(running, 2, "tools/call", retry, **caps))["result"]
    assert second["resultType"] == "complete"
    return entry, second


async def modern_elicitation(running: Running, era: str, tmp_path: Path) -> None:
    """input_required with elicitation/create; the retry's answer reaches the backend."""
    entry, result = await _mrtr(running, "b__ask_name", {"elicitation": {"form": {}}}, NAME_ANSWER)
    assert entry["method"] == "elicitation/create"
    assert entry["params"]["message"] == "What is your name?"
    answer = _answer(text_of(result))
    assert (answer["action"], answer["content"]) == ("accept", {"name": "Ada"})


async def modern_sampling(running: Running, era: str, tmp_path: Path) -> None:
    """input_required with sampling/createMessage; the retry's answer reaches the backend."""
    entry, result = await _mrtr(running, "b__ask_sample", {"sampling": {}}, SAMPLED)
    assert entry["method"] == "sampling/createMessage"
    assert entry["params"]["messages"][0]["content"]["text"] == "Say hi"
    answer = _answer(text_of(result))
    assert (answer["model"], answer["text"]) == ("m1", "hi")


CELLS: Final[dict[tuple[str, str], Cell]] = {
    ("legacy", "list"): legacy_list,
    ("legacy", "call"): legacy_call,
    ("legacy", "progress"): legacy_progress,
    ("legacy", "cancel"): legacy_cancel,
    ("legacy", "list_changed"): legacy_list_changed,
    ("legacy", "elicitation"): legacy_elicitation,
    ("legacy", "sampling"): legacy_sampling,
    ("modern", "list"): modern_list,
    ("modern", "call"): modern_call_cell,
    ("modern", "progress"): modern_progress,
    ("modern", "cancel"): modern_cancel,
    ("modern", "list_changed"): modern_list_changed,
    ("modern", "elicitation"): modern_elicitation,
    ("modern", "sampling"): modern_sampling,
}


@pytest.mark.parametrize(("host", "backend", "feature"), _cells())
async def test_era_matrix(
    nursery: trio.Nursery, tmp_path: Path, host: str, backend: str, feature: str
) -> None:
    """One cell: ``host`` era x ``backend`` era x ``feature``, observed at both ends."""
    running = await start_gateway(nursery, gateway_config([_backend(backend)]))
    info = running.gateway.pool.backends["b"].info
    assert info is not None and info.modern is (backend == "modern")
    await CELLS[host, feature](running, backend, tmp_path)
    nursery.cancel_scope.cancel()


@pytest.fixture(name="sdk2_direct")
def _sdk2_direct() -> Iterator[RunningServer]:
    port = free_port()
    with run_server([str(SDK2_PYTHON), str(SERVER), "http", str(port)], port) as server:
        yield server


async def test_control_the_modern_backend_announces_its_change_on_its_own_listen_stream(
    sdk2_direct: RunningServer,
) -> None:
    """The xfail cells fail for the gateway's gap, not the peer: spoken to directly
    (no gateway), the SDK 2.x backend's ``grow`` reaches a listen stream."""
    base = sdk2_direct.url("")
    async with (
        httpx.AsyncClient(base_url=base, trust_env=False, timeout=WAIT) as client,
        listen(client, "L1", {"toolsListChanged": True}) as stream,
    ):
        ack = await stream.next()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        grown = await send(client, modern(2, "tools/call", {"name": "grow", "arguments": {}}))
        assert text_of(messages_of(grown)[-1]["result"]) == "grown_1"
        changed = await stream.next()
    assert changed["method"] == "notifications/tools/list_changed"
    assert changed["params"]["_meta"] == {SUB_ID: "L1"}
