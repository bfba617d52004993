"""Binding a sign-in link to a person's own login (``consent.bind_login``, sans-IO).

Without it the single-use link is the proof of who asked: whoever opens it
signs in for its principal. With it, opening the link first sends the
browser to the gateway's OpenID provider; only an ID token naming the
link's principal lets the sign-in go on to the backend's server.

Rules:

1. **Which callers.** A JWT principal's key is ``jwt:<iss>|<sub>``
   (``identity.principal.Principal.key``); the login must yield an ID token
   with that very ``iss`` and ``sub``. A static-token principal has no
   person to log in as: its link is refused (:data:`Refusal.CANNOT_BIND`).
2. **The login is single use and bound like the link** (``records`` rules):
   an *identifying* record (``consent:identify:<state>``) holds the link's
   principal, backend and elicitation, the PKCE verifier and the OpenID
   ``nonce``; the callback takes it. Its ``state`` starts with
   :data:`STATE_PREFIX`, so the one callback path tells the two steps apart
   (the prefix only picks which record to take: a forged one finds none).
3. **The ID token is checked as OpenID Connect Core 3.1.3.7 says for one
   received from the token endpoint over the gateway's own connection**
   (TLS there validates the issuer in place of its signature): ``iss`` is
   the configured issuer, ``aud`` holds the client id (with ``azp`` equal
   to it when there are several), ``exp`` is in the future (with
   :data:`LEEWAY`), and ``nonce`` is the one sent.
4. Typed refusals (``LoginRefused``), never a token or a claim value in a
   message.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote, urlencode, urlsplit

import msgspec

from gateway.consent.records import NAMESPACE, LoginRefused, Refusal, check_fresh

if TYPE_CHECKING:
    from gateway.consent.oauth import AuthorizationServer, Pkce

__all__ = [
    "STATE_PREFIX",
    "IdentifyingLogin",
    "decode_identifying",
    "identify_key",
    "identity_of",
    "login_url",
    "principal_key",
]

#: The ``state`` of a login at the gateway's OpenID provider starts with this (rule 2).
STATE_PREFIX: Final = "i."
#: Seconds of clock skew allowed on the ID token's ``exp``.
LEEWAY: Final = 60.0
_IDENTIFY_PREFIX: Final = f"{NAMESPACE}:identify:"
_JSON: Final = msgspec.json.Decoder()


class IdentifyingLogin(msgspec.Struct, frozen=True, kw_only=True):
    """A login at the gateway's OpenID provider under way (rule 2).

    Attributes:
        principal: the principal the link was made for.
        backend: the link's backend.
        elicitation_id: the link's elicitation.
        verifier: the PKCE verifier of this login.
        nonce: the OpenID ``nonce`` sent; the ID token must carry it.
        redirect_uri: the redirect URI sent, which the exchange repeats.
        expires_at: the link's expiry, which this login keeps.
    """

    principal: str
    backend: str
    elicitation_id: str
    verifier: str
    nonce: str
    redirect_uri: str
    expires_at: float


_DECODER: Final = msgspec.json.Decoder(IdentifyingLogin)


def identify_key(state: str) -> str:
    """The store key of an identifying login, by its ``state``."""
    return _IDENTIFY_PREFIX + quote(state, safe="")


def decode_identifying(blob: bytes | None, now: float) -> IdentifyingLogin:
    """An identifying login taken from the store, checked (rule 2).

    Raises:
        LoginRefused: none (unknown, used or tampered state), unreadable, or expired.
    """
    if blob is None:
        raise LoginRefused(Refusal.UNKNOWN)
    try:
        login = _DECODER.decode(blob)
    except msgspec.DecodeError:
        raise LoginRefused(Refusal.MALFORMED, "the stored login is unreadable") from None
    check_fresh(login.expires_at, now)
    return login


def principal_key(issuer: str, subject: str) -> str:
    """The key of the JWT principal ``(issuer, subject)``: ``Principal.key``'s form (rule 1)."""
    return f"jwt:{issuer}|{subject}"


def login_url(
    server: AuthorizationServer,
    *,
    client_id: str,
    redirect_uri: str,
    state: str,
    pkce: Pkce,
    nonce: str,
    scopes: list[str],
) -> str:
    """The OpenID Connect authentication request (Core 3.1.2.1) with PKCE, no ``resource``."""
    wanted = ["openid", *(scope for scope in scopes if scope != "openid")]
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "scope": " ".join(wanted),
        "state": state,
        "nonce": nonce,
        "code_challenge": pkce.challenge,
        "code_challenge_method": "S256",
    }
    separator = "&" if urlsplit(server.authorization_endpoint).query else "?"
    return server.authorization_endpoint + separator + urlencode(query)


def _claims(id_token: str) -> dict[str, Any]:
    parts = id_token.split(".")
    if len(parts) != 3:
        raise LoginRefused(Refusal.EXCHANGE_FAILED, "the ID token is not a JWT")
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = _JSON.decode(payload)
    except (binascii.Error, ValueError, msgspec.DecodeError):
        raise LoginRefused(Refusal.EXCHANGE_FAILED, "the ID token is unreadable") from None
    if not isinstance(claims, dict):
        raise LoginRefused(Refusal.EXCHANGE_FAILED, "the ID token is unreadable")
    return claims


def identity_of(body: bytes, *, issuer: str, client_id: str, nonce: str, now: float) -> str:
    """The principal key a token response's ID token proves (rules 1 and 3).

    Args:
        body: the token endpoint's JSON answer (status 200).
        issuer: the configured OpenID provider.
        client_id: the gateway's client there.
        nonce: the nonce the login sent.
        now: wall-clock seconds.

    Raises:
        LoginRefused: ``EXCHANGE_FAILED`` without a usable ID token, or one
            for another issuer, client or nonce, or expired.
    """
    try:
        answer = _JSON.decode(body)
    except msgspec.DecodeError:
        raise LoginRefused(Refusal.EXCHANGE_FAILED, "the token response is not JSON") from None
    id_token = answer.get("id_token") if isinstance(answer, dict) else None
    if not isinstance(id_token, str):
        raise LoginRefused(Refusal.EXCHANGE_FAILED, "the login returned no ID token")
    claims = _claims(id_token)
    iss, sub, aud = claims.get("iss"), claims.get("sub"), claims.get("aud")
    audiences = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
    if not isinstance(iss, str) or iss.rstrip("/") != issuer.rstrip("/"):
        raise LoginRefused(Refusal.EXCHANGE_FAILED, "the ID token is from another issuer")
    if client_id not in audiences or (len(audiences) > 1 and claims.get("azp") != client_id):
        raise LoginRefused(Refusal.EXCHANGE_FAILED, "the ID token is for another client")
    expires = claims.get("exp")
    if not isinstance(expires, int | float) or expires + LEEWAY <= now:
        raise LoginRefused(Refusal.EXCHANGE_FAILED, "the ID token has expired")
    if claims.get("nonce") != nonce:
        raise LoginRefused(Refusal.EXCHANGE_FAILED, "the ID token is for another login")
    if not isinstance(sub, str) or not sub:
        raise LoginRefused(Refusal.EXCHANGE_FAILED, "the ID token names no subject")
    return principal_key(iss, sub)
