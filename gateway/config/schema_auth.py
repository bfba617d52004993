"""The configuration schema, auth part: bearer tokens, JWTs, resource metadata, admin access.

What each key means for a request is in docs/security.md; the checks
themselves are in :mod:`gateway.identity`. Rules here are the ones a file can
break on its own: an unknown algorithm, ``none``, a JWKS given twice, a
token name used twice.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from gateway.config.schema import Base, Invalid, Positive

__all__ = ["JwtConfig", "ResourceMetadataConfig", "AuthConfig", "DEFAULT_JWT_ALGORITHMS"]

#: Asymmetric algorithms accepted from a JWKS when ``algorithms`` is not set.
DEFAULT_JWT_ALGORITHMS = [
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
]
_KNOWN_ALGORITHMS = frozenset(DEFAULT_JWT_ALGORITHMS) | {"HS256", "HS384", "HS512", "ES256K"}

TokenName = Annotated[
    str,
    Meta(
        pattern="^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$",
        extra={"problem": "{value!r} is not a token name (letters, digits, '_.@-', up to 64)"},
    ),
]


class JwtConfig(Base, frozen=True, kw_only=True):
    """Validation of JWT bearer tokens.

    Attributes:
        secret: the HS256 shared key (from the environment); empty refuses
            HMAC-signed tokens.
        jwks_url: where the identity provider publishes its signing keys
            (``.../protocol/openid-connect/certs`` for Keycloak).
        jwks_file: a JWK Set on disk, instead of ``jwks_url``.
        audience: the ``aud`` a token must carry; empty means the gateway's
            resource URL (``server.public_url``, RFC 8707).
        issuer: the ``iss`` a token must carry; empty accepts any (set it).
        algorithms: what keys from the JWKS may verify; a JWK's own ``alg``
            must be among them. ``none`` is never accepted.
        leeway: seconds of clock skew tolerated on ``exp`` and ``nbf``.
        jwks_min_refresh: the least seconds between two JWKS fetches, also
            when tokens name unknown ``kid`` values.
        jwks_max_age: how long a JWKS stays fresh when its response has no
            ``Cache-Control: max-age``.
        jwks_timeout: seconds for one JWKS fetch.
    """

    secret: str = ""
    jwks_url: str = ""
    jwks_file: str = ""
    audience: str = ""
    issuer: str = ""
    algorithms: list[str] = msgspec.field(default_factory=lambda: list(DEFAULT_JWT_ALGORITHMS))
    leeway: Annotated[float, Meta(ge=0, le=600)] = 30.0
    jwks_min_refresh: Positive = 60.0
    jwks_max_age: Positive = 3600.0
    jwks_timeout: Positive = 10.0

    def __post_init__(self) -> None:
        problems: list[tuple[str, str]] = []
        for index, alg in enumerate(self.algorithms):
            if alg.lower() == "none":
                problems.append((f"algorithms[{index}]", "'none' is never accepted"))
            elif alg not in _KNOWN_ALGORITHMS:
                known = ", ".join(sorted(_KNOWN_ALGORITHMS))
                problems.append((f"algorithms[{index}]", f"unknown algorithm {alg!r} ({known})"))
        if self.jwks_url and self.jwks_file:
            problems.append(("jwks_file", "set jwks_url or jwks_file, not both"))
        if self.jwks_url and not self.jwks_url.startswith(("https://", "http://")):
            problems.append(("jwks_url", f"must be an http(s) URL (got {self.jwks_url!r})"))
        if problems:
            raise Invalid(*problems)

    @property
    def enabled(self) -> bool:
        """Whether JWTs are accepted at all."""
        return bool(self.secret or self.jwks_url or self.jwks_file)


class ResourceMetadataConfig(Base, frozen=True, kw_only=True):
    """OAuth protected resource metadata (RFC 9728), served under ``/.well-known``.

    Attributes:
        authorization_servers: issuer URLs of the authorization servers
            hosts get tokens from.
        scopes_supported: scopes a host may ask for.
        url: the metadata URL named in ``WWW-Authenticate``; empty means
            ``{server.public_url origin}/.well-known/oauth-protected-resource{server.path}``.
    """

    authorization_servers: list[str] = msgspec.field(default_factory=list)
    scopes_supported: list[str] = msgspec.field(default_factory=list)
    url: str = ""


class AuthConfig(Base, frozen=True, kw_only=True):
    """Who may use the gateway. With no tokens and no JWT keys, anyone on
    an allowed Origin/Host may (the default, for a loopback bind).

    Attributes:
        bearer_tokens: static tokens, compared in constant time; entries that
            expand to "" are ignored, so ``${TOKEN:-}`` is safe to leave in.
            Each is its own principal, named by a digest of the token.
        tokens: named static tokens (name → token); the name is the
            principal (logs, session binding, later policy).
        jwt: JWT validation.
        resource_metadata: what ``/.well-known/oauth-protected-resource``
            says. The old string form (the metadata URL) still works.
        required_scopes: scopes every JWT must carry; one missing → 403
            ``insufficient_scope`` naming it.
        admin_tokens: tokens for ``/metrics`` and ``/readyz`` details on a
            non-loopback bind without a separate ``metrics`` listener.
    """

    bearer_tokens: list[str] = msgspec.field(default_factory=list)
    tokens: dict[TokenName, str] = msgspec.field(default_factory=dict)
    jwt: JwtConfig = msgspec.field(default_factory=JwtConfig)
    resource_metadata: str | ResourceMetadataConfig = msgspec.field(
        default_factory=ResourceMetadataConfig
    )
    required_scopes: list[str] = msgspec.field(default_factory=list)
    admin_tokens: list[str] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        if isinstance(self.resource_metadata, str):
            # The form before 0.x: just the URL for WWW-Authenticate.
            msgspec.structs.force_setattr(
                self, "resource_metadata", ResourceMetadataConfig(url=self.resource_metadata)
            )

    @property
    def metadata(self) -> ResourceMetadataConfig:
        """``resource_metadata`` in its one normalized form."""
        value = self.resource_metadata
        return value if isinstance(value, ResourceMetadataConfig) else ResourceMetadataConfig()

    @property
    def enabled(self) -> bool:
        """Whether requests must carry a credential."""
        return any(self.bearer_tokens) or any(self.tokens.values()) or self.jwt.enabled
