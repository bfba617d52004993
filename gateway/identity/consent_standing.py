"""Whether a principal may still use a ``user_consent`` backend under the config in force (sans-IO).

A reload that takes a principal's access to a backend away purges that
principal's tokens there (``ConsentTokens.purge_withdrawn``). Only the
stored (principal, backend) pairs are judged: JWT principals cannot be
listed, and a stored key is all that is known of them.

Rules:

1. **A static token no longer configured is nobody.** ``token:NAME`` with
   ``auth`` on and no token ``NAME`` may use nothing.
2. **The router's decision, an upper bound.** Under a policy, the principal
   may use the backend when, on some profile that selects the backend, the
   policy (:func:`gateway.identity.policy.decide`) opens the profile and
   admits at least one of the backend's items there. A JWT principal is
   known only by ``iss|sub``: a rule that also asks for scopes or claims is
   taken to match it (those may be in its next token) and its denies are
   left out, so a token is never purged for a principal who could still
   reach the backend.
3. **What cannot be judged is kept.** No policy; a key of neither form; a
   profile that selects the backend while its items are unknown (it lists
   nothing without a person's token): the principal keeps its tokens.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from gateway.catalog.naming import public_skill_name
from gateway.catalog.snapshot import Kind
from gateway.identity.policy import Policy, decide
from gateway.identity.principal import Principal

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from gateway.catalog.snapshot import Snapshot

__all__ = ["backend_items", "may_use", "principal_from_key"]

#: One item as the policy names it: its kind and public name (or URI).
Item = tuple[Kind, str]


def principal_from_key(key: str) -> Principal | None:
    """The principal a stored key names (``token:NAME``, ``jwt:ISS|SUB``); None for another form."""
    kind, sep, rest = key.partition(":")
    if not sep or not rest:
        return None
    if kind == "token":
        return Principal("static", rest)
    if kind == "jwt":
        # An issuer is an https URL (no bare ``|``); a subject may hold one (``auth0|123``).
        issuer, bar, subject = rest.partition("|")
        return Principal("jwt", subject, issuer) if bar and subject else None
    return None


def _as_known(policy: Policy, principal: Principal) -> Policy:
    """Rule 2: the policy as it may apply to a principal known by its key alone."""
    if principal.kind != "jwt":
        return policy  # a static token has no scopes nor claims: its key is all of it
    rules = [
        dataclasses.replace(rule, scopes=frozenset(), claims=(), deny=tuple(() for _ in rule.deny))
        if rule.scopes or rule.claims
        else rule
        for rule in policy.rules
    ]
    return Policy(rules)


def may_use(
    key: str,
    profiles: Mapping[str, Sequence[Item] | None],
    *,
    policy: Policy | None,
    auth_enabled: bool,
    static_names: frozenset[str],
) -> bool:
    """Whether the principal ``key`` may still use the backend (module rules 1-3).

    Args:
        key: the principal's key, as its stored tokens name it.
        profiles: the profiles that select the backend, each with the
            backend's items there (:func:`backend_items`); None or empty:
            the items are not known.
        policy: the access policy in force (None: none).
        auth_enabled: whether ``auth`` is on.
        static_names: the static tokens configured.
    """
    principal = principal_from_key(key)
    if principal is None:
        return True
    if principal.kind == "static" and auth_enabled and principal.subject not in static_names:
        return False
    if policy is None:
        return True
    access = decide(_as_known(policy, principal), principal)
    for profile, items in profiles.items():
        on = access.on(profile)
        if not on.opened:
            continue
        if not items:
            return True
        admits = on.admitter()
        if any(admits(kind, public) for kind, public in items):
            return True
    return False


def backend_items(view: Snapshot, backend: str, separator: str) -> list[Item]:
    """The items of ``backend`` in a profile's view, named as the policy names them.

    Skills by their public skill name, templates as resources (as
    :mod:`gateway.catalog.effective` matches them).
    """
    found: list[Item] = []
    for kind in Kind:
        for entry in view.view(kind):
            if entry.backend != backend:
                continue
            if kind is Kind.SKILLS:
                extra = len(entry.key) - len(entry.original)
                prefix = entry.key[: extra - 1] if extra > 0 else ""
                found.append((kind, public_skill_name(prefix, entry.original, separator)))
            else:
                found.append((kind, entry.key))
    return found
