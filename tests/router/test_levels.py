"""logging/setLevel: each client's level, and each backend's, kept in step."""

from __future__ import annotations

import trio
import trio.testing

from gateway.backends.backend import BackendState
from tests.router.fakes import FakeBackend, FakeClient, FakePool, ask, make_router


def _levels_sent(backend: FakeBackend) -> list[tuple[str, str | None]]:
    return [(s.params["level"], s.client) for s in backend.sent if s.method == "logging/setLevel"]


async def test_an_unknown_level_is_invalid_params(nursery: trio.Nursery) -> None:
    """Spec (logging): the level is one of the syslog names."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha"))
    router = make_router(pool, nursery)
    answer = await ask(router, FakeClient("c1"), "logging/setLevel", level="chatty")
    assert answer["error"]["code"] == -32602
    assert alpha.sent == []


async def test_a_shared_backend_gets_the_most_verbose_level_once(nursery: trio.Nursery) -> None:
    """Router rule (levels 2): a level already applied is not sent again."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha"))
    quiet = pool.add(FakeBackend("quiet", capabilities={"tools": {}}))
    router = make_router(pool, nursery)
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
    router = make_router(pool, nursery)
    await ask(router, FakeClient("c1"), "logging/setLevel", level="info")
    assert sorted(_levels_sent(alpha), key=str) == [("info", "c1"), ("info", None)]


async def test_a_timed_out_set_level_is_sent_again_when_the_backend_comes_back(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Router rule (levels 3): the backend's next connection gets the level again."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha", request_timeout=1))
    alpha.hang_until_timeout("logging/setLevel")
    router = make_router(pool, nursery)
    await ask(router, FakeClient("c1"), "logging/setLevel", level="notice")
    del alpha.answers["logging/setLevel"]
    pool.set_state(alpha, BackendState.DOWN)
    pool.set_state(alpha, BackendState.UP)
    await trio.testing.wait_all_tasks_blocked()
    assert _levels_sent(alpha) == [("notice", None), ("notice", None)]
