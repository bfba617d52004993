"""`trio-mcp-gateway stdio` under an access policy: the anonymous rules decide (issue 16 item 3)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import pytest
import trio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError

from tests.servers.paths import python_server_command

if TYPE_CHECKING:
    from pathlib import Path


def _config(tmp_path: Path, policy: list[dict[str, Any]]) -> Path:
    alpha = python_server_command("alpha")
    config = {
        "backends": [
            {"name": "alpha", "transport": "stdio", "command": alpha[0], "args": alpha[1:]},
        ],
        "policy": policy,
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(json.dumps(config))
    return path


async def test_stdio_mode_sees_what_the_anonymous_rules_grant(tmp_path: Path) -> None:
    """Gateway choice (issue 16 item 3): stdio has no principal; ``anonymous: true`` rules apply."""
    policy = [{"anonymous": True, "profiles": ["default"], "tools": {"allow": ["alpha__add"]}}]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway", "stdio", "-c", str(_config(tmp_path, policy))],
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        assert [tool.name for tool in (await session.list_tools()).tools] == ["alpha__add"]
        with pytest.raises(McpError) as info:
            await session.call_tool("alpha__echo", {"text": "x"})
    assert info.value.error.code == -32602


async def test_stdio_mode_refuses_to_start_when_no_anonymous_rule_opens_its_profile(
    tmp_path: Path,
) -> None:
    """Gateway choice (issue 16 item 3): a pipe that could see nothing exits 2 at start."""
    policy = [{"tokens": [], "subjects": ["alice"], "profiles": ["*"]}]
    done = await trio.run_process(
        [sys.executable, "-m", "gateway", "stdio", "-c", str(_config(tmp_path, policy))],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert done.returncode == 2
    assert b"the access policy lets no anonymous caller open the profile 'default'" in done.stderr
