"""Specification of the hosts' formats, translated without any file (sans-IO; issue 19)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.config.hosts import HostServer, detect_format, translate
from gateway.config.problems import Problems
from gateway.config.source import expand


def run(
    document: object, fmt: str, *, path: str = "/p/x.json", inputs: dict[str, str] | None = None
) -> tuple[list[HostServer], list[str]]:
    """Translate a document: the servers and the ``place: message`` problems."""
    problems: list[str] = []
    servers = translate(
        document,
        fmt,
        path=path,
        inputs=inputs or {},
        add=lambda place, message: problems.append(f"{place}: {message}"),
    )
    return servers, problems


def backends(document: object, fmt: str, **kwargs: Any) -> list[dict[str, Any]]:
    """The native entries of a document that has no problem."""
    servers, problems = run(document, fmt, **kwargs)
    assert problems == []
    return [server.backend for server in servers]


@pytest.mark.parametrize(
    ("path", "document", "expected"),
    [
        (
            "/home/a/Library/Application Support/Claude/claude_desktop_config.json",
            {},
            "claude-desktop",
        ),
        ("/w/.cursor/mcp.json", {"mcpServers": {}}, "cursor"),
        ("/home/a/.codeium/windsurf/mcp_config.json", {"mcpServers": {}}, "windsurf"),
        ("/w/.mcp.json", {"mcpServers": {}}, "claude-code"),
        ("/w/.vscode/mcp.json", {"servers": {}}, "vscode"),
        ("/w/anything.json", {"servers": {}, "inputs": []}, "vscode"),
        ("/w/anything.json", {"mcpServers": {}}, "claude-desktop"),
    ],
)
def test_auto_tells_the_format_by_the_files_name_and_top_level_key(
    path: str, document: object, expected: str
) -> None:
    """Issue 19: `format: auto`."""
    assert detect_format(path, document) == expected


def test_the_type_names_of_every_host_map_to_the_native_transports() -> None:
    """Issue 19: stdio, http, streamable-http/streamableHttp and sse; implied by command/url."""
    document = {
        "mcpServers": {
            "a": {"type": "stdio", "command": "x"},
            "b": {"type": "http", "url": "http://h/mcp"},
            "c": {"type": "streamable-http", "url": "http://h/mcp"},
            "d": {"type": "streamableHttp", "url": "http://h/mcp"},
            "e": {"type": "sse", "url": "http://h/sse"},
            "f": {"command": "x"},
            "g": {"url": "http://h/mcp"},
        }
    }
    found = backends(document, "claude-code")
    assert [(b["name"], b["transport"]) for b in found] == [
        ("a", "stdio"),
        ("b", "http"),
        ("c", "http"),
        ("d", "http"),
        ("e", "sse"),
        ("f", "stdio"),
        ("g", "http"),
    ]
    assert list(found[0]) == ["name", "transport", "command"]  # the native order


def test_every_shape_problem_is_reported_at_its_place_and_the_rest_still_checked() -> None:
    """Issue 19: what cannot be translated is named, each at its place."""
    document = {
        "mcpServers": {
            "both": {"command": "x", "url": "http://h"},
            "twice": {"serverUrl": "http://a", "url": "http://b"},
            "!!!": {"command": "x"},
            "list": ["not", "an", "object"],
            "odd": {"command": "x", "timeout": 30, "autoApprove": []},
            "kind": {"type": "ws", "command": "x", "url": "ws://h"},
        }
    }
    servers, problems = run(document, "windsurf")
    assert problems == [
        "mcpServers.both: has both `command` and `url`: set `type`",
        "mcpServers.twice.url: given twice (also as `serverUrl`)",
        "mcpServers.!!!: no backend name can be made of this key (use letters or digits)",
        "mcpServers.list: expected an object, got a list",
        "mcpServers.odd.timeout: not supported by the gateway (known: type, command, args, env, "
        "cwd, url, headers, serverUrl, disabled)",
        "mcpServers.odd.autoApprove: not supported by the gateway (known: type, command, args, "
        "env, cwd, url, headers, serverUrl, disabled)",
        # Once: not also "has both `command` and `url`".
        "mcpServers.kind.type: unknown type 'ws' (one of: stdio, http, streamable-http, "
        "streamableHttp, sse)",
    ]
    # Translated as far as it goes, so decoding still finds the other problems.
    assert [s.key for s in servers] == ["twice", "odd"]


@pytest.mark.parametrize(
    ("document", "fmt", "expected"),
    [
        ([], "claude-desktop", ": expected a JSON object at the top level, got a list"),
        ({}, "cursor", "mcpServers: required key missing"),
        (
            {"servers": {}},
            "cursor",
            "mcpServers: required key missing (it has `servers`: set `format`)",
        ),
        (
            {"mcpServers": {}},
            "vscode",
            "servers: required key missing (it has `mcpServers`: set `format`)",
        ),
        ({"mcpServers": []}, "claude-desktop", "mcpServers: expected an object, got a list"),
    ],
)
def test_a_document_not_in_the_format_says_what_is_missing(
    document: object, fmt: str, expected: str
) -> None:
    """Issue 19: a file of the wrong format or shape is named as such."""
    assert run(document, fmt)[1] == [expected]


def test_variables_are_rewritten_into_native_references() -> None:
    """Issue 19: each host's variables become the gateway's own ${VAR}."""
    server = {
        "command": "run",
        "args": ["${env:A}", "${userHome}/x", "${workspaceFolder}", "$5 and $HOME"],
        "env": {"K": "pre-${env:B}-post"},
    }
    cursor = backends({"mcpServers": {"s": server}}, "cursor", path="/w/proj/.cursor/mcp.json")
    assert cursor[0]["args"] == ["${A}", "${HOME}/x", "/w/proj", "$5 and $HOME"]
    assert cursor[0]["env"] == {"K": "pre-${B}-post"}
    code = backends({"mcpServers": {"s": server}}, "claude-code")
    assert code[0]["args"] == server["args"]  # the native syntax already


def test_claude_desktop_text_that_looks_like_a_variable_stays_text() -> None:
    """Issue 19: Claude Desktop expands nothing, so every ${ is escaped for the native expansion."""
    server = {"command": "run", "args": ["${env:A}", "costs $${5}", "${}", "${oops"]}
    desktop = backends({"mcpServers": {"s": server}}, "claude-desktop")
    assert desktop[0]["args"] == ["$${env:A}", "costs $$${5}", "$${}", "$${oops"]
    problems = Problems()
    assert expand(desktop[0]["args"], {"A": "no"}, problems) == server["args"]
    assert problems.items == []


def test_unknown_or_unresolvable_variables_are_errors_naming_them() -> None:
    """Issue 19: nothing is half-expanded or guessed."""
    document = {
        "servers": {
            "s": {
                "type": "stdio",
                "command": "${workspaceFolderBasename}",
                "args": ["${input:undeclared}", "${workspaceFolder}"],
            }
        },
        "inputs": [{"type": "promptString", "id": "declared"}],
    }
    _, problems = run(document, "vscode", path="/w/mcp.json", inputs={"undeclared": "X"})
    assert problems == [
        "servers.s.command: ${workspaceFolderBasename} is not supported by the gateway (it knows "
        "${env:NAME}, ${userHome}, ${workspaceFolder} and ${input:ID})",
        "servers.s.args[0]: ${input:undeclared}: no input 'undeclared' in the file's `inputs`",
        "servers.s.args[1]: ${workspaceFolder} is the folder holding the file's .vscode, .cursor "
        "or .windsurf folder, and this file is in none",
    ]


def test_disabled_becomes_enabled_and_keeps_a_wrong_value_for_the_decoder() -> None:
    """Issue 19: `disabled: true` is `enabled: false`; a non-boolean is the decoder's to refuse."""
    document = {
        "mcpServers": {
            "a": {"command": "x", "disabled": True},
            "b": {"command": "x", "disabled": "yes"},
        }
    }
    servers, problems = run(document, "cursor")
    assert problems == []
    assert [s.backend["enabled"] for s in servers] == [False, "yes"]
    assert servers[1].origin == {"enabled": "disabled"}


@given(st.text())
def test_any_claude_desktop_text_survives_the_native_expansion_unchanged(text: str) -> None:
    """Issue 19: Claude Desktop expands nothing, whatever its text holds."""
    desktop = backends({"mcpServers": {"s": {"command": text}}}, "claude-desktop")
    problems = Problems()
    assert expand(desktop[0]["command"], {}, problems) == text
    assert problems.items == []
