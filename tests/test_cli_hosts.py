"""Specification of ``trio-mcp-gateway import`` and ``connect`` (issue 19)."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.cli.host_files import gateway_command, import_yaml
from gateway.cli.main import main
from gateway.config import StdioBackend, load, parse
from gateway.errors import ConfigError
from tests.config.test_backends_from import ENV, HOSTS

# Every host file, with the import options its backends_from entry needs.
HOST_FILES: Final = [
    ("claude_desktop_config.json", {}),
    ("project/.cursor/mcp.json", {}),
    ("windsurf/mcp_config.json", {}),
    ("project/.mcp.json", {}),
    ("project/.vscode/mcp.json", {"github-token": "GH_TOKEN"}),
]


@pytest.fixture(autouse=True)
def _python_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """main() sets MCP_GATEWAY_PYTHON for the process; keep that inside each test."""
    monkeypatch.setenv("MCP_GATEWAY_PYTHON", sys.executable)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the command line in-process: exit code, stdout, stderr."""
    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def connect_write(
    capsys: pytest.CaptureFixture[str], host: str, host_file: Path
) -> tuple[int, str, str]:
    """``connect HOST --url http://h/mcp --write HOST_FILE``: exit code, stdout, stderr."""
    return run(capsys, "connect", host, "--url", "http://h/mcp", "--write", str(host_file))


@pytest.mark.parametrize(("file", "inputs"), HOST_FILES)
def test_imports_output_loads_to_the_same_backends_as_backends_from(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    file: str,
    inputs: dict[str, str],
) -> None:
    """Issue 19: `import` prints native YAML a user can switch over to for good."""
    shutil.copytree(HOSTS, tmp_path / "hosts")
    monkeypatch.chdir(tmp_path)
    flags = [f"--input={ident}={var}" for ident, var in inputs.items()]
    code, out, _ = run(capsys, "import", f"hosts/{file}", *flags)
    assert code == 0
    imported = parse(out, env=ENV).backends
    gateway = tmp_path / "gateway.yaml"
    gateway.write_text(json.dumps({"backends_from": [{"path": f"hosts/{file}", "inputs": inputs}]}))
    assert imported == load(gateway, env=ENV).backends
    assert len(imported) >= 2


def test_import_keeps_variables_as_references_instead_of_printing_secrets(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 19: ${env:DOCS_TOKEN} becomes ${DOCS_TOKEN}, never its value."""
    monkeypatch.setenv("DOCS_TOKEN", "docs-secret")
    code, out, _ = run(capsys, "import", str(HOSTS / "project/.cursor/mcp.json"))
    assert code == 0
    assert "Bearer ${DOCS_TOKEN}" in out
    assert "docs-secret" not in out


def test_import_of_a_broken_file_prints_every_problem_and_exits_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 19: the same places as backends_from, with the file named."""
    monkeypatch.chdir(HOSTS)
    code, out, err = run(capsys, "import", "broken_claude_desktop_config.json")
    assert code == 2
    assert out == ""
    assert err.splitlines()[0] == (
        "broken_claude_desktop_config.json: mcpServers.github.command: required field missing "
        "(or `url`, for a remote server)"
    )
    assert len(err.splitlines()) == 4  # three of the translation, one of the decoding


@pytest.mark.parametrize(
    "servers",
    [
        {"fetch": {"command": "uvx", "args": ["mcp-server-fetch", 3]}},
        {"a": {"command": "x", "env": {"N": 1.5}}},
        {"GitHub": {"command": "x"}, "github": {"command": "y"}},
        {"w": {"url": "ftp://files.example/mcp"}},
        {"s": {"command": ""}},
    ],
)
def test_import_refuses_with_the_same_problems_what_backends_from_refuses(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    servers: dict[str, Any],
) -> None:
    """Issue 24: `import` never prints a config that `backends_from` would refuse."""
    monkeypatch.chdir(tmp_path)
    Path("mcp.json").write_text(json.dumps({"mcpServers": servers}))
    Path("gateway.yaml").write_text("backends_from: [mcp.json]\n")
    with pytest.raises(ConfigError) as caught:
        load("gateway.yaml", env={})
    code, out, err = run(capsys, "import", "mcp.json")
    assert (code, out) == (2, "")
    assert err.splitlines() == caught.value.problems
    assert err.splitlines()


def test_import_leaves_every_variable_to_the_environment_the_gateway_runs_in(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 24: a reference may stand where a URL is due: its value is known only at start."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SEARCH_URL", raising=False)
    Path("mcp.json").write_text(
        json.dumps({"mcpServers": {"search": {"url": "${env:SEARCH_URL}"}}})
    )
    code, out, err = run(capsys, "import", "mcp.json", "--format", "cursor")
    assert (code, err) == (0, "")
    assert "url: ${SEARCH_URL}" in out


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("claude-code", {"mcpServers": {"gw": {"type": "http", "url": "http://127.0.0.1:9/mcp"}}}),
        ("cursor", {"mcpServers": {"gw": {"url": "http://127.0.0.1:9/mcp"}}}),
        ("vscode", {"servers": {"gw": {"type": "http", "url": "http://127.0.0.1:9/mcp"}}}),
    ],
)
def test_connect_prints_the_hosts_entry_for_the_gateways_url(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    host: str,
    expected: dict[str, Any],
) -> None:
    """Issue 19: HTTP-capable hosts get the URL, in their own format."""
    monkeypatch.chdir(tmp_path)  # the packaged default config, as for an installed wheel
    code, out, _ = run(capsys, "connect", host, "--url", "http://127.0.0.1:9/mcp", "--name", "gw")
    assert code == 0
    assert json.loads(out) == expected


