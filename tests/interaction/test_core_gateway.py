"""Issue 2 end to end: real backends, the real gateway, the official client.

Backends: two official-SDK servers that share the tool name ``echo``
(alpha, beta), the official reference server (everything), and a server
that cannot start (broken). The host is the official ``mcp`` client over
Streamable HTTP.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio
from mcp import ClientSession
from mcp.shared.exceptions import McpError
from mcp.types import (
    EmbeddedResource,
    PromptReference,
    ResourceLink,
    ResourceTemplateReference,
    TextContent,
    TextResourceContents,
)
from pydantic import AnyUrl

from gateway.backends.state import BackendState
from tests.harness import (
    Running,
    everything_backend,
    gateway_config,
    open_client,
    sdk_backend,
    start_gateway,
    wait_for_states,
)

# Every test here talks to a gateway with the Node reference server behind it.
pytestmark = pytest.mark.node


@pytest.fixture(name="running")
async def _running(nursery: trio.Nursery) -> Running:
    config = gateway_config(
        [
            sdk_backend("alpha"),
            sdk_backend("beta"),
            everything_backend(),
            sdk_backend("broken", restart={"initial_delay": 5, "max_delay": 60}),
        ]
    )
    running = await start_gateway(nursery, config, wait_up=["alpha", "beta", "everything"])
    await wait_for_states(running.gateway, {"broken": BackendState.DOWN})
    return running


@pytest.fixture(name="client")
async def _client(running: Running) -> AsyncIterator[ClientSession]:
    async with open_client(running.url) as session:
        yield session


def _text(blocks: list[object]) -> list[str]:
    return [b.text for b in blocks if isinstance(b, TextContent)]


async def test_tools_of_every_backend_are_listed_under_their_prefix(client: ClientSession) -> None:
    """Spec (issue 2): one merged tools/list, names `{prefix}__{name}`, sorted."""
    names = [tool.name for tool in (await client.list_tools()).tools]
    assert {"alpha__echo", "beta__echo", "alpha__add", "beta__multiply", "everything__echo"} <= set(
        names
    )
    assert names == sorted(names)
    assert not [n for n in names if n.startswith("broken__")]


async def test_the_same_tool_name_on_two_backends_reaches_each_backend(
    client: ClientSession,
) -> None:
    """Gateway choice: namespacing makes same-named tools distinct and routable."""
    alpha = await client.call_tool("alpha__echo", {"text": "hi"})
    beta = await client.call_tool("beta__echo", {"text": "hi"})
    everything = await client.call_tool("everything__echo", {"message": "hi"})
    assert _text(alpha.content) == ["alpha: hi"]
    assert _text(beta.content) == ["beta: hi"]
    assert _text(everything.content) == ["Echo: hi"]


async def test_tool_arguments_and_structured_results_pass_through(client: ClientSession) -> None:
    """Spec: arguments reach the backend unchanged; structuredContent comes back."""
    result = await client.call_tool("alpha__add", {"a": 2, "b": 40})
    assert _text(result.content) == ["42"]
    assert result.structuredContent == {"result": 42}


async def test_a_tool_failure_passes_through_as_is_error(client: ClientSession) -> None:
    """Spec: a tool's own failure is a result with isError, not a protocol error."""
    result = await client.call_tool("alpha__fail", {})
    assert result.isError is True
    assert "failed on purpose" in _text(result.content)[0]


async def test_an_unknown_tool_is_invalid_params_naming_it(client: ClientSession) -> None:
    """Spec (issue 2 errors): unknown tool → -32602 naming what was not found."""
    with pytest.raises(McpError) as caught:
        await client.call_tool("echo", {"text": "no prefix"})
    assert caught.value.error.code == -32602
    assert "echo" in caught.value.error.message


async def test_uris_inside_tool_results_are_namespaced_and_readable(client: ClientSession) -> None:
    """Spec (issue 2): URIs in embedded resources and links get the backend prefix."""
    result = await client.call_tool("alpha__embed", {})
    embedded = [b for b in result.content if isinstance(b, EmbeddedResource)]
    links = [b for b in result.content if isinstance(b, ResourceLink)]
    assert [str(e.resource.uri) for e in embedded] == ["alpha+alpha://readme"]
    assert [str(link.uri) for link in links] == ["alpha+alpha://items/7"]
    read = await client.read_resource(links[0].uri)
    assert [c.text for c in read.contents if isinstance(c, TextResourceContents)] == ["item 7"]


