"""The bundled demo backends (``gateway.demo.notes``, ``gateway.demo.toolbox``) over real stdio.

Each test starts a demo exactly as the shipped config does (``python -m
gateway.demo.<name>``) and speaks newline-delimited JSON-RPC to it from plain
synchronous code, so a failure points at the demo, not at the gateway. One test
drives the notes demo with the official MCP SDK client, proving it against a
real peer. Every line the demo writes to stdout is checked to be a JSON-RPC
object as it is read.
"""

from __future__ import annotations

import datetime
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest
import trio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.shared.exceptions import McpError
from mcp.types import (
    EmbeddedResource,
    ResourceLink,
    ResourceTemplateReference,
    TextContent,
    TextResourceContents,
)
from pydantic import AnyUrl

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

ROOT: Final = Path(__file__).resolve().parents[1]
# Generous: a cold interpreter start on a loaded CI machine, not a protocol wait.
TIMEOUT: Final = 10.0
LATEST: Final = "2025-11-25"
SUPPORTED: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
# The demo's own settings; a developer's shell must not leak into the tests.
DEMO_ENV_VARS: Final = ("NOTES_DIR", "DEMO_PAGE_SIZE", "DEMO_LOG_LEVEL")

NOTES_TOOLS: Final = {"add_note", "list_notes", "get_note", "delete_note"}
TOOLBOX_TOOLS: Final = {"echo", "add", "now", "fail", "uuid", "stats"}
SEED_TITLES: Final = ["Welcome", "Shopping list", "Gateway ideas"]


def demo_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a demo child gets: ours minus demo settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in DEMO_ENV_VARS}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(extra or {})
    return env


