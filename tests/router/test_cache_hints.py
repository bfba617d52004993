"""Cache hints of merged results, derived from the backends (issue 14, item 3).

``server/discover`` and ``resources/read`` for a 2026-07-28 host carry the
most conservative combination of what the contributing backends said
(``S/server/utilities/caching.mdx``; rules in ``gateway/protocol/stateless/cache_hints.py``):
the shortest ``ttlMs``, ``private`` if any is; a handshake-era backend
counts as ``{0, private}``; under an access policy the result is
``private`` (the view depends on who asks). Fakes stand for the backends:
what is checked is the router's combination, not a transport.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import msgspec
import pytest
import trio

from gateway.backends.state import BackendState
from gateway.catalog.cursor import CursorCodec
from gateway.config import PolicyRule
from gateway.identity.policy import Policy
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.stateless.cache_hints import NO_CACHE, CacheHint
from gateway.protocol.stateless.envelope import Envelope
from gateway.router import Router
from gateway.router.access import AccessControl
from gateway.router.context import ModernRequest
from tests.router.fakes import FakeBackend, FakeClient, FakePool, ask, make_router, started
from tests.router.test_policy import CI, PLATFORM, policy
from tests.router.test_policy import make_pool as make_policy_pool

MODERN = "2026-07-28"


def modern(backend: FakeBackend, discover: CacheHint = NO_CACHE) -> FakeBackend:
    """``backend`` as a 2026-07-28 backend whose DiscoverResult carried ``discover``."""
    assert backend.info is not None
    backend.info = replace(
        backend.info,
        protocol_version=MODERN,
        modern=True,
        supported_versions=(MODERN,),
        discover_hint=discover,
    )
    return backend


def reads(contents_hint: dict[str, Any]) -> Any:
    """A ``resources/read`` answer carrying ``contents_hint`` as its own fields."""

    async def answer(params: dict[str, Any], client: str | None) -> msgspec.Raw:
        text = {"uri": params["uri"], "text": "hello"}
        return mcp.encode({"contents": [text], **contents_hint})

    return answer


def hint_of_discover(router: Router) -> tuple[int, str]:
    """(ttlMs, cacheScope) of the router's ``server/discover`` answer."""
    result = router.discover_result()
    return result["ttlMs"], result["cacheScope"]


def modern_request(principal: Any = None) -> ModernRequest:
    """A modern request of ``principal`` (a ``Principal`` or None)."""
    return ModernRequest(
        envelope=Envelope(protocol_version=MODERN, client_capabilities={}),
        principal=None if principal is None else principal.key,
        caller=principal,
    )


async def read(router: Router, uri: str, principal: Any = None) -> dict[str, Any]:
    """One modern ``resources/read`` through the router; its result."""
    message = jsonrpc.Request(7, "resources/read", jsonrpc.to_raw({"uri": uri}))
    reply = jsonrpc.decode(
        await router.handle_modern(modern_request(principal), message, {"uri": uri})
    )
    assert isinstance(reply, jsonrpc.Response), reply
    result = mcp.decode_object(reply.result)
    assert result is not None
    return result


async def test_discover_carries_the_modern_backends_own_hint(nursery: trio.Nursery) -> None:
    """Spec (caching.mdx): a lone 2026-07-28 backend's discover hint reaches the host."""
    pool = FakePool()
    pool.add(modern(FakeBackend("m"), CacheHint(ttl_ms=30000, scope="public")))
    assert hint_of_discover(await make_router(pool, nursery)) == (30000, "public")


async def test_discover_takes_the_shortest_ttl_and_private_if_any_modern_backend_is(
    nursery: trio.Nursery,
) -> None:
    """Gateway rule (issue 14): the most conservative combination of the backends'."""
    pool = FakePool()
    pool.add(modern(FakeBackend("a"), CacheHint(ttl_ms=30000, scope="public")))
    pool.add(modern(FakeBackend("b"), CacheHint(ttl_ms=5000, scope="public")))
    router = await make_router(pool, nursery)
    assert hint_of_discover(router) == (5000, "public")
    pool.add(modern(FakeBackend("c"), CacheHint(ttl_ms=90000, scope="private")))
    assert hint_of_discover(router) == (5000, "private")


async def test_one_handshake_era_backend_makes_discover_uncacheable(
    nursery: trio.Nursery,
) -> None:
    """Gateway rule (issue 14): a legacy backend promised nothing, so {0, private}."""
    pool = FakePool()
    pool.add(modern(FakeBackend("m"), CacheHint(ttl_ms=30000, scope="public")))
    legacy = pool.add(FakeBackend("old"))
    router = await make_router(pool, nursery)
    assert hint_of_discover(router) == (0, "private")
    pool.set_state(legacy, BackendState.DOWN)  # only the backends up contribute
    assert hint_of_discover(router) == (30000, "public")


async def test_discover_with_no_backend_up_is_uncacheable(nursery: trio.Nursery) -> None:
    """Gateway rule: nothing to merge gives {0, private} (caching.py)."""
    pool = FakePool()
    backend = pool.add(modern(FakeBackend("m"), CacheHint(ttl_ms=30000, scope="public")))
    pool.set_state(backend, BackendState.DOWN)
    assert hint_of_discover(await make_router(pool, nursery)) == (0, "private")


