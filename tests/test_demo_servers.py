"""The demo backends (``mcp_gateway_demo.notes``, ``.toolbox``) through the official SDK client.

Each test starts a demo exactly as the shipped config does (``python -m
mcp_gateway_demo.<name>``) and drives it with mcp 1.x's ``ClientSession`` over
real stdio, so a failure points at the demo, not at the gateway. Two tests
speak raw lines instead, for what no client shows: the exit status and that
stdout carries nothing but protocol messages.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import mcp.types as types
import pytest
import trio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.shared.exceptions import McpError
from pydantic import AnyUrl

from tests.harness import initialize_message

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

ROOT: Final = Path(__file__).resolve().parents[1]
# Generous: a cold interpreter start on a loaded machine, not a protocol wait.
TIMEOUT: Final = 30.0
NOTES_TOOLS: Final = {"add_note", "list_notes", "get_note", "delete_note"}
TOOLBOX_TOOLS: Final = {"echo", "add", "now", "fail", "uuid", "stats"}
SEED_TITLES: Final = ["Welcome", "Shopping list", "Gateway ideas"]
INITIALIZE: Final = initialize_message("test_demo_servers", "0")


class Received:
    """What a demo sent the client besides answers: notifications and log messages."""

    def __init__(self) -> None:
        self.methods: list[str] = []
        self.logs: list[types.LoggingMessageNotificationParams] = []

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            self.methods.append(message.root.method)

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)


def demo_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: the SDK's safe defaults, the repo importable, plus ``extra``."""
    return {**get_default_environment(), "PYTHONPATH": str(ROOT), **(extra or {})}


@asynccontextmanager
async def demo(
    name: str, env: dict[str, str] | None = None, received: Received | None = None
) -> AsyncIterator[tuple[ClientSession, types.InitializeResult]]:
    """Start a demo, initialize a client session with it, and stop it afterwards."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", f"mcp_gateway_demo.{name}"], env=demo_env(env), cwd=ROOT
    )
    received = received or Received()
    with trio.fail_after(TIMEOUT):
        async with (
            stdio_client(params) as (read, write),
            ClientSession(
                read, write, message_handler=received.on_message, logging_callback=received.on_log
            ) as session,
        ):
            yield session, await session.initialize()


def only_text(result: types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


def spawn_raw(name: str) -> subprocess.Popen[bytes]:
    """Start a demo with pipes and answer its initialize, for the tests that need the process."""
    proc = subprocess.Popen(
        [sys.executable, "-m", f"mcp_gateway_demo.{name}"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, **demo_env()},
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
    proc.stdin.flush()
    # The SDK's stdout is a pipe we read to EOF in the test; one line is the answer.
    assert json.loads(proc.stdout.readline())["id"] == 1
    return proc


# --- lifecycle -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "server_name"), [("notes", "gateway-demo-notes"), ("toolbox", "gateway-demo-toolbox")]
)
async def test_initialize_reports_capabilities_server_info_and_one_sentence_instructions(
    name: str, server_name: str
) -> None:
    """The demos announce exactly the features they serve; only notes' resources change."""
    async with demo(name) as (_, init):
        assert init.serverInfo.name == server_name
        assert init.protocolVersion == types.LATEST_PROTOCOL_VERSION
        capabilities = init.capabilities
        assert capabilities.tools is not None and capabilities.prompts is not None
        assert capabilities.logging is not None and capabilities.completions is not None
        assert capabilities.resources is not None
        assert capabilities.resources.listChanged is (name == "notes")
        assert capabilities.resources.subscribe is False
        assert init.instructions is not None
        assert init.instructions.endswith(".")
        assert init.instructions.count(". ") == 0


@pytest.mark.parametrize("version", ["2024-11-05", "2025-06-18"])
async def test_demo_protocol_version_pins_the_negotiated_revision(version: str) -> None:
    """DEMO_PROTOCOL_VERSION makes a demo stand in for a server of an older revision."""
    async with demo("toolbox", {"DEMO_PROTOCOL_VERSION": version}) as (session, init):
        assert init.protocolVersion == version
        assert only_text(await session.call_tool("echo", {"text": "x"})) == "x"


