"""OAuth 2.0 grants the gateway uses towards backends, sans-IO.

Rules:

1. The caller's token never leaves as a credential: it is only ever the
   ``subject_token`` of a token exchange (RFC 8693) sent to the configured
   token endpoint. :class:`CallerToken` holds it and never shows it in a
   ``repr`` or ``str``, so a log line cannot carry it by accident.
2. A token is used until ``refresh_at``: its expiry minus the larger of the
   configured skew and a share of its lifetime, so a token is never sent in
   the last seconds of its life. A token without ``expires_in`` is kept for
   ``DEFAULT_LIFETIME`` (RFC 6749 makes the field optional).
3. A token a backend refused (401) is dropped from the cache only if it is
   still the cached one: of a hundred requests refused with the same
   token, the first invalidates and fetches; the rest find the new one.
4. A token endpoint's refusal is :class:`TokenEndpointError`, naming the
   status and the OAuth ``error`` code, never a secret or a token.

Building requests, reading responses and deciding what is fresh live here
and never await; ``gateway.backends.credentials.provider`` does the HTTP.
"""

from __future__ import annotations

import base64
import math
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote

import msgspec

from gateway.errors import CredentialUnavailable

if TYPE_CHECKING:
    from collections.abc import Hashable

    from gateway.config.schema_backend_auth import BackendAuth

CLIENT_CREDENTIALS: Final = "client_credentials"
TOKEN_EXCHANGE_GRANT: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:access_token"
FORM_MEDIA_TYPE: Final = "application/x-www-form-urlencoded"
JWT_BEARER_ASSERTION: Final = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
# Seconds a private_key_jwt client assertion is valid (RFC 7523 3: short).
ASSERTION_LIFETIME: Final = 60
# How long a token without ``expires_in`` is used (rule 2): short, because
# nothing says how long it lives; a 401 refreshes it sooner anyway.
DEFAULT_LIFETIME: Final = 300.0
# A longer ``expires_in`` is read as this (a year): a token is still
# refreshed now and then, and no number overflows the clock's float.
MAX_LIFETIME: Final = 365 * 86400
# The longest error description kept from a token endpoint's answer.
MAX_DESCRIPTION: Final = 200

_decoder: Final = msgspec.json.Decoder(dict[str, Any])


class TokenEndpointError(CredentialUnavailable):
    """The token endpoint answered, but not with a token.

    Args:
        status: the HTTP status.
        error: the OAuth ``error`` code (``invalid_client``), or "" when the
            body had none.
        description: the ``error_description``, shortened.
    """

    def __init__(self, status: int, error: str = "", description: str = "") -> None:
        self.status = status
        self.error = error
        self.description = description
        text = f"token endpoint answered {status}"
        if error:
            text += f" {error}"
        if description:
            text += f" ({description})"
        super().__init__(text)


class CallerToken:
    """The caller's raw bearer token: kept for token exchange only, never shown (rule 1).

    A plain class, not a dataclass or Struct, so that msgspec and ``json``
    refuse to encode it rather than write the token out.

    Args:
        value: the token as the caller sent it.
    """

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "CallerToken(<redacted>)"

    __str__ = __repr__


@dataclass(frozen=True, slots=True)
class TokenRequest:
    """One POST to a token endpoint: where, the headers and the form.

    Attributes:
        url: the token endpoint.
        headers: ``Authorization`` (client_secret_basic) and ``Content-Type``.
        form: the form fields, in order.
    """

    url: str
    headers: dict[str, str] = field(repr=False)
    form: dict[str, str] = field(repr=False)


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """An access token and when to stop using it.

    Attributes:
        access_token: the token (never logged: ``repr`` leaves it out).
        refresh_at: the time (the caller's clock) from which it is stale.
        expires_at: when it expires, on the same clock.
    """

    access_token: str = field(repr=False)
    refresh_at: float
    expires_at: float


def _form_quote(text: str) -> str:
    # RFC 6749 section 2.3.1: id and secret are form-urlencoded before Basic.
    return quote(text, safe="")


def client_assertion(auth: BackendAuth, private_key: str, now: float, jti: str) -> str:
    """The signed client assertion of ``private_key_jwt`` (RFC 7523 section 3).

    The client is issuer and subject, the token endpoint (or
    ``assertion_audience``) the audience; it
    lives ``ASSERTION_LIFETIME`` seconds and ``jti`` makes each one single-use.

    Raises:
        CredentialUnavailable: the key cannot sign with ``signing_algorithm``
            (not a PEM key, or the wrong key type); the message names neither.
    """
    claims = {
        "iss": auth.client_id,
        "sub": auth.client_id,
        "aud": auth.assertion_audience or auth.token_url,
        "iat": int(now),
        "exp": int(now) + ASSERTION_LIFETIME,
        "jti": jti,
    }
    import jwt  # here, not at the top: PyJWT loads cryptography, a start-up cost (performance.md)

    try:
        return jwt.encode(claims, private_key, algorithm=auth.signing_algorithm)
    except (ValueError, TypeError, jwt.PyJWTError) as exc:
        raise CredentialUnavailable(
            f"private_key_file cannot sign {auth.signing_algorithm} ({type(exc).__name__})"
        ) from None