def test_connect_derives_the_url_from_the_configs_server_section(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 19: without --url, the URL the config serves (a wildcard bind via loopback)."""
    config = tmp_path / "gateway.yaml"
    config.write_text("server: {host: 0.0.0.0, port: 8123, path: /gw}\n")
    code, out, _ = run(capsys, "connect", "cursor", "-c", str(config))
    assert code == 0
    assert json.loads(out) == {
        "mcpServers": {"trio-mcp-gateway": {"url": "http://127.0.0.1:8123/gw"}}
    }


def test_connect_claude_desktop_spawns_the_gateway_in_stdio_mode_with_absolute_paths(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 19: Claude Desktop's file starts only local servers: the gateway in stdio mode."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gateway.yaml").write_text("")
    code, out, _ = run(capsys, "connect", "claude-desktop", "-c", "gateway.yaml")
    assert code == 0
    entry = json.loads(out)["mcpServers"]["trio-mcp-gateway"]
    # This install's own script (the venv's), not whichever PATH finds first.
    assert entry == {
        "command": str(Path(sys.executable).parent / "trio-mcp-gateway"),
        "args": ["stdio", "-c", str(tmp_path.resolve() / "gateway.yaml")],
    }
    code, _, err = run(capsys, "connect", "claude-desktop", "--url", "http://127.0.0.1:9/mcp")
    assert code == 2
    assert "starts only local (stdio) servers: use --stdio -c FILE" in err


def test_connect_write_merges_after_a_backup_and_keeps_every_unknown_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 19: never drop a key the gateway does not know."""
    host_file = tmp_path / "claude_desktop_config.json"
    original = {
        "globalShortcut": "Ctrl+Space",
        "preferences": {"menuBarEnabled": True, "quickEntry": {"enabled": False, "shortcut": None}},
        "mcpServers": {
            "notes": {"command": "python", "args": ["-m", "notes"], "x-vendor": {"k": [1, 2.5]}},
            "trio-mcp-gateway": {"command": "old"},
        },
        "zFutureKey": ["é", 1e100, None, True],
    }
    text = json.dumps(original, indent=4)
    host_file.write_text(text)
    config = tmp_path / "gw.yaml"
    config.write_text("")
    code, out, err = run(
        capsys, "connect", "claude-desktop", "--stdio", "-c", str(config), "--write", str(host_file)
    )
    assert code == 0
    assert out == f"wrote trio-mcp-gateway into {host_file}\n"
    written = json.loads(host_file.read_text())
    entry = written["mcpServers"].pop("trio-mcp-gateway")
    assert entry["args"][-3:] == ["stdio", "-c", str(config.resolve())]
    expected = json.loads(text)
    expected["mcpServers"].pop("trio-mcp-gateway")
    assert written == expected
    assert list(written) == list(original)
    (backup,) = tmp_path.glob("claude_desktop_config.json.bak-*")
    assert sorted(tmp_path.iterdir()) == sorted([host_file, backup, config])
    assert backup.read_text() == text
    assert f"backup: {backup}" in err
    assert "replaced the existing entry mcpServers.trio-mcp-gateway" in err


def test_connect_write_refuses_a_file_that_is_not_json_and_touches_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 19: a clear error; no backup, no change."""
    host_file = tmp_path / "mcp.json"
    host_file.write_text('{"mcpServers": {"a": }')
    code, _, err = connect_write(capsys, "cursor", host_file)
    assert code == 2
    assert err == (
        f"trio-mcp-gateway connect: {host_file} is not valid JSON (line 1, column 22: Expecting "
        "value); nothing written\n"
    )
    assert host_file.read_text() == '{"mcpServers": {"a": }'
    assert list(tmp_path.iterdir()) == [host_file]


def test_connect_write_reads_vscode_jsonc_and_says_the_comments_stay_in_the_backup(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 19: VS Code allows comments; a JSON rewrite cannot keep them, the backup does."""
    host_file = tmp_path / "mcp.json"
    shutil.copy(HOSTS / "project/.vscode/mcp.json", host_file)
    code, _, err = connect_write(capsys, "vscode", host_file)
    assert code == 0
    written = json.loads(host_file.read_text())
    assert list(written["servers"]) == ["github", "perplexity", "events", "trio-mcp-gateway"]
    assert written["inputs"][0]["id"] == "github-token"
    assert "had comments or trailing commas" in err


def test_connect_write_creates_a_missing_file_without_a_backup(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 19: a project without .vscode/mcp.json yet gets one."""
    host_file = tmp_path / ".vscode" / "mcp.json"
    code, _, err = connect_write(capsys, "vscode", host_file)
    assert code == 0
    assert json.loads(host_file.read_text()) == {
        "servers": {"trio-mcp-gateway": {"type": "http", "url": "http://h/mcp"}}
    }
    assert err == ""
    assert list(host_file.parent.iterdir()) == [host_file]


def test_connect_write_refuses_a_file_whose_servers_key_is_not_an_object(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 19: a shape that is not the host's is not guessed at."""
    host_file = tmp_path / ".mcp.json"
    host_file.write_text('{"mcpServers": []}')
    code, _, err = connect_write(capsys, "claude-code", host_file)
    assert code == 2
    assert "`mcpServers` is not an object; nothing written" in err
    assert host_file.read_text() == '{"mcpServers": []}'


def test_connect_write_refuses_the_file_the_gateway_reads_its_backends_from(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Gateway choice: writing the gateway into its own backends_from file would loop."""
    host_file = tmp_path / "claude_desktop_config.json"
    host_file.write_text('{"mcpServers": {}}')
    config = tmp_path / "gateway.yaml"
    config.write_text("backends_from: [{path: claude_desktop_config.json}]\n")
    code, _, err = run(
        capsys, "connect", "claude-desktop", "-c", str(config), "--write", str(host_file)
    )
    assert code == 2
    assert err == (
        f"trio-mcp-gateway connect: {host_file} is read by backends_from[0] of {config}: "
        "the gateway would start itself; write to the host's file, and let the gateway read "
        "a copy\n"
    )
    assert host_file.read_text() == '{"mcpServers": {}}'


@pytest.mark.parametrize(
    ("host", "typed"), [("claude-code", True), ("cursor", False), ("vscode", True)]
)
def test_connect_stdio_gives_any_host_the_command_that_starts_the_gateway(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, host: str, typed: bool
) -> None:
    """Issue 19: --stdio for hosts that could use the URL too; `type` where the host writes it."""
    config = tmp_path / "gateway.yaml"
    config.write_text("")
    code, out, _ = run(capsys, "connect", host, "--stdio", "-c", str(config))
    assert code == 0
    (entry,) = next(iter(json.loads(out).values())).values()
    assert entry.pop("type", None) == ("stdio" if typed else None)
    assert list(entry) == ["command", "args"]
    assert entry["args"][-3:] == ["stdio", "-c", str(config.resolve())]


def test_connect_reports_a_broken_config_before_a_host_would(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 19: the config is loaded first, so its problems are seen now, exit 2."""
    config = tmp_path / "gateway.yaml"
    config.write_text("server: {prt: 1}\n")
    code, out, err = run(capsys, "connect", "claude-desktop", "-c", str(config))
    assert code == 2
    assert out == ""
    assert err == f"{config}: server.prt: unknown field, did you mean `port`?\n"


def test_connect_write_through_a_symlink_writes_the_file_it_points_to(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Gateway choice: a host file kept in a dotfiles folder stays a link."""
    real = tmp_path / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_bytes(b'\xef\xbb\xbf{"mcpServers": {"a": {"command": "x"}}}')  # with a BOM
    link = tmp_path / "mcp.json"
    link.symlink_to(real)
    code, _, _ = connect_write(capsys, "cursor", link)
    assert code == 0
    assert link.is_symlink()
    assert json.loads(real.read_text()) == {
        "mcpServers": {"a": {"command": "x"}, "trio-mcp-gateway": {"url": "http://h/mcp"}}
    }
    assert len(list(real.parent.glob("mcp.json.bak-*"))) == 1


def test_connect_write_twice_in_one_second_keeps_both_backups(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Gateway choice: a backup is never overwritten, even by a second write at once."""
    host_file = tmp_path / "mcp.json"
    host_file.write_text('{"mcpServers": {}}')
    for url in ("http://one/mcp", "http://two/mcp"):
        code, _, _ = run(capsys, "connect", "cursor", "--url", url, "--write", str(host_file))
        assert code == 0
    backups = sorted(tmp_path.glob("mcp.json.bak-*"))
    contents = sorted(b.read_text() for b in backups)
    assert len(backups) == 2  # the same second, or two: either way two files
    assert contents == sorted(
        [
            '{"mcpServers": {}}',
            json.dumps({"mcpServers": {"trio-mcp-gateway": {"url": "http://one/mcp"}}}, indent=2)
            + "\n",
        ]
    )


def test_connect_write_refuses_a_file_whose_top_level_is_not_an_object(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 19: a JSON array is valid JSON but no host's file."""
    host_file = tmp_path / "mcp.json"
    host_file.write_text("[]")
    code, _, err = run(capsys, "connect", "cursor", "--url", "http://h", "--write", str(host_file))
    assert code == 2
    assert err == (
        f"trio-mcp-gateway connect: {host_file}: expected a JSON object at the top level; "
        "nothing written\n"
    )


def test_without_a_script_beside_the_interpreter_the_host_runs_python_m_gateway(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 19: an install without the console script (python -m gateway) still connects."""
    interpreter = tmp_path / "bin" / "python3"
    interpreter.parent.mkdir()
    interpreter.touch()
    monkeypatch.setattr(sys, "executable", str(interpreter))
    command, args = gateway_command("gw.yaml")
    assert command == str(interpreter)
    assert args == ["-m", "gateway", "stdio", "-c", str(Path("gw.yaml").resolve())]


def test_import_refuses_a_malformed_input_option(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 19: --input is ID=VAR."""
    code, _, err = run(capsys, "import", str(HOSTS / "project/.vscode/mcp.json"), "--input", "x")
    assert code == 2
    assert err == "trio-mcp-gateway import: --input 'x': expected ID=VAR\n"


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True), st.text()))
def test_any_claude_desktop_env_survives_import_and_loading_unchanged(env: dict[str, str]) -> None:
    """Issue 19: import's YAML, loaded back, holds exactly the file's values, ${ and all."""
    with tempfile.TemporaryDirectory() as folder:
        host_file = Path(folder) / "claude_desktop_config.json"
        host_file.write_text(json.dumps({"mcpServers": {"s": {"command": "x", "env": env}}}))
        (backend,) = parse(import_yaml(str(host_file), "auto", {}), env={}).backends
    assert isinstance(backend, StdioBackend)
    assert backend.env == env


def test_import_writes_line_break_characters_so_that_they_load_back(tmp_path: Path) -> None:
    """Found by the property above: PyYAML writes U+0085 raw and reads it back as a break."""
    env = {"A": "\x85", "B": "caf\u00e9 \u2028"}
    host_file = tmp_path / "claude_desktop_config.json"
    host_file.write_text(json.dumps({"mcpServers": {"s": {"command": "x", "env": env}}}))
    (backend,) = parse(import_yaml(str(host_file), "auto", {}), env={}).backends
    assert isinstance(backend, StdioBackend)
    assert backend.env == env
