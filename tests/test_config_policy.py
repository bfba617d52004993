"""The ``policy:`` section: what ``check`` accepts and refuses, with the place (issue 16)."""

from __future__ import annotations

import json
from textwrap import dedent

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.config import parse
from gateway.errors import ConfigError

BASE = """
auth:
  tokens: {ci: token-of-ci-0123456789}
backends:
  - {name: files, transport: stdio, command: x}
profiles:
  - name: coding
"""


def problems_of(text: str) -> list[str]:
    """The problems ``parse`` reports for ``text`` (it must fail)."""
    with pytest.raises(ConfigError) as info:
        parse(BASE + dedent(text), env={})
    return info.value.problems


def test_no_policy_key_is_none_and_an_empty_policy_is_an_empty_list() -> None:
    """Gateway choice (issue 16 item 3).

    No key: today's behaviour; ``policy: []``: default deny (docs/security.md).
    """
    assert parse(BASE, env={}).policy is None
    assert parse(BASE + "policy: []\n", env={}).policy == []
    assert parse(BASE, env={}).policy_audit == "denials"


def test_a_full_rule_parses_with_its_defaults() -> None:
    """Gateway choice (issue 16 item 3).

    Every key of a rule; ``allow`` defaults to everything, ``deny`` to nothing.
    """
    config = parse(
        BASE
        + dedent(
            """
            policy_audit: calls
            policy:
              - name: platform
                claims: {groups: [platform, sre]}
                scopes: [mcp:tools]
                subjects: ["svc-*"]
                profiles: [coding, "team-*"]
                tools: {deny: ["*delete*"]}
              - tokens: [ci]
                profiles: [default]
              - anonymous: true
                profiles: [default]
              - everyone: true
                resources: {deny: ["files+secret://*"]}
            """
        ),
        env={},
    )
    assert config.policy is not None
    first = config.policy[0]
    assert first.claims == {"groups": ["platform", "sre"]}
    assert first.tools.allow == ["*"]
    assert first.tools.deny == ["*delete*"]
    assert first.prompts.allow == ["*"]
    assert config.policy_audit == "calls"


@pytest.mark.parametrize(
    ("rule", "place", "says"),
    [
        ("{profiles: [default]}", "policy[0]", "everyone: true"),
        ("{profiles: [nope]}", "policy[0]", "needs a matcher"),
        ("{tokens: [ci], profiles: [nope]}", "policy[0].profiles[0]", "no profile is named 'nope'"),
        ("{tokens: [cd], profiles: [default]}", "policy[0].tokens[0]", "auth.tokens has no 'cd'"),
        ("{tokens: [ci], profiles: ['[z-a]']}", "policy[0].profiles[0]", "not a valid glob"),
        ("{tokens: [ci], tools: {allow: ['']}}", "policy[0].tools.allow[0]", "empty glob"),
        ("{tokens: [ci], tools: {deny: ['[z-a]*']}}", "policy[0].tools.deny[0]", "valid glob"),
        ("{subjects: ['[b-a]']}", "policy[0].subjects[0]", "not a valid glob"),
        ("{everyone: true, tokens: [ci]}", "policy[0].everyone", "drop the matchers"),
        ("{anonymous: true, scopes: [x]}", "policy[0].anonymous", "has no token"),
        ("{claims: {groups: []}}", "policy[0].claims.groups", "at least one value"),
        ("{tokens: [ci], colour: red}", "policy[0]", "colour"),
    ],
)
def test_check_refuses_a_bad_rule_and_says_where(rule: str, place: str, says: str) -> None:
    """Gateway choice (issue 16 item 3).

    ``trio-mcp-gateway check``: each problem at its place, with what is wrong.
    """
    problems = problems_of(f"policy:\n  - {rule}\n")
    assert any(p.startswith(place) and says in p for p in problems), problems


def test_a_glob_profile_need_not_name_a_profile() -> None:
    """Gateway choice (issue 16 item 3).

    ``team-*`` may match profiles added later; only a literal must exist.
    """
    config = parse(BASE + "policy:\n  - {tokens: [ci], profiles: ['team-*', default]}\n", env={})
    assert config.policy is not None


def test_policy_audit_takes_only_its_two_values() -> None:
    """Gateway choice (issue 16 item 3).

    ``denials`` or ``calls``: a typo is an error, not silence.
    """
    assert any("policy_audit" in p for p in problems_of("policy_audit: everything\n"))


_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_KEYS = st.sampled_from(
    [
        "name",
        "everyone",
        "anonymous",
        "tokens",
        "subjects",
        "scopes",
        "claims",
        "profiles",
        "tools",
        "prompts",
        "resources",
        "other",
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(_KEYS, _VALUES, max_size=5), max_size=3))
def test_any_policy_shape_is_accepted_or_refused_with_problems_never_a_crash(
    rules: list[dict[str, object]],
) -> None:
    """Gateway choice (issue 16 item 3).

    Whatever a file holds under ``policy:``: a config, or ConfigError with places.

    Found a crash this way: a YAML ``"\\ud800"`` escape (a lone surrogate)
    where a bool is read raised UnicodeEncodeError out of msgspec.
    """
    text = BASE + "policy: " + json.dumps(rules) + "\n"
    problems: list[str] = []
    try:
        config = parse(text, env={})
    except ConfigError as exc:
        problems = exc.problems
    if problems:
        assert all(p.startswith("policy") for p in problems), problems
        return
    assert config.policy is not None
    assert len(config.policy) == len(rules)


def test_a_lone_surrogate_where_a_bool_is_read_is_a_problem_not_a_crash() -> None:
    """Gateway choice (issue 16 item 3).

    The case Hypothesis found, kept as an example (also outside ``policy:``).
    """
    problems = problems_of('policy: [{everyone: "\\ud800"}]\n')
    assert problems == ["policy[0].everyone: expected bool, got str '\\ud800'"]
    with pytest.raises(ConfigError, match=r"logging\.requests: expected bool"):
        parse('logging: {requests: "\\ud800"}\n', env={})
