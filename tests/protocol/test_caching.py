"""Specification tests for ``gateway.protocol.stateless.cache_hints`` (sans-IO).

2026-07-28 ``server/utilities/caching.mdx``: ``ttlMs`` and ``cacheScope`` on
complete results of discover, the lists and resources/read; ``resultType``
on every result (``basic/index.mdx``).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.protocol.stateless.cache_hints import (
    CACHEABLE_METHODS,
    NO_CACHE,
    CacheHint,
    backend_hint,
    combined_hint,
    finish_result,
    hint_of,
    merge_hints,
    result_type,
)


@pytest.mark.parametrize(
    ("result", "hint"),
    [
        ({"ttlMs": 5000, "cacheScope": "public"}, CacheHint(ttl_ms=5000, scope="public")),
        ({"ttlMs": 5000}, CacheHint(ttl_ms=5000, scope="private")),
        ({"ttlMs": -3, "cacheScope": "public"}, CacheHint(ttl_ms=0, scope="public")),
        ({"ttlMs": 12.9, "cacheScope": "shared"}, CacheHint(ttl_ms=12, scope="private")),
        ({"ttlMs": True}, NO_CACHE),
        ({"ttlMs": "60"}, NO_CACHE),
        ({"ttlMs": float("inf")}, NO_CACHE),
        ({}, NO_CACHE),
    ],
)
def test_backend_hints_are_read_leniently(result: dict[str, Any], hint: CacheHint) -> None:
    """Spec: absent or negative ttl is 0; gateway choice: missing scope is private."""
    assert hint_of(result) == hint


def test_merging_takes_the_shortest_ttl_and_private_if_any_is() -> None:
    """Gateway rule (issue 14): the shortest ttl, private when any input is private."""
    a = CacheHint(ttl_ms=60000, scope="public")
    b = CacheHint(ttl_ms=1000, scope="public")
    c = CacheHint(ttl_ms=90000, scope="private")
    assert merge_hints([a, b]) == CacheHint(ttl_ms=1000, scope="public")
    assert merge_hints([a, c]) == CacheHint(ttl_ms=60000, scope="private")
    assert merge_hints([]) == NO_CACHE


hints = st.builds(
    CacheHint, ttl_ms=st.integers(0, 10**9), scope=st.sampled_from(["public", "private"])
)


@given(st.lists(hints, min_size=1))
def test_a_merged_hint_never_promises_more_than_any_input(items: list[CacheHint]) -> None:
    """Property: merged ttl ≤ every input's; public only if every input is."""
    merged = merge_hints(items)
    assert all(merged.ttl_ms <= h.ttl_ms for h in items)
    assert (merged.scope == "public") == all(h.scope == "public" for h in items)


def test_a_handshake_era_backend_contributes_no_cache_whatever_its_result_holds() -> None:
    """Gateway rule (issue 14): a legacy backend promised nothing; a modern one its own."""
    stray = {"contents": [], "ttlMs": 60000, "cacheScope": "public"}
    assert backend_hint(False, stray) == NO_CACHE
    assert backend_hint(False, None) == NO_CACHE
    assert backend_hint(True, None) == NO_CACHE
    assert backend_hint(True, stray) == CacheHint(ttl_ms=60000, scope="public")
    assert backend_hint(True, {"contents": []}) == NO_CACHE


def test_a_combined_hint_is_private_when_the_view_depends_on_the_principal() -> None:
    """Gateway rule (issue 14): under a policy a shared cache must not serve another user."""
    public = [CacheHint(ttl_ms=30000, scope="public"), CacheHint(ttl_ms=5000, scope="public")]
    assert combined_hint(public, per_principal=False) == CacheHint(ttl_ms=5000, scope="public")
    assert combined_hint(public, per_principal=True) == CacheHint(ttl_ms=5000, scope="private")
    with_legacy = [*public, backend_hint(False, None)]
    assert combined_hint(with_legacy, per_principal=False) == NO_CACHE
    assert combined_hint([], per_principal=False) == NO_CACHE
    assert combined_hint([], per_principal=True) == NO_CACHE


@given(st.lists(hints), st.booleans())
def test_a_combined_hint_never_promises_more_than_the_merge(
    items: list[CacheHint], per_principal: bool
) -> None:
    """Property: same ttl as the merge; public only without a policy and all inputs public."""
    combined = combined_hint(items, per_principal=per_principal)
    merged = merge_hints(items)
    assert combined.ttl_ms == merged.ttl_ms
    assert (combined.scope == "public") == (not per_principal and merged.scope == "public")


def test_complete_cacheable_results_get_hints_and_keep_unknown_fields() -> None:
    """Spec: hints on complete cacheable results; dict in, dict out."""
    original = {"tools": [], "x-vendor": {"k": 1}, "ttlMs": 99, "cacheScope": "public"}
    out = finish_result("tools/list", original, CacheHint(ttl_ms=5, scope="private"))
    assert out == {
        "tools": [],
        "x-vendor": {"k": 1},
        "resultType": "complete",
        "ttlMs": 5,
        "cacheScope": "private",
    }
    assert original["ttlMs"] == 99  # not mutated
    assert finish_result("resources/read", {"contents": [], "ttlMs": 7})["ttlMs"] == 7


def test_other_methods_get_result_type_only() -> None:
    """Spec: resultType on every result; hints only where caching.mdx lists them."""
    assert finish_result("tools/call", {"content": []}) == {"content": [], "resultType": "complete"}
    assert "ttlMs" not in finish_result("completion/complete", {}, CacheHint(ttl_ms=5))
    assert len(CACHEABLE_METHODS) == 6


def test_input_required_results_carry_no_hints() -> None:
    """Spec: interim input_required results are not cacheable and carry no hints."""
    out = finish_result(
        "resources/read", {"resultType": "input_required", "requestState": "s", "ttlMs": 5}
    )
    assert out == {"resultType": "input_required", "requestState": "s"}


@pytest.mark.parametrize("retry", [{"inputResponses": {}}, {"requestState": "s"}])
def test_results_of_mrtr_retries_are_marked_uncacheable(retry: dict[str, Any]) -> None:
    """Spec: retry results MUST NOT be cached; gateway choice: ttl 0, private."""
    out = finish_result(
        "resources/read", {"contents": []}, CacheHint(ttl_ms=5000, scope="public"), retry
    )
    assert (out["ttlMs"], out["cacheScope"]) == (0, "private")


def test_absent_result_type_means_complete() -> None:
    """Spec: an absent resultType from an older server is ``complete``."""
    assert result_type({}) == "complete"
    assert result_type({"resultType": "task"}) == "task"
    assert result_type({"resultType": 3}) == "complete"
