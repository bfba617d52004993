"""The response cache (gateway/cache/responses.py): scope, freshness, invalidation, bounds."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.cache.responses import VERBATIM_KEY_MAX, ResponseCache, request_key

READ = {"uri": "file:///a"}


def test_a_public_answer_is_served_to_everyone_while_fresh() -> None:
    """Rules 2-3."""
    cache = ResponseCache(1 << 20)
    assert cache.store(
        "b", "resources/read", READ, principal="alice", ttl=10, scope="public", value=b"x", now=0
    )
    assert cache.lookup("b", "resources/read", READ, "bob", now=9.999) == b"x"
    assert cache.lookup("b", "resources/read", READ, "", now=9.999) == b"x"
    assert cache.lookup("b", "resources/read", READ, "bob", now=10.0) is None


def test_a_private_answer_is_served_to_its_principal_only() -> None:
    """Rule 2: 0 cross-principal private hits."""
    cache = ResponseCache(1 << 20)
    cache.store(
        "b", "resources/read", READ, principal="alice", ttl=10, scope="private", value=b"a", now=0
    )
    assert cache.lookup("b", "resources/read", READ, "alice", now=1) == b"a"
    assert cache.lookup("b", "resources/read", READ, "bob", now=1) is None
    assert cache.lookup("b", "resources/read", READ, "", now=1) is None


def test_without_a_principal_a_private_answer_is_not_kept() -> None:
    """Rule 2: no auth, no way to tell people apart."""
    cache = ResponseCache(1 << 20)
    assert not cache.store(
        "b", "resources/read", READ, principal="", ttl=10, scope="private", value=b"a", now=0
    )


def test_key_order_and_meta_do_not_split_an_entry() -> None:
    """Rule 1: canonical params, _meta and MRTR fields left out."""
    a = {"name": "t", "arguments": {"x": 1, "y": [1, 2]}}
    b = {"arguments": {"y": [1, 2], "x": 1}, "name": "t", "_meta": {"progressToken": 7}}
    assert request_key("tools/call", a) == request_key("tools/call", b)
    assert request_key("tools/call", a) != request_key("tools/call", {**a, "arguments": {"x": 2}})


def test_a_short_request_is_its_own_key_and_a_long_one_is_hashed_yet_told_apart() -> None:
    """Rule 1: keys up to VERBATIM_KEY_MAX bytes compared whole; longer ones by SHA-256."""
    short = request_key("tools/call", {"name": "t"}, "2025-11-25")
    assert short == b'["tools/call","2025-11-25",{"name":"t"}]'
    long_a = request_key("tools/call", {"name": "t", "arguments": {"x": "a" * VERBATIM_KEY_MAX}})
    long_b = request_key("tools/call", {"name": "t", "arguments": {"x": "b" * VERBATIM_KEY_MAX}})
    assert len(long_a) == len(long_b) == 33 and long_a != long_b
    assert long_a.startswith(b"#") and short.startswith(b"[")
    assert short != request_key("tools/call", {"name": "t"}, "2025-06-18")


def test_invalidation_by_uri_kind_and_backend() -> None:
    """Rule 4."""
    cache = ResponseCache(1 << 20)
    for uri in ("file:///a", "file:///b"):
        cache.store(
            "b",
            "resources/read",
            {"uri": uri},
            principal="",
            ttl=60,
            scope="public",
            value=b"v",
            now=0,
            uri=uri,
        )
    cache.store(
        "b", "tools/call", {"name": "t"}, principal="", ttl=60, scope="public", value=b"t", now=0
    )
    cache.store(
        "c", "tools/call", {"name": "t"}, principal="", ttl=60, scope="public", value=b"t", now=0
    )
    assert cache.invalidate_uri("b", "file:///a") == 1
    assert cache.lookup("b", "resources/read", {"uri": "file:///b"}, "", now=1) == b"v"
    assert cache.invalidate_methods("b", frozenset({"tools/call"})) == 1
    assert cache.invalidate_backend("b") == 1
    assert cache.lookup("c", "tools/call", {"name": "t"}, "", now=1) == b"t"


def test_the_bound_evicts_the_least_recently_used_and_refuses_giants() -> None:
    """Rules 5-6."""
    cache = ResponseCache(800)
    for i in range(10):
        cache.store(
            "b",
            "tools/call",
            {"i": i},
            principal="",
            ttl=60,
            scope="public",
            value=b"x" * 100,
            now=0,
        )
    assert cache.total.bytes <= 800
    assert cache.total.evictions == 2
    assert cache.lookup("b", "tools/call", {"i": 0}, "", now=1) is None
    assert cache.lookup("b", "tools/call", {"i": 9}, "", now=1) == b"x" * 100
    assert not cache.store(
        "b", "tools/call", {"big": 1}, principal="", ttl=60, scope="public", value=b"y" * 101, now=0
    )
    assert cache.stats("b").hit_ratio == 0.5


operations = st.lists(
    st.tuples(
        st.sampled_from(["store", "lookup", "invalidate", "invalidate_uri"]),
        st.sampled_from(["", "alice", "bob"]),
        st.sampled_from(["public", "private"]),
        st.integers(0, 3),  # which request
        st.floats(0, 5),  # time advance
        st.integers(0, 4),  # ttl
    ),
    max_size=60,
)


@settings(max_examples=300)
@given(operations)
def test_no_stale_answer_and_no_other_principals_private_answer(ops: list[Any]) -> None:
    """Issue 31's property: 0 stale answers past ttl, 0 cross-principal private hits,
    checked against a model of what each caller may be served."""
    cache = ResponseCache(1 << 20)
    now = 0.0
    # model: request -> list of (value, deadline, owner or "" for public)
    model: dict[int, list[tuple[bytes, float, str]]] = {}
    for op, principal, scope, request, advance, ttl in ops:
        now += advance
        params = {"q": request}
        if op == "store":
            value = f"{request}-{principal}-{scope}-{now}".encode()
            stored = cache.store(
                "b",
                "m",
                params,
                principal=principal,
                ttl=ttl,
                scope=scope,
                value=value,
                now=now,
                uri=f"u{request}",
            )
            if stored:
                owner = principal if scope == "private" else ""
                model[request] = [e for e in model.get(request, []) if e[2] != owner]
                model[request].append((value, now + ttl, owner))
        elif op == "lookup":
            got = cache.lookup("b", "m", params, principal, now)
            if got is not None:
                allowed = {
                    v
                    for v, deadline, owner in model.get(request, [])
                    if now < deadline and owner in ("", principal)
                }
                assert got in allowed
        elif op == "invalidate_uri":
            cache.invalidate_uri("b", f"u{request}")
            model.pop(request, None)
        else:
            cache.invalidate_backend("b")
            model.clear()
    # The index agrees with the entries: invalidating everything leaves nothing.
    cache.invalidate_methods("b", frozenset({"m"}))
    assert cache.total.entries == 0 and cache.total.bytes == 0
