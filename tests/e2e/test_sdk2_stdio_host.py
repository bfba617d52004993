"""The official Python SDK 2.x as a desktop host that spawns ``trio-mcp-gateway stdio``.

mcp 2.x in its default mode probes ``server/discover`` at 2026-07-28 and falls
back to ``initialize`` only when refused; over stdio the gateway must answer
the probe and then serve every request statelessly (issue 14, stdio mode).
The client lives in ``.venv-sdk2`` and runs ``tests/sdk2/modern_stdio_host.py``,
which spawns the gateway with this virtualenv's Python.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Final

import trio

from tests.harness import NEEDS_SDK2, SDK2_PYTHON, run_sdk2_host, sdk_backend, stdio_backend
from tests.servers.paths import python_server_command
from tests.servers.recorder import recorded

ROOT: Final = Path(__file__).resolve().parents[2]
SCRIPT: Final = ROOT / "tests" / "sdk2" / "modern_stdio_host.py"
RUN_LIMIT: Final = 60.0  # seconds for the whole run: spawn, backends' start, a dozen requests

pytestmark = NEEDS_SDK2


def _config(tmp_path: Path, watched_log: Path) -> Path:
    config = {
        "logging": {"level": "info"},
        "backends": [
            sdk_backend("alpha"),
            stdio_backend("toolbox", [sys.executable, "-m", "mcp_gateway_demo.toolbox"]),
            sdk_backend("headers"),
            stdio_backend("watched", recorded(watched_log, python_server_command("watched"))),
        ],
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(json.dumps(config))
    return path


async def test_the_default_sdk2_client_negotiates_2026_07_28_over_stdio(tmp_path: Path) -> None:
    """Discover, no initialize; list (complete at once), call with progress, read, prompt,
    complete; listen, hear both kinds, cancel the listen and see the backend unsubscribed."""
    log = tmp_path / "watched.log"
    config = str(_config(tmp_path, log))
    seen = await run_sdk2_host(SCRIPT, sys.executable, config, str(log), limit=RUN_LIMIT)
    assert seen["protocol_version"] == "2026-07-28"
    assert seen["discovered"] is True
    assert seen["initialized"] is False  # no fallback to the handshake
    assert seen["server_name"] == "mcp-gateway"
    # The first tools/list already holds every backend's tools (the startup wait).
    assert {"alpha__echo", "alpha__progress", "toolbox__add", "headers__lookup"} <= set(
        seen["tools"]
    )
    assert "headers__broken" not in seen["tools"]  # invalid x-mcp-header: dropped on stdio too
    assert (seen["add"], seen["add_is_error"]) == ("42", False)
    assert seen["progress_result"] == "done"
    assert seen["progress"] == [1.0, 2.0, 3.0]
    assert any("readme" in uri for uri in seen["resources"])
    assert seen["read_text"]
    assert seen["prompt_messages"] >= 1
    assert isinstance(seen["completion_values"], list)
    first_watched = seen["watched"][0]
    assert seen["honored"] == {"toolsListChanged": True, "resourceSubscriptions": [first_watched]}
    assert seen["events"] == ["ToolsListChanged", ["ResourceUpdated", first_watched]]
    # The SDK ends a listen with notifications/cancelled; the gateway releases the
    # backend subscription while the host is still connected (not at stdin EOF).
    assert seen["unsubscribed_while_connected"] is True
    assert seen["tools_after_listen"] > len(seen["tools"])  # grow added one


async def test_a_probe_that_times_out_during_the_startup_wait_still_ends_modern(
    tmp_path: Path,
) -> None:
    """The SDK's probe (shortened to 1 s here) times out while the gateway waits 3 s for
    a slow backend; the SDK falls back to initialize, which the pipe the probe locked
    modern answers -32022 naming 2026-07-28, and the SDK re-probes (its documented
    path for a slow-starting server). The host ends modern and its first tools/list
    holds the slow backend's tools."""
    slow = ["sh", "-c", 'sleep 3 && exec "$@"', "sh", *python_server_command("alpha")]
    config = {"logging": {"level": "info"}, "backends": [stdio_backend("slow", slow)]}
    path = tmp_path / "gateway.yaml"
    path.write_text(json.dumps(config))
    with trio.fail_after(RUN_LIMIT):
        done = await trio.run_process(
            [str(SDK2_PYTHON), str(SCRIPT), "--slow-start", "1.0", sys.executable, str(path)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, stderr[-4000:]
    seen = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert (seen["protocol_version"], seen["discovered"], seen["initialized"]) == (
        "2026-07-28",
        True,
        False,
    )
    assert "slow__echo" in seen["tools"]
    assert '"client.era.refused"' in stderr  # the fallback initialize really came, and was refused
