"""A 2026-07-28 backend's ``input_required`` (MRTR) behind the gateway, for both hosts.

The SDK 2.x backend (``tests/servers/modern_sdk2.py``) answers ``ask_name``
and ``ask_sample`` with ``input_required``. A modern host (raw ``httpx``)
gets it passed through with the backend's state sealed by the gateway; a
legacy host (the official SDK 1.x client) is asked by the gateway with
ordinary server-to-client requests. Rules: ``docs/eras.md``, "MRTR from a
modern backend".
"""

from __future__ import annotations

import json
from typing import Any, Final

import pytest
import trio
from mcp.shared.exceptions import McpError
from mcp.types import CreateMessageResult, ElicitResult, TextContent

from tests.e2e.test_modern_backend import META, modern_call, sdk2_stdio, text_of
from tests.e2e.test_modern_backend import pytestmark as pytestmark  # the same skip
from tests.frontend.test_modern_http import modern, send
from tests.frontend.test_streamable_http import http_client
from tests.harness import gateway_config, open_client, start_gateway

ASK: Final = {"name": "m__ask_name", "arguments": {}}
ELICIT: Final = {META + "clientCapabilities": {"elicitation": {"form": {}}}}


async def test_input_required_passes_to_a_modern_host_with_the_backends_state_sealed(
    nursery: trio.Nursery,
) -> None:
    """Issue 14 step 4: inputRequests unchanged, requestState wrapped by the gateway;
    the retry restores the backend's own (SDK-sealed) state byte for byte."""
    running = await start_gateway(nursery, gateway_config([sdk2_stdio("m")]))
    first = (await modern_call(running, 1, "tools/call", ASK, **ELICIT))["result"]
    assert first["resultType"] == "input_required"
    assert first["inputRequests"]["name"]["method"] == "elicitation/create"
    assert first["inputRequests"]["name"]["params"]["message"] == "What is your name?"
    token = first["requestState"]
    assert not token.startswith("v1.")  # the gateway's seal, not the SDK's own token
    retry = {
        **ASK,
        "requestState": token,
        "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}},
    }
    second = (await modern_call(running, 2, "tools/call", retry, **ELICIT))["result"]
    assert second["resultType"] == "complete"
    seen = json.loads(text_of(second))
    assert seen["answer"]["content"] == {"name": "Ada"}
    # The SDK unsealed its own token, which the gateway gave back byte for byte.
    assert seen["state"] == "round-1:\u00fc"
    # A stateless gateway: the same retry verifies again (nothing was held).
    again = (await modern_call(running, 3, "tools/call", retry, **ELICIT))["result"]
    assert again["resultType"] == "complete"
    # Issue 18 item 4: one backend round, two retries, none refused.
    get = running.gateway.metrics.registry.get_sample_value
    assert get("mcp_gateway_mrtr_input_required_total", {"origin": "backend"}) == 1
    assert get("mcp_gateway_mrtr_input_required_total", {"origin": "bridge"}) is None
    assert get("mcp_gateway_mrtr_retries_total") == 2


async def test_a_tampered_sealed_state_is_refused_before_the_backend(
    nursery: trio.Nursery,
) -> None:
    """S/basic/patterns/mrtr.mdx: a state that does not verify is -32602."""
    running = await start_gateway(nursery, gateway_config([sdk2_stdio("m")]))
    first = (await modern_call(running, 1, "tools/call", ASK, **ELICIT))["result"]
    token = first["requestState"]
    flipped = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
    retry = {**ASK, "requestState": flipped, "inputResponses": {"name": {"action": "decline"}}}
    async with http_client(running) as client:
        response = await send(client, modern(2, "tools/call", retry, **ELICIT))
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["message"]) == (-32602, "Invalid or expired requestState")
    # Sealed for another request (other arguments): refused the same way.
    other = {**retry, "requestState": token, "arguments": {"x": 1}}
    async with http_client(running) as client:
        response = await send(client, modern(3, "tools/call", other, **ELICIT))
    assert response.json()["error"]["code"] == -32602
    # Issue 18 item 4: each refusal counted by its reason.
    get = running.gateway.metrics.registry.get_sample_value
    assert get("mcp_gateway_mrtr_rejections_total", {"reason": "tampered"}) == 1
    assert get("mcp_gateway_mrtr_rejections_total", {"reason": "mismatched"}) == 1


async def test_input_required_is_driven_for_a_legacy_host_with_its_elicitation_callback(
    nursery: trio.Nursery,
) -> None:
    """Issue 14 step 4: the gateway asks the SDK 1.x host with elicitation/create
    and retries the backend with the answer and its state echoed."""
    running = await start_gateway(nursery, gateway_config([sdk2_stdio("m")]))
    asked: list[str] = []

    async def on_elicit(context: Any, params: Any) -> Any:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"name": "Ada"})

    async with open_client(running.url, elicitation_callback=on_elicit) as session:
        result = await session.call_tool("m__ask_name", {})
    assert asked == ["What is your name?"]
    assert result.isError is False
    seen = json.loads(result.content[0].text)  # type: ignore[union-attr] # a TextContent
    assert (seen["answer"]["action"], seen["answer"]["content"]) == ("accept", {"name": "Ada"})
    assert seen["state"] == "round-1:\u00fc"


async def test_a_legacy_host_without_the_capability_gets_a_clear_error(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice: -32603 naming the capability the host did not declare."""
    running = await start_gateway(nursery, gateway_config([sdk2_stdio("m")]))
    async with open_client(running.url) as session:
        with pytest.raises(McpError) as info:
            await session.call_tool("m__ask_name", {})
    assert info.value.error.code == -32603
    assert "elicitation" in info.value.error.message
    assert "did not declare it at initialize" in info.value.error.message


async def test_a_sampling_round_is_driven_for_a_legacy_host_with_its_sampling_callback(
    nursery: trio.Nursery,
) -> None:
    """Issue 14 step 4: sampling/createMessage asked over the call's stream; a backend
    that sent no requestState gets none back."""
    running = await start_gateway(nursery, gateway_config([sdk2_stdio("m")]))
    prompts: list[str] = []

    async def on_sample(context: Any, params: Any) -> Any:
        prompts.append(params.messages[0].content.text)
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text="hi"), model="test-model"
        )

    async with open_client(running.url, sampling_callback=on_sample) as session:
        result = await session.call_tool("m__ask_sample", {})
    assert prompts == ["Say hi"]
    seen = json.loads(result.content[0].text)  # type: ignore[union-attr] # a TextContent
    assert seen["state"] is None
    assert seen["answer"]["model"] == "test-model"
    assert seen["answer"]["content"]["text"] == "hi"


async def test_a_state_free_input_required_still_routes_its_retry_through_a_sealed_state(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice: the host always gets a sealed state (it names the backend); the
    backend, which sent none, gets none back."""
    running = await start_gateway(nursery, gateway_config([sdk2_stdio("m")]))
    ask = {"name": "m__ask_sample", "arguments": {}}
    sampling = {META + "clientCapabilities": {"sampling": {}}}
    first = (await modern_call(running, 1, "tools/call", ask, **sampling))["result"]
    assert first["resultType"] == "input_required"
    assert first["inputRequests"]["llm"]["method"] == "sampling/createMessage"
    reply = {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m1"}
    retry = {**ask, "requestState": first["requestState"], "inputResponses": {"llm": reply}}
    second = (await modern_call(running, 2, "tools/call", retry, **sampling))["result"]
    seen = json.loads(text_of(second))
    assert seen["state"] is None
    assert seen["answer"]["model"] == "m1"
