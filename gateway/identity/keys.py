"""A JWK Set turned into verification keys, each pinned to its algorithms (sans-IO).

A key is usable only with the algorithms it is pinned to: its JWK ``alg``
when it names one (and the configuration allows it), else the configured
algorithms its key type can serve. That pinning is what makes algorithm
confusion impossible: an RSA public key never becomes an HMAC secret, and
``none`` is never an algorithm at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import structlog

from gateway.config.schema_auth import DEFAULT_JWT_ALGORITHMS
from gateway.errors import GatewayError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

logger = structlog.get_logger("gateway.identity")

# Which algorithms each key type (and curve) can verify.
_RSA: Final = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
_EC_BY_CURVE: Final = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512", "secp256k1": "ES256K"}
_OKP: Final = frozenset({"EdDSA"})
_OCT: Final = frozenset({"HS256", "HS384", "HS512"})

#: Asymmetric algorithms accepted when ``auth.jwt.algorithms`` is not set (the
#: config's one list, so the default and the checks cannot drift apart).
DEFAULT_ALGORITHMS: Final = tuple(DEFAULT_JWT_ALGORITHMS)
#: Every algorithm the gateway knows; anything else in the config is an error.
KNOWN_ALGORITHMS: Final = frozenset(DEFAULT_ALGORITHMS) | _OCT | {"ES256K"}


class JwksError(GatewayError):
    """A JWK Set document that cannot be used at all (not an object, no ``keys``)."""


def compatible_algorithms(jwk: Mapping[str, Any]) -> frozenset[str]:
    """The algorithms a JWK's key type (and curve) can verify.

    Args:
        jwk: one JSON Web Key.

    Returns:
        The algorithms; empty for an unknown key type.
    """
    kty = jwk.get("kty")
    if kty == "RSA":
        return _RSA
    if kty == "EC":
        alg = _EC_BY_CURVE.get(str(jwk.get("crv")))
        return frozenset({alg}) if alg else frozenset()
    if kty == "OKP":
        return _OKP if jwk.get("crv") in ("Ed25519", "Ed448") else frozenset()
    if kty == "oct":
        return _OCT
    return frozenset()


@dataclass(frozen=True, slots=True)
class VerificationKey:
    """One usable key.

    Attributes:
        kid: its key id ("" when the JWK has none).
        key: the key object PyJWT verifies with.
        algorithms: the only algorithms it may verify.
    """

    kid: str
    key: Any
    algorithms: frozenset[str]


class KeySet:
    """The keys of one JWK Set, by ``kid``.

    Args:
        keys: the usable keys.
    """

    def __init__(self, keys: Iterable[VerificationKey] = ()) -> None:
        self.keys = tuple(keys)
        self._by_kid = {k.kid: k for k in self.keys if k.kid}

    def __len__(self) -> int:
        return len(self.keys)

    def find(self, kid: str | None, alg: str) -> VerificationKey | None:
        """The key for a token's header, or None when there is none.

        A token without ``kid`` is accepted only when exactly one key can
        verify its algorithm, so that no key is tried by guessing.
        """
        if kid:
            return self._by_kid.get(kid)
        candidates = [k for k in self.keys if alg in k.algorithms]
        return candidates[0] if len(candidates) == 1 else None

    @classmethod
    def from_jwks(cls, document: object, allowed: Iterable[str]) -> KeySet:
        """Parse a JWK Set; keys that cannot serve any allowed algorithm are skipped.

        Args:
            document: the decoded JSON of a JWK Set (``{"keys": [...]}``).
            allowed: the configured algorithms.

        Returns:
            The usable keys (possibly none).

        Raises:
            JwksError: the document is not a JWK Set.
        """
        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise JwksError("a JWK Set must be an object with a 'keys' list")
        allowed_set = frozenset(allowed)
        usable: list[VerificationKey] = []
        for index, jwk in enumerate(document["keys"]):
            key = _one_key(jwk, allowed_set, index)
            if key is not None:
                usable.append(key)
        return cls(usable)


def _one_key(jwk: object, allowed: frozenset[str], index: int) -> VerificationKey | None:
    if not isinstance(jwk, dict):
        logger.warning("auth.jwks.key_skipped", index=index, reason="not an object")
        return None
    raw_kid = jwk.get("kid")
    kid = raw_kid if isinstance(raw_kid, str) else ""
    if jwk.get("use", "sig") != "sig":
        return None  # an encryption key: not for signatures
    pinned = jwk.get("alg")
    compatible = compatible_algorithms(jwk)
    if isinstance(pinned, str):
        algorithms = frozenset({pinned}) & compatible & allowed
    else:
        algorithms = compatible & allowed
    if not algorithms:
        logger.info(
            "auth.jwks.key_skipped",
            kid=kid,
            kty=jwk.get("kty"),
            alg=pinned,
            reason="no allowed algorithm fits this key",
        )
        return None
    import jwt  # here, not at the top: PyJWT loads cryptography, a start-up cost (performance.md)

    try:
        parsed = jwt.PyJWK(jwk, algorithm=next(iter(sorted(algorithms))))
    except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError) as exc:
        logger.warning("auth.jwks.key_skipped", kid=kid, reason=type(exc).__name__)
        return None
    return VerificationKey(kid, parsed.key, algorithms)
