"""The roots digest of each handshake-era host (router/host_roots.py), on virtual time."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
import trio

from gateway.backends.link_keys import link_key
from gateway.errors import RemoteProtocolError
from gateway.protocol import jsonrpc
from gateway.router.host_roots import ROOTS_WAIT, HostRoots, roots_digest
from tests.router.fakes import FakeClient

if TYPE_CHECKING:
    from trio.testing import MockClock

ROOTS = {"roots": {"listChanged": True}}


def _lister(roots: list[dict[str, Any]]) -> Any:
    async def answer(method: str, params: msgspec.Raw | None) -> msgspec.Raw:
        await trio.sleep(1)
        return jsonrpc.to_raw({"roots": roots})

    return answer


def test_the_roots_digest_ignores_order_and_the_key_differs_by_roots() -> None:
    """Gateway choice (link_keys rule 5): the same roots in any order digest alike; keys
    of one principal and capabilities differ by roots, and stay as before without any."""
    one = [{"uri": "file:///a", "name": "a"}, {"uri": "file:///b"}]
    assert roots_digest(one) == roots_digest(list(reversed(one)))
    assert roots_digest(one) != roots_digest(one[:1])
    assert roots_digest("nonsense") == roots_digest([])
    keys = {
        link_key("per_principal", "c", "alice", ROOTS, roots)
        for roots in (None, roots_digest(one), roots_digest(one[:1]))
    }
    assert len(keys) == 3
    assert link_key("per_client", "c", "alice", ROOTS, roots_digest(one)) == "c"


async def test_a_host_is_asked_once_however_many_calls_start_together(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice (host_roots rules 1, 3): concurrent calls of one host wait for one
    roots/list; the digest is then known without asking again."""
    host = FakeClient("h1", capabilities=ROOTS, answer=_lister([{"uri": "file:///a"}]))
    table = HostRoots()
    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(table.ensure, host, None)
    await table.ensure(host, None)
    assert [method for method, _, _ in host.asked] == ["roots/list"]
    assert table.digest_of("h1") == roots_digest([{"uri": "file:///a"}])


async def test_a_list_changed_asks_again_and_only_a_new_digest_rekeys(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice (host_roots rule 2): after roots/list_changed the next call asks
    again; the backends are told to re-key only when the roots really changed."""
    rekeyed: list[str] = []
    roots = [{"uri": "file:///a"}]
    host = FakeClient("h1", capabilities=ROOTS, answer=_lister(roots))
    table = HostRoots(rekeyed.append)
    await table.ensure(host, None)
    table.changed("h1")
    await table.ensure(host, None)  # the same roots
    assert rekeyed == []
    roots.append({"uri": "file:///b"})
    table.changed("h1")
    await table.ensure(host, None)
    assert rekeyed == ["h1"]
    assert len(host.asked) == 3
    table.closed("h1")
    assert table.digest_of("h1") is None


async def test_a_host_without_roots_is_never_asked_and_a_silent_one_costs_one_wait(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice (host_roots rules 1, 4): no roots capability, no question; a host
    that does not answer within ROOTS_WAIT, or answers an error, has no roots known and
    its call goes on."""
    plain = FakeClient("h0")
    table = HostRoots()
    await table.ensure(plain, None)
    assert plain.asked == []

    async def silent(method: str, params: msgspec.Raw | None) -> msgspec.Raw:
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover

    async def refusing(method: str, params: msgspec.Raw | None) -> msgspec.Raw:
        raise RemoteProtocolError("no", -32601)

    for name, answer in (("h1", silent), ("h2", refusing)):
        host = FakeClient(name, capabilities=ROOTS, answer=answer)
        started = trio.current_time()
        await table.ensure(host, None)
        assert table.digest_of(name) is None
        assert trio.current_time() - started <= ROOTS_WAIT
