"""The cells of the era matrix (``tests/interaction/test_era_matrix.py``), one per host era.

Each cell is ``(running, backend_era, tmp_path) -> None``: it drives one feature
through a gateway whose only backend is ``b`` and asserts what both ends observe.
The backends' tools share one contract (``tests/servers/era_legacy.py`` and
``tests/servers/modern_sdk2.py``), so a cell reads both; where the two peers
report differently (``_answer``) or the tool names differ (``PROGRESS_TOOL``),
it says so. A cell that sees a known gap raises a ``GapSeen`` subclass, the only
failure its strict xfail accepts.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import mcp.types as types
import pytest
import trio
from mcp.shared.exceptions import McpError

from gateway.backends.state import BackendState
from tests.e2e.test_modern_backend import (
    META,
    assert_progress_then_done,
    modern_call,
    text_of,
)
from tests.e2e.test_modern_backend import pytestmark as pytestmark  # skip without .venv-sdk2
from tests.frontend.test_listen_http import SUB_ID, listen
from tests.frontend.test_modern_http import modern, send
from tests.frontend.test_streamable_http import http_client
from tests.harness import Running, open_client, wait_for_states
from tests.interaction.test_beside_a_call import messages_of, open_raw

WAIT: Final = 10.0  # the bound on anything a real peer does at once (2 shared cores)
HEARD_WAIT: Final = 5.0  # how long a host waits for a list_changed (debounce: 0.2 s)

# The progress tool of each backend (same contract: ``steps`` reports, then "done").
PROGRESS_TOOL: Final = {"legacy": "b__progress", "modern": "b__slow"}
NAME_ANSWER: Final = {"action": "accept", "content": {"name": "Ada"}}
VISIT_URL: Final = "https://example.com/visit"  # what both backends' ask_visit opens
SAMPLED: Final = {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m1"}
# The backends' tools that ask the host, and the capability each needs.
ASKING: Final = (("b__ask_name", "elicitation"), ("b__ask_sample", "sampling"))


class GapSeen(AssertionError):
    """A cell saw the behaviour of a known gap: the only failure its xfail accepts."""


class ListChangedNotHeard(GapSeen):
    """The host heard no list_changed after the backend's list changed."""


class UndeclaredAskPassedOn(GapSeen):
    """A modern host was asked for a capability its request did not declare."""


Cell = Callable[[Running, str, Path], Awaitable[None]]


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
        grown = _call_text(await session.call_tool("b__grow", {}))
        assert grown.startswith("grown_")
        with trio.move_on_after(HEARD_WAIT):
            await heard.wait()
        names = {tool.name for tool in (await session.list_tools()).tools}
    if not heard.is_set():
        raise ListChangedNotHeard(f"no tools list_changed within {HEARD_WAIT} s")
    assert f"b__{grown}" in names


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


async def legacy_url_elicitation(running: Running, era: str, tmp_path: Path) -> None:
    """A URL-mode elicitation/create reaches the host with an elicitationId; after its
    consent, notifications/elicitation/complete names that id (the backend's own id from
    a handshake-era backend; one the gateway minted for a 2026-07-28 backend)."""
    asked: list[types.ElicitRequestURLParams] = []
    completed: list[str] = []
    heard = trio.Event()

    async def on_elicit(context: Any, params: Any) -> Any:
        asked.append(params)
        return types.ElicitResult(action="accept")

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ElicitCompleteNotification
        ):
            completed.append(message.root.params.elicitationId)
            heard.set()

    async with open_client(
        running.url, elicitation_callback=on_elicit, message_handler=on_message
    ) as session:
        result = await session.call_tool("b__ask_visit", {})
        with trio.fail_after(WAIT):
            await heard.wait()
    ((params,),) = (asked,)
    assert (params.mode, params.url) == ("url", VISIT_URL)
    assert params.elicitationId
    assert completed == [params.elicitationId]
    assert json.loads(_call_text(result)) == {"action": "accept"}


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


