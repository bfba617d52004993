"""One request's credential → its principal, or a typed refusal.

An :class:`Authenticator` is built from one ``auth:`` section and never
changes; a reload builds a new one and swaps it into the
:class:`AuthHolder` the frontend reads, so a token removed from the file is
refused from the next request on (also on sessions already open), and no
request looks at the config file.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from gateway.backends.credentials.grants import CallerToken
from gateway.errors import GatewayError
from gateway.identity import tokens
from gateway.identity.keys import KeySet
from gateway.identity.metadata import WELL_KNOWN, challenge
from gateway.identity.principal import Principal, scopes_of

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gateway.config import AuthConfig
    from gateway.identity.jwks import JwksSource


# Verified JWTs remembered per authenticator: a host sends the same token
# with every request, and PyJWT's parse and signature check cost a few
# hundred microseconds each time (docs/security.md, measured).
VERIFIED_CACHE_SIZE: Final = 4096


class Unauthenticated(GatewayError):
    """No acceptable credential (401); ``str()`` says why, never the token.

    Args:
        reason: why, for the host.
        token_sent: whether a bearer token was sent (then the challenge
            says ``error="invalid_token"``).
        kind: which check failed, from a fixed vocabulary (``missing``,
            ``unknown_token``, ``no_subject``, or a ``TokenRejected.kind``):
            the ``reason`` label of the auth metrics.
    """

    def __init__(self, reason: str, *, token_sent: bool, kind: str = "") -> None:
        super().__init__(reason)
        self.token_sent = token_sent
        self.kind = kind or ("invalid" if token_sent else "missing")


class InsufficientScope(GatewayError):
    """A valid token without a scope the gateway requires (403).

    Args:
        missing: the required scopes the token lacks.
    """

    def __init__(self, missing: Sequence[str]) -> None:
        super().__init__("token lacks scope " + " ".join(missing))
        self.missing = list(missing)


def token_digest(token: bytes) -> str:
    """A short, non-secret name for an unnamed static token (logs, principal keys)."""
    return "sha256-" + hashlib.sha256(token).hexdigest()[:16]


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of a URL."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class Authenticator:
    """Checks ``Authorization`` headers against one ``auth:`` section.

    Args:
        config: the auth section.
        resource_url: the gateway's resource URL (default audience, metadata).
        jwks: the JWKS URL's key source, when ``jwt.jwks_url`` is set.
        file_keys: the keys of ``jwt.jwks_file``, when set.
    """

    def __init__(
        self,
        config: AuthConfig,
        resource_url: str,
        *,
        jwks: JwksSource | None = None,
        file_keys: KeySet | None = None,
    ) -> None:
        self.config = config
        self.enabled = config.enabled
        self.resource_url = resource_url
        self._static: list[tuple[bytes, str]] = [
            (t.encode(), token_digest(t.encode())) for t in config.bearer_tokens if t
        ]
        self._static += [(t.encode(), name) for name, t in config.tokens.items() if t]
        self._admin = [t.encode() for t in config.admin_tokens if t]
        self._jwks = jwks
        self._file_keys = file_keys or KeySet()
        jwt = config.jwt
        self._jwt_on = jwt.enabled
        self.rules = tokens.JwtRules(
            audience=jwt.audience or resource_url,
            issuer=jwt.issuer,
            leeway=jwt.leeway,
            secret=jwt.secret,
        )
        self.metadata = config.metadata
        self.required_scopes = list(config.required_scopes)
        # token → (the key set it verified with, its claims)
        self._verified: dict[bytes, tuple[KeySet, dict[str, Any]]] = {}

    @property
    def static_names(self) -> frozenset[str]:
        """The names of the static tokens accepted (principal subjects)."""
        return frozenset(name for _, name in self._static)

    @property
    def keys(self) -> KeySet:
        """The asymmetric keys in use now."""
        return self._jwks.keys if self._jwks is not None else self._file_keys

    def metadata_url(self, resource_path: str) -> str:
        """The RFC 9728 metadata URL for one of the gateway's MCP paths."""
        if self.metadata.url:
            return self.metadata.url
        suffix = "" if resource_path == "/" else resource_path
        return origin_of(self.resource_url) + WELL_KNOWN + suffix

    def challenge(self, resource_path: str, exc: Unauthenticated | InsufficientScope) -> bytes:
        """The ``WWW-Authenticate`` value for a refusal on ``resource_path``."""
        if isinstance(exc, InsufficientScope):
            return challenge(
                metadata_url=self.metadata_url(resource_path),
                scopes=exc.missing,
                error="insufficient_scope",
                description=str(exc),
            )
        return challenge(
            metadata_url=self.metadata_url(resource_path),
            scopes=self.required_scopes or self.metadata.scopes_supported,
            error="invalid_token" if exc.token_sent else None,
            description=str(exc) if exc.token_sent else None,
        )

    async def authenticate(
        self, authorization: bytes | None, now: float | None = None
    ) -> Principal | None:
        """The principal of a request, None when auth is off.

        Args:
            authorization: the ``Authorization`` header value, if any.
            now: the time in seconds since the epoch (default: the wall clock).

        Raises:
            Unauthenticated: auth is on and the credential is missing or bad.
            InsufficientScope: a valid JWT lacks a required scope.
        """
        if not self.enabled:
            return None
        token = bearer_token(authorization)
        principal = await self._principal(token, now)
        # Kept for token exchange towards backends only (never forwarded).
        return replace(principal, token=CallerToken(token.decode("ascii", "replace")))

    async def _principal(self, token: bytes, now: float | None) -> Principal:
        static = self._static_principal(token)
        if static is not None:
            return static
        if not self._jwt_on or token.count(b".") != 2:
            raise Unauthenticated("unknown token", token_sent=True, kind="unknown_token")
        when = time.time() if now is None else now
        remembered = self._remembered(token, when)
        if remembered is not None:
            return self._jwt_principal(remembered)
        text = token.decode("ascii", "replace")
        try:
            claims = await self._verify(text, when)
        except tokens.TokenRejected as exc:
            raise Unauthenticated(str(exc), token_sent=True, kind=exc.kind) from None
        if len(self._verified) >= VERIFIED_CACHE_SIZE:
            self._verified.clear()  # bounded memory beats exactness under a token flood
        self._verified[token] = (self.keys, claims)
        return self._jwt_principal(claims)

    async def _verify(self, text: str, when: float) -> dict[str, Any]:
        """The token's claims; on an unknown ``kid``, once more after a key refresh.

        Raises:
            tokens.TokenRejected: the token does not verify (after the refresh).
        """
        try:
            return tokens.verify(text, self.keys, self.rules, when)
        except tokens.UnknownKey as unknown:
            # Key rotation: the IdP may have published the key since. The
            # refresh awaits, so it runs after the except block (a cancellation
            # inside it would discard the exception: ASYNC120).
            missing = unknown
        if self._jwks is None or not await self._jwks.refresh_for_unknown_kid():
            raise missing
        return tokens.verify(text, self.keys, self.rules, when)

    def _remembered(self, token: bytes, now: float) -> dict[str, Any] | None:
        """The claims of a token verified before with the key set still in force."""
        entry = self._verified.get(token)
        if entry is None:
            return None
        keys, claims = entry
        if keys is not self.keys:
            # The JWK Set was refetched: its key may be gone; verify afresh.
            del self._verified[token]
            return None
        try:
            tokens.check_times(claims, self.rules.leeway, now)
        except tokens.TokenRejected as exc:
            del self._verified[token]
            raise Unauthenticated(str(exc), token_sent=True, kind=exc.kind) from None
        return claims

    def _static_principal(self, token: bytes) -> Principal | None:
        found = None
        for known, name in self._static:
            # Every entry is compared, so timing does not tell which matched.
            if hmac.compare_digest(known, token) and found is None:
                found = name
        return Principal("static", found) if found is not None else None

    def _jwt_principal(self, claims: dict[str, Any]) -> Principal:
        subject = claims.get("sub")
        issuer = claims.get("iss")
        if not isinstance(subject, str) or not subject:
            # Client-credentials tokens may lack sub; the client id stands in.
            client = claims.get("client_id") or claims.get("azp")
            subject = client if isinstance(client, str) and client else ""
        if not subject:
            raise Unauthenticated(
                "JWT names no subject (sub, client_id)", token_sent=True, kind="no_subject"
            )
        scopes = scopes_of(claims)
        missing = [s for s in self.required_scopes if s not in scopes]
        if missing:
            raise InsufficientScope(missing)
        return Principal(
            "jwt",
            subject,
            issuer if isinstance(issuer, str) else "",
            scopes,
            claims,
        )

    def is_admin(self, authorization: bytes | None) -> bool:
        """Whether the header carries one of ``admin_tokens``."""
        try:
            token = bearer_token(authorization)
        except Unauthenticated:
            return False
        matched = False
        for known in self._admin:
            matched |= hmac.compare_digest(known, token)
        return matched


def bearer_token(authorization: bytes | None) -> bytes:
    """The token of an ``Authorization: Bearer`` header.

    Raises:
        Unauthenticated: no header, another scheme, or an empty token.
    """
    if authorization is None:
        raise Unauthenticated("missing bearer token", token_sent=False)
    scheme, _, token = authorization.partition(b" ")
    token = token.strip()
    if scheme.lower() != b"bearer" or not token:
        raise Unauthenticated("expected 'Authorization: Bearer <token>'", token_sent=False)
    return token


class AuthHolder:
    """The authenticator in force: one attribute, replaced whole by a reload.

    Args:
        current: the first authenticator.
    """

    def __init__(self, current: Authenticator) -> None:
        self.current = current
