"""Specification of ``backends_from``: the hosts' own config files as backends (issue 19).

The files under ``tests/config/hosts/`` are written as each host's MCP
documentation shows them (Claude Desktop, Cursor, Windsurf, Claude Code,
VS Code).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Final

import pytest
import trio
from prometheus_client import CollectorRegistry
from trio.testing import MockClock

from gateway.backends.state import BackendState
from gateway.catalog.snapshot import Kind
from gateway.config import GatewayConfig, HttpBackend, SseBackend, StdioBackend, load
from gateway.errors import ConfigError
from gateway.runtime.app import open_gateway, reload_config
from tests.fakes import FakeConnector, FakeMcpServer
from tests.harness import wait_for_states

HOSTS: Final = Path(__file__).parent / "hosts"
ENV: Final = {
    "DOCS_TOKEN": "docs-secret",
    "TRACKER_TOKEN": "tracker-secret",
    "API_KEY": "key-1",
    "API_TOKEN": "token-2",
    "PERPLEXITY_API_KEY": "pplx",
    "GH_TOKEN": "gh-secret",
    "HOME": "/home/ada",
}


def load_from(
    tmp_path: Path, *entries: dict[str, Any] | str, env: dict[str, str] = ENV
) -> GatewayConfig:
    """Load a gateway file (next to a copy of tests/config/hosts) with these backends_from."""
    shutil.copytree(HOSTS, tmp_path / "hosts", dirs_exist_ok=True)
    path = tmp_path / "gateway.yaml"
    path.write_text(json.dumps({"backends_from": list(entries)}))
    return load(path, env=env)


def problems_of(
    tmp_path: Path, *entries: dict[str, Any] | str, env: dict[str, str] = ENV
) -> list[str]:
    """The problems loading such a file reports."""
    with pytest.raises(ConfigError) as caught:
        load_from(tmp_path, *entries, env=env)
    return caught.value.problems


def by_name(config: GatewayConfig) -> dict[str, Any]:
    """The config's backends by name."""
    return {backend.name: backend for backend in config.backends}