class DemoPeer:
    """A demo child process plus a synchronous JSON-RPC client for it.

    stdout is read by a thread into a queue so every wait has a timeout; the
    thread parses nothing, so a non-JSON line fails the test that reads it.
    """

    def __init__(self, demo: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", f"gateway.demo.{demo}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env=demo_env(env),
        )
        self.notifications: list[dict[str, Any]] = []
        self.stderr: list[bytes] = []
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._next_id = 0
        self._pumps = [
            threading.Thread(target=self._pump_stdout, daemon=True),
            threading.Thread(target=self._pump_stderr, daemon=True),
        ]
        for pump in self._pumps:
            pump.start()

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in iter(self.proc.stdout.readline, b""):
            self._lines.put(line)
        self._lines.put(b"")  # EOF marker

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr.extend(iter(self.proc.stderr.readline, b""))

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(json.dumps(message).encode() + b"\n")

    def receive_json(self) -> Any:
        """The next line, decoded; fails unless it is one complete UTF-8 JSON line."""
        line = self._lines.get(timeout=TIMEOUT)
        assert line, "the demo closed stdout"
        assert line.endswith(b"\n")
        return json.loads(line.decode("utf-8"))

    def receive(self) -> dict[str, Any]:
        """The next message; fails unless it is one JSON-RPC 2.0 object."""
        decoded = self.receive_json()
        assert isinstance(decoded, dict)
        assert decoded["jsonrpc"] == "2.0"
        return decoded

    def receive_response(self) -> dict[str, Any]:
        """The next response, keeping any notifications that come first."""
        while True:
            received = self.receive()
            if "id" in received:
                return received
            self.notifications.append(received)

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._next_id += 1
        envelope: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            envelope["params"] = params
        self.send(envelope)
        response = self.receive_response()
        assert response["id"] == self._next_id
        return response

    def result(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        response = self.request(method, params)
        assert "result" in response, response
        result = response["result"]
        assert isinstance(result, dict)
        return result

    def error(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        response = self.request(method, params)
        assert "error" in response, response
        error = response["error"]
        assert isinstance(error, dict)
        return error

    def initialize(self, version: str = LATEST) -> dict[str, Any]:
        result = self.result(
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "test_demo_servers", "version": "0"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"name": tool}
        if arguments is not None:
            params["arguments"] = arguments
        return self.result("tools/call", params)

    def close_stdin(self) -> int:
        """Close stdin (EOF) and return the exit status once the demo exits."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout=TIMEOUT)

    def remaining_stdout(self) -> list[bytes]:
        """Every line still unread, up to EOF (call after the process exited)."""
        lines: list[bytes] = []
        while line := self._lines.get(timeout=TIMEOUT):
            lines.append(line)
        return lines

    def all_stderr(self) -> bytes:
        """Everything the demo logged (call after the process exited)."""
        self._pumps[1].join(timeout=TIMEOUT)
        return b"".join(self.stderr)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=TIMEOUT)
        # Let the pumps reach EOF first: closing a pipe under a reading thread makes it raise.
        for pump in self._pumps:
            pump.join(timeout=TIMEOUT)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture(name="spawn")
def _spawn() -> Iterator[Callable[..., DemoPeer]]:
    peers: list[DemoPeer] = []

    def spawn(demo: str, env: dict[str, str] | None = None) -> DemoPeer:
        peer = DemoPeer(demo, env)
        peers.append(peer)
        return peer

    yield spawn
    for peer in peers:
        peer.kill()


@pytest.fixture(name="notes")
def _notes(spawn: Callable[..., DemoPeer]) -> DemoPeer:
    peer = spawn("notes")
    peer.initialize()
    return peer


@pytest.fixture(name="toolbox")
def _toolbox(spawn: Callable[..., DemoPeer]) -> DemoPeer:
    peer = spawn("toolbox")
    peer.initialize()
    return peer


def only_text(result: dict[str, Any]) -> str:
    (block,) = result["content"]
    assert block["type"] == "text"
    text = block["text"]
    assert isinstance(text, str)
    return text


# --- lifecycle -----------------------------------------------------------------------------


@pytest.mark.parametrize("demo", ["notes", "toolbox"])
@pytest.mark.parametrize("version", SUPPORTED)
def test_initialize_echoes_a_supported_protocol_version(
    spawn: Callable[..., DemoPeer], demo: str, version: str
) -> None:
    """Spec (lifecycle): a server that supports the requested version answers with it."""
    assert spawn(demo).initialize(version)["protocolVersion"] == version


@pytest.mark.parametrize("demo", ["notes", "toolbox"])
def test_initialize_answers_latest_for_an_unknown_version(
    spawn: Callable[..., DemoPeer], demo: str
) -> None:
    """Spec (lifecycle): otherwise the server answers with the latest version it supports."""
    assert spawn(demo).initialize("1999-01-01")["protocolVersion"] == LATEST


@pytest.mark.parametrize(
    ("demo", "name"), [("notes", "gateway-demo-notes"), ("toolbox", "gateway-demo-toolbox")]
)
def test_initialize_reports_capabilities_server_info_and_one_sentence_instructions(
    spawn: Callable[..., DemoPeer], demo: str, name: str
) -> None:
    """The demos announce exactly the features they serve."""
    result = spawn(demo).initialize()
    assert result["serverInfo"]["name"] == name
    assert isinstance(result["serverInfo"]["version"], str)
    capabilities = result["capabilities"]
    assert set(capabilities) == {"tools", "resources", "prompts", "completions", "logging"}
    assert capabilities["resources"]["listChanged"] is (demo == "notes")
    instructions = result["instructions"]
    assert instructions.endswith(".")
    assert instructions.count(". ") == 0


def test_initialize_with_missing_client_info_is_invalid_params(
    spawn: Callable[..., DemoPeer],
) -> None:
    """Spec: clientInfo is required; -32602 names it."""
    error = spawn("notes").error("initialize", {"protocolVersion": LATEST, "capabilities": {}})
    assert error["code"] == -32602
    assert "clientInfo" in error["message"]


def test_ping_answers_an_empty_result(notes: DemoPeer) -> None:
    """Spec (utilities/ping): the receiver answers promptly with an empty result."""
    assert notes.result("ping") == {}


def test_notifications_are_never_answered(notes: DemoPeer) -> None:
    """JSON-RPC 2.0: no response to a notification, even an unknown or malformed one."""
    notes.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    notes.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}})
    notes.send({"jsonrpc": "2.0", "method": "notifications/whatever"})
    notes.send({"jsonrpc": "2.0", "method": "tools/list"})
    response = notes.request("ping")
    assert response["result"] == {}
    assert notes.notifications == []


def test_stdin_eof_exits_zero_with_nothing_but_json_lines_on_stdout(
    spawn: Callable[..., DemoPeer],
) -> None:
    """The demo stops cleanly on EOF; stdout never carries anything but protocol messages."""
    peer = spawn("notes")
    peer.initialize()
    peer.call("add_note", {"title": "t", "text": "x"})
    peer.send_raw(b"not json\n")
    assert peer.close_stdin() == 0
    for line in peer.remaining_stdout():
        assert json.loads(line)["jsonrpc"] == "2.0"
    assert b"demo.started" in peer.all_stderr()


@pytest.mark.parametrize("demo", ["notes", "toolbox"])
def test_sigterm_exits_zero(spawn: Callable[..., DemoPeer], demo: str) -> None:
    """Gateway choice: SIGTERM, the stdio transport's second step, is a clean exit too."""
    peer = spawn(demo)
    peer.initialize()  # the handler is installed before the first line is read
    peer.proc.send_signal(signal.SIGTERM)
    assert peer.proc.wait(timeout=TIMEOUT) == 0


def test_logging_set_level_answers_empty_and_then_log_messages_flow(notes: DemoPeer) -> None:
    """Spec (utilities/logging): setLevel answers {}; messages at or above it are sent."""
    notes.call("add_note", {"title": "quiet", "text": ""})
    assert not [n for n in notes.notifications if n["method"] == "notifications/message"]
    assert notes.result("logging/setLevel", {"level": "info"}) == {}
    notes.call("add_note", {"title": "loud", "text": ""})
    (logged,) = [n for n in notes.notifications if n["method"] == "notifications/message"]
    assert logged["params"]["level"] == "info"
    assert "loud" in logged["params"]["data"]
    assert notes.result("logging/setLevel", {"level": "error"}) == {}
    notes.notifications.clear()
    notes.call("delete_note", {"title": "loud"})
    assert not [n for n in notes.notifications if n["method"] == "notifications/message"]


def test_logging_set_level_rejects_an_unknown_level(notes: DemoPeer) -> None:
    """Spec: the level is one of the RFC 5424 names; anything else is -32602."""
    error = notes.error("logging/setLevel", {"level": "loud"})
    assert error["code"] == -32602
    assert "level" in error["message"]


# --- JSON-RPC errors -----------------------------------------------------------------------


def test_unknown_method_is_method_not_found_naming_it(notes: DemoPeer) -> None:
    """JSON-RPC 2.0: -32601, and the message names the method."""
    error = notes.error("tools/frobnicate")
    assert error["code"] == -32601
    assert "tools/frobnicate" in error["message"]


@pytest.mark.parametrize(
    ("method", "params", "named"),
    [
        ("tools/call", {}, "name"),
        ("tools/call", {"name": 3}, "name"),
        ("tools/call", {"name": "add_note", "arguments": []}, "arguments"),
        ("resources/read", {}, "uri"),
        ("prompts/get", {"name": "summarize_note", "arguments": {"title": 1}}, "title"),
        ("prompts/get", {"name": "summarize_note"}, "title"),
        ("prompts/get", {"name": "nope"}, "nope"),
        ("completion/complete", {"ref": {"type": "ref/x"}}, "ref.type"),
        ("tools/list", {"cursor": 7}, "cursor"),
    ],
)
def test_bad_params_are_invalid_params_naming_what_was_wrong(
    notes: DemoPeer, method: str, params: dict[str, Any], named: str
) -> None:
    """JSON-RPC 2.0: -32602; the message says which parameter was wrong."""
    error = notes.error(method, params)
    assert error["code"] == -32602
    assert named in error["message"]


def test_unknown_tool_is_invalid_params(notes: DemoPeer) -> None:
    """Spec (server/tools): an unknown tool is a protocol error, -32602."""
    error = notes.error("tools/call", {"name": "x", "arguments": {}})
    assert error == {"code": -32602, "message": "Unknown tool: x"}


def test_unknown_resource_is_resource_not_found(notes: DemoPeer) -> None:
    """Spec (server/resources): -32002 with the URI."""
    for uri in ["notes://nothing", "notes://note/No%20such%20note"]:
        error = notes.error("resources/read", {"uri": uri})
        assert error["code"] == -32002
        assert error["message"] == f"Resource not found: {uri}"
        assert error["data"] == {"uri": uri}


def test_malformed_line_is_a_parse_error_and_the_demo_keeps_serving(notes: DemoPeer) -> None:
    """JSON-RPC 2.0: -32700 with id null; the stream stays usable."""
    notes.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
    response = notes.receive()
    assert response["id"] is None
    assert response["error"]["code"] == -32700
    notes.send_raw(b"\xff\xfe\n")
    assert notes.receive()["error"]["code"] == -32700
    assert notes.result("ping") == {}


def test_non_object_message_is_an_invalid_request(notes: DemoPeer) -> None:
    """JSON-RPC 2.0: valid JSON that is not a request is -32600 (no batches after 2025-03-26)."""
    for line in [b"42\n", b'{"id": 1, "method": "ping"}\n', b"[]\n"]:
        notes.send_raw(line)
        response = notes.receive()
        assert response["id"] is None
        assert response["error"]["code"] == -32600


def test_a_batch_is_answered_when_2025_03_26_was_negotiated(spawn: Callable[..., DemoPeer]) -> None:
    """Spec 2025-03-26 (basic): implementations MUST accept batches; answer as a batch."""
    peer = spawn("notes")
    peer.initialize("2025-03-26")
    batch = [
        {"jsonrpc": "2.0", "id": "a", "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/whatever"},
        {"jsonrpc": "2.0", "id": "b", "method": "nope"},
    ]
    peer.send_raw(json.dumps(batch).encode() + b"\n")
    answers = peer.receive_json()
    assert [a["id"] for a in answers] == ["a", "b"]
    assert answers[1]["error"]["code"] == -32601


# --- notes: tools ----------------------------------------------------------------------------


def test_notes_lists_its_tools_with_schemas_and_annotations(notes: DemoPeer) -> None:
    """Every tool has an object inputSchema with required, titles, descriptions and hints."""
    tools = {tool["name"]: tool for tool in notes.result("tools/list")["tools"]}
    assert set(tools) == NOTES_TOOLS
    for tool in tools.values():
        assert tool["title"]
        assert tool["description"]
        assert tool["inputSchema"]["type"] == "object"
        assert tool["annotations"]["openWorldHint"] is False
        for prop in tool["inputSchema"]["properties"].values():
            assert prop["title"]
            assert prop["description"]
    assert tools["add_note"]["inputSchema"]["required"] == ["title", "text"]
    assert tools["get_note"]["inputSchema"]["required"] == ["title"]
    assert tools["list_notes"]["annotations"]["readOnlyHint"] is True
    assert tools["get_note"]["annotations"]["readOnlyHint"] is True
    assert tools["delete_note"]["annotations"]["destructiveHint"] is True
    assert tools["add_note"]["annotations"]["destructiveHint"] is False


def test_add_note_returns_text_and_a_resource_link_and_announces_the_change(
    notes: DemoPeer,
) -> None:
    """The link's URI reads back the note; the resource list change is notified."""
    result = notes.call("add_note", {"title": "Trip / plan", "text": "# Pack\n- socks"})
    assert result["isError"] is False
    text_block, link = result["content"]
    assert text_block["type"] == "text"
    assert "Trip / plan" in text_block["text"]
    assert link == {
        "type": "resource_link",
        "uri": "notes://note/Trip%20%2F%20plan",
        "name": "Trip / plan",
        "title": "Trip / plan",
        "mimeType": "text/markdown",
    }
    assert {"jsonrpc": "2.0", "method": "notifications/resources/list_changed"} in (
        notes.notifications
    )
    read = notes.result("resources/read", {"uri": link["uri"]})
    assert read["contents"][0]["text"] == "# Pack\n- socks"


def test_add_note_with_a_taken_title_is_a_tool_error(notes: DemoPeer) -> None:
    """A business-logic failure is isError, so the model can pick another title."""
    result = notes.call("add_note", {"title": "Welcome", "text": "again"})
    assert result["isError"] is True
    assert "already exists" in only_text(result)


def test_invalid_tool_arguments_are_a_tool_error_naming_the_argument(notes: DemoPeer) -> None:
    """Spec 2025-11-25 (SEP-1303): input validation errors are tool execution errors."""
    missing = notes.call("add_note", {"title": "x"})
    assert missing["isError"] is True
    assert "text" in only_text(missing)
    extra = notes.call("list_notes", {"verbose": True})
    assert extra["isError"] is True
    assert "verbose" in only_text(extra)


def test_list_notes_lists_every_title(notes: DemoPeer) -> None:
    """The seeded notes are there from the start, in order."""
    listing = only_text(notes.call("list_notes"))
    assert [line[2:] for line in listing.splitlines()[1:]] == SEED_TITLES


def test_get_note_returns_an_embedded_resource(notes: DemoPeer) -> None:
    """The note comes back inline, with its URI and MIME type."""
    result = notes.call("get_note", {"title": "Shopping list"})
    (block,) = result["content"]
    assert block["type"] == "resource"
    assert block["resource"]["uri"] == "notes://note/Shopping%20list"
    assert block["resource"]["mimeType"] == "text/markdown"
    assert "coffee" in block["resource"]["text"]


def test_get_note_of_a_missing_note_is_a_tool_error(notes: DemoPeer) -> None:
    """The tool ran and found nothing: isError, not a protocol error."""
    result = notes.call("get_note", {"title": "Nope"})
    assert result["isError"] is True
    assert "Nope" in only_text(result)


def test_delete_note_removes_it_everywhere(notes: DemoPeer) -> None:
    """After deletion the note is gone from the tools and the resources."""
    assert notes.call("delete_note", {"title": "Welcome"})["isError"] is False
    assert "Welcome" not in only_text(notes.call("list_notes"))
    assert notes.error("resources/read", {"uri": "notes://note/Welcome"})["code"] == -32002
    assert notes.call("delete_note", {"title": "Welcome"})["isError"] is True


# --- notes: resources, prompts, completion ----------------------------------------------------


def test_notes_resources_are_the_index_and_one_per_note(notes: DemoPeer) -> None:
    """resources/list reflects the store, including notes added at run time."""
    notes.call("add_note", {"title": "New", "text": "n"})
    listed = notes.result("resources/list")["resources"]
    assert [r["uri"] for r in listed] == [
        "notes://index",
        "notes://note/Welcome",
        "notes://note/Shopping%20list",
        "notes://note/Gateway%20ideas",
        "notes://note/New",
    ]
    assert all(r["mimeType"] == "text/markdown" for r in listed)


def test_notes_index_links_every_note(notes: DemoPeer) -> None:
    """The index is Markdown with a link per note."""
    (contents,) = notes.result("resources/read", {"uri": "notes://index"})["contents"]
    assert contents["uri"] == "notes://index"
    assert contents["mimeType"] == "text/markdown"
    assert "- [Shopping list](notes://note/Shopping%20list)" in contents["text"]


def test_notes_template_is_listed(notes: DemoPeer) -> None:
    """One template, for reading any note by title."""
    (template,) = notes.result("resources/templates/list")["resourceTemplates"]
    assert template["uriTemplate"] == "notes://note/{title}"
    assert template["mimeType"] == "text/markdown"


def test_note_title_completes_over_existing_titles(notes: DemoPeer) -> None:
    """Spec (completion): ref/resource completes template variables, prefix match."""

    def complete(value: str) -> dict[str, Any]:
        result = notes.result(
            "completion/complete",
            {
                "ref": {"type": "ref/resource", "uri": "notes://note/{title}"},
                "argument": {"name": "title", "value": value},
            },
        )
        completion = result["completion"]
        assert isinstance(completion, dict)
        return completion

    assert complete("") == {"values": SEED_TITLES, "total": 3, "hasMore": False}
    assert complete("s")["values"] == ["Shopping list"]
    notes.call("add_note", {"title": "Sailing", "text": ""})
    assert complete("S")["values"] == ["Shopping list", "Sailing"]
    assert complete("zzz")["values"] == []


def test_completion_of_an_unknown_template_is_invalid_params(notes: DemoPeer) -> None:
    """A ref that names nothing the server has is -32602."""
    error = notes.error(
        "completion/complete",
        {
            "ref": {"type": "ref/resource", "uri": "notes://elsewhere/{x}"},
            "argument": {"name": "x", "value": ""},
        },
    )
    assert error["code"] == -32602


def test_summarize_note_prompt_embeds_the_note(notes: DemoPeer) -> None:
    """The prompt's messages carry the note as an embedded resource."""
    (prompt,) = notes.result("prompts/list")["prompts"]
    assert prompt["name"] == "summarize_note"
    assert prompt["arguments"] == [
        {
            "name": "title",
            "title": "Title",
            "description": "The title of the note to summarize.",
            "required": True,
        }
    ]
    result = notes.result(
        "prompts/get", {"name": "summarize_note", "arguments": {"title": "Welcome"}}
    )
    instruction, embedded = result["messages"]
    assert instruction["role"] == "user"
    assert instruction["content"]["type"] == "text"
    assert embedded["content"]["type"] == "resource"
    assert embedded["content"]["resource"]["uri"] == "notes://note/Welcome"


def test_summarize_note_of_a_missing_note_is_invalid_params(notes: DemoPeer) -> None:
    """A prompt argument naming nothing is a bad request: -32602."""
    error = notes.error("prompts/get", {"name": "summarize_note", "arguments": {"title": "Nope"}})
    assert error["code"] == -32602
    assert "Nope" in error["message"]


def test_notes_persist_in_notes_dir_across_restarts(
    spawn: Callable[..., DemoPeer], tmp_path: Path
) -> None:
    """With NOTES_DIR set, a new directory is seeded and survives a restart."""
    directory = tmp_path / "notes"
    first = spawn("notes", {"NOTES_DIR": str(directory)})
    first.initialize()
    first.call("add_note", {"title": "Kept/100%", "text": "still here"})
    first.call("delete_note", {"title": "Welcome"})
    assert first.close_stdin() == 0
    second = spawn("notes", {"NOTES_DIR": str(directory)})
    second.initialize()
    got = second.call("get_note", {"title": "Kept/100%"})
    assert got["content"][0]["resource"]["text"] == "still here"
    assert "Welcome" not in only_text(second.call("list_notes"))


# --- toolbox -------------------------------------------------------------------------------


def test_toolbox_lists_its_tools(toolbox: DemoPeer) -> None:
    """Six tools; only stats declares an outputSchema."""
    tools = {tool["name"]: tool for tool in toolbox.result("tools/list")["tools"]}
    assert set(tools) == TOOLBOX_TOOLS
    assert [name for name, tool in tools.items() if "outputSchema" in tool] == ["stats"]
    assert tools["add"]["inputSchema"]["required"] == ["a", "b"]
    assert tools["add"]["inputSchema"]["properties"]["a"]["type"] == "number"
    assert all(tool["annotations"]["readOnlyHint"] for tool in tools.values())


def test_echo_add_now_and_uuid_answer_text(toolbox: DemoPeer) -> None:
    """The plain-text tools."""
    assert only_text(toolbox.call("echo", {"text": "héllo ✓"})) == "héllo ✓"
    assert only_text(toolbox.call("add", {"a": 2, "b": 0.5})) == "2.5"
    assert only_text(toolbox.call("add", {"a": 2, "b": 3})) == "5"
    moment = datetime.datetime.fromisoformat(only_text(toolbox.call("now")))
    assert moment.utcoffset() == datetime.timedelta(0)
    assert uuid.UUID(only_text(toolbox.call("uuid"))).version == 4


def test_add_rejects_a_boolean_as_a_number(toolbox: DemoPeer) -> None:
    """JSON Schema: true is not a number, though Python thinks it is."""
    result = toolbox.call("add", {"a": True, "b": 1})
    assert result["isError"] is True
    assert "a: expected number" in only_text(result)


def test_fail_is_always_a_tool_error_with_the_message(toolbox: DemoPeer) -> None:
    """Spec (server/tools): a failing tool is a result with isError true."""
    result = toolbox.call("fail", {"message": "it broke"})
    assert result == {"content": [{"type": "text", "text": "it broke"}], "isError": True}


def test_stats_returns_structured_content_matching_its_output_schema(toolbox: DemoPeer) -> None:
    """Spec: structuredContent, plus the same JSON as text for older clients."""
    result = toolbox.call("stats", {"numbers": [1, 2, 3.5, -0.5]})
    assert result["structuredContent"] == {"count": 4, "mean": 1.5, "min": -0.5, "max": 3.5}
    assert json.loads(only_text(result)) == result["structuredContent"]
    empty = toolbox.call("stats", {"numbers": []})
    assert empty["isError"] is True
    assert "numbers" in only_text(empty)


def test_toolbox_about_resource(toolbox: DemoPeer) -> None:
    """One fixed resource, no templates."""
    (listed,) = toolbox.result("resources/list")["resources"]
    assert listed["uri"] == "toolbox://about"
    (contents,) = toolbox.result("resources/read", {"uri": "toolbox://about"})["contents"]
    assert contents["mimeType"] == "text/plain"
    assert "stats" in contents["text"]
    assert toolbox.result("resources/templates/list") == {"resourceTemplates": []}


def test_code_review_prompt_with_and_without_language(toolbox: DemoPeer) -> None:
    """language is optional; code is required."""
    (prompt,) = toolbox.result("prompts/list")["prompts"]
    assert prompt["name"] == "code_review"
    assert [(a["name"], a["required"]) for a in prompt["arguments"]] == [
        ("code", True),
        ("language", False),
    ]
    with_language = toolbox.result(
        "prompts/get", {"name": "code_review", "arguments": {"code": "x = 1", "language": "python"}}
    )
    (only,) = with_language["messages"]
    assert "```python\nx = 1\n```" in only["content"]["text"]
    without = toolbox.result("prompts/get", {"name": "code_review", "arguments": {"code": "x"}})
    assert "this code" in without["messages"][0]["content"]["text"]
    missing = toolbox.error("prompts/get", {"name": "code_review", "arguments": {}})
    assert missing["code"] == -32602
    assert "code" in missing["message"]


def test_code_review_language_completes_over_a_fixed_list(toolbox: DemoPeer) -> None:
    """Spec (completion): ref/prompt completes prompt arguments, prefix match."""
    result = toolbox.result(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "code_review"},
            "argument": {"name": "language", "value": "ja"},
            "context": {"arguments": {"code": "x"}},
        },
    )
    assert result["completion"] == {"values": ["java", "javascript"], "total": 2, "hasMore": False}
    no_completer = toolbox.result(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "code_review"},
            "argument": {"name": "code", "value": "x"},
        },
    )
    assert no_completer["completion"]["values"] == []


