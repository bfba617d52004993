"""A newcomer's Claude Desktop config, served by the gateway to the official client (issue 19).

The README's three commands: a gateway file whose only key is
``backends_from`` pointing at a ``claude_desktop_config.json`` written as
Claude Desktop's documentation shows, the gateway serving it, and the
entry ``connect`` prints for the host. Real backend processes (the demo
servers on the official SDK), the official ``mcp`` client as the host.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio
from mcp.types import TextContent

from gateway.cli.main import main
from gateway.config import load
from tests.harness import open_client, start_gateway


async def test_a_claude_desktop_config_is_served_through_backends_from(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """Issue 19 (done when): backends_from, run, and the host's tools are there."""
    desktop = tmp_path / "claude_desktop_config.json"
    desktop.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "notes": {"command": sys.executable, "args": ["-m", "mcp_gateway_demo.notes"]},
                    "Tool Box": {
                        "command": sys.executable,
                        "args": ["-m", "mcp_gateway_demo.toolbox"],
                    },
                },
                "globalShortcut": "Ctrl+Space",
            },
            indent=2,
        )
    )
    gateway_file = tmp_path / "gateway.yaml"
    gateway_file.write_text(
        "server: {host: 127.0.0.1, port: 0}\nbackends_from:\n  - path: claude_desktop_config.json\n"
    )
    running = await start_gateway(nursery, load(gateway_file))
    async with open_client(running.url) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert "toolbox__add" not in tools  # the key "Tool Box" is the name and prefix...
        assert "tool-box__add" in tools  # ...made valid
        assert any(name.startswith("notes__") for name in tools)
        result = await client.call_tool("tool-box__add", {"a": 2, "b": 3})
        assert result.isError is False
        assert [b.text for b in result.content if isinstance(b, TextContent)] == ["5"]


def test_connect_prints_the_url_the_gateway_file_serves(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 19: the third command, for an HTTP-capable host."""
    monkeypatch.setenv("MCP_GATEWAY_PYTHON", sys.executable)  # main() sets it for the process
    (tmp_path / "claude_desktop_config.json").write_text('{"mcpServers": {}}')
    gateway_file = tmp_path / "gateway.yaml"
    gateway_file.write_text("backends_from:\n  - path: claude_desktop_config.json\n")
    main(["connect", "claude-code", "-c", str(gateway_file)])
    assert json.loads(capsys.readouterr().out) == {
        "mcpServers": {"trio-mcp-gateway": {"type": "http", "url": "http://127.0.0.1:8000/mcp"}}
    }