async def test_resources_of_every_backend_are_listed_and_read_back(client: ClientSession) -> None:
    """Spec (issue 2): resources/list merges; resources/read routes by prefix."""
    resources = (await client.list_resources()).resources
    uris = {str(r.uri) for r in resources}
    assert {"alpha+alpha://readme", "beta+beta://config"} <= uris
    assert any(u.startswith("everything+demo://") for u in uris)
    read = await client.read_resource(AnyUrl("beta+beta://config"))
    (content,) = read.contents
    assert str(content.uri) == "beta+beta://config"
    assert isinstance(content, TextResourceContents)
    assert '"beta"' in content.text


async def test_resource_templates_are_namespaced_and_expand_to_readable_uris(
    client: ClientSession,
) -> None:
    """Spec (issue 2): a template keeps its shape behind the prefix; reads route."""
    templates = {t.uriTemplate for t in (await client.list_resource_templates()).resourceTemplates}
    assert "alpha+alpha://items/{item_id}" in templates
    assert "everything+demo://resource/dynamic/text/{resourceId}" in templates
    read = await client.read_resource(AnyUrl("alpha+alpha://items/5"))
    assert [c.text for c in read.contents if isinstance(c, TextResourceContents)] == ["item 5"]


async def test_reading_an_unknown_resource_is_resource_not_found(client: ClientSession) -> None:
    """Spec: resources/read of a URI nobody serves → -32002 on 2025-11-25."""
    with pytest.raises(McpError) as caught:
        await client.read_resource(AnyUrl("nobody+x://y"))
    assert caught.value.error.code == -32002
    assert "nobody+x://y" in caught.value.error.message


async def test_prompts_are_listed_and_fetched_through_their_prefix(client: ClientSession) -> None:
    """Spec (issue 2): prompts/list merges; prompts/get routes and passes arguments."""
    names = {p.name for p in (await client.list_prompts()).prompts}
    assert {"alpha__greet", "beta__haiku", "everything__simple-prompt"} <= names
    prompt = await client.get_prompt("alpha__greet", {"name": "ada"})
    assert "ada" in str(prompt.messages[0].content)
    with pytest.raises(McpError) as caught:
        await client.get_prompt("nobody__greet", {})
    assert caught.value.error.code == -32602


async def test_completion_routes_prompt_and_template_references(client: ClientSession) -> None:
    """Spec (issue 2): completion/complete finds the backend through the reference."""
    by_prompt = await client.complete(
        PromptReference(type="ref/prompt", name="alpha__greet"), {"name": "name", "value": "a"}
    )
    assert by_prompt.completion.values == ["ada", "alan"]
    by_template = await client.complete(
        ResourceTemplateReference(type="ref/resource", uri="alpha+alpha://items/{item_id}"),
        {"name": "item_id", "value": ""},
    )
    assert by_template.completion.values == ["1", "2", "7"]


async def test_ping_is_answered_by_the_gateway(client: ClientSession) -> None:
    """Spec: ping gets an empty result."""
    await client.send_ping()


async def test_instructions_merge_every_backends_under_its_prefix(running: Running) -> None:
    """Spec (issue 2): InitializeResult.instructions holds each backend's own, by prefix."""
    async with open_client(running.url) as session:
        pass
    instructions = running.gateway.router.instructions()
    assert instructions is not None
    assert "## alpha\nAlpha does arithmetic and echoes." in instructions
    assert "## beta\nBeta multiplies." in instructions
    assert session is not None


async def test_a_backend_that_cannot_start_fails_fast_while_others_serve(
    client: ClientSession, running: Running
) -> None:
    """Spec (issue 2): a broken backend never stops the others; its calls fail at once."""
    # Robustness A31: within 100 ms in practice; the bound only tells it from a
    # request timeout (30 s and more), with room for a loaded machine.
    with trio.fail_after(5):
        with pytest.raises(McpError) as caught:
            await client.read_resource(AnyUrl("broken+anything://x"))
    assert caught.value.error.code == -32603
    assert "broken" in caught.value.error.message
    assert isinstance(caught.value.error.data, dict)
    assert caught.value.error.data["reason"] == "backend_unavailable"
    assert _text((await client.call_tool("beta__echo", {"text": "ok"})).content) == ["beta: ok"]
    ready, details = running.gateway.readiness()
    assert ready is True  # broken is not `required`
    assert details["down"] == ["broken"]


async def test_a_tool_of_a_backend_that_is_down_fails_fast_as_unavailable(
    client: ClientSession,
) -> None:
    """A31: a name under a down backend's prefix is unavailable (-32603), not unknown."""
    with trio.fail_after(5):
        with pytest.raises(McpError) as caught:
            await client.call_tool("broken__anything", {})
    assert caught.value.error.code == -32603
    assert isinstance(caught.value.error.data, dict)
    assert caught.value.error.data == {"reason": "backend_unavailable", "backend": "broken"}
