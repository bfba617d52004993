"""The consent flow's records in the state store: links, logins and sealed tokens (sans-IO).

Rules:

1. **Three records, namespace ``consent``.** A *link*
   (``consent:link:<id>``) is what a host shows the person: made for one
   principal, one backend and one waiting call, short-lived. Opening it
   turns it into a *login* (``consent:login:<state>``): the OAuth ``state``
   with the PKCE verifier, made when the person is sent to the
   authorization server. The callback turns the login into the person's
   *tokens* (``consent:token:<principal>:<backend>``), sealed by the vault.
2. **Single use.** A link and a login are taken (read and deleted in one
   store operation) by whoever uses them, so a second use finds nothing;
   both carry their expiry and are stored with it as their TTL, and
   :func:`check_fresh` refuses one read past it anyway (a store without
   TTLs, a clock step).
3. **Bound to the person.** The principal and backend are inside the link
   and the login (never taken from the browser's request), and they are
   the associated data of the sealed tokens (``vault.record_binding``): a
   token record copied under another principal's key does not open.
4. **Keys quote their parts** (``%`` escapes), so a principal key holding a
   colon cannot reach another record.
5. **Typed refusals** (:class:`LoginRefused` and its kinds), never the
   token, code or verifier in a message.
"""

from __future__ import annotations

import enum
from typing import Final
from urllib.parse import quote, unquote

import msgspec

from gateway.consent.vault import Vault, VaultError, record_binding
from gateway.errors import GatewayError

__all__ = [
    "LINK_PREFIX",
    "NAMESPACE",
    "TOKEN_PREFIX",
    "ConsentLink",
    "LoginRefused",
    "PendingLogin",
    "Refusal",
    "StoredTokens",
    "check_fresh",
    "decode_link",
    "decode_login",
    "link_key",
    "login_key",
    "open_tokens",
    "parse_token_key",
    "seal_tokens",
    "token_key",
]

NAMESPACE: Final = "consent"
LINK_PREFIX: Final = f"{NAMESPACE}:link:"
LOGIN_PREFIX: Final = f"{NAMESPACE}:login:"
TOKEN_PREFIX: Final = f"{NAMESPACE}:token:"


class Refusal(enum.Enum):
    """Why a link or a callback was refused (rule 5): each has its page and log line."""

    UNKNOWN = "unknown or already used"
    EXPIRED = "expired"
    DENIED = "refused at the authorization server"
    MALFORMED = "malformed"
    EXCHANGE_FAILED = "the authorization server did not issue a token"
    #: ``consent.bind_login``: the login was someone else's than the caller's.
    NOT_THE_CALLER = "for another account than the one you signed in with"
    #: ``consent.bind_login``: the caller has no login to prove (a static token).
    CANNOT_BIND = "for a caller without a personal login"


class LoginRefused(GatewayError):
    """A consent link or callback the gateway will not complete (rule 5).

    Args:
        reason: which refusal.
        detail: what the person or operator may be told (no secret).
    """

    def __init__(self, reason: Refusal, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"consent {reason.value}" + (f": {detail}" if detail else ""))


class ConsentLink(msgspec.Struct, frozen=True, kw_only=True):
    """A link made for one principal's call to one backend (rule 1).

    Attributes:
        principal: the principal key the call was authenticated as.
        backend: the backend's name.
        elicitation_id: the URL elicitation it answers, so the callback can
            tell the waiting call (and the host) that it completed.
        expires_at: wall-clock seconds past which it is refused.
    """

    principal: str
    backend: str
    elicitation_id: str
    expires_at: float


class PendingLogin(msgspec.Struct, frozen=True, kw_only=True):
    """An authorization request under way: what the callback needs (rule 1).

    Attributes:
        principal: as the link said.
        backend: as the link said.
        elicitation_id: as the link said.
        verifier: the PKCE verifier (never leaves the gateway but to the
            token endpoint).
        redirect_uri: the redirect URI sent, which the exchange repeats.
        expires_at: wall-clock seconds past which the callback is refused.
    """

    principal: str
    backend: str
    elicitation_id: str
    verifier: str
    redirect_uri: str
    expires_at: float


