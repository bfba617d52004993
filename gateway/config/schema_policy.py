"""The configuration schema, policy part: who may open which profile and see which items.

``policy:`` is a list of rules (issue 16 item 3). Each rule says whom it
matches (``tokens``, ``subjects``, ``scopes``, ``claims``, ``anonymous`` or
``everyone``) and what it grants (``profiles``) or takes away (``tools``,
``prompts``, ``resources``, ``skills`` with ``allow`` and ``deny`` globs
over public names and URIs). What a request then may do is decided in
:mod:`gateway.identity.policy`; docs/security.md "Access policy" explains
the combination rule with a worked example.

The rules here are the ones a file can break: a rule that matches nobody
by accident (no matcher at all: matching everyone must be said with
``everyone: true``), a glob ``fnmatch`` cannot compile, an empty glob, and
(checked with the profiles, :func:`policy_problems`) a literal profile name
that names no profile.
"""

from __future__ import annotations

from fnmatch import translate
from typing import TYPE_CHECKING, Final, Literal

import msgspec

from gateway.config.schema import Base, Invalid

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = ["ItemRules", "PolicyAudit", "PolicyRule", "glob_problem", "policy_problems"]

_GLOB_CHARS: Final = frozenset("*?[")
# What ``fnmatch.translate`` writes for an empty character range.
_NEVER: Final = "(?!)"

#: ``denials``: one ``policy.denied`` line per denying decision;
#: ``calls``: also one ``policy.call`` line per call, read and get.
PolicyAudit = Literal["denials", "calls"]


def glob_problem(pattern: str) -> str | None:
    """Why ``pattern`` is no usable ``fnmatchcase`` glob, or None when it is one.

    An empty glob, and one with a character range written backwards
    (``[z-a]``, which ``fnmatch`` compiles to "never matches"), match
    nothing: always a slip, and one that must show at ``check`` time, not
    as a caller who silently sees nothing.
    """
    if not pattern:
        return "an empty glob matches nothing"
    # ``translate`` escapes whatever ``re`` would refuse; what is left to
    # catch is the range that can never match.
    if _NEVER in translate(pattern):
        return f"{pattern!r} is not a valid glob (a character range that matches nothing)"
    return None


class ItemRules(Base, frozen=True, kw_only=True):
    """Which items of one kind a rule lets its principals see.

    Attributes:
        allow: globs over public names (resources: public URIs and URI
            templates); an item must match one of them in a rule that also
            grants the profile. Default ``["*"]``: the whole profile.
        deny: globs; an item matching one in any matching rule is hidden,
            whatever any rule allows (deny wins).
    """

    allow: list[str] = msgspec.field(default_factory=lambda: ["*"])
    deny: list[str] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        problems = [
            (f"{key}[{index}]", why)
            for key, globs in (("allow", self.allow), ("deny", self.deny))
            for index, pattern in enumerate(globs)
            if (why := glob_problem(pattern)) is not None
        ]
        if problems:
            raise Invalid(*problems)


class PolicyRule(Base, frozen=True, kw_only=True):
    """One rule of ``policy:``: whom it matches and what it grants.

    Every matcher the rule names must match (they are ANDed); within a
    matcher, any listed value will do, except ``scopes``, which all must
    be granted.

    Attributes:
        name: a label for the people who read the file (problems are
            reported by position, ``policy[2]``).
        everyone: matches every caller, authenticated or not; the only way
            to write a rule for everyone (an empty matcher is an error).
        anonymous: matches the caller when auth is off (no principal).
        tokens: static token names (``auth.tokens`` keys).
        subjects: globs over the JWT ``sub``.
        scopes: scopes the principal must all hold.
        claims: claim name -> values; matches when the principal's claim
            (a string, or a list such as ``groups`` or ``roles``) holds any
            of the values, for every claim named.
        profiles: globs over the profile names the rule lets its principals
            open (``default`` is the one at ``server.path``).
        tools: tool globs over public names.
        prompts: prompt globs over public names.
        resources: resource globs over public URIs and URI templates.
        skills: skill globs over public skill names (``alpha__git-workflow``,
            as in a profile's ``skills``); a skill is also held to
            ``resources`` by its every file's URI.
        role: ``admin`` lets the rule's principals into the operator console
            (``docs/console.md``) with their own token; "" grants no role.
    """

    name: str = ""
    everyone: bool = False
    anonymous: bool = False
    tokens: list[str] = msgspec.field(default_factory=list)
    subjects: list[str] = msgspec.field(default_factory=list)
    scopes: list[str] = msgspec.field(default_factory=list)
    claims: dict[str, list[str]] = msgspec.field(default_factory=dict)
    profiles: list[str] = msgspec.field(default_factory=list)
    tools: ItemRules = msgspec.field(default_factory=ItemRules)
    prompts: ItemRules = msgspec.field(default_factory=ItemRules)
    resources: ItemRules = msgspec.field(default_factory=ItemRules)
    skills: ItemRules = msgspec.field(default_factory=ItemRules)
    role: Literal["", "admin"] = ""

    def __post_init__(self) -> None:
        problems: list[tuple[str, str]] = []
        matchers = (self.anonymous, self.tokens, self.subjects, self.scopes, self.claims)
        if not self.everyone and not any(matchers):
            problems.append(
                (
                    "",
                    "a rule needs a matcher (tokens, subjects, scopes, claims or anonymous); "
                    "a rule for every caller must say everyone: true",
                )
            )
        if self.everyone and any(matchers):
            problems.append(("everyone", "everyone: true matches every caller; drop the matchers"))
        if self.role and (self.everyone or self.anonymous):
            problems.append(
                ("role", "a role is for named principals (tokens, subjects, scopes or claims)")
            )
        if self.anonymous and (self.tokens or self.subjects or self.scopes or self.claims):
            problems.append(
                ("anonymous", "the anonymous caller has no token, subject, scope or claim")
            )
        for key, globs in (("subjects", self.subjects), ("profiles", self.profiles)):
            problems.extend(
                (f"{key}[{index}]", why)
                for index, pattern in enumerate(globs)
                if (why := glob_problem(pattern)) is not None
            )
        for claim, values in self.claims.items():
            if not claim:
                problems.append(("claims", "a claim name must not be empty"))
            if not values:
                problems.append((f"claims.{claim}", "list at least one value"))
        if problems:
            raise Invalid(*problems)


def policy_problems(
    rules: Sequence[PolicyRule], profiles: Iterable[str], tokens: Iterable[str]
) -> list[tuple[str, str]]:
    """Check the rules against the configured profiles and token names.

    A literal profile name (no glob characters) must name a profile
    (``default`` always exists): a typo would silently lock its callers
    out. Likewise a literal token name in ``tokens`` must be a key of
    ``auth.tokens``.

    Returns:
        ``(place, message)`` pairs, places relative to the whole file.
    """
    known = frozenset(profiles) | {"default"}
    names = frozenset(tokens)
    problems: list[tuple[str, str]] = []
    for position, rule in enumerate(rules):
        for index, pattern in enumerate(rule.profiles):
            if not _GLOB_CHARS & set(pattern) and pattern not in known:
                problems.append(
                    (f"policy[{position}].profiles[{index}]", f"no profile is named {pattern!r}")
                )
        for index, token in enumerate(rule.tokens):
            if token not in names:
                problems.append(
                    (f"policy[{position}].tokens[{index}]", f"auth.tokens has no {token!r}")
                )
    return problems