def _base_form(auth: BackendAuth, secret: str, headers: dict[str, str]) -> dict[str, str]:
    form: dict[str, str] = {}
    if auth.client_auth == "private_key_jwt":
        # The only clock and randomness of this module: an assertion is
        # built per token request, which already is the I/O edge.
        form["client_id"] = auth.client_id
        form["client_assertion_type"] = JWT_BEARER_ASSERTION
        form["client_assertion"] = client_assertion(auth, secret, time.time(), uuid.uuid4().hex)
    elif auth.client_auth == "client_secret_basic":
        pair = f"{_form_quote(auth.client_id)}:{_form_quote(secret)}".encode()
        headers["authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
    else:
        form["client_id"] = auth.client_id
        form["client_secret"] = secret
    return form


def _targets(auth: BackendAuth, form: dict[str, str]) -> None:
    if auth.scopes:
        form["scope"] = " ".join(auth.scopes)
    if auth.audience:
        form["audience"] = auth.audience
    if auth.resource:
        form["resource"] = auth.resource


def client_credentials_request(auth: BackendAuth, secret: str) -> TokenRequest:
    """The token request of the client credentials grant (RFC 6749 section 4.4).

    Args:
        auth: the backend's ``auth`` settings.
        secret: the client secret, already read from its file or variable.
    """
    headers = {"content-type": FORM_MEDIA_TYPE, "accept": "application/json"}
    form = {"grant_type": CLIENT_CREDENTIALS, **_base_form(auth, secret, headers)}
    _targets(auth, form)
    return TokenRequest(auth.token_url, headers, form)


def token_exchange_request(auth: BackendAuth, secret: str, subject: CallerToken) -> TokenRequest:
    """The token request that exchanges the caller's token (RFC 8693 section 2.1).

    Args:
        auth: the backend's ``auth`` settings (``audience``/``resource`` name
            the backend the new token is for).
        secret: the gateway's client secret at the token endpoint.
        subject: the caller's access token.
    """
    headers = {"content-type": FORM_MEDIA_TYPE, "accept": "application/json"}
    form = {
        "grant_type": TOKEN_EXCHANGE_GRANT,
        **_base_form(auth, secret, headers),
        "subject_token": subject.value,
        "subject_token_type": ACCESS_TOKEN_TYPE,
        "requested_token_type": ACCESS_TOKEN_TYPE,
    }
    _targets(auth, form)
    return TokenRequest(auth.token_url, headers, form)


def refresh_time(now: float, lifetime: float, skew: float, fraction: float) -> float:
    """When a token issued at ``now`` for ``lifetime`` seconds goes stale (rule 2).

    Never before ``now``: a token shorter-lived than the skew is used once
    and then replaced, rather than refetched forever.
    """
    margin = max(skew, lifetime * fraction)
    return now + max(lifetime - margin, 0.0)


def parse_token_response(
    status: int, body: bytes, now: float, skew: float, fraction: float
) -> IssuedToken:
    """Read a token endpoint's answer (RFC 6749 sections 5.1 and 5.2).

    Args:
        status: the HTTP status.
        body: the response body.
        now: the time of the request, on the clock ``refresh_at`` uses.
        skew: ``refresh_skew``.
        fraction: ``refresh_fraction``.

    Raises:
        TokenEndpointError: an error answer, or a success without a usable
            bearer token.
    """
    try:
        data = _decoder.decode(body) if body else {}
    except msgspec.DecodeError:
        data = {}
    if status != 200:
        error = data.get("error")
        description = data.get("error_description")
        raise TokenEndpointError(
            status,
            error if isinstance(error, str) else "",
            description[:MAX_DESCRIPTION] if isinstance(description, str) else "",
        )
    token = data.get("access_token")
    if not isinstance(token, str) or not token:
        raise TokenEndpointError(status, "", "the answer holds no access_token")
    token_type = data.get("token_type", "Bearer")
    if not isinstance(token_type, str) or token_type.lower() not in ("bearer", "n_a"):
        # RFC 8693 allows "N_A" for a token that is not an access token; a
        # DPoP or MAC token cannot be sent as a plain bearer token.
        raise TokenEndpointError(status, "", f"token_type {str(token_type)[:40]!r} is not Bearer")
    expires_in = data.get("expires_in")
    lifetime = DEFAULT_LIFETIME
    # An int of 400 digits is valid JSON; float() of it overflows, so it is
    # capped while still an int (found by the property test).
    if (
        isinstance(expires_in, int | float)
        and not isinstance(expires_in, bool)
        and expires_in > 0
        and (isinstance(expires_in, int) or math.isfinite(expires_in))
    ):
        lifetime = float(min(expires_in, MAX_LIFETIME))
    return IssuedToken(
        token, refresh_time(now, lifetime, skew, fraction), expires_at=now + lifetime
    )


class TokenCache:
    """Fresh tokens by key: the backend, or (principal key, backend) for exchanges.

    Bounded: past ``max_entries`` the oldest entry goes, so callers that come
    and go cannot grow it without limit.

    Args:
        max_entries: the most tokens kept.
    """

    def __init__(self, max_entries: int) -> None:
        self._max = max_entries
        self._tokens: dict[Hashable, IssuedToken] = {}

    def __len__(self) -> int:
        return len(self._tokens)

    def fresh(self, key: Hashable, now: float) -> IssuedToken | None:
        """The cached token for ``key`` if it is not yet stale at ``now``."""
        token = self._tokens.get(key)
        if token is None or now >= token.refresh_at:
            return None
        return token

    def put(self, key: Hashable, token: IssuedToken) -> None:
        """Keep ``token`` for ``key`` (replacing any)."""
        self._tokens.pop(key, None)
        self._tokens[key] = token
        while len(self._tokens) > self._max:
            del self._tokens[next(iter(self._tokens))]

    def invalidate(self, key: Hashable, refused: str) -> bool:
        """Drop ``key``'s token if it is still ``refused`` (rule 3); True if dropped."""
        token = self._tokens.get(key)
        if token is None or token.access_token != refused:
            return False
        del self._tokens[key]
        return True


def _consent_form(auth: BackendAuth, secret: str, headers: dict[str, str]) -> dict[str, str]:
    """Client authentication of a ``user_consent`` client: Basic/post with a secret, else public."""
    if secret:
        return _base_form(auth, secret, headers)
    return {"client_id": auth.client_id}


def authorization_code_request(
    auth: BackendAuth,
    secret: str,
    *,
    token_url: str,
    code: str,
    verifier: str,
    redirect_uri: str,
    resource: str,
) -> TokenRequest:
    """The code exchange of ``user_consent`` (RFC 6749 4.1.3, RFC 7636 4.5, RFC 8707 2.2).

    Args:
        auth: the backend's ``auth`` settings.
        secret: the client secret ("" for a public client).
        token_url: the discovered token endpoint.
        code: the authorization code from the callback.
        verifier: the PKCE verifier of that login.
        redirect_uri: the redirect URI the authorization request named.
        resource: the backend's canonical URL; "" sends none.
    """
    headers = {"content-type": FORM_MEDIA_TYPE, "accept": "application/json"}
    form = {
        "grant_type": "authorization_code",
        **_consent_form(auth, secret, headers),
        "code": code,
        "redirect_uri": redirect_uri,
        "code_verifier": verifier,
    }
    if resource:  # "" for the gateway's own OpenID login (consent.bind_login)
        form["resource"] = resource
    return TokenRequest(token_url, headers, form)


def refresh_token_request(
    auth: BackendAuth, secret: str, *, token_url: str, refresh_token: str, resource: str
) -> TokenRequest:
    """A person's token refreshed (RFC 6749 section 6), for the same resource (RFC 8707)."""
    headers = {"content-type": FORM_MEDIA_TYPE, "accept": "application/json"}
    form = {
        "grant_type": "refresh_token",
        **_consent_form(auth, secret, headers),
        "refresh_token": refresh_token,
        "resource": resource,
    }
    return TokenRequest(token_url, headers, form)


def revocation_request(
    auth: BackendAuth, secret: str, *, revocation_url: str, token: str, hint: str
) -> TokenRequest:
    """A person's token revoked at its authorization server (RFC 7009 section 2.1).

    Args:
        auth: the backend's ``auth`` settings (the client, as for the token endpoint).
        secret: the client secret ("" for a public client).
        revocation_url: the server's ``revocation_endpoint``.
        token: the refresh or access token.
        hint: ``refresh_token`` or ``access_token`` (``token_type_hint``).
    """
    headers = {"content-type": FORM_MEDIA_TYPE, "accept": "application/json"}
    form = {**_consent_form(auth, secret, headers), "token": token, "token_type_hint": hint}
    return TokenRequest(revocation_url, headers, form)


def revocation_error(body: bytes) -> str:
    """The OAuth ``error`` code of a refused revocation (RFC 7009 2.2.1); "" when none."""
    try:
        data = _decoder.decode(body)
    except msgspec.DecodeError:
        return ""
    error = data.get("error")
    return error if isinstance(error, str) else ""


def token_extras(body: bytes) -> tuple[str, str]:
    """The ``refresh_token`` and ``scope`` of a successful token answer ("" when absent)."""
    try:
        data = _decoder.decode(body)
    except msgspec.DecodeError:
        return "", ""
    refresh = data.get("refresh_token")
    scope = data.get("scope")
    return (
        refresh if isinstance(refresh, str) else "",
        scope if isinstance(scope, str) else "",
    )
