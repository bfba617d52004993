"""identity.consent_standing: may a stored (principal, backend) consent stay, as a table."""

from __future__ import annotations

from typing import Any, Final

import msgspec
import pytest

from gateway.catalog.effective import narrow
from gateway.catalog.naming import NamingRules
from gateway.catalog.snapshot import BackendListing, Kind, Snapshot, build_snapshot
from gateway.config import PolicyRule
from gateway.identity.consent_standing import backend_items, may_use, principal_from_key
from gateway.identity.policy import Policy
from gateway.identity.principal import Principal

#: The backend ``tracker`` on two profiles: its items there (None: not known).
ITEMS: Final = [(Kind.TOOLS, "tracker__search"), (Kind.TOOLS, "tracker__edit")]
DEFAULT_ONLY: Final = {"default": ITEMS}
TWO: Final = {"default": ITEMS, "ops": [(Kind.PROMPTS, "tracker__triage")]}
UNKNOWN: Final = {"default": None}
STATIC: Final = frozenset({"alice", "bob"})


def _policy(rules: list[dict[str, Any]] | None) -> Policy | None:
    return Policy.from_config(None if rules is None else msgspec.convert(rules, list[PolicyRule]))


EVERYONE: Final = [{"everyone": True, "profiles": ["*"]}]
ALICE_ONLY: Final = [{"tokens": ["alice"], "profiles": ["default"]}]
BOB_DENIED_TRACKER: Final = [
    {"everyone": True, "profiles": ["default"]},
    {"tokens": ["bob"], "tools": {"deny": ["tracker__*"]}},
]
BOB_ONE_TOOL: Final = [
    {"everyone": True, "profiles": ["default"], "tools": {"allow": ["tracker__search"]}}
]
BOB_OTHER_TOOLS: Final = [
    {"everyone": True, "profiles": ["default"], "tools": {"allow": ["wiki__*"]}}
]
OPS_FOR_BOB: Final = [
    {"tokens": ["alice"], "profiles": ["default"]},
    {"tokens": ["bob"], "profiles": ["ops"]},
]
SUBJECTS: Final = [{"subjects": ["ali*"], "profiles": ["default"]}]
SCOPED: Final = [
    {"subjects": ["bob"], "scopes": ["tracker"], "profiles": ["default"]},
    {"claims": {"groups": ["x"]}, "tools": {"deny": ["tracker__*"]}},
]


@pytest.mark.parametrize(
    ("key", "profiles", "rules", "static", "expected"),
    [
        # No policy: every configured principal keeps its consents.
        ("token:bob", DEFAULT_ONLY, None, STATIC, True),
        ("jwt:https://idp|bob", DEFAULT_ONLY, None, STATIC, True),
        # A static token removed from auth: nobody, whatever the policy.
        ("token:carol", DEFAULT_ONLY, None, STATIC, False),
        ("token:carol", DEFAULT_ONLY, EVERYONE, STATIC, False),
        # The policy: no rule matches any more.
        ("token:alice", DEFAULT_ONLY, ALICE_ONLY, STATIC, True),
        ("token:bob", DEFAULT_ONLY, ALICE_ONLY, STATIC, False),
        # Denied every item of the backend; denied some of them; allowed none.
        ("token:bob", DEFAULT_ONLY, BOB_DENIED_TRACKER, STATIC, False),
        ("token:alice", DEFAULT_ONLY, BOB_DENIED_TRACKER, STATIC, True),
        ("token:bob", DEFAULT_ONLY, BOB_ONE_TOOL, STATIC, True),
        ("token:bob", DEFAULT_ONLY, BOB_OTHER_TOOLS, STATIC, False),
        # Another profile that selects the backend still reaches it.
        ("token:bob", TWO, OPS_FOR_BOB, STATIC, True),
        ("token:bob", DEFAULT_ONLY, OPS_FOR_BOB, STATIC, False),
        # The backend's items unknown (not listable without a token): an open profile keeps.
        ("token:bob", UNKNOWN, BOB_OTHER_TOOLS, STATIC, True),
        ("token:bob", UNKNOWN, ALICE_ONLY, STATIC, False),
        # No profile selects the backend.
        ("token:alice", {}, ALICE_ONLY, STATIC, False),
        # JWT principals: by subject; a rule asking for scopes or claims may match later.
        ("jwt:https://idp|alice", DEFAULT_ONLY, SUBJECTS, STATIC, True),
        ("jwt:https://idp|bob", DEFAULT_ONLY, SUBJECTS, STATIC, False),
        ("jwt:https://idp|bob", DEFAULT_ONLY, SCOPED, STATIC, True),
        ("jwt:https://idp|carol", DEFAULT_ONLY, SCOPED, STATIC, False),
        # A key of neither form is never judged away.
        ("something-else", DEFAULT_ONLY, ALICE_ONLY, STATIC, True),
    ],
)
def test_a_stored_consent_stays_exactly_while_its_principal_may_reach_the_backend(
    key: str,
    profiles: dict[str, list[tuple[Kind, str]] | None],
    rules: list[dict[str, Any]] | None,
    static: frozenset[str],
    expected: bool,
) -> None:
    """gateway choice: judged as the router decides, erring toward keeping what it cannot judge."""
    verdict = may_use(key, profiles, policy=_policy(rules), auth_enabled=True, static_names=static)
    assert verdict is expected