async def legacy_undeclared(running: Running, era: str, tmp_path: Path) -> None:
    """A host that declared neither capability is never asked; the call fails clearly.

    Legacy backend: the gateway refuses the backend's own request, so the backend's
    tool fails (``isError``) with that refusal. Modern backend: the gateway drives
    the round and fails the call with -32603 naming the capability (gateway choice).
    """
    async with open_client(running.url) as session:
        for tool, capability in ASKING:
            if era == "legacy":
                result = await session.call_tool(tool, {})
                assert result.isError is True
                text = _call_text(result)
                assert f"did not declare the '{capability}' capability" in text
            else:
                with pytest.raises(McpError) as info:
                    await session.call_tool(tool, {})
                assert info.value.error.code == -32603
                assert capability in info.value.error.message
                assert "did not declare it at initialize" in info.value.error.message


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
    assert_progress_then_done(messages_of(response))


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
        answer = await modern_call(running, 2, "tools/call", {"name": "b__grow", "arguments": {}})
        grown = text_of(answer["result"])
        assert grown.startswith("grown_")
        changed: dict[str, Any] = {}
        with trio.move_on_after(HEARD_WAIT):
            changed = await stream.next()
    if not changed:
        raise ListChangedNotHeard(f"no tools list_changed within {HEARD_WAIT} s")
    assert changed["method"] == "notifications/tools/list_changed"
    assert changed["params"]["_meta"] == {SUB_ID: "L1"}
    listed = (await modern_call(running, 3, "tools/list", {}))["result"]
    assert f"b__{grown}" in {tool["name"] for tool in listed["tools"]}


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


async def modern_url_elicitation(running: Running, era: str, tmp_path: Path) -> None:
    """input_required carries the URL request (no elicitationId: removed in 2026-07-28);
    the host's consent reaches the backend. A request that declared form only gets
    -32021 with requiredCapabilities elicitation.url, and is never asked."""
    caps = {"elicitation": {"url": {}}}
    entry, result = await _mrtr(running, "b__ask_visit", caps, {"action": "accept"})
    assert entry["method"] == "elicitation/create"
    assert (entry["params"]["mode"], entry["params"]["url"]) == ("url", VISIT_URL)
    assert "elicitationId" not in entry["params"]
    assert json.loads(text_of(result)) == {"action": "accept"}
    await wait_for_states(running.gateway, {"b": BackendState.UP})
    form_only = {META + "clientCapabilities": {"elicitation": {"form": {}}}}
    async with http_client(running) as client:
        ask = modern(1, "tools/call", {"name": "b__ask_visit", "arguments": {}}, **form_only)
        response = await send(client, ask)
    body = messages_of(response)[-1]
    if body.get("result", {}).get("resultType") == "input_required":
        raise UndeclaredAskPassedOn(f"url elicitation passed on: {body['result']}")
    assert response.status_code == 400, response.text
    assert body["error"]["code"] == -32021
    assert body["error"]["data"]["requiredCapabilities"] == {"elicitation": {"url": {}}}


async def modern_sampling(running: Running, era: str, tmp_path: Path) -> None:
    """input_required with sampling/createMessage; the retry's answer reaches the backend."""
    entry, result = await _mrtr(running, "b__ask_sample", {"sampling": {}}, SAMPLED)
    assert entry["method"] == "sampling/createMessage"
    assert entry["params"]["messages"][0]["content"]["text"] == "Say hi"
    answer = _answer(text_of(result))
    assert (answer["model"], answer["text"]) == ("m1", "hi")


async def modern_undeclared(running: Running, era: str, tmp_path: Path) -> None:
    """A request declaring no capability gets -32021 naming the one the backend needs."""
    async with http_client(running) as client:
        for tool, capability in ASKING:
            # The refusal cancels the backend's call while its request is
            # answered; an SDK 1.x backend now and then dies of that pair (its
            # stdin reader's BrokenResourceError, CI saw it once) and the
            # gateway restarts it. Each ask starts on a backend that is up.
            await wait_for_states(running.gateway, {"b": BackendState.UP})
            response = await send(client, modern(1, "tools/call", {"name": tool, "arguments": {}}))
            body = messages_of(response)[-1]
            if body.get("result", {}).get("resultType") == "input_required":
                raise UndeclaredAskPassedOn(f"{tool}: input_required passed on: {body['result']}")
            assert response.status_code == 400, response.text
            assert body["error"]["code"] == -32021
            assert capability in body["error"]["data"]["requiredCapabilities"]


CELLS: Final[dict[tuple[str, str], Cell]] = {
    ("legacy", "list"): legacy_list,
    ("legacy", "call"): legacy_call,
    ("legacy", "progress"): legacy_progress,
    ("legacy", "cancel"): legacy_cancel,
    ("legacy", "list_changed"): legacy_list_changed,
    ("legacy", "elicitation"): legacy_elicitation,
    ("legacy", "sampling"): legacy_sampling,
    ("legacy", "url_elicitation"): legacy_url_elicitation,
    ("legacy", "undeclared"): legacy_undeclared,
    ("modern", "list"): modern_list,
    ("modern", "call"): modern_call_cell,
    ("modern", "progress"): modern_progress,
    ("modern", "cancel"): modern_cancel,
    ("modern", "list_changed"): modern_list_changed,
    ("modern", "elicitation"): modern_elicitation,
    ("modern", "sampling"): modern_sampling,
    ("modern", "url_elicitation"): modern_url_elicitation,
    ("modern", "undeclared"): modern_undeclared,
}