async def test_discover_is_private_under_an_access_policy(nursery: trio.Nursery) -> None:
    """Gateway rule (issue 14): a per-principal view may not sit in a shared cache."""
    pool = FakePool()
    pool.add(modern(FakeBackend("m"), CacheHint(ttl_ms=30000, scope="public")))
    router = await started(
        nursery, Router(pool, CursorCodec("test"), 0, access=AccessControl(policy()))
    )
    assert hint_of_discover(router) == (30000, "private")


@pytest.mark.parametrize(
    ("own", "expected"),
    [
        ({"ttlMs": 45000, "cacheScope": "public"}, (45000, "public")),
        ({"ttlMs": 45000, "cacheScope": "private"}, (45000, "private")),
        ({"ttlMs": 45000}, (45000, "private")),  # absent scope reads as private
        ({}, (0, "private")),  # a modern backend that gave no hint
    ],
)
async def test_a_read_carries_its_modern_backends_own_hint(
    nursery: trio.Nursery, own: dict[str, Any], expected: tuple[int, str]
) -> None:
    """Spec (caching.mdx): a resources/read result is cacheable; its backend's hint counts."""
    pool = FakePool()
    backend = modern(FakeBackend("m", capabilities={"resources": {}}))
    backend.answers["resources/read"] = reads(own)
    pool.add(backend, resources=({"uri": "mem://a", "name": "a"},))
    result = await read(await make_router(pool, nursery), "m+mem://a")
    assert (result["ttlMs"], result["cacheScope"]) == expected
    assert result["contents"][0]["uri"] == "m+mem://a"


async def test_a_read_from_a_handshake_era_backend_is_uncacheable_whatever_it_says(
    nursery: trio.Nursery,
) -> None:
    """Gateway rule (issue 14): a legacy backend's stray fields promise nothing."""
    pool = FakePool()
    backend = FakeBackend("old", capabilities={"resources": {}})
    backend.answers["resources/read"] = reads({"ttlMs": 60000, "cacheScope": "public"})
    pool.add(backend, resources=({"uri": "mem://a", "name": "a"},))
    result = await read(await make_router(pool, nursery), "old+mem://a")
    assert (result["ttlMs"], result["cacheScope"]) == (0, "private")


async def test_a_read_is_private_under_an_access_policy_even_for_who_sees_everything(
    nursery: trio.Nursery,
) -> None:
    """Gateway rule (issue 14): the policy makes what one principal reads per-principal."""
    pool = make_policy_pool()
    files = modern(pool.backends["files"])
    files.answers["resources/read"] = reads({"ttlMs": 45000, "cacheScope": "public"})
    router = await started(
        nursery, Router(pool, CursorCodec("test"), 0, access=AccessControl(policy()))
    )
    for principal in (CI, PLATFORM):  # narrowed, and everything
        result = await read(router, "files+mem://notes.txt", principal)
        assert (result["ttlMs"], result["cacheScope"]) == (45000, "private")


async def test_a_legacy_hosts_read_gets_no_hint_fields(nursery: trio.Nursery) -> None:
    """Spec: a handshake-era host sees no 2026-07-28 fields the gateway added."""
    pool = FakePool()
    backend = FakeBackend("old", capabilities={"resources": {}})
    backend.answers["resources/read"] = reads({})
    pool.add(backend, resources=({"uri": "mem://a", "name": "a"},))
    router = await make_router(pool, nursery)
    answer = await ask(router, FakeClient("legacy"), "resources/read", uri="old+mem://a")
    assert not {"ttlMs", "cacheScope"} & set(answer["result"])


async def test_a_list_is_private_under_a_policy_even_for_a_principal_that_sees_everything(
    nursery: trio.Nursery,
) -> None:
    """Gateway rule (issue 14): the list a principal allowed everything gets is more
    than another may see, so no shared cache may keep it."""
    pool = FakePool()
    backend = modern(FakeBackend("m"))
    backend.list_hint = lambda kind: CacheHint(ttl_ms=20000, scope="public")  # type: ignore[method-assign] # a modern backend's walk
    pool.add(backend, tools=({"name": "t"},))
    open_to_all = Policy.from_config(
        msgspec.convert([{"name": "all", "everyone": True, "profiles": ["*"]}], list[PolicyRule])
    )
    assert open_to_all is not None
    plain = await make_router(pool, nursery)
    guarded = await started(
        nursery, Router(pool, CursorCodec("test"), 0, access=AccessControl(open_to_all))
    )
    for router, scope in ((plain, "public"), (guarded, "private")):
        message = jsonrpc.Request(3, "tools/list", None)
        reply = jsonrpc.decode(await router.handle_modern(modern_request(PLATFORM), message, {}))
        assert isinstance(reply, jsonrpc.Response)
        result = mcp.decode_object(reply.result)
        assert result is not None
        assert [t["name"] for t in result["tools"]] == ["m__t"]
        assert (result["ttlMs"], result["cacheScope"]) == (20000, scope)
