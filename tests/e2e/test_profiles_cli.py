"""`trio-mcp-gateway stdio --profile` and `catalog` on real peers (issue 15, steps 3, 5)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
import trio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError

from tests.servers.paths import python_server_command

if TYPE_CHECKING:
    from pathlib import Path


def _config(tmp_path: Path) -> Path:
    alpha, beta = python_server_command("alpha"), python_server_command("beta")
    config = {
        "backends": [
            {"name": "alpha", "transport": "stdio", "command": alpha[0], "args": alpha[1:]},
            {"name": "beta", "transport": "stdio", "command": beta[0], "args": beta[1:]},
        ],
        "profiles": [
            {"name": "math", "tools": {"include": ["alpha__add", "beta__multiply"]}},
            {"name": "find", "mode": "search", "backends": {"include": ["beta"]}},
        ],
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(json.dumps(config))
    return path


async def _gateway(*args: str) -> subprocess.CompletedProcess[bytes]:
    """``python -m gateway ARGS`` run to its end, its output captured, its exit code kept."""
    return await trio.run_process(
        [sys.executable, "-m", "gateway", *args],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )


async def test_stdio_mode_serves_the_profile_it_is_given(tmp_path: Path) -> None:
    """Issue 15: `trio-mcp-gateway stdio --profile NAME` serves that profile only."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway", "stdio", "-c", str(_config(tmp_path)), "--profile", "math"],
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        names = [tool.name for tool in (await session.list_tools()).tools]
        assert names == ["alpha__add", "beta__multiply"]
        with pytest.raises(McpError) as info:
            await session.call_tool("alpha__echo", {"text": "x"})
    assert info.value.error.code == -32602


async def test_stdio_mode_refuses_a_profile_that_is_not_configured(tmp_path: Path) -> None:
    """Gateway choice: a typo in --profile exits 2 naming the configured profiles."""
    done = await _gateway("stdio", "-c", str(_config(tmp_path)), "--profile", "nope")
    assert done.returncode == 2
    assert b"no profile named 'nope' (configured: default, find, math)" in done.stderr


async def test_the_catalog_command_prints_each_profiles_items_and_tools_list_size(
    tmp_path: Path,
) -> None:
    """Issue 15: `trio-mcp-gateway catalog` starts the backends, prints per profile, exits."""
    with trio.fail_after(60):
        done = await _gateway("catalog", "-c", str(_config(tmp_path)))
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    lines = done.stdout.decode().splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:4]}
    assert list(rows) == ["default", "find", "math"]
    # tools, prompts, resources, templates, bytes, ~tokens
    assert rows["default"][:4] == ["9", "2", "2", "1"]
    assert rows["math"][:4] == ["2", "2", "2", "1"]
    assert rows["find"][:4] == ["2", "1", "1", "0"]
    for tools_bytes, tokens in ((int(r[4]), int(r[5])) for r in rows.values()):
        assert tokens == -(-tools_bytes // 4)
    assert int(rows["math"][4]) < int(rows["default"][4])
    assert lines[4] == "(~tokens: bytes / 4, an estimate)"
    one = await _gateway("catalog", "-c", str(_config(tmp_path)), "--profile", "math")
    assert [line.split()[0] for line in one.stdout.decode().splitlines()[1:2]] == ["math"]
