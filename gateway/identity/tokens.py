"""Checking one JWT (sans-IO): keys and the time in, claims out, or a typed refusal.

PyJWT does the signature and the ``aud``/``iss`` checks; ``exp`` and ``nbf``
are checked here against the ``now`` the caller passes, so tests run on a
fake clock and nothing here reads the time. The algorithm comes from the
token's header but is only ever accepted when the key it names is pinned to
it (keys.py): a header cannot choose how it is verified.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeGuard

from gateway.errors import GatewayError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from gateway.identity.keys import KeySet

# The HMAC algorithm the shared ``secret`` verifies.
SECRET_ALGORITHM: Final = "HS256"
# A token longer than this is refused before it is parsed.
MAX_TOKEN_CHARS: Final = 16 * 1024


class TokenRejected(GatewayError):
    """The token is not acceptable; ``str()`` says why (never the token itself).

    Args:
        reason: why, for the host.
        kind: which check failed, from a fixed vocabulary (``malformed``,
            ``algorithm``, ``unknown_key``, ``signature``, ``audience``,
            ``issuer``, ``claims``, ``expired``, ``not_yet_valid``): the
            ``reason`` label of the token metrics, never parsed from ``reason``.
    """

    kind = "invalid"

    def __init__(self, reason: str, *, kind: str | None = None) -> None:
        super().__init__(reason)
        if kind is not None:
            self.kind = kind


class UnknownKey(TokenRejected):
    """The token names a key the current key set does not have (a refetch may help)."""

    kind = "unknown_key"


@dataclass(frozen=True, slots=True)
class JwtRules:
    """What a JWT must satisfy.

    Attributes:
        audience: the ``aud`` it must carry ("" checks none).
        issuer: the ``iss`` it must carry ("" accepts any).
        leeway: seconds of clock skew tolerated on ``exp`` and ``nbf``.
        secret: the HS256 shared secret ("" refuses HMAC tokens).
    """

    audience: str = ""
    issuer: str = ""
    leeway: float = 30.0
    secret: str = ""


def verify(token: str, keys: KeySet, rules: JwtRules, now: float) -> dict[str, Any]:
    """Verify a JWT and return its claims.

    Args:
        token: the compact JWT.
        keys: the asymmetric keys (from a JWKS).
        rules: issuer, audience, leeway and the shared secret.
        now: the current time, seconds since the epoch.

    Returns:
        The verified claims.

    Raises:
        UnknownKey: no key in ``keys`` has the token's ``kid``.
        TokenRejected: anything else wrong with the token.
    """
    if len(token) > MAX_TOKEN_CHARS:
        raise TokenRejected("token too long", kind="malformed")
    # Here, not at the top: PyJWT loads cryptography, a start-up cost
    # (performance.md); after the first token this is a dict lookup.
    import jwt
    from jwt.warnings import InsecureKeyLengthWarning

    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise TokenRejected("malformed JWT", kind="malformed") from None
    alg = header.get("alg")
    kid = header.get("kid")
    if not isinstance(alg, str) or alg.lower() == "none":
        raise TokenRejected("JWT algorithm missing or 'none'", kind="algorithm")
    if kid is not None and not isinstance(kid, str):
        raise TokenRejected("JWT kid is not a string", kind="malformed")
    key: Any
    if alg == SECRET_ALGORITHM and rules.secret and kid is None:
        key = rules.secret
    else:
        found = keys.find(kid, alg)
        if found is None:
            if kid:
                raise UnknownKey(f"no key with kid {kid[:64]!r}")
            raise TokenRejected(f"no key for algorithm {alg[:16]!r}", kind="algorithm")
        if alg not in found.algorithms:
            raise TokenRejected(
                f"algorithm {alg[:16]!r} is not allowed for this key", kind="algorithm"
            )
        key = found.key
    try:
        with warnings.catch_warnings():
            # A short HS256 secret is the operator's choice, warned about in
            # docs/security.md; a warning per request would only flood logs.
            warnings.simplefilter("ignore", InsecureKeyLengthWarning)
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key,
                algorithms=[alg],
                audience=rules.audience or None,
                issuer=rules.issuer or None,
                options={
                    "verify_exp": False,
                    "verify_nbf": False,
                    "verify_iat": False,
                    "verify_aud": bool(rules.audience),
                    "verify_iss": bool(rules.issuer),
                },
            )
    except jwt.InvalidAudienceError:
        raise TokenRejected("JWT audience is not this gateway", kind="audience") from None
    except jwt.InvalidIssuerError:
        raise TokenRejected("JWT issuer not accepted", kind="issuer") from None
    except jwt.MissingRequiredClaimError as exc:
        raise TokenRejected(f"JWT lacks the {exc.claim!r} claim", kind="claims") from None
    except jwt.InvalidSignatureError:
        raise TokenRejected("JWT signature does not verify", kind="signature") from None
    except (jwt.PyJWTError, ValueError, TypeError):
        raise TokenRejected("malformed JWT", kind="malformed") from None
    check_times(claims, rules.leeway, now)
    return claims


def check_times(claims: Mapping[str, Any], leeway: float, now: float) -> None:
    """Check ``exp`` and ``nbf`` of claims against ``now`` (also for a cached token).

    Raises:
        TokenRejected: expired, not valid yet, or without a usable ``exp``.
    """
    exp = claims.get("exp")
    if not _is_number(exp):
        raise TokenRejected("JWT without exp", kind="claims")
    if now > exp + leeway:
        raise TokenRejected("JWT expired", kind="expired")
    nbf = claims.get("nbf")
    if nbf is not None:
        if not _is_number(nbf):
            raise TokenRejected("JWT nbf is not a number", kind="claims")
        if now + leeway < nbf:
            raise TokenRejected("JWT not valid yet", kind="not_yet_valid")


def _is_number(value: object) -> TypeGuard[float]:
    # NaN would compare false with everything and so never expire.
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