# --- pagination ----------------------------------------------------------------------------

LISTS: Final = [
    ("tools/list", "tools", "name"),
    ("resources/list", "resources", "uri"),
    ("resources/templates/list", "resourceTemplates", "uriTemplate"),
    ("prompts/list", "prompts", "name"),
]


@pytest.mark.parametrize("demo", ["notes", "toolbox"])
def test_lists_paginate_one_item_per_page_with_demo_page_size_1(
    spawn: Callable[..., DemoPeer], demo: str
) -> None:
    """Spec (pagination): walking nextCursor yields the same set as one unpaginated page."""
    whole = spawn(demo)
    whole.initialize()
    paged = spawn(demo, {"DEMO_PAGE_SIZE": "1"})
    paged.initialize()
    for method, key, ident in LISTS:
        everything = whole.result(method)
        assert "nextCursor" not in everything
        expected = [item[ident] for item in everything[key]]
        seen: list[str] = []
        params: dict[str, Any] = {}
        for _ in range(len(expected) + 1):
            page = paged.result(method, params)
            assert len(page[key]) <= 1
            seen.extend(item[ident] for item in page[key])
            if "nextCursor" not in page:
                break
            assert isinstance(page["nextCursor"], str)
            params = {"cursor": page["nextCursor"]}
        assert seen == expected, method
        assert len(set(seen)) == len(seen)


