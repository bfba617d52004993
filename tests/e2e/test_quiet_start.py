"""``make run``'s first seconds: the shipped config starts without a warning (issue 24 item 9).

The demo backends are SDK 1.x servers; probed with ``server/discover`` they
logged a 31-line validation warning each, and every line reached the
gateway's log. The shipped config pins them to the handshake era.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import trio

from tests.e2e.shipped_gateway import shipped_gateway

# How long after both backends connected the log must stay quiet.
SETTLE: Final = 2.0
QUIET_LEVELS: Final = {"debug", "info"}
# What a child's own log line says when it warns or fails (its words, not ours).
ALARMS: Final = ("WARNING", "ERROR", "CRITICAL", "Traceback", "validation error")


async def test_the_shipped_config_starts_without_a_warning_or_an_error_line(
    tmp_path: Path,
) -> None:
    """Issue 24: no warning or error from the gateway or a demo backend as it starts."""
    async with shipped_gateway(tmp_path) as running:
        await trio.sleep(SETTLE)
        records = running.records()
    loud = [r for r in records if r.get("level") not in QUIET_LEVELS]
    assert loud == []
    alarms = [
        r["line"]
        for r in records
        if r.get("event") == "backend.stderr" and any(a in str(r["line"]) for a in ALARMS)
    ]
    assert alarms == []
    eras = {r["backend"]: r["era"] for r in records if r.get("event") == "backend.connect.complete"}
    assert eras == {"notes": "legacy", "toolbox": "legacy"}
