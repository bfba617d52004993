"""Guardrails on a 2026-07-28 backend's ``input_required`` (MRTR), in both host eras.

The SDK 2.x backend (``tests/servers/modern_sdk2.py``) asks for input inside
its results: ``ask_name`` an elicitation ("What is your name?"), ``ask_sample``
a sampling round ("Say hi"). Its questions go through the backend-request
chain (the reference policy service under ``deploy/policy-service`` refuses
"your name" and redacts "Say hi"), and the result that ends the rounds
through the result chain (``secrets``), whether the gateway drives the rounds
for a handshake-era host (the official SDK 1.x client) or passes them to a
2026-07-28 host (raw HTTP). Rules: ``router/filtering.py`` rules 2 and 4.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any, Final

import pytest
import trio
from mcp.shared.exceptions import McpError
from mcp.types import CreateMessageResult, ElicitResult, TextContent

from gateway.config import parse
from tests.e2e.test_modern_backend import META, modern_call, sdk2_stdio, text_of
from tests.e2e.test_modern_backend import pytestmark as pytestmark  # the same skip
from tests.frontend.test_modern_http import modern, send
from tests.frontend.test_streamable_http import http_client
from tests.guardrails.test_external import SERVICE
from tests.harness import Running, open_client, start_gateway
from tests.redis_server import free_port

AWS_PAIR: Final = "id AKIAIOSFODNN7EXAMPLE secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
ASK_NAME: Final = {"name": "m__ask_name", "arguments": {}}
ASK_SAMPLE: Final = {"name": "m__ask_sample", "arguments": {}}
ELICIT: Final = {META + "clientCapabilities": {"elicitation": {"form": {}}}}
SAMPLING: Final = {META + "clientCapabilities": {"sampling": {}}}


@pytest.fixture(name="policy_url")
def _policy_url() -> Iterator[str]:
    """The reference policy service: refuses "your name", redacts "Say hi"."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVICE), "--port", str(port), "--deny", "your name",
         "--redact", "Say hi"],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    assert process.stdout.readline().startswith(b"listening")
    yield f"http://127.0.0.1:{port}/decide"
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture(name="running")
async def _running(nursery: trio.Nursery, policy_url: str) -> Running:
    filters = [
        {"type": "external", "name": "dlp", "url": policy_url, "at": ["backend_requests"]},
        {"type": "secrets", "name": "secrets", "at": ["results"]},
    ]
    document = {
        "server": {"host": "127.0.0.1", "port": 0},
        "backends": [sdk2_stdio("m", filters=filters)],
    }
    return await start_gateway(nursery, parse(json.dumps(document), env={}))


def _sample_reply(text: str) -> CreateMessageResult:
    return CreateMessageResult(
        role="assistant", content=TextContent(type="text", text=text), model="test-model"
    )


async def test_a_denied_question_is_never_asked_of_a_handshake_era_host(
    running: Running,
) -> None:
    """Issue 29: the elicitation is refused before the host sees it; the call ends with
    -32602 naming the filter, as a handshake-era backend's refused request is answered."""
    asked: list[str] = []

    async def on_elicit(context: Any, params: Any) -> Any:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"name": "Ada"})

    async with open_client(running.url, elicitation_callback=on_elicit) as session:
        with pytest.raises(McpError) as info:
            await session.call_tool("m__ask_name", {})
    assert asked == []
    assert info.value.error.code == -32602
    assert info.value.error.data == {"filter": "dlp", "reason": "mentions 'your name'"}


async def test_a_denied_question_is_never_passed_to_a_2026_07_28_host(running: Running) -> None:
    """Issue 29: no input_required carrying the refused question; -32602 naming the filter."""
    async with http_client(running) as client:
        response = await send(client, modern(1, "tools/call", ASK_NAME, **ELICIT))
    error = response.json()["error"]
    assert error["code"] == -32602, error
    assert error["data"] == {"filter": "dlp", "reason": "mentions 'your name'"}
    assert "inputRequests" not in response.text


async def test_a_changed_question_reaches_a_handshake_era_host_and_the_final_result_is_filtered(
    running: Running,
) -> None:
    """Issue 29: the host is asked the modified sampling request; the result that ends the
    rounds carries the host's answer, whose secret is redacted before the host sees it."""
    prompts: list[str] = []

    async def on_sample(context: Any, params: Any) -> Any:
        prompts.append(params.messages[0].content.text)
        return _sample_reply(AWS_PAIR)

    async with open_client(running.url, sampling_callback=on_sample) as session:
        result = await session.call_tool("m__ask_sample", {})
    assert prompts == ["[redacted]"]
    text = result.content[0].text  # type: ignore[union-attr] # a TextContent
    assert "[redacted: AWS Access Key]" in text
    assert "AKIAIOSFODNN7EXAMPLE" not in text and "wJalrXUtnFEMI" not in text


async def test_a_changed_question_reaches_a_2026_07_28_host_and_the_final_result_is_filtered(
    running: Running,
) -> None:
    """Issue 29: the passed-through inputRequests carry the modified params; the retry's
    result, which ends the rounds, goes through the result chain."""
    first = (await modern_call(running, 1, "tools/call", ASK_SAMPLE, **SAMPLING))["result"]
    assert first["resultType"] == "input_required"
    asked = first["inputRequests"]["llm"]["params"]["messages"][0]["content"]["text"]
    assert asked == "[redacted]"
    reply = _sample_reply(AWS_PAIR).model_dump(mode="json", exclude_none=True)
    retry = {**ASK_SAMPLE, "requestState": first["requestState"], "inputResponses": {"llm": reply}}
    second = (await modern_call(running, 2, "tools/call", retry, **SAMPLING))["result"]
    assert second["resultType"] == "complete"
    assert "[redacted: AWS Access Key]" in text_of(second)
    assert "AKIAIOSFODNN7EXAMPLE" not in json.dumps(second)
