"""The response cache on the request path (gateway/router/response_cache.py).

A recording backend counts what reaches it: a kept answer is one the backend
is not asked for again. Freshness runs on trio's MockClock.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import trio
import trio.testing

from gateway.backends.state import BackendState
from gateway.config import StdioBackend
from gateway.config.schema_backend_auth import BackendAuth
from gateway.config.schema_backends import HttpBackend
from gateway.config.schema_cache import BackendCache, CacheConfig, ToolCache
from gateway.config.schema_profiles import ProfileConfig
from gateway.protocol import jsonrpc, mcp
from gateway.router import Router
from gateway.router.response_cache import cache_for
from tests.router.fakes import FakeBackend, FakeClient, FakePool, ask, make_router
from tests.router.test_cache_hints import modern, read, reads
from tests.router.test_policy import CI, DEV, NOT_FOUND
from tests.router.test_policy import client as policy_client
from tests.router.test_policy import make_pool as make_policy_pool
from tests.router.test_policy import make_router as policy_router

ALICE = "token:alice"
BOB = "token:bob"


class _Who:
    """A principal as ``modern_request`` takes it (its key only)."""

    def __init__(self, key: str) -> None:
        self.key = key


def legacy_backend(ttl: float | None = None, **cache: Any) -> FakeBackend:
    """A handshake-era backend with one resource; ``backends[].cache`` when ``ttl`` is given."""
    backend = FakeBackend("old", capabilities={"resources": {}, "tools": {}})
    backend.answers["resources/read"] = reads({})
    if ttl is not None:
        backend.config = StdioBackend(
            name="old", command="fake", prefix="old", cache=BackendCache(ttl=ttl, **cache)
        )
    return backend


def modern_backend(hint: dict[str, Any]) -> FakeBackend:
    """A 2026-07-28 backend whose reads carry ``hint``."""
    backend = modern(FakeBackend("m", capabilities={"resources": {}}))
    backend.answers["resources/read"] = reads(hint)
    return backend


async def cached_router(
    pool: FakePool,
    nursery: trio.Nursery,
    *,
    profiles: tuple[ProfileConfig, ...] = (),
    config: CacheConfig | None = None,
) -> Router:
    """A router over ``pool`` with the cache on (the backends' configs as they are)."""
    router = await make_router(pool, nursery)
    configs = [b.config for b in pool.backends.values()]
    router.set_cache(cache_for(config or CacheConfig(), configs, profiles))
    return router


def reads_sent(backend: FakeBackend) -> int:
    """How many reads reached the backend."""
    return backend.methods().count("resources/read")


def notify(pool: FakePool, backend: FakeBackend, method: str, params: dict[str, Any]) -> None:
    """The backend sends a notification, as the pool hands it to the router."""
    for listener in pool.notification_listeners:
        listener(backend, method, mcp.encode(params), None)


async def test_without_the_cache_every_read_reaches_the_backend(nursery: trio.Nursery) -> None:
    """Gateway choice: the cache is off unless configured; the router holds none."""
    pool = FakePool()
    backend = pool.add(legacy_backend(ttl=30), resources=({"uri": "mem://a", "name": "a"},))
    router = await make_router(pool, nursery)
    assert router.cache is None
    for _ in range(2):
        await ask(router, FakeClient("c"), "resources/read", uri="old+mem://a")
    assert reads_sent(backend) == 2


async def test_a_second_read_of_an_opted_in_legacy_backend_is_served_from_the_cache(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice: backends[].cache keeps a hint-less backend's reads; same answer."""
    pool = FakePool()
    backend = pool.add(legacy_backend(ttl=30), resources=({"uri": "mem://a", "name": "a"},))
    router = await cached_router(pool, nursery)
    first = await ask(router, FakeClient("c1"), "resources/read", uri="old+mem://a")
    second = await ask(router, FakeClient("c2"), "resources/read", uri="old+mem://a")
    assert reads_sent(backend) == 1
    assert first["result"] == second["result"]
    assert second["result"]["contents"][0]["uri"] == "old+mem://a"
    assert "ttlMs" not in second["result"]
    stats = router.cache.responses.stats("old") if router.cache else None
    assert stats is not None and (stats.hits, stats.misses) == (1, 1)


async def test_a_legacy_backend_without_the_opt_in_is_never_cached(
    nursery: trio.Nursery,
) -> None:
    """Spec (caching.mdx): a handshake-era backend promised nothing."""
    pool = FakePool()
    backend = pool.add(legacy_backend(), resources=({"uri": "mem://a", "name": "a"},))
    router = await cached_router(pool, nursery)
    for _ in range(2):
        await ask(router, FakeClient("c"), "resources/read", uri="old+mem://a")
    assert reads_sent(backend) == 2


async def test_a_modern_backends_public_hint_is_honoured_until_its_ttl(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Spec (caching.mdx): fresh for ttlMs; at the deadline it is asked again."""
    pool = FakePool()
    backend = pool.add(
        modern_backend({"ttlMs": 5000, "cacheScope": "public"}),
        resources=({"uri": "mem://a", "name": "a"},),
    )
    router = await cached_router(pool, nursery)
    await read(router, "m+mem://a")
    await trio.sleep(4.9)
    again = await read(router, "m+mem://a")
    assert reads_sent(backend) == 1
    assert 0 < again["ttlMs"] <= 100  # the time left, not the backend's 5000
    await trio.sleep(0.1)
    await read(router, "m+mem://a")
    assert reads_sent(backend) == 2


async def test_a_zero_ttl_or_a_missing_hint_is_not_kept(nursery: trio.Nursery) -> None:
    """Spec (caching.mdx): ttlMs 0 (or none, which counts as 0) means stale at once."""
    for hint in ({"ttlMs": 0, "cacheScope": "public"}, {}):
        pool = FakePool()
        backend = pool.add(modern_backend(hint), resources=({"uri": "mem://a", "name": "a"},))
        router = await cached_router(pool, nursery)
        await read(router, "m+mem://a")
        await read(router, "m+mem://a")
        assert reads_sent(backend) == 2


async def test_a_private_answer_never_crosses_principals(nursery: trio.Nursery) -> None:
    """Spec (caching.mdx §Cache Scope): private is kept per principal, served to it only."""
    pool = FakePool()
    backend = pool.add(
        modern_backend({"ttlMs": 60000, "cacheScope": "private"}),
        resources=({"uri": "mem://a", "name": "a"},),
    )
    router = await cached_router(pool, nursery)
    await read(router, "m+mem://a", _Who(ALICE))
    await read(router, "m+mem://a", _Who(BOB))
    assert reads_sent(backend) == 2  # Bob never gets Alice's
    await read(router, "m+mem://a", _Who(ALICE))
    await read(router, "m+mem://a", _Who(BOB))
    assert reads_sent(backend) == 2  # each got their own


async def test_without_auth_a_private_answer_is_not_kept(nursery: trio.Nursery) -> None:
    """Gateway choice: with no principal the gateway cannot tell two people apart."""
    pool = FakePool()
    backend = pool.add(
        modern_backend({"ttlMs": 60000, "cacheScope": "private"}),
        resources=({"uri": "mem://a", "name": "a"},),
    )
    router = await cached_router(pool, nursery)
    await read(router, "m+mem://a")
    await read(router, "m+mem://a")
    assert reads_sent(backend) == 2


async def test_a_legacy_host_and_a_modern_host_each_get_their_own_shape(
    nursery: trio.Nursery,
) -> None:
    """Spec: a handshake-era host never sees hints, from the cache either; a modern one does."""
    pool = FakePool()
    backend = pool.add(
        modern_backend({"ttlMs": 60000, "cacheScope": "public"}),
        resources=({"uri": "mem://a", "name": "a"},),
    )
    router = await cached_router(pool, nursery)
    for _ in range(2):
        legacy = await ask(router, FakeClient("c"), "resources/read", uri="m+mem://a")
        assert not {"resultType", "ttlMs", "cacheScope"} & set(legacy["result"])
        result = await read(router, "m+mem://a")
        assert result["cacheScope"] == "public" and result["ttlMs"] > 0
    assert reads_sent(backend) == 2  # one per shape


async def test_resources_updated_drops_that_uri(nursery: trio.Nursery) -> None:
    """Gateway choice: the backend said the resource changed; the next read asks it."""
    pool = FakePool()
    backend = pool.add(
        legacy_backend(ttl=600),
        resources=({"uri": "mem://a", "name": "a"}, {"uri": "mem://b", "name": "b"}),
    )
    router = await cached_router(pool, nursery)
    for uri in ("old+mem://a", "old+mem://b"):
        await ask(router, FakeClient("c"), "resources/read", uri=uri)
    notify(pool, backend, "notifications/resources/updated", {"uri": "mem://a"})
    for uri in ("old+mem://a", "old+mem://b"):
        await ask(router, FakeClient("c"), "resources/read", uri=uri)
    assert [s.params["uri"] for s in backend.sent] == ["mem://a", "mem://b", "mem://a"]


async def test_resources_list_changed_drops_every_read_of_the_backend(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice: a changed list may mean changed contents."""
    pool = FakePool()
    backend = pool.add(legacy_backend(ttl=600), resources=({"uri": "mem://a", "name": "a"},))
    router = await cached_router(pool, nursery)
    await ask(router, FakeClient("c"), "resources/read", uri="old+mem://a")
    notify(pool, backend, "notifications/resources/list_changed", {})
    await ask(router, FakeClient("c"), "resources/read", uri="old+mem://a")
    assert reads_sent(backend) == 2


async def test_a_backend_restart_drops_its_entries(nursery: trio.Nursery) -> None:
    """Gateway choice: a new backend session owes nothing to what the old one said."""
    pool = FakePool()
    backend = pool.add(legacy_backend(ttl=600), resources=({"uri": "mem://a", "name": "a"},))
    router = await cached_router(pool, nursery)
    await ask(router, FakeClient("c"), "resources/read", uri="old+mem://a")
    pool.set_state(backend, BackendState.DOWN)
    pool.set_state(backend, BackendState.UP)
    pool.add(backend, resources=({"uri": "mem://a", "name": "a"},))
    await ask(router, FakeClient("c"), "resources/read", uri="old+mem://a")
    assert reads_sent(backend) == 2


def tool_backend(annotations: dict[str, Any] | None) -> tuple[FakeBackend, dict[str, Any]]:
    """A backend with one tool ``t`` (annotated as given) that counts its calls."""
    backend = FakeBackend("old", capabilities={"tools": {}})
    calls = 0

    async def answer(params: dict[str, Any], client: str | None) -> msgspec.Raw:
        nonlocal calls
        calls += 1
        failing = params.get("arguments", {}).get("fail", False)
        text = {"type": "text", "text": f"call {calls}"}
        return mcp.encode({"content": [text], "isError": failing})

    backend.answers["tools/call"] = answer
    tool: dict[str, Any] = {"name": "t", "inputSchema": {"type": "object"}}
    if annotations is not None:
        tool["annotations"] = annotations
    return backend, tool


async def test_an_opted_in_read_only_tool_call_is_served_from_the_cache(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Gateway choice: profiles[].cache keeps a readOnlyHint tool's calls for its ttl."""
    pool = FakePool()
    backend, tool = tool_backend({"readOnlyHint": True})
    pool.add(backend, tools=(tool,))
    profile = ProfileConfig(name="default", cache=ToolCache(tools=["old__*"], ttl=10))
    router = await cached_router(pool, nursery, profiles=(profile,))
    client = FakeClient("c")
    first = await ask(router, client, "tools/call", name="old__t", arguments={"x": 1})
    second = await ask(router, client, "tools/call", name="old__t", arguments={"x": 1})
    other = await ask(router, client, "tools/call", name="old__t", arguments={"x": 2})
    assert first["result"] == second["result"]
    assert other["result"]["content"][0]["text"] == "call 2"
    await trio.sleep(10)
    later = await ask(router, client, "tools/call", name="old__t", arguments={"x": 1})
    assert later["result"]["content"][0]["text"] == "call 3"


async def test_a_tool_without_read_only_hint_is_not_cached_unless_the_operator_allows(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice: a call with effects is never skipped on a glob alone."""
    for allow, expected in ((False, 2), (True, 1)):
        pool = FakePool()
        backend, tool = tool_backend({"readOnlyHint": False} if not allow else None)
        pool.add(backend, tools=(tool,))
        rule = ToolCache(tools=["old__t"], allow_unannotated=allow)
        router = await cached_router(
            pool, nursery, profiles=(ProfileConfig(name="default", cache=rule),)
        )
        for _ in range(2):
            await ask(router, FakeClient("c"), "tools/call", name="old__t")
        assert backend.methods().count("tools/call") == expected


async def test_a_tool_outside_the_globs_or_another_profile_is_not_cached(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice: the opt-in is per profile and per public name."""
    pool = FakePool()
    backend, tool = tool_backend({"readOnlyHint": True})
    pool.add(backend, tools=(tool,))
    rule = ToolCache(tools=["other__*"])
    router = await cached_router(
        pool, nursery, profiles=(ProfileConfig(name="default", cache=rule),)
    )
    for _ in range(2):
        await ask(router, FakeClient("c"), "tools/call", name="old__t")
    assert backend.methods().count("tools/call") == 2


async def test_a_failed_tool_call_is_not_kept(nursery: trio.Nursery) -> None:
    """Gateway choice: isError answers are asked again (the failure may pass)."""
    pool = FakePool()
    backend, tool = tool_backend({"readOnlyHint": True})
    pool.add(backend, tools=(tool,))
    profile = ProfileConfig(name="default", cache=ToolCache(tools=["*"]))
    router = await cached_router(pool, nursery, profiles=(profile,))
    for _ in range(2):
        await ask(router, FakeClient("c"), "tools/call", name="old__t", arguments={"fail": True})
    assert backend.methods().count("tools/call") == 2


async def test_tools_list_changed_drops_the_backends_tool_answers(nursery: trio.Nursery) -> None:
    """Gateway choice: a changed tool list may mean changed tools."""
    pool = FakePool()
    backend, tool = tool_backend({"readOnlyHint": True})
    pool.add(backend, tools=(tool,))
    profile = ProfileConfig(name="default", cache=ToolCache(tools=["*"]))
    router = await cached_router(pool, nursery, profiles=(profile,))
    await ask(router, FakeClient("c"), "tools/call", name="old__t")
    notify(pool, backend, "notifications/tools/list_changed", {})
    await ask(router, FakeClient("c"), "tools/call", name="old__t")
    assert backend.methods().count("tools/call") == 2


async def test_an_mrtr_retry_is_neither_served_nor_kept(nursery: trio.Nursery) -> None:
    """Spec (caching.mdx §Cache Key): results of a retry must not be cached."""
    pool = FakePool()
    backend = pool.add(legacy_backend(ttl=600), resources=({"uri": "mem://a", "name": "a"},))
    router = await cached_router(pool, nursery)
    await ask(router, FakeClient("c"), "resources/read", uri="old+mem://a")
    retry = {"uri": "old+mem://a", "inputResponses": {}}
    await ask(router, FakeClient("c"), "resources/read", **retry)
    assert reads_sent(backend) == 2


async def test_a_cache_too_small_for_an_answer_forwards_it_unchanged(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice: an answer over an eighth of the bound is never kept."""
    pool = FakePool()
    backend = pool.add(legacy_backend(ttl=600), resources=({"uri": "mem://a", "name": "a"},))
    router = await cached_router(pool, nursery, config=CacheConfig(max_bytes=64))
    for _ in range(2):
        answer = await ask(router, FakeClient("c"), "resources/read", uri="old+mem://a")
        assert answer["result"]["contents"][0]["text"] == "hello"
    assert reads_sent(backend) == 2


async def test_a_shared_answer_never_reaches_a_caller_the_policy_hides_the_item_from(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice: the item is resolved in the caller's view before the cache is asked."""
    pool = make_policy_pool()
    files = modern(pool.backends["files"])
    files.answers["resources/read"] = reads({"ttlMs": 60000, "cacheScope": "public"})
    router = await policy_router(pool, nursery)
    router.set_cache(cache_for(CacheConfig(), [], []))
    uri = "files+mem://notes.txt"
    for _ in range(2):
        allowed = await ask(router, policy_client(CI, "ci"), "resources/read", uri=uri)
        assert allowed["result"]["contents"][0]["text"] == "hello"
    hidden = await ask(router, policy_client(DEV, "dev"), "resources/read", uri=uri)
    assert hidden["error"]["code"] == NOT_FOUND
    assert reads_sent(files) == 1


async def test_scope_auto_keeps_a_per_principal_backends_reads_per_principal(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice: a backend whose sessions are per principal may answer per principal."""
    pool = FakePool()
    backend = pool.add(legacy_backend(), resources=({"uri": "mem://a", "name": "a"},))
    backend.config = StdioBackend(
        name="old", command="fake", prefix="old", session="per_principal", cache=BackendCache()
    )
    router = await cached_router(pool, nursery)
    for principal in (ALICE, BOB, ALICE, BOB):
        await ask(router, FakeClient("c", principal=principal), "resources/read", uri="old+mem://a")
    assert reads_sent(backend) == 2


def _personal_config(kind: str, name: str = "old", **cache: Any) -> HttpBackend:
    """An HTTP backend ``name`` that is sent each caller's own credential (``kind``)."""
    token_url = "http://127.0.0.1:9/token" if kind == "token_exchange" else ""
    auth = BackendAuth(type=kind, client_id="gateway", token_url=token_url)  # type: ignore[arg-type]
    return HttpBackend(
        name=name,
        url="http://127.0.0.1:9/mcp",
        prefix=name,
        auth=auth,
        cache=BackendCache(**cache),
    )


@pytest.mark.parametrize("kind", ["user_consent", "token_exchange"])
async def test_a_backend_answering_as_each_person_never_shares_a_read_even_when_told_public(
    nursery: trio.Nursery, kind: str
) -> None:
    """Gateway choice (rule 5): an answer made with alice's token is alice's, whatever
    the opt-in says; bob's read reaches the backend with his own."""
    pool = FakePool()
    backend = pool.add(legacy_backend(), resources=({"uri": "mem://a", "name": "a"},))
    backend.config = _personal_config(kind, ttl=30, scope="public")
    router = await cached_router(pool, nursery)
    for principal in (ALICE, BOB, ALICE, BOB):
        await ask(router, FakeClient("c", principal=principal), "resources/read", uri="old+mem://a")
    assert reads_sent(backend) == 2


@pytest.mark.parametrize(
    ("result", "kept"),
    [
        (b'{"content":[],"isError":true}', False),
        (b'{"content":[],"resultType":"input_required"}', False),
        (b'{"content":[{"type":"text","text":"1e400"}],"isError":false}', True),
        (b'{"content":[],"structuredContent":{"n":1e400},"isError":true}', False),
        (b'{"content":[],"structuredContent":{"n":1e400}}', True),
        (b"[]", False),
    ],
)
async def test_a_tool_answer_is_kept_only_when_complete_and_not_an_error(
    nursery: trio.Nursery, result: bytes, kept: bool
) -> None:
    """Gateway choice (rules 3-4): judged on isError and resultType alone, also in an
    answer with a number only the lenient reader takes (``mcp.decode_object``)."""
    pool = FakePool()
    backend, tool = tool_backend({"readOnlyHint": True})

    async def answer(params: dict[str, Any], client: str | None) -> msgspec.Raw:
        return msgspec.Raw(result)

    backend.answers["tools/call"] = answer
    pool.add(backend, tools=(tool,))
    profile = ProfileConfig(name="default", cache=ToolCache(tools=["*"]))
    router = await cached_router(pool, nursery, profiles=(profile,))
    request = jsonrpc.Request(id=1, method="tools/call", params=jsonrpc.to_raw({"name": "old__t"}))
    for _ in range(2):  # not ``ask``: its strict decoding refuses 1e400
        assert result in await router.handle_request(FakeClient("c"), request)
    assert backend.methods().count("tools/call") == (1 if kept else 2)


async def test_a_personal_backends_public_hint_is_kept_per_principal(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice (rule 5): a 2026-07-28 backend saying ``public`` of an answer it
    made with one person's token is still kept for that person only."""
    pool = FakePool()
    backend = pool.add(
        modern_backend({"ttlMs": 60000, "cacheScope": "public"}),
        resources=({"uri": "mem://a", "name": "a"},),
    )
    backend.config = _personal_config("user_consent", name=backend.name)
    router = await cached_router(pool, nursery)
    uri = f"{backend.name}+mem://a"
    for principal in (ALICE, BOB, ALICE, BOB):
        await ask(router, FakeClient("c", principal=principal), "resources/read", uri=uri)
    assert reads_sent(backend) == 2