def test_claude_desktop_servers_become_stdio_backends_named_after_their_keys(
    tmp_path: Path,
) -> None:
    """Issue 19: each `mcpServers` entry is a backend; its key made into a valid name."""
    config = load_from(tmp_path, {"path": "hosts/claude_desktop_config.json"})
    backends = by_name(config)
    assert list(backends) == ["notes", "github-tools"]
    notes = backends["notes"]
    assert isinstance(notes, StdioBackend)
    assert notes.command == "python"
    assert notes.args == ["-m", "mcp_gateway_demo.notes"]
    # Claude Desktop expands nothing: "${5}" is literal text there, and here.
    assert notes.env == {"NOTES_GREETING": "costs ${5}"}
    assert notes.prefix is None
    assert notes.public_prefix == "notes"
    github = backends["github-tools"]
    assert isinstance(github, StdioBackend)
    assert github.env == {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_example"}


def test_cursor_urls_headers_and_variables_are_mapped(tmp_path: Path) -> None:
    """Issue 19: `url` is HTTP unless `type` says sse; ${env:X}, ${userHome}, ${workspaceFolder}."""
    config = load_from(tmp_path, {"path": "hosts/project/.cursor/mcp.json"})
    backends = by_name(config)
    docs = backends["docs"]
    assert isinstance(docs, HttpBackend)
    assert docs.url == "https://docs.example.com/mcp"
    assert docs.headers == {"Authorization": "Bearer docs-secret"}
    files = backends["local-files"]
    assert isinstance(files, StdioBackend)
    assert files.args[-1] == str((tmp_path / "hosts" / "project").resolve())
    assert files.env == {"HOME_DIR": "/home/ada"}
    assert isinstance(backends["legacy-events"], SseBackend)


def test_windsurf_server_url_and_disabled_are_mapped(tmp_path: Path) -> None:
    """Issue 19: Windsurf's `serverUrl` is `url`; `disabled: true` is `enabled: false`."""
    config = load_from(tmp_path, {"path": "hosts/windsurf/mcp_config.json"})
    backends = by_name(config)
    tracker = backends["tracker"]
    assert isinstance(tracker, HttpBackend)
    assert tracker.url == "https://tracker.example.com/mcp"
    assert tracker.headers == {"Authorization": "Bearer tracker-secret"}
    assert backends["ollama"].enabled is False
    assert tracker.enabled is True


def test_claude_code_variables_with_defaults_are_expanded_as_native_ones(tmp_path: Path) -> None:
    """Issue 19: Claude Code's ${VAR} and ${VAR:-default} are the gateway's own syntax."""
    config = load_from(tmp_path, {"path": "hosts/project/.mcp.json"})
    backends = by_name(config)
    assert backends["my-tool"].env == {"DEBUG": "false"}
    service = backends["http-service"]
    assert isinstance(service, HttpBackend)
    assert service.url == "https://api.example.com/mcp"
    assert service.headers == {"X-API-Key": "key-1"}
    remote = backends["remote-api"]
    assert isinstance(remote, SseBackend)
    assert remote.headers == {"Authorization": "Bearer token-2"}


def test_vscode_servers_inputs_from_named_environment_variables(tmp_path: Path) -> None:
    """Issue 19: VS Code's `servers` (jsonc), ${input:ID} from the variable `inputs` names."""
    config = load_from(
        tmp_path, {"path": "hosts/project/.vscode/mcp.json", "inputs": {"github-token": "GH_TOKEN"}}
    )
    backends = by_name(config)
    assert list(backends) == ["github", "perplexity", "events"]
    github = backends["github"]
    assert isinstance(github, HttpBackend)
    assert github.headers == {"Authorization": "Bearer gh-secret"}
    perplexity = backends["perplexity"]
    assert isinstance(perplexity, StdioBackend)
    assert perplexity.env == {"PERPLEXITY_API_KEY": "pplx"}
    assert perplexity.cwd == str((tmp_path / "hosts" / "project").resolve())
    assert isinstance(backends["events"], SseBackend)


def test_a_vscode_input_without_a_variable_is_refused_since_the_gateway_never_prompts(
    tmp_path: Path,
) -> None:
    """Issue 19: an ${input:...} the config does not map is a clear error, not a prompt."""
    problems = problems_of(tmp_path, {"path": "hosts/project/.vscode/mcp.json"})
    assert problems == [
        "hosts/project/.vscode/mcp.json: servers.github.headers.Authorization: "
        "${input:github-token} needs a value and the gateway never prompts: name the "
        "environment variable that holds it in the backends_from entry "
        "(inputs: {github-token: VAR})"
    ]


def test_an_unset_variable_in_a_host_file_is_reported_at_its_place_in_that_file(
    tmp_path: Path,
) -> None:
    """Gateway choice: as in the native YAML, an unset ${VAR} is an error (Claude Code would
    pass the text on)."""
    problems = problems_of(
        tmp_path, {"path": "hosts/project/.mcp.json"}, env={"API_TOKEN": "t", "HOME": "/h"}
    )
    assert problems == [
        "hosts/project/.mcp.json: mcpServers.http-service.headers.X-API-Key: "
        "environment variable API_KEY is not set"
    ]


def test_every_problem_of_a_host_file_is_reported_at_its_place_in_that_file(
    tmp_path: Path,
) -> None:
    """Issue 19: the same validation as a native backend, the places naming the host's file."""
    problems = problems_of(tmp_path, {"path": "hosts/broken_claude_desktop_config.json"})
    file = "hosts/broken_claude_desktop_config.json"
    assert problems == [
        f"{file}: mcpServers.github.command: required field missing (or `url`, for a remote "
        "server)",
        f"{file}: mcpServers.fetch.alwaysAllow: not supported by the gateway (known: type, "
        "command, args, env, cwd, url, headers, disabled)",
        f"{file}: mcpServers.remote.type: unknown type 'websocket-ish' (one of: stdio, http, "
        "streamable-http, streamableHttp, sse)",
        f"{file}: mcpServers.fetch.args[1]: expected str, got int 3",
    ]


def test_defaults_apply_to_every_server_and_their_problems_are_reported_once(
    tmp_path: Path,
) -> None:
    """Issue 19: per-file defaults (session, timeouts) are checked as backend keys, once."""
    config = load_from(
        tmp_path,
        {
            "path": "hosts/claude_desktop_config.json",
            "defaults": {"session": "per_client", "timeouts": {"request": 5}},
        },
    )
    for backend in config.backends:
        assert backend.session == "per_client"
        assert backend.timeouts.request == 5.0
    problems = problems_of(
        tmp_path,
        {
            "path": "hosts/claude_desktop_config.json",
            "defaults": {"session": "sometimes", "command": "x", "timeouts": {"request": 900}},
        },
    )
    assert problems[0].startswith(
        "backends_from[0].defaults.command: not a key every backend has (one of: session, "
    )
    assert problems[1:] == [
        "backends_from[0].defaults.session: must be one of: auto, shared, per_principal, "
        "per_client "
        "(got 'sometimes')",
        "backends_from[0].defaults.timeouts.request: must not exceed max_total (600.0)",
    ]


def test_a_prefix_template_names_each_backends_prefix(tmp_path: Path) -> None:
    """Issue 19: `prefix_template` with {name}; a template making a bad prefix is refused."""
    config = load_from(
        tmp_path, {"path": "hosts/claude_desktop_config.json", "prefix_template": "desk-{name}"}
    )
    assert [b.public_prefix for b in config.backends] == ["desk-notes", "desk-github-tools"]
    assert [b.name for b in config.backends] == ["desk-notes", "desk-github-tools"]
    problems = problems_of(
        tmp_path, {"path": "hosts/claude_desktop_config.json", "prefix_template": "Desk_{name}"}
    )
    assert problems == [
        "backends_from[0].prefix_template: 'Desk_notes' is not a valid name (lowercase letters, "
        "digits and '-', starting with a letter or digit)",
        "backends_from[0].prefix_template: 'Desk_github-tools' is not a valid name (lowercase "
        "letters, digits and '-', starting with a letter or digit)",
    ]
    unprefixed = load_from(
        tmp_path, {"path": "hosts/claude_desktop_config.json", "prefix_template": ""}
    )
    assert [(b.name, b.public_prefix) for b in unprefixed.backends] == [
        ("notes", ""),
        ("github-tools", ""),
    ]


def test_two_files_listing_the_same_key_coexist_through_a_prefix_template(tmp_path: Path) -> None:
    """Issue 19: the same server in Cursor's and VS Code's files; a template tells them apart."""
    shutil.copytree(HOSTS, tmp_path / "hosts")
    (tmp_path / "hosts" / "second.json").write_text('{"mcpServers": {"notes": {"command": "x"}}}')
    path = tmp_path / "gateway.yaml"
    path.write_text(
        json.dumps(
            {
                "backends_from": [
                    {"path": "hosts/claude_desktop_config.json"},
                    {"path": "hosts/second.json"},
                ]
            }
        )
    )
    with pytest.raises(ConfigError) as caught:
        load(path, env=ENV)
    assert caught.value.problems == [
        "hosts/second.json: mcpServers.notes.name: duplicate backend name 'notes' "
        "(also hosts/claude_desktop_config.json: mcpServers.notes)"
    ]
    path.write_text(
        json.dumps(
            {
                "backends_from": [
                    {"path": "hosts/claude_desktop_config.json"},
                    {"path": "hosts/second.json", "prefix_template": "two-{name}"},
                ]
            }
        )
    )
    assert [b.name for b in load(path, env=ENV).backends] == ["notes", "github-tools", "two-notes"]


def test_a_host_server_clashing_with_a_native_backend_names_both_places(tmp_path: Path) -> None:
    """Issue 19: the rules across backends see native and host backends together."""
    shutil.copytree(HOSTS, tmp_path / "hosts")
    path = tmp_path / "gateway.yaml"
    path.write_text(
        json.dumps(
            {
                "backends": [{"name": "notes", "transport": "stdio", "command": "x"}],
                "backends_from": [{"path": "hosts/claude_desktop_config.json"}],
            }
        )
    )
    with pytest.raises(ConfigError) as caught:
        load(path, env=ENV)
    assert caught.value.problems == [
        "hosts/claude_desktop_config.json: mcpServers.notes.name: duplicate backend name "
        "'notes' (also backends[0])"
    ]


def test_a_missing_or_malformed_host_file_is_a_clear_error(tmp_path: Path) -> None:
    """Issue 19: an unreadable file or one that is not JSON says so, with the line."""
    problems = problems_of(tmp_path, {"path": "hosts/nowhere.json"})
    assert problems == [
        "backends_from[0].path: cannot read hosts/nowhere.json: No such file or directory"
    ]
    (tmp_path / "bad.json").write_text('{"mcpServers": {\n  "a": {"command": "x",}}\n  oops')
    assert problems_of(tmp_path, {"path": "bad.json"}) == [
        "bad.json: not JSON: line 3, column 3: Expecting ',' delimiter"
    ]


def test_a_bare_path_is_shorthand_for_an_entry_with_only_its_path(tmp_path: Path) -> None:
    """Issue 24: `backends_from: [FILE]` reads FILE as `{path: FILE}` does, beside full entries."""
    shorthand = load_from(
        tmp_path,
        "hosts/claude_desktop_config.json",
        {"path": "hosts/project/.cursor/mcp.json", "prefix_template": "c-{name}"},
    )
    full = load_from(
        tmp_path,
        {"path": "hosts/claude_desktop_config.json"},
        {"path": "hosts/project/.cursor/mcp.json", "prefix_template": "c-{name}"},
    )
    assert shorthand.backends == full.backends
    assert [b.name for b in shorthand.backends][:2] == ["notes", "github-tools"]
    assert problems_of(tmp_path, "hosts/nowhere.json") == [
        "backends_from[0].path: cannot read hosts/nowhere.json: No such file or directory"
    ]


@pytest.mark.parametrize(
    ("item", "problem"),
    [
        ("", "backends_from[0]: must not be empty"),
        (3, "backends_from[0]: expected a mapping or str, got int 3"),
        ({"path": "x", "paths": "y"}, "backends_from[0].paths: unknown field"),
    ],
)
def test_an_item_that_is_neither_a_path_nor_an_entry_is_refused_at_its_place(
    tmp_path: Path, item: object, problem: str
) -> None:
    """Issue 24: the shorthand keeps an entry's problems at their own places."""
    path = tmp_path / "gateway.yaml"
    path.write_text(json.dumps({"backends_from": [item]}))
    with pytest.raises(ConfigError) as caught:
        load(path, env=ENV)
    assert caught.value.problems[0].startswith(problem)


def test_a_host_file_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """Gateway choice: an editor on Windows may write one; JSON itself does not allow it."""
    (tmp_path / "mcp.json").write_bytes(b'\xef\xbb\xbf{"mcpServers": {"a": {"command": "x"}}}')
    assert [b.name for b in load_from(tmp_path, {"path": "mcp.json"}).backends] == ["a"]


def test_a_file_without_the_formats_key_hints_at_the_other_format(tmp_path: Path) -> None:
    """Issue 19: VS Code's file read as Claude Desktop's says which key it has instead."""
    problems = problems_of(
        tmp_path, {"path": "hosts/project/.vscode/mcp.json", "format": "claude-desktop"}
    )
    assert problems == [
        "hosts/project/.vscode/mcp.json: mcpServers: required key missing (it has `servers`: "
        "set `format`)"
    ]


async def test_reload_rereads_the_host_files(autojump_clock: MockClock, tmp_path: Path) -> None:
    """Issue 19: a reload loads the whole config again, host files included."""
    host = tmp_path / "claude_desktop_config.json"
    fake = {"command": "fake", "args": []}
    host.write_text(json.dumps({"mcpServers": {"alpha": fake}}))
    path = tmp_path / "gateway.yaml"
    path.write_text(
        json.dumps(
            {
                "backends_from": [
                    {
                        "path": "claude_desktop_config.json",
                        "defaults": {"health": {"ping_interval": 0}},
                    }
                ]
            }
        )
    )
    connector = FakeConnector({"alpha": FakeMcpServer("alpha"), "beta": FakeMcpServer("beta")})
    async with open_gateway(
        load(path, env={}), registry=CollectorRegistry(), connect=connector
    ) as gateway:
        await wait_for_states(gateway, {"alpha": BackendState.UP})
        host.write_text(json.dumps({"mcpServers": {"alpha": fake, "beta": fake}}))
        assert await reload_config(gateway, str(path)) is True
        await wait_for_states(gateway, {"alpha": BackendState.UP, "beta": BackendState.UP})
        assert gateway.pool.snapshot.view(Kind.TOOLS).keys() == ("alpha__echo", "beta__echo")
        with trio.fail_after(10):  # a hang, not a speed: generous on a loaded machine
            host.write_text("{")
            assert await reload_config(gateway, str(path)) is False
        assert list(gateway.pool.backends) == ["alpha", "beta"]


def test_a_profile_may_name_a_backend_that_comes_from_a_host_file(tmp_path: Path) -> None:
    """Issues 15 and 19 together: profiles are checked against every backend, host files
    included, so a literal name from a host file is known and a typo is still reported."""
    shutil.copytree(HOSTS, tmp_path / "hosts", dirs_exist_ok=True)
    path = tmp_path / "gateway.yaml"
    host = {"path": "hosts/claude_desktop_config.json"}

    def write(include: str) -> None:
        profile = {"name": "coding", "backends": {"include": [include]}}
        path.write_text(json.dumps({"backends_from": [host], "profiles": [profile]}))

    write("github-tools")
    assert load(path, env=ENV).profiles[0].backends.include == ["github-tools"]
    write("github-tool")
    with pytest.raises(ConfigError) as caught:
        load(path, env=ENV)
    assert caught.value.problems == [
        "profiles[0].backends.include[0]: no backend is named 'github-tool'"
    ]