@pytest.mark.parametrize("name", ["notes", "toolbox"])
def test_sigterm_and_stdin_eof_exit_zero_with_only_json_lines_on_stdout(name: str) -> None:
    """Gateway choice: both stdio shutdown steps are a clean exit; stdout is protocol only."""
    terminated = spawn_raw(name)
    terminated.send_signal(signal.SIGTERM)
    _, stderr = terminated.communicate(timeout=TIMEOUT)
    assert terminated.returncode == 0
    assert b"demo.stopped reason=sigterm" in stderr
    ended = spawn_raw(name)
    assert ended.stdin is not None
    assert ended.stdout is not None
    ended.stdin.write(b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n')
    ended.stdin.flush()
    # The answer is read before stdin closes: the SDK drops a request still in
    # flight at EOF (CI saw it, once in a few hundred runs), and a host waits
    # for its answers before it closes the pipe anyway.
    answered = ended.stdout.readline()
    assert json.loads(answered)["id"] == 2
    stdout, stderr = ended.communicate(timeout=TIMEOUT)  # closes stdin: EOF
    assert ended.returncode == 0
    assert b"demo.started" in stderr and b"demo.stopped" in stderr
    for line in [answered, *stdout.splitlines()]:
        assert json.loads(line)["jsonrpc"] == "2.0"


async def test_logging_starts_at_set_level_and_honours_it() -> None:
    """Spec (utilities/logging): nothing before setLevel; then messages at or above it."""
    received = Received()
    async with demo("notes", received=received) as (session, _):
        await session.call_tool("add_note", {"title": "quiet", "text": ""})
        assert received.logs == []
        await session.set_logging_level("info")
        await session.call_tool("add_note", {"title": "loud", "text": ""})
        (logged,) = received.logs
        assert logged.level == "info"
        assert logged.logger == "gateway-demo-notes"
        assert "loud" in logged.data
        await session.set_logging_level("error")
        await session.call_tool("delete_note", {"title": "loud"})
        assert len(received.logs) == 1


@pytest.mark.parametrize("name", ["notes", "toolbox"])
async def test_an_unknown_tool_is_invalid_params(name: str) -> None:
    """Spec (server/tools): an unknown tool is a protocol error, -32602, naming it."""
    async with demo(name) as (session, _):
        with pytest.raises(McpError) as unknown:
            await session.call_tool("no_such_tool", {})
    assert unknown.value.error.code == types.INVALID_PARAMS
    assert "no_such_tool" in unknown.value.error.message


# --- notes: tools --------------------------------------------------------------------------


async def test_notes_tools_have_schemas_titles_and_hints() -> None:
    """Every tool has an object inputSchema with required, titles, descriptions and hints."""
    async with demo("notes") as (session, _):
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == NOTES_TOOLS
    for tool in tools.values():
        assert tool.title and tool.description
        assert tool.inputSchema["type"] == "object"
        assert tool.annotations is not None and tool.annotations.openWorldHint is False
        for prop in tool.inputSchema["properties"].values():
            assert prop["title"] and prop["description"]
    assert tools["add_note"].inputSchema["required"] == ["title", "text"]
    assert tools["get_note"].inputSchema["required"] == ["title"]
    hints = {name: tool.annotations for name, tool in tools.items() if tool.annotations}
    assert hints["list_notes"].readOnlyHint is True
    assert hints["get_note"].readOnlyHint is True
    assert hints["delete_note"].destructiveHint is True
    assert hints["add_note"].destructiveHint is False


async def test_add_note_links_the_note_and_announces_the_list_change() -> None:
    """Text plus a resource_link that reads back; resources/list_changed is notified."""
    received = Received()
    async with demo("notes", received=received) as (session, _):
        result = await session.call_tool("add_note", {"title": "Trip / plan", "text": "# Pack"})
        assert result.isError is False
        text, link = result.content
        assert isinstance(text, types.TextContent) and "Trip / plan" in text.text
        assert isinstance(link, types.ResourceLink)
        assert str(link.uri) == "notes://note/Trip%20%2F%20plan"
        assert (link.name, link.title, link.mimeType) == ("Trip / plan",) * 2 + ("text/markdown",)
        assert "notifications/resources/list_changed" in received.methods
        (contents,) = (await session.read_resource(link.uri)).contents
        assert isinstance(contents, types.TextResourceContents)
        assert contents.text == "# Pack"


async def test_notes_tool_failures_are_tool_errors() -> None:
    """A taken title, bad arguments and a missing note are isError, naming what was wrong."""
    async with demo("notes") as (session, _):
        taken = await session.call_tool("add_note", {"title": "Welcome", "text": "again"})
        assert taken.isError is True
        assert "already exists" in only_text(taken)
        missing_argument = await session.call_tool("add_note", {"title": "x"})
        assert missing_argument.isError is True
        assert "text" in only_text(missing_argument)
        extra = await session.call_tool("list_notes", {"verbose": True})
        assert extra.isError is True
        assert "verbose" in only_text(extra)
        absent = await session.call_tool("get_note", {"title": "Nope"})
        assert absent.isError is True
        assert "Nope" in only_text(absent)


async def test_list_get_and_delete_notes() -> None:
    """The seeded notes in order; get embeds one; delete removes it from tools and resources."""
    async with demo("notes") as (session, _):
        listing = only_text(await session.call_tool("list_notes"))
        assert [line[2:] for line in listing.splitlines()[1:]] == SEED_TITLES
        got = await session.call_tool("get_note", {"title": "Shopping list"})
        (embedded,) = got.content
        assert isinstance(embedded, types.EmbeddedResource)
        assert isinstance(embedded.resource, types.TextResourceContents)
        assert str(embedded.resource.uri) == "notes://note/Shopping%20list"
        assert embedded.resource.mimeType == "text/markdown"
        assert "coffee" in embedded.resource.text
        assert (await session.call_tool("delete_note", {"title": "Welcome"})).isError is False
        assert "Welcome" not in only_text(await session.call_tool("list_notes"))
        with pytest.raises(McpError) as gone:
            await session.read_resource(AnyUrl("notes://note/Welcome"))
        assert gone.value.error.code == -32002
        assert (await session.call_tool("delete_note", {"title": "Welcome"})).isError is True


# --- notes: resources, prompts, completion ----------------------------------------------------


async def test_notes_resources_are_the_index_one_per_note_and_a_template() -> None:
    """resources/list follows the store; the index links every note; one template."""
    async with demo("notes") as (session, _):
        await session.call_tool("add_note", {"title": "New", "text": "n"})
        listed = (await session.list_resources()).resources
        assert [str(r.uri) for r in listed] == [
            "notes://index",
            "notes://note/Welcome",
            "notes://note/Shopping%20list",
            "notes://note/Gateway%20ideas",
            "notes://note/New",
        ]
        assert all(r.mimeType == "text/markdown" for r in listed)
        (index,) = (await session.read_resource(AnyUrl("notes://index"))).contents
        assert isinstance(index, types.TextResourceContents)
        assert index.mimeType == "text/markdown"
        assert "- [Shopping list](notes://note/Shopping%20list)" in index.text
        (template,) = (await session.list_resource_templates()).resourceTemplates
        assert template.uriTemplate == "notes://note/{title}"
        assert template.mimeType == "text/markdown"


@pytest.mark.parametrize("uri", ["notes://nothing", "notes://note/No%20such%20note"])
async def test_an_unknown_resource_is_resource_not_found(uri: str) -> None:
    """Spec (server/resources): -32002, with the URI in message and data."""
    async with demo("notes") as (session, _):
        with pytest.raises(McpError) as missing:
            await session.read_resource(AnyUrl(uri))
    assert missing.value.error.code == -32002
    assert missing.value.error.message == f"Resource not found: {uri}"
    assert missing.value.error.data == {"uri": uri}


async def test_note_titles_complete_for_the_template_and_the_prompt() -> None:
    """Spec (completion): both refs complete titles by prefix, ignoring case."""
    template = types.ResourceTemplateReference(type="ref/resource", uri="notes://note/{title}")
    prompt = types.PromptReference(type="ref/prompt", name="summarize_note")
    async with demo("notes") as (session, _):

        async def complete(ref: Any, value: str) -> list[str]:
            answer = await session.complete(ref, {"name": "title", "value": value})
            return answer.completion.values

        assert await complete(template, "") == SEED_TITLES
        assert await complete(template, "s") == ["Shopping list"]
        await session.call_tool("add_note", {"title": "Sailing", "text": ""})
        assert await complete(prompt, "S") == ["Shopping list", "Sailing"]
        assert await complete(template, "zzz") == []
        elsewhere = types.ResourceTemplateReference(type="ref/resource", uri="notes://x/{x}")
        with pytest.raises(McpError) as unknown:
            await complete(elsewhere, "")
    assert unknown.value.error.code == types.INVALID_PARAMS


async def test_summarize_note_prompt_embeds_the_note() -> None:
    """The prompt's messages carry the note; a missing note or argument is -32602."""
    async with demo("notes") as (session, _):
        (prompt,) = (await session.list_prompts()).prompts
        assert prompt.name == "summarize_note"
        assert prompt.arguments is not None
        (argument,) = prompt.arguments
        assert argument.model_dump(exclude_none=True) == {
            "name": "title",
            "title": "Title",
            "description": "The title of the note to summarize.",
            "required": True,
        }
        result = await session.get_prompt("summarize_note", {"title": "Welcome"})
        instruction, embedded = result.messages
        assert instruction.role == "user" and isinstance(instruction.content, types.TextContent)
        assert isinstance(embedded.content, types.EmbeddedResource)
        assert str(embedded.content.resource.uri) == "notes://note/Welcome"
        for arguments, named in [({"title": "Nope"}, "Nope"), ({}, "title")]:
            with pytest.raises(McpError) as bad:
                await session.get_prompt("summarize_note", arguments)
            assert bad.value.error.code == types.INVALID_PARAMS
            assert named in bad.value.error.message


async def test_notes_persist_in_notes_dir_across_restarts(tmp_path: Path) -> None:
    """With NOTES_DIR set, a new directory is seeded and survives a restart."""
    env = {"NOTES_DIR": str(tmp_path / "notes")}
    async with demo("notes", env) as (session, _):
        await session.call_tool("add_note", {"title": "Kept/100%", "text": "still here"})
        await session.call_tool("delete_note", {"title": "Welcome"})
    async with demo("notes", env) as (session, _):
        (got,) = (await session.call_tool("get_note", {"title": "Kept/100%"})).content
        assert isinstance(got, types.EmbeddedResource)
        assert isinstance(got.resource, types.TextResourceContents)
        assert got.resource.text == "still here"
        assert "Welcome" not in only_text(await session.call_tool("list_notes"))


# --- toolbox -------------------------------------------------------------------------------


async def test_toolbox_tools_answer_text_structured_content_and_tool_errors() -> None:
    """Plain text; JSON integers stay integers; stats is structured; fail is isError."""
    async with demo("toolbox") as (session, _):
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(tools) == TOOLBOX_TOOLS
        assert [name for name, tool in tools.items() if tool.outputSchema] == ["stats"]
        assert tools["add"].inputSchema["required"] == ["a", "b"]
        assert tools["add"].inputSchema["properties"]["a"]["type"] == "number"
        assert all(t.annotations is not None and t.annotations.readOnlyHint for t in tools.values())

        assert only_text(await session.call_tool("echo", {"text": "héllo ✓"})) == "héllo ✓"
        assert only_text(await session.call_tool("add", {"a": 2, "b": 0.5})) == "2.5"
        assert only_text(await session.call_tool("add", {"a": 2, "b": 3})) == "5"
        moment = datetime.datetime.fromisoformat(only_text(await session.call_tool("now")))
        assert moment.utcoffset() == datetime.timedelta(0)
        assert uuid.UUID(only_text(await session.call_tool("uuid"))).version == 4

        boolean = await session.call_tool("add", {"a": True, "b": 1})
        assert boolean.isError is True  # JSON Schema: true is not a number
        failed = await session.call_tool("fail", {"message": "it broke"})
        assert failed.isError is True
        assert only_text(failed) == "it broke"

        stats = await session.call_tool("stats", {"numbers": [1, 2, 3.5, -0.5]})
        assert stats.structuredContent == {"count": 4, "mean": 1.5, "min": -0.5, "max": 3.5}
        assert json.loads(only_text(stats)) == stats.structuredContent
        assert (await session.call_tool("stats", {"numbers": []})).isError is True


async def test_toolbox_about_resource_prompt_and_completion() -> None:
    """One fixed resource, no templates; code_review with completion of its language."""
    async with demo("toolbox") as (session, _):
        (listed,) = (await session.list_resources()).resources
        assert str(listed.uri) == "toolbox://about"
        (about,) = (await session.read_resource(listed.uri)).contents
        assert isinstance(about, types.TextResourceContents)
        assert about.mimeType == "text/plain" and "stats" in about.text
        assert (await session.list_resource_templates()).resourceTemplates == []

        (prompt,) = (await session.list_prompts()).prompts
        assert prompt.name == "code_review"
        assert [(a.name, a.required) for a in prompt.arguments or []] == [
            ("code", True),
            ("language", False),
        ]
        with_language = await session.get_prompt(
            "code_review", {"code": "x = 1", "language": "python"}
        )
        (only,) = with_language.messages
        assert isinstance(only.content, types.TextContent)
        assert "```python\nx = 1\n```" in only.content.text
        without = await session.get_prompt("code_review", {"code": "x"})
        assert isinstance(without.messages[0].content, types.TextContent)
        assert "this code" in without.messages[0].content.text
        with pytest.raises(McpError) as missing:
            await session.get_prompt("code_review", {})
        assert missing.value.error.code == types.INVALID_PARAMS
        assert "code" in missing.value.error.message

        ref = types.PromptReference(type="ref/prompt", name="code_review")
        language = await session.complete(ref, {"name": "language", "value": "ja"}, {"code": "x"})
        assert language.completion.values == ["java", "javascript"]
        assert language.completion.total == 2
        code = await session.complete(ref, {"name": "code", "value": "x"})
        assert code.completion.values == []
