"""A handshake-era backend names its input key (issue 14; docs/eras.md, MRTR).

The conformance backend (official SDK 1.x) asks for a name with
``_meta["dev.mcp-gateway/inputKey"] = "user_name"`` in its
``test_input_required_result_elicitation`` tool. A 2026-07-28 host (raw
``httpx``) sees that key in ``inputRequests`` and answers under it; a
handshake-era host (the SDK 1.x client) is sent the elicitation itself,
without the hint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import mcp.types as types

from tests.e2e.test_tasks import _ask
from tests.harness import gateway_config, open_client, sdk_backend, start_gateway

if TYPE_CHECKING:
    import trio
    from mcp.shared.context import RequestContext

TOOL: Final = "test_input_required_result_elicitation"
HINT: Final = "dev.mcp-gateway/inputKey"
CAPS: Final = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}


async def test_a_modern_host_answers_under_the_key_the_backend_named(
    nursery: trio.Nursery,
) -> None:
    """Gateway convention: the key is ``user_name``; the entry carries no hint."""
    running = await start_gateway(
        nursery, gateway_config([sdk_backend("conformance_backend", "c")])
    )
    call = {"name": f"c__{TOOL}", "arguments": {}}
    first = (await _ask(running, "tools/call", call, **CAPS))["result"]
    assert first["resultType"] == "input_required"
    assert list(first["inputRequests"]) == ["user_name"]
    entry = first["inputRequests"]["user_name"]
    assert entry["method"] == "elicitation/create"
    assert HINT not in entry["params"].get("_meta", {})
    retry = {
        **call,
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}}},
        "requestState": first["requestState"],
    }
    final = (await _ask(running, "tools/call", retry, **CAPS))["result"]
    assert final["content"][0]["text"] == "Hello, Alice!"


async def test_a_legacy_host_is_asked_without_the_hint(nursery: trio.Nursery) -> None:
    """Gateway convention: the hint is for the gateway, not sent on to a legacy host."""
    running = await start_gateway(
        nursery, gateway_config([sdk_backend("conformance_backend", "c")])
    )
    seen: list[dict[str, Any]] = []

    async def answer(
        context: RequestContext[Any, Any], params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        seen.append(params.model_dump(by_alias=True, exclude_none=True))
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async with open_client(running.url, elicitation_callback=answer) as session:
        result = await session.call_tool(f"c__{TOOL}", {})
    assert result.content[0].text == "Hello, Ada!"  # type: ignore[union-attr] # a TextContent
    assert len(seen) == 1
    assert seen[0]["message"] == "What is your name?"
    assert HINT not in (seen[0].get("_meta") or {})
