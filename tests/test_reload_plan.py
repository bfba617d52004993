"""A reload's plan, computed without running anything (``runtime.reload.plan_config``)."""

from __future__ import annotations

from gateway.config import parse
from gateway.frontend.origin import OriginPolicy
from gateway.runtime.reload import plan_config, restart_only_changes

BASE = """
server: {allowed_origins: ["https://a.example"]}
mrtr: {state_secret: first, max_held_calls: 8}
pagination: {page_size: 50}
"""


def test_an_unchanged_config_plans_nothing_but_the_backends_diff() -> None:
    """gateway choice: a reload of the same file changes no part (the pool still diffs)."""
    plan = plan_config(parse(BASE, env={}), parse(BASE, env={}))
    assert plan.changed == ()
    assert (plan.auth, plan.origin, plan.mrtr, plan.pagination, plan.policy) == (None,) * 5


def test_each_changed_section_becomes_the_piece_its_part_applies() -> None:
    """gateway choice: origins for the guards, mrtr (rotated) for the held calls, page size."""
    new = parse(
        BASE.replace("a.example", "b.example")
        .replace("first", "second")
        .replace("page_size: 50", "page_size: 10"),
        env={},
    )
    plan = plan_config(parse(BASE, env={}), new)
    assert plan.changed == ("server.allowed_origins/allowed_hosts", "pagination", "mrtr")
    assert isinstance(plan.origin, OriginPolicy)
    assert plan.mrtr == new.mrtr and plan.rotate_state_secret
    assert plan.pagination == new.pagination and not plan.rotate_cursor_secret


def test_a_profiles_cache_opt_in_is_applied_by_a_reload_not_held_for_a_restart() -> None:
    """gateway choice (docs/caching.md): the cache starts afresh under the file's opt-ins."""
    before = parse(BASE + "profiles: [{name: p}]\n", env={})
    after = parse(BASE + "cache: {}\nprofiles: [{name: p, cache: {tools: ['*']}}]\n", env={})
    assert restart_only_changes(before, after) == []
    assert plan_config(before, after).changed == ("cache",)
    renamed = parse(BASE + "profiles: [{name: q}]\n", env={})
    assert restart_only_changes(before, renamed) == ["profiles"]


def test_filters_anywhere_are_applied_by_a_reload_not_held_for_a_restart() -> None:
    """gateway choice (docs/security.md): a change to any filters list rebuilds the chains."""
    before = parse(BASE + "profiles: [{name: p}]\n", env={})
    for added in (
        "filters: [{type: secrets}]\nprofiles: [{name: p}]\n",
        "profiles: [{name: p, filters: [{type: size, max_bytes: 10}]}]\n",
    ):
        after = parse(BASE + added, env={})
        assert restart_only_changes(before, after) == []
        plan = plan_config(before, after)
        assert plan.changed == ("filters",) and plan.filters
        assert plan_config(after, before).filters  # and removed again
    assert not plan_config(before, before).filters
