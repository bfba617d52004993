"""The official Python SDK 2.x as host, in its default mode, through the gateway.

mcp 2.x opens with 2026-07-28 (``server/discover``) and falls back to
``initialize`` only when the server refuses; it cannot be installed beside the
1.x test peers, so it lives in ``.venv-sdk2`` (``make sdk2-venv``, which
``make pytest`` depends on) and runs ``tests/sdk2/modern_host.py`` as a child
process against a gateway this test starts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

import pytest
import trio

from tests.frontend.test_streamable_http import TOOLBOX
from tests.harness import gateway_config, sdk_backend, start_gateway

ROOT: Final = Path(__file__).resolve().parents[2]
SDK2_PYTHON: Final = ROOT / ".venv-sdk2" / "bin" / "python"
SCRIPT: Final = ROOT / "tests" / "sdk2" / "modern_host.py"
RUN_LIMIT: Final = 60.0  # seconds for the whole client run: a start and nine requests

pytestmark = [
    pytest.mark.sdk2,
    pytest.mark.skipif(
        not SDK2_PYTHON.exists(),
        reason=".venv-sdk2 is missing: run `make sdk2-venv` (make test always creates it)",
    ),
]


async def test_the_default_sdk2_client_negotiates_2026_07_28_and_uses_every_feature(
    nursery: trio.Nursery,
) -> None:
    """Issue 14 "done when": discover, not initialize; list, call, read, prompt, complete."""
    running = await start_gateway(nursery, gateway_config([TOOLBOX, sdk_backend("headers")]))
    with trio.fail_after(RUN_LIMIT):
        done = await trio.run_process(
            [str(SDK2_PYTHON), str(SCRIPT), running.url],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]
    seen = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert seen["protocol_version"] == "2026-07-28"
    assert seen["discovered"] is True
    assert seen["initialized"] is False  # no fallback to the handshake
    assert seen["server_name"] == "mcp-gateway"
    assert "toolbox__add" in seen["tools"] and "headers__lookup" in seen["tools"]
    assert "headers__broken" not in seen["tools"]  # invalid x-mcp-header: dropped
    assert (seen["add"], seen["add_is_error"]) == ("42", False)
    assert seen["lookup"] == "eu-west:2:True"  # sent with its Mcp-Param-* headers
    assert seen["read_contents"] >= 1
    assert seen["prompt_messages"] >= 1
    assert isinstance(seen["completion_values"], list)
