"""Subscriptions and log levels survive a backend restart (issue 4 with issue 5).

The backend is the official reference server behind the recording wrapper,
so the test sees what the server was sent before and after it was killed.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import trio
from pydantic import AnyUrl

from gateway.backends.state import BackendState
from gateway.transports.stdio import StdioChannel
from tests.harness import (
    everything_backend,
    gateway_config,
    open_client,
    start_gateway,
    stdio_backend,
    wait_for_states,
)
from tests.servers.recorder import read_log, recorded

RESOURCE = "everything+demo://resource/static/document/architecture.md"


def _sent(log: Path, method: str) -> list[dict[str, object]]:
    return [m for d, m in read_log(log) if d == ">" and m.get("method") == method]


def _renewed(log: Path) -> bool:
    """Both the second subscribe and the second setLevel reached the backend."""
    return len(_sent(log, "resources/subscribe")) >= 2 and len(_sent(log, "logging/setLevel")) >= 2


@pytest.mark.node
async def test_a_restarted_backend_gets_its_subscriptions_and_log_level_again(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Spec (issue 4): the backend sees one subscribe per URI, and again after a restart."""
    log = tmp_path / "everything.log"
    plain = everything_backend()
    argv = recorded(log, [plain["command"], *plain["args"]])
    config = gateway_config(
        [stdio_backend("everything", argv, restart={"initial_delay": 0.05, "max_delay": 0.1})]
    )
    running = await start_gateway(nursery, config)
    async with open_client(running.url) as client:
        await client.set_logging_level("debug")
        await client.subscribe_resource(AnyUrl(RESOURCE))
        assert len(_sent(log, "resources/subscribe")) == 1
        backend = running.gateway.pool.backends["everything"]
        peer = backend._peer
        assert peer is not None
        channel = peer._channel
        assert isinstance(channel, StdioChannel)
        os.killpg(channel.pid, signal.SIGKILL)
        await wait_for_states(running.gateway, {"everything": BackendState.DOWN})
        await wait_for_states(running.gateway, {"everything": BackendState.UP})
        # The gateway renews subscriptions, then the level (router._renew):
        # wait for both, or the level's line may not be written yet.
        with trio.fail_after(10):
            while not _renewed(log):  # noqa: ASYNC110 - a file another process writes
                await trio.sleep(0.05)
        subscribes = _sent(log, "resources/subscribe")
        assert [m["params"] for m in subscribes] == [
            {"uri": "demo://resource/static/document/architecture.md"}
        ] * 2
        levels = _sent(log, "logging/setLevel")
        assert len(levels) >= 2
        assert levels[-1]["params"] == {"level": "debug"}
