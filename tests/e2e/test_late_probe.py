"""An SDK 2.x backend that answers ``server/discover`` late is modern on its first try.

The official SDK 2.x server (``tests/servers/modern_sdk2.py``) chooses
2026-07-28 for a connection once it answered discover there, and refuses
``initialize`` on it afterwards (-32022). Started late (``SDK2_START_DELAY``,
as on a machine starting many interpreters on few cores), it answers the
probe after the five seconds the gateway used to wait; the answer must be
taken, and nothing sent that would make it refuse (robustness E17).
The same fault in virtual time: ``tests/backends/test_probe.py``.
"""

from __future__ import annotations

from typing import Final

import trio
from structlog.testing import capture_logs

from gateway.backends.supervision.supervisor import BackendState
from tests.e2e.test_modern_backend import pytestmark as pytestmark  # skip without .venv-sdk2
from tests.e2e.test_modern_backend import sdk2_stdio
from tests.harness import gateway_config, open_client, start_gateway

# Past the five seconds the probe used to wait before sending initialize.
START_DELAY: Final = 7.0


async def test_a_discover_answered_seven_seconds_late_makes_the_backend_modern_first_time(
    nursery: trio.Nursery,
) -> None:
    """Robustness E17: up in 2026-07-28 on the first connection: no initialize, no
    dropped answer, no restart, and calls work."""
    backend = sdk2_stdio("m", env={"SDK2_START_DELAY": str(START_DELAY)})
    started = trio.current_time()
    with capture_logs() as logs:
        running = await start_gateway(nursery, gateway_config([backend]))
        waited = trio.current_time() - started
        gateway_backend = running.gateway.pool.backends["m"]
        assert gateway_backend.state is BackendState.UP
        assert gateway_backend.info is not None and gateway_backend.info.modern
        assert gateway_backend.initializations == 0
        assert gateway_backend.restarts == 0
        async with open_client(running.url) as session:
            names = [tool.name for tool in (await session.list_tools()).tools]
        assert "m__whoami" in names
    assert waited >= START_DELAY
    events = [entry["event"] for entry in logs]
    assert "session.unmatched_response_dropped" not in events
    assert events.count("backend.connect.started") == 1
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == []
    nursery.cancel_scope.cancel()
