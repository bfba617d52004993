"""The official Python SDK 2.x as host, in its default mode, through the gateway.

mcp 2.x opens with 2026-07-28 (``server/discover``) and falls back to
``initialize`` only when the server refuses; it cannot be installed beside the
1.x test peers, so it lives in ``.venv-sdk2`` (``make sdk2-venv``, which
``make pytest`` depends on) and runs ``tests/sdk2/modern_host.py`` as a child
process against a gateway this test starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import trio

from tests.frontend.test_streamable_http import TOOLBOX
from tests.harness import (
    NEEDS_SDK2,
    gateway_config,
    run_sdk2_host,
    sdk_backend,
    start_gateway,
)

ROOT: Final = Path(__file__).resolve().parents[2]
SCRIPT: Final = ROOT / "tests" / "sdk2" / "modern_host.py"
RUN_LIMIT: Final = 60.0  # seconds for the whole client run: a start and nine requests

pytestmark = NEEDS_SDK2


async def test_the_default_sdk2_client_negotiates_2026_07_28_and_uses_every_feature(
    nursery: trio.Nursery,
) -> None:
    """Issue 14 "done when": discover, not initialize; list, call, read, prompt, complete."""
    running = await start_gateway(nursery, gateway_config([TOOLBOX, sdk_backend("headers")]))
    seen = await run_sdk2_host(SCRIPT, running.url, limit=RUN_LIMIT)
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
