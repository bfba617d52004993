"""logging/setLevel: each client's level, and each backend's, kept in step."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from structlog.testing import capture_logs

from gateway.backends.state import BackendState
from gateway.errors import RemoteProtocolError
from gateway.protocol import jsonrpc
from tests.router.fakes import (
    FakeBackend,
    FakeClient,
    FakePool,
    RecordingMetrics,
    ask,
    make_router,
)


def _levels_sent(backend: FakeBackend) -> list[tuple[str, str | None]]:
    return [(s.params["level"], s.client) for s in backend.sent if s.method == "logging/setLevel"]


async def test_an_unknown_level_is_invalid_params(nursery: trio.Nursery) -> None:
    """Spec (logging): the level is one of the syslog names."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha"))
    router = await make_router(pool, nursery)
    answer = await ask(router, FakeClient("c1"), "logging/setLevel", level="chatty")
    assert answer["error"]["code"] == -32602
    assert alpha.sent == []


async def test_a_shared_backend_gets_the_most_verbose_level_once(nursery: trio.Nursery) -> None:
    """Router rule (levels 2): a level already applied is not sent again."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha"))
    quiet = pool.add(FakeBackend("quiet", capabilities={"tools": {}}))
    router = await make_router(pool, nursery)
    await ask(router, FakeClient("c1"), "logging/setLevel", level="warning")
    await ask(router, FakeClient("c2"), "logging/setLevel", level="debug")
    await ask(router, FakeClient("c3"), "logging/setLevel", level="error")
    assert _levels_sent(alpha) == [("warning", None), ("debug", None)]
    assert quiet.sent == []


async def test_a_per_client_backend_session_gets_its_own_clients_level(
    nursery: trio.Nursery,
) -> None:
    """Router rule (levels 2)."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha", per_client=True, links={"c1"}))
    router = await make_router(pool, nursery)
    await ask(router, FakeClient("c1"), "logging/setLevel", level="info")
    assert sorted(_levels_sent(alpha), key=str) == [("info", "c1"), ("info", None)]


async def test_a_failed_set_level_is_sent_again_on_the_next_set_level(
    nursery: trio.Nursery,
) -> None:
    """Router rule (levels 3), issue 13: a refused setLevel is not recorded as applied."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha"))
    refusals = [RemoteProtocolError("not now", -32603)]

    async def flaky(params: dict[str, Any], client: str | None) -> Any:
        if refusals:
            raise refusals.pop()
        return jsonrpc.EMPTY_OBJECT

    alpha.answers["logging/setLevel"] = flaky
    router = await make_router(pool, nursery)
    first = await ask(router, FakeClient("c1"), "logging/setLevel", level="debug")
    assert first["result"] == {}  # the host's level is recorded either way
    await ask(router, FakeClient("c2"), "logging/setLevel", level="debug")
    assert _levels_sent(alpha) == [("debug", None), ("debug", None)]
    await ask(router, FakeClient("c3"), "logging/setLevel", level="debug")
    assert len(_levels_sent(alpha)) == 2  # acknowledged now: not sent a third time


async def test_a_timed_out_set_level_is_sent_again_when_the_backend_comes_back(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Router rule (levels 3): the backend's next connection gets the level again."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha", request_timeout=1))
    alpha.hang_until_timeout("logging/setLevel")
    router = await make_router(pool, nursery)
    await ask(router, FakeClient("c1"), "logging/setLevel", level="notice")
    del alpha.answers["logging/setLevel"]
    pool.set_state(alpha, BackendState.DOWN)
    pool.set_state(alpha, BackendState.UP)
    await trio.testing.wait_all_tasks_blocked()
    assert _levels_sent(alpha) == [("notice", None), ("notice", None)]


async def test_one_hung_backend_delays_set_level_by_one_timeout_not_one_per_backend(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Router rule (levels 4), issue 13: backends get the level at once, each on its own clock."""
    pool = FakePool()
    hung = [
        pool.add(FakeBackend(name, request_timeout=timeout))
        for name, timeout in [("alpha", 3.0), ("beta", 5.0), ("gamma", 4.0)]
    ]
    for backend in hung:
        backend.hang_until_timeout("logging/setLevel")
    fine = pool.add(FakeBackend("delta"))
    per_client = pool.add(FakeBackend("omega", per_client=True, links={"c1"}, request_timeout=5.0))
    per_client.hang_until_timeout("logging/setLevel")
    router = await make_router(pool, nursery)
    started = trio.current_time()
    answer = await ask(router, FakeClient("c1"), "logging/setLevel", level="info")
    assert answer["result"] == {}
    assert trio.current_time() - started == 5.0
    assert _levels_sent(fine) == [("info", None)]


@pytest.mark.usefixtures("debug_logs")
async def test_a_cancelled_set_level_is_logged_and_counted_as_cancelled(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Router rule (dispatch 4): the concurrent sends' nursery does not hide the cancellation."""
    pool = FakePool()
    pool.add(FakeBackend("alpha", request_timeout=10)).hang_until_timeout("logging/setLevel")
    metrics = RecordingMetrics()
    router = await make_router(pool, nursery, metrics=metrics)
    with capture_logs() as logs, trio.move_on_after(1):
        await ask(router, FakeClient("c1"), "logging/setLevel", level="info")
    [line] = [entry for entry in logs if entry["event"] == "request.routed"]
    assert line["outcome"] == "cancelled"
    assert metrics.counts == {("cancellations", "client"): 1}
    assert metrics.requests == [("logging/setLevel", "cancelled", "")]