@pytest.mark.parametrize("cursor", ["bogus", "", "dG9vbHM6LTE", "cHJvbXB0czox"])
def test_an_unknown_cursor_is_invalid_params(spawn: Callable[..., DemoPeer], cursor: str) -> None:
    """Spec (pagination): an invalid cursor is -32602 (including one from another list)."""
    peer = spawn("toolbox", {"DEMO_PAGE_SIZE": "1"})
    peer.initialize()
    error = peer.error("tools/list", {"cursor": cursor})
    assert error["code"] == -32602
    assert "cursor" in error["message"]


# --- the official SDK as the peer -------------------------------------------------------------


async def test_notes_demo_works_with_the_official_sdk_client() -> None:
    """The notes demo against mcp 1.x's ClientSession over real stdio, under trio."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway.demo.notes"],
        env={**get_default_environment(), **{"PYTHONPATH": str(ROOT)}},
        cwd=ROOT,
    )
    with trio.fail_after(30):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.serverInfo.name == "gateway-demo-notes"
            assert init.instructions

            tools = await session.list_tools()
            assert {tool.name for tool in tools.tools} == NOTES_TOOLS

            added = await session.call_tool("add_note", {"title": "From SDK", "text": "*hi*"})
            assert added.isError is False
            text_block, link = added.content
            assert isinstance(text_block, TextContent)
            assert isinstance(link, ResourceLink)
            assert str(link.uri) == "notes://note/From%20SDK"

            got = await session.call_tool("get_note", {"title": "From SDK"})
            (embedded,) = got.content
            assert isinstance(embedded, EmbeddedResource)
            assert isinstance(embedded.resource, TextResourceContents)
            assert embedded.resource.text == "*hi*"

            read = await session.read_resource(AnyUrl("notes://note/From%20SDK"))
            (contents,) = read.contents
            assert isinstance(contents, TextResourceContents)
            assert contents.text == "*hi*"

            prompt = await session.get_prompt("summarize_note", {"title": "From SDK"})
            assert isinstance(prompt.messages[-1].content, EmbeddedResource)

            completion = await session.complete(
                ResourceTemplateReference(type="ref/resource", uri="notes://note/{title}"),
                {"name": "title", "value": "from"},
            )
            assert completion.completion.values == ["From SDK"]

            with pytest.raises(McpError) as unknown:
                await session.call_tool("no_such_tool", {})
            assert unknown.value.error.code == -32602
