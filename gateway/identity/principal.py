"""The principal: who a request is from, as every later decision needs it.

Frozen, and safe to log and compare: the one secret it carries, the caller's
raw token (``token``, for token exchange towards backends), is a
:class:`~gateway.backends.credentials.grants.CallerToken` that never shows itself,
is left out of ``repr`` and of comparisons, and cannot be encoded to JSON.
Policy (profiles, tool globs) will match on ``kind``, ``subject``, ``scopes``
and ``claims``; session binding, sealed ``requestState`` and
cursors use ``key``, which is stable across a token's refreshes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Mapping

    from gateway.backends.credentials.grants import CallerToken

PrincipalKind = Literal["static", "jwt"]


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller.

    Attributes:
        kind: ``static`` (a configured token) or ``jwt`` (a signed token).
        subject: the static token's name, or the JWT's ``sub``.
        issuer: the JWT's ``iss`` ("" for a static token).
        scopes: the granted scopes (``scope``/``scp`` claims; none for a
            static token).
        claims: the verified JWT claims (empty for a static token).
        token: the bearer token the caller sent; only a ``token_exchange``
            backend credential reads it, to exchange it (never forwarded).
    """

    kind: PrincipalKind
    subject: str
    issuer: str = ""
    scopes: frozenset[str] = frozenset()
    claims: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    token: CallerToken | None = field(default=None, repr=False, compare=False, hash=False)

    @property
    def key(self) -> str:
        """A stable, non-secret identity: ``token:<name>`` or ``jwt:<iss>|<sub>``.

        A session, a sealed ``requestState`` or a cursor made for one key is
        refused to every other, so the key must not change when the same
        caller refreshes its token, and must differ between issuers that
        happen to reuse a subject.
        """
        if self.kind == "static":
            return f"token:{self.subject}"
        return f"jwt:{self.issuer}|{self.subject}"


def scopes_of(claims: Mapping[str, Any]) -> frozenset[str]:
    """The scopes a JWT grants: ``scope`` (RFC 9068, space separated) or ``scp`` (Entra, Okta).

    Args:
        claims: verified claims.

    Returns:
        The scopes; empty when the token names none or names them oddly.
    """
    found: set[str] = set()
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            found.update(value.split())
        elif isinstance(value, list):
            found.update(v for v in value if isinstance(v, str))
    return frozenset(found)
