"""Cache hints derived from a real 2026-07-28 backend (issue 14, item 3).

The backend is the official SDK 2.x server ``tests/servers/modern_sdk2.py``
with ``SDK2_CACHE_HINTS=1``: its ``MCPServer(cache_hints=...)`` gives
``server/discover`` ``{30000, public}``, ``tools/list`` ``{20000, public}``
and ``resources/read`` ``{45000, public}``. The host is raw ``httpx`` with
the modern envelope. Rules: ``docs/eras.md``, "Caching and resultType".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.e2e.test_modern_backend import modern_call, sdk2_stdio
from tests.harness import NEEDS_SDK2, gateway_config, open_client, sdk_backend, start_gateway

if TYPE_CHECKING:
    import trio

    from tests.harness import Running

pytestmark = NEEDS_SDK2

HINTED = {"SDK2_CACHE_HINTS": "1"}


def hint(result: dict[str, Any]) -> tuple[int, str]:
    """(ttlMs, cacheScope) of a result."""
    return result["ttlMs"], result["cacheScope"]


async def results(running: Running) -> dict[str, dict[str, Any]]:
    """discover, tools/list and the note's resources/read, as a modern host gets them."""
    out = {}
    for msg_id, (method, params) in enumerate(
        (
            ("server/discover", {}),
            ("tools/list", {}),
            ("resources/read", {"uri": "m+sdk2://note"}),
        ),
        start=1,
    ):
        answer = await modern_call(running, msg_id, method, params)
        assert "result" in answer, answer
        out[method] = answer["result"]
    return out


async def test_a_modern_backends_own_hints_reach_discover_lists_and_reads(
    nursery: trio.Nursery,
) -> None:
    """Spec (S/server/utilities/caching.mdx): the lone backend's hints, each kept as given."""
    running = await start_gateway(nursery, gateway_config([sdk2_stdio("m", env=HINTED)]))
    info = running.gateway.pool.backends["m"].info
    assert info is not None and info.modern
    got = await results(running)
    assert hint(got["server/discover"]) == (30000, "public")
    assert hint(got["tools/list"]) == (20000, "public")
    assert hint(got["resources/read"]) == (45000, "public")
    assert got["resources/read"]["contents"][0]["text"] == "a note from sdk2"


async def test_a_handshake_era_backend_beside_it_makes_merged_results_uncacheable(
    nursery: trio.Nursery,
) -> None:
    """Gateway rule (issue 14): merged results take the most conservative hint; a read
    keeps its own backend's."""
    config = gateway_config([sdk2_stdio("m", env=HINTED), sdk_backend("alpha")])
    running = await start_gateway(nursery, config)
    got = await results(running)
    assert hint(got["server/discover"]) == (0, "private")
    assert hint(got["tools/list"]) == (0, "private")
    assert hint(got["resources/read"]) == (45000, "public")  # only m's answer is in it
    async with open_client(running.url) as session:  # a legacy host sees no hint
        read = await session.read_resource("m+sdk2://note")  # type: ignore[arg-type]
    assert not set(read.model_extra or {}) & {"ttlMs", "cacheScope", "resultType"}


async def test_without_hints_of_its_own_the_sdk_default_is_kept(nursery: trio.Nursery) -> None:
    """Spec: the SDK's default {0, private} passes through as the backend gave it."""
    running = await start_gateway(nursery, gateway_config([sdk2_stdio("m")]))
    got = await results(running)
    assert {hint(result) for result in got.values()} == {(0, "private")}
