"""identity.policy, the one decision, without a router: matching, combination, and a model.

The Hypothesis test checks :meth:`Policy.decide` against a second,
deliberately naive reading of docs/security.md ("Access policy") written
with ``fnmatchcase`` directly, over random rule shapes and principals.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any, Final

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.catalog.snapshot import Kind
from gateway.config import PolicyRule
from gateway.identity.policy import EVERYTHING, Policy, decide
from gateway.identity.principal import Principal


def compile_rules(rules: list[dict[str, Any]]) -> Policy:
    """The policy of ``rules`` as the config file would hold them."""
    policy = Policy.from_config(msgspec.convert(rules, list[PolicyRule]))
    assert policy is not None
    return policy


ALICE: Final = Principal(
    "jwt",
    "alice",
    "https://idp",
    frozenset({"mcp:tools", "mcp:read"}),
    {"groups": ["platform", "dev"], "role": "admin", "realm_access": {"roles": ["ops"]}},
)


@pytest.mark.parametrize(
    ("rule", "principal", "matches"),
    [
        ({"tokens": ["ci"]}, Principal("static", "ci"), True),
        ({"tokens": ["ci"]}, Principal("jwt", "ci", "https://idp"), False),
        ({"subjects": ["ali*"]}, ALICE, True),
        ({"subjects": ["ali*"]}, Principal("static", "alice"), False),
        ({"scopes": ["mcp:tools"]}, ALICE, True),
        ({"scopes": ["mcp:tools", "mcp:admin"]}, ALICE, False),
        ({"claims": {"groups": ["platform"]}}, ALICE, True),
        ({"claims": {"groups": ["sre"]}}, ALICE, False),
        ({"claims": {"role": ["admin"]}}, ALICE, True),
        ({"claims": {"realm_access.roles": ["ops"]}}, ALICE, True),
        ({"claims": {"groups": ["dev"], "role": ["viewer"]}}, ALICE, False),
        ({"claims": {"missing": ["x"]}}, ALICE, False),
        ({"subjects": ["alice"], "claims": {"groups": ["sre"]}}, ALICE, False),
        ({"anonymous": True}, None, True),
        ({"anonymous": True}, ALICE, False),
        ({"tokens": ["ci"]}, None, False),
        ({"everyone": True}, None, True),
        ({"everyone": True}, ALICE, True),
    ],
)
def test_what_a_rule_matches(
    rule: dict[str, Any], principal: Principal | None, matches: bool
) -> None:
    """Gateway choice (issue 16 item 3).

    Every matcher named must match; within one, any value (scopes: all).
    """
    policy = compile_rules([{**rule, "profiles": ["default"]}])
    assert policy.decide(principal).opens("default") is matches


def test_grants_are_per_profile_and_deny_wins_across_rules() -> None:
    """Gateway choice (issue 16 item 3).

    A rule's allow counts only on the profiles that same rule grants; any deny wins.
    """
    policy = compile_rules(
        [
            {"claims": {"groups": ["dev"]}, "profiles": ["default"], "tools": {"allow": ["gh__*"]}},
            {"claims": {"groups": ["platform"]}, "profiles": ["ops"]},
            {"everyone": True, "tools": {"deny": ["*delete*"]}},
        ]
    )
    access = policy.decide(ALICE)
    assert access.admits("default", Kind.TOOLS, "gh__create")
    assert not access.admits("default", Kind.TOOLS, "fs__read")  # allowed on ops only
    assert access.admits("ops", Kind.TOOLS, "fs__read")
    assert not access.admits("ops", Kind.TOOLS, "gh__delete_repo")
    assert not access.admits("default", Kind.TOOLS, "gh__delete_repo")
    assert not access.opens("other")
    assert access.admits("default", Kind.PROMPTS, "anything")  # allow defaults to "*"
    # Templates are resources to a policy.
    assert access.on("ops").admits(Kind.TEMPLATES, "fs+file:///{path}")


def test_no_policy_is_everything_and_no_matching_rule_is_nothing() -> None:
    """Gateway choice (issue 16 item 3): Default deny only when a policy exists."""
    assert decide(None, None) is EVERYTHING
    policy = compile_rules([{"tokens": ["ci"], "profiles": ["*"]}])
    assert not policy.decide(ALICE).opens("default")
    assert not policy.decide(ALICE).admits("default", Kind.TOOLS, "x")
    assert not policy.decide(ALICE).on("default").opened


def test_the_same_grants_are_the_same_view_key() -> None:
    """Gateway choice (issue 16 item 3).

    Two principals matched by the same rules share one ProfileAccess (and one tag).
    """
    policy = compile_rules([{"claims": {"groups": ["dev"]}, "profiles": ["default"]}])
    bob = Principal("jwt", "bob", "https://idp", claims={"groups": ["dev"]})
    assert policy.decide(ALICE).on("default") == policy.decide(bob).on("default")
    assert policy.decide(ALICE).on("default").tag == policy.decide(bob).on("default").tag
    assert policy.decide(ALICE).on("default").tag != ""


# -- a model of the documented rule, over random rule shapes ------------------

NAMES: Final = ["a__x", "a__y", "b__x", "b__delete", "c__z"]
GLOBS: Final = st.sampled_from(["*", "a__*", "b__*", "*x", "*delete*", "c__z", "?__y"])
PROFILES: Final = ["default", "ops", "team-a"]
GROUPS: Final = ["dev", "platform", "sre"]


@st.composite
def rules(draw: st.DrawFn) -> dict[str, Any]:
    """One rule: a matcher (or everyone), maybe profiles, maybe tool allow/deny globs."""
    rule: dict[str, Any] = {}
    matcher = draw(st.sampled_from(["everyone", "claims", "subjects", "tokens", "scopes"]))
    if matcher == "everyone":
        rule["everyone"] = True
    elif matcher == "claims":
        rule["claims"] = {"groups": draw(st.lists(st.sampled_from(GROUPS), min_size=1))}
    elif matcher == "subjects":
        rule["subjects"] = draw(st.lists(st.sampled_from(["alice", "b*", "*"]), min_size=1))
    elif matcher == "tokens":
        rule["tokens"] = ["ci"]
    else:
        rule["scopes"] = draw(st.lists(st.sampled_from(["s1", "s2"]), min_size=1))
    profiles = draw(st.lists(st.sampled_from([*PROFILES, "*", "team-*"]), max_size=2))
    if profiles:
        rule["profiles"] = profiles
    tools: dict[str, list[str]] = {}
    if draw(st.booleans()):
        tools["allow"] = draw(st.lists(GLOBS, max_size=2))
    if draw(st.booleans()):
        tools["deny"] = draw(st.lists(GLOBS, max_size=2))
    if tools:
        rule["tools"] = tools
    return rule


PRINCIPALS: Final = st.one_of(
    st.none(),
    st.just(Principal("static", "ci")),
    st.builds(
        lambda sub, groups, scopes: Principal(
            "jwt", sub, "https://idp", frozenset(scopes), {"groups": groups}
        ),
        st.sampled_from(["alice", "bob", "carol"]),
        st.lists(st.sampled_from(GROUPS), max_size=3),
        st.lists(st.sampled_from(["s1", "s2"]), max_size=2),
    ),
)


def model_matches(rule: dict[str, Any], who: Principal | None) -> bool:
    """docs/security.md, read literally."""
    if rule.get("everyone"):
        return True
    if who is None:
        return False
    if "tokens" in rule and not (who.kind == "static" and who.subject in rule["tokens"]):
        return False
    if "subjects" in rule and not (
        who.kind == "jwt" and any(fnmatchcase(who.subject, g) for g in rule["subjects"])
    ):
        return False
    if "scopes" in rule and not set(rule["scopes"]) <= who.scopes:
        return False
    if "claims" in rule:
        groups = who.claims.get("groups", [])
        if not set(rule["claims"]["groups"]) & set(groups):
            return False
    return True


def model_admits(
    rules: list[dict[str, Any]], who: Principal | None, profile: str, name: str
) -> bool:
    """Some matching rule grants the profile and allows the tool; no matching rule denies it."""
    matching = [r for r in rules if model_matches(r, who)]
    denied = any(fnmatchcase(name, g) for r in matching for g in r.get("tools", {}).get("deny", []))
    allowed = any(
        any(fnmatchcase(profile, p) for p in r.get("profiles", []))
        and any(fnmatchcase(name, g) for g in r.get("tools", {}).get("allow", ["*"]))
        for r in matching
    )
    return allowed and not denied


@settings(max_examples=300, deadline=None)
@given(st.lists(rules(), max_size=4), PRINCIPALS)
def test_the_decision_agrees_with_the_documented_rule(
    shapes: list[dict[str, Any]], who: Principal | None
) -> None:
    """Gateway choice (issue 16 item 3).

    Over random rules and principals: opens and admits are exactly the model's.
    """
    access = compile_rules(shapes).decide(who)
    for profile in PROFILES:
        opened = any(
            model_matches(r, who) and any(fnmatchcase(profile, p) for p in r.get("profiles", []))
            for r in shapes
        )
        assert access.opens(profile) is opened
        for name in NAMES:
            assert access.admits(profile, Kind.TOOLS, name) is model_admits(
                shapes, who, profile, name
            ), (profile, name)


def test_role_admin_is_granted_only_by_a_matching_rule() -> None:
    from gateway.identity.policy import is_admin

    policy = compile_rules(
        [
            {"claims": {"groups": ["platform"]}, "role": "admin"},
            {"tokens": ["ci"], "profiles": ["*"]},
        ]
    )
    assert is_admin(policy, ALICE)
    assert not is_admin(policy, Principal("static", "ci"))
    assert not is_admin(policy, None)
    assert not is_admin(None, ALICE)  # no policy, no roles
    # A rule without the role grants profiles, never the role.
    assert not is_admin(compile_rules([{"claims": {"groups": ["platform"]}}]), ALICE)
