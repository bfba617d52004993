"""The access policy: the one decision of what a principal may open and see (sans-IO).

Rules (docs/security.md "Access policy"):

1. One decision: :meth:`Policy.decide` turns a principal (None when auth
   is off) into an :class:`Access`; :meth:`Access.opens` says whether it
   may open a profile, :meth:`Access.admits` whether an item of that
   profile exists for it. The router builds each caller's *effective
   view* from it (``catalog.effective``), and lists, calls, reads, gets,
   completions, subscriptions and search all go through that view, so a
   hidden item is exactly as unknown as an item that does not exist.
2. A rule matches when every matcher it names matches (``tokens``,
   ``subjects``, ``scopes``, ``claims``, ``anonymous``); ``everyone``
   matches every caller.
3. Combination: an item of profile P is admitted when some matching rule
   grants P *and* allows the item, and no matching rule denies it (deny
   wins, whichever rule it comes from). A rule's ``allow`` only counts on
   the profiles that same rule grants, so a rule that only denies (no
   ``profiles``) widens nothing.
4. No matching rule: nothing (no profile opens). No policy at all:
   :data:`EVERYTHING`, today's behaviour.
5. :meth:`Access.on` is the part of an access that matters on one profile;
   it is hashable and has a short :attr:`ProfileAccess.tag`, so effective
   views are cached per (profile, ProfileAccess): a thousand callers with
   the same groups share one view, and cursors and list_changed are per
   tag.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from gateway.catalog.profiles import Globs
from gateway.catalog.snapshot import Kind

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from gateway.config import ItemRules, PolicyRule
    from gateway.identity.principal import Principal

_NOTHING: Final = Globs((), ())
# Templates are resources to a policy: both are written as public URIs.
# Skills (SEP-2640) are matched by their public skill name under ``skills``,
# and their files (SKILL.md included) as resources (``catalog.effective``).
_KINDS: Final = (Kind.TOOLS, Kind.PROMPTS, Kind.RESOURCES, Kind.SKILLS)
_NONE: Final[tuple[tuple[str, ...], ...]] = ((),) * len(_KINDS)


def _kind_index(kind: Kind) -> int:
    if kind is Kind.TEMPLATES:
        return 2
    return _KINDS.index(kind)


def _any(patterns: Iterable[str]) -> Globs:
    return Globs(tuple(patterns), ())


@dataclass(frozen=True, slots=True)
class ProfileAccess:
    """What one access admits on one profile (rule 5): hashable, the view cache key.

    Attributes:
        allow: per kind (tools, prompts, resources, skills), one glob tuple per
            matching rule that grants the profile.
        deny: per kind, every deny glob of every matching rule.
        everything: no policy applies (the view is the profile's own).
    """

    allow: tuple[tuple[tuple[str, ...], ...], ...] = ((),) * len(_KINDS)
    deny: tuple[tuple[str, ...], ...] = _NONE
    everything: bool = False

    @property
    def opened(self) -> bool:
        """Whether some rule grants the profile at all."""
        return self.everything or bool(self.allow[0])

    @property
    def tag(self) -> str:
        """A short, stable digest of this access: "" for everything.

        Cursors minted under one tag do not verify under another, and a
        list_changed goes to the sessions of one tag.
        """
        if self.everything:
            return ""
        digest = hashlib.sha256(repr((self.allow, self.deny)).encode()).hexdigest()
        return digest[:12]

    def admits(self, kind: Kind, public: str) -> bool:
        """Whether an item of this profile is visible (rule 3)."""
        return self.admitter()(kind, public)

    def admitter(self) -> Callable[[Kind, str], bool]:
        """:meth:`admits` with its globs built once: what a view of many items is built with."""
        if self.everything:
            return lambda kind, public: True
        deny = tuple(_any(globs) for globs in self.deny)
        # One include list per kind: "some granting rule allows it" is one
        # glob set, the union of the granting rules' allows.
        allow = tuple(_any(g for globs in per_rule for g in globs) for per_rule in self.allow)

        def admits(kind: Kind, public: str) -> bool:
            index = _kind_index(kind)
            return allow[index].allows(public) and not deny[index].allows(public)

        return admits


EVERYTHING_ON: Final = ProfileAccess(everything=True)
NOTHING_ON: Final = ProfileAccess()


@dataclass(frozen=True, slots=True)
class _Grant:
    profiles: Globs
    allow: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class Access:
    """What one principal may do under the policy in force.

    Attributes:
        grants: the matching rules' profile globs and item allow globs.
        deny: per kind, every matching rule's deny globs.
        everything: no policy: every profile, every item.
    """

    grants: tuple[_Grant, ...] = ()
    deny: tuple[tuple[str, ...], ...] = _NONE
    everything: bool = False

    def opens(self, profile: str) -> bool:
        """Whether the principal may open ``profile``."""
        return self.everything or any(g.profiles.allows(profile) for g in self.grants)

    def on(self, profile: str) -> ProfileAccess:
        """The part of this access that matters on ``profile`` (rule 5)."""
        if self.everything:
            return EVERYTHING_ON
        granting = [g for g in self.grants if g.profiles.allows(profile)]
        if not granting:
            return NOTHING_ON
        allow = tuple(tuple(g.allow[i] for g in granting) for i in range(len(_KINDS)))
        return ProfileAccess(allow, self.deny)

    def admits(self, profile: str, kind: Kind, public: str) -> bool:
        """Whether an item of ``profile`` exists for the principal (rule 1)."""
        return self.on(profile).admits(kind, public)


EVERYTHING: Final = Access(everything=True)
NOTHING: Final = Access()


def _claim_values(claims: Mapping[str, Any], name: str) -> list[str]:
    """The string values of a claim; a dotted name walks nested objects
    (Keycloak's ``realm_access.roles``) when no top-level claim has that name."""
    value: Any = claims.get(name)
    if value is None and "." in name:
        value = claims
        for part in name.split("."):
            value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


@dataclass(frozen=True, slots=True)
class Rule:
    """One compiled ``policy:`` rule.

    Attributes:
        name: its label ("" when none was given).
        everyone: matches every caller.
        anonymous: matches the unauthenticated caller only.
        tokens: static token names.
        subjects: globs over the JWT ``sub``.
        scopes: scopes that must all be held.
        claims: (claim name, accepted values) pairs, all required.
        grant: the profiles and item allows it grants (None: no profile).
        deny: per kind, its deny globs.
        admin: the rule grants the ``admin`` role (the operator console).
    """

    name: str
    everyone: bool = False
    anonymous: bool = False
    tokens: frozenset[str] = frozenset()
    subjects: Globs = _NOTHING
    scopes: frozenset[str] = frozenset()
    claims: tuple[tuple[str, frozenset[str]], ...] = ()
    grant: _Grant | None = None
    deny: tuple[tuple[str, ...], ...] = _NONE
    admin: bool = False

    def matches(self, principal: Principal | None) -> bool:
        """Whether the rule applies to ``principal`` (rule 2)."""
        if self.everyone:
            return True
        if principal is None:
            return self.anonymous
        if self.anonymous:
            return False
        if self.tokens and not (principal.kind == "static" and principal.subject in self.tokens):
            return False
        if self.subjects.include and not (
            principal.kind == "jwt" and self.subjects.allows(principal.subject)
        ):
            return False
        if not self.scopes <= principal.scopes:
            return False
        return all(
            not accepted.isdisjoint(_claim_values(principal.claims, name))
            for name, accepted in self.claims
        )


def rule_from_config(config: PolicyRule, position: int = 0) -> Rule:
    """The compiled form of one ``policy:`` entry."""
    kinds: tuple[ItemRules, ...] = (
        config.tools,
        config.prompts,
        config.resources,
        config.skills,
    )
    grant = (
        _Grant(_any(config.profiles), tuple(tuple(k.allow) for k in kinds))
        if config.profiles
        else None
    )
    return Rule(
        config.name or f"policy[{position}]",
        everyone=config.everyone,
        anonymous=config.anonymous,
        tokens=frozenset(config.tokens),
        subjects=_any(config.subjects),
        scopes=frozenset(config.scopes),
        claims=tuple((n, frozenset(v)) for n, v in sorted(config.claims.items())),
        grant=grant,
        deny=tuple(tuple(k.deny) for k in kinds),
        admin=config.role == "admin",
    )


class Policy:
    """The rules in force; :meth:`decide` is the one decision (rule 1).

    Args:
        rules: the compiled rules, in file order.
    """

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)

    @classmethod
    def from_config(cls, configs: Sequence[PolicyRule] | None) -> Policy | None:
        """The policy a ``policy:`` section describes; None when the key is absent (rule 4)."""
        if configs is None:
            return None
        return cls([rule_from_config(c, i) for i, c in enumerate(configs)])

    def decide(self, principal: Principal | None) -> Access:
        """What ``principal`` may open and see: the union of the matching rules' grants.

        Every deny of every matching rule applies (rule 3); no matching
        rule is :data:`NOTHING` (rule 4).
        """
        matched = [rule for rule in self.rules if rule.matches(principal)]
        if not matched:
            return NOTHING
        grants = tuple(rule.grant for rule in matched if rule.grant is not None)
        deny = tuple(tuple(g for rule in matched for g in rule.deny[i]) for i in range(len(_KINDS)))
        return Access(grants, deny)


def is_admin(policy: Policy | None, principal: Principal | None) -> bool:
    """Whether a matching rule grants ``principal`` the ``admin`` role (never the anonymous).

    A role is a grant like a profile: only a rule that matches grants it,
    and with no policy nobody has it.
    """
    if policy is None or principal is None:
        return False
    return any(rule.admin and rule.matches(principal) for rule in policy.rules)


def decide(policy: Policy | None, principal: Principal | None) -> Access:
    """The access of ``principal``: :data:`EVERYTHING` when there is no policy (rule 4)."""
    return EVERYTHING if policy is None else policy.decide(principal)
