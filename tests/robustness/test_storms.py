"""Robustness B15, scaled to CI: a reconnect storm of hosts initializing at once.

The catalogue's B15 is 500 clients against a freshly restarted gateway with
event-loop lag measured from outside; here the 500 clients are real HTTP
connections from this same process (so loop lag is not measured: the
clients share the loop), against a gateway admitting at most 100 sessions.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Final

import httpx
import pytest
import trio

from tests.harness import gateway_config, start_gateway
from tests.robustness.support import ACCEPT_BOTH, LATEST, misbehaving

pytestmark = pytest.mark.usefixtures("engine")

CLIENTS: Final = 500
MAX_SESSIONS: Final = 100


async def test_a_storm_of_initializes_is_admitted_up_to_the_limit_and_shed_with_retry_after(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """B15 (scaled): 500 hosts initialize at once against max_sessions 100: exactly 100
    sessions open, the other 400 get 503 with Retry-After, nothing crashes, and the shared
    stdio backend is not spawned again for any of them."""
    starts = tmp_path / "starts"
    entry = misbehaving("shared", "--start-log", str(starts))
    config = gateway_config([entry], server={"max_sessions": MAX_SESSIONS})
    running = await start_gateway(nursery, config)
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": LATEST, "capabilities": {}, "clientInfo": {"name": "s"}},
        }
    ).encode()
    headers = {"Accept": ACCEPT_BOTH, "Content-Type": "application/json"}
    statuses: list[int | str] = []
    retry_after: list[str | None] = []
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=0)
    async with httpx.AsyncClient(
        base_url=running.base_url, trust_env=False, timeout=60.0, limits=limits
    ) as client:

        async def host() -> None:
            try:
                response = await client.post("/mcp", content=body, headers=headers)
            except httpx.TransportError as exc:  # refused or reset: neither admitted nor shed
                statuses.append(type(exc).__name__)
                retry_after.append(None)
                return
            statuses.append(response.status_code)
            retry_after.append(response.headers.get("retry-after"))

        with trio.fail_after(30):
            async with trio.open_nursery() as storm:
                for _ in range(CLIENTS):
                    storm.start_soon(host)
        assert (await client.get("/healthz")).status_code == 200
    outcomes = Counter(statuses)
    assert outcomes == {200: MAX_SESSIONS, 503: CLIENTS - MAX_SESSIONS}, outcomes
    shed = [value for status, value in zip(statuses, retry_after, strict=True) if status == 503]
    assert all(value is not None and value.isdigit() for value in shed)
    assert len(running.gateway.clients) == MAX_SESSIONS
    assert len(starts.read_text().split()) == 1
