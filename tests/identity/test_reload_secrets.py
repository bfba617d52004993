"""Issue 16 item 7: a rotated mrtr.state_secret verifies for one held-call lifetime (MockClock)."""

from __future__ import annotations

from typing import Any

import trio

from gateway.config import parse
from gateway.router.stateless.held_calls import HeldCalls, sealer_for


async def test_the_previous_state_secret_is_retired_after_the_held_call_lifetime(
    nursery: trio.Nursery, autojump_clock: Any
) -> None:
    """The new key seals at once; the old one verifies until held_call_lifetime has passed."""
    old = sealer_for("first-state-secret")
    held = HeldCalls(old, lifetime=120)
    await nursery.start(held.run)
    new_config = parse('{"mrtr": {"state_secret": "second", "held_call_lifetime": 120}}', env={})
    held.apply(new_config.mrtr, rotate=True)
    assert held.sealer.keys[1:] == old.keys[:1]
    assert held.sealer.keys[0] == sealer_for("second").keys[0]
    await trio.sleep(119)
    assert len(held.sealer.keys) == 2
    await trio.sleep(2)
    assert held.sealer.keys == sealer_for("second").keys