def test_with_auth_off_a_static_key_is_not_judged_by_the_token_list() -> None:
    """gateway choice: only a configured ``auth`` names the tokens that exist."""
    assert may_use(
        "token:carol", DEFAULT_ONLY, policy=None, auth_enabled=False, static_names=STATIC
    )


@pytest.mark.parametrize(
    ("key", "principal"),
    [
        ("token:alice", Principal("static", "alice")),
        ("jwt:https://idp|bob", Principal("jwt", "bob", "https://idp")),
        ("jwt:https://idp|auth0|123", Principal("jwt", "auth0|123", "https://idp")),
        ("jwt:nobar", None),
        ("token:", None),
        ("anonymous", None),
    ],
)
def test_a_stored_key_names_the_principal_it_was_made_for(
    key: str, principal: Principal | None
) -> None:
    """gateway choice: ``Principal.key`` read back; any other form names nobody."""
    assert principal_from_key(key) == principal


def _catalog() -> Snapshot:
    """alpha with a tool, a prompt, a resource and a skill; beta with a tool."""
    skill = {
        "uri": "skill://git-workflow/SKILL.md",
        "frontmatter": {"name": "git-workflow", "description": "d"},
        "resources": [{"uri": "skill://git-workflow/SKILL.md", "size": 1}],
    }
    return build_snapshot(
        [
            BackendListing(
                "alpha",
                "alpha",
                tools=({"name": "search"},),
                prompts=({"name": "triage"},),
                resources=({"uri": "file:///notes", "name": "notes"},),
                skills=(skill,),
            ),
            BackendListing("beta", "beta", tools=({"name": "search"},)),
        ],
        NamingRules(),
    )


def _only(**allow: list[str]) -> list[dict[str, Any]]:
    """One rule for everyone on ``default`` allowing only ``allow`` (per kind; others none)."""
    kinds = ("tools", "prompts", "resources", "skills")
    rule: dict[str, Any] = {k: {"allow": allow.get(k, ["none-such"])} for k in kinds}
    return [{"everyone": True, "profiles": ["default"], **rule}]


@pytest.mark.parametrize(
    ("rules", "reaches"),
    [
        (_only(tools=["alpha__*"]), True),
        (_only(tools=["beta__*"]), False),
        (_only(prompts=["alpha__*"]), True),
        (_only(resources=["alpha+*"]), True),
        (_only(resources=["beta+*"]), False),
        (_only(skills=["alpha__git*"], resources=["alpha+skill://*"]), True),
        (_only(skills=["beta__*"]), False),
        (_only(skills=["beta__*"], resources=["alpha+skill://*"]), False),
        (_only(), False),
        (
            [
                {"everyone": True, "profiles": ["default"]},
                {"tokens": ["bob"], **{k: {"deny": ["alpha*"]} for k in ("tools", "prompts")}},
                {"tokens": ["bob"], **{k: {"deny": ["alpha*"]} for k in ("resources", "skills")}},
            ],
            False,
        ),
    ],
)
def test_the_backends_items_are_judged_as_the_routers_effective_view_narrows_them(
    rules: list[dict[str, Any]], reaches: bool
) -> None:
    """gateway choice: a backend is reachable exactly when the caller's effective view (the
    router's ``narrow``) keeps one of its items."""
    view = _catalog()
    policy = _policy(rules)
    assert policy is not None
    admits = policy.decide(Principal("static", "bob")).on("default").admitter()
    narrowed = narrow(view, admits)
    kept = any(entry.backend == "alpha" for kind in Kind for entry in narrowed.view(kind))
    assert kept is reaches
    items = backend_items(view, "alpha", "__")
    assert {kind for kind, _ in items} >= {Kind.TOOLS, Kind.PROMPTS, Kind.SKILLS}
    verdict = may_use(
        "token:bob", {"default": items}, policy=policy, auth_enabled=True, static_names=STATIC
    )
    assert verdict is kept