class StoredTokens(msgspec.Struct, frozen=True, kw_only=True):
    """A person's tokens at one backend, as sealed in the store.

    Attributes:
        access_token: sent on the person's backend requests.
        refresh_token: "" when the server issued none.
        expires_at: wall-clock seconds the access token expires at.
        refresh_at: wall-clock seconds from which it is refreshed first.
        scope: the scope granted, as the server said ("" when it did not).
        obtained_at: wall-clock seconds of the consent (the console shows it).
    """

    access_token: str
    refresh_token: str = ""
    expires_at: float
    refresh_at: float
    scope: str = ""
    obtained_at: float = 0.0

    def __repr__(self) -> str:
        return f"StoredTokens(expires_at={self.expires_at}, scope={self.scope!r})"


_LINK_DECODER: Final = msgspec.json.Decoder(ConsentLink)
_LOGIN_DECODER: Final = msgspec.json.Decoder(PendingLogin)
_TOKENS_DECODER: Final = msgspec.json.Decoder(StoredTokens)


def _part(text: str) -> str:
    return quote(text, safe="")


def link_key(link_id: str) -> str:
    """The store key of a link (rule 4)."""
    return LINK_PREFIX + _part(link_id)


def login_key(state: str) -> str:
    """The store key of a login, by its OAuth ``state`` (rule 4)."""
    return LOGIN_PREFIX + _part(state)


def token_key(principal: str, backend: str) -> str:
    """The store key of a principal's tokens at a backend (rule 4)."""
    return f"{TOKEN_PREFIX}{_part(principal)}:{_part(backend)}"


def parse_token_key(key: str) -> tuple[str, str] | None:
    """(principal, backend) of a token key; None for any other key."""
    if not key.startswith(TOKEN_PREFIX):
        return None
    principal, sep, backend = key[len(TOKEN_PREFIX) :].partition(":")
    if not sep or ":" in backend:
        return None
    return unquote(principal), unquote(backend)


def decode_link(blob: bytes | None, now: float) -> ConsentLink:
    """A link taken from the store, checked (rule 2).

    Raises:
        LoginRefused: none (unknown or used), unreadable, or expired.
    """
    if blob is None:
        raise LoginRefused(Refusal.UNKNOWN)
    try:
        link = _LINK_DECODER.decode(blob)
    except msgspec.DecodeError:
        raise LoginRefused(Refusal.MALFORMED, "the stored link is unreadable") from None
    check_fresh(link.expires_at, now)
    return link


def decode_login(blob: bytes | None, now: float) -> PendingLogin:
    """A login taken from the store by its ``state``, checked (rule 2).

    Raises:
        LoginRefused: none (unknown, used or tampered state), unreadable, or expired.
    """
    if blob is None:
        raise LoginRefused(Refusal.UNKNOWN)
    try:
        login = _LOGIN_DECODER.decode(blob)
    except msgspec.DecodeError:
        raise LoginRefused(Refusal.MALFORMED, "the stored login is unreadable") from None
    check_fresh(login.expires_at, now)
    return login


def check_fresh(expires_at: float, now: float) -> None:
    """Rule 2's own check of a record's expiry.

    Raises:
        LoginRefused: ``EXPIRED`` at or past ``expires_at``.
    """
    if now >= expires_at:
        raise LoginRefused(Refusal.EXPIRED)


def seal_tokens(vault: Vault, principal: str, backend: str, tokens: StoredTokens) -> bytes:
    """The tokens sealed for their record (rule 3)."""
    return vault.seal(msgspec.json.encode(tokens), record_binding(principal, backend))


def open_tokens(vault: Vault, principal: str, backend: str, blob: bytes) -> StoredTokens:
    """Sealed tokens opened for the record they must belong to (rule 3).

    Raises:
        VaultError: altered, sealed for another record, an unknown key, or
            not a token record once opened.
    """
    plain = vault.open(blob, record_binding(principal, backend))
    try:
        return _TOKENS_DECODER.decode(plain)
    except msgspec.DecodeError:
        raise VaultError("a sealed record that is not a token record") from None
