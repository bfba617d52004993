"""Signed tokens, one codec for every kind the gateway hands out (sans-IO).

Pagination cursors, sealed ``requestState`` and the console's login cookie
and CSRF token are all the same thing: bytes the gateway gives away and must
recognise, unaltered, when they come back. They share this codec, so they
share its rules:

1. **Purpose-bound.** The MAC is over the purpose (``cursor``,
   ``requestState``, ``console-login``, ...), so a token minted for one
   purpose never verifies for another, even under the same key.
2. **Optionally bound to a party.** ``bound_to`` (a principal, a console
   credential's identity) is in the MAC and not in the token: it verifies
   only for the same party, and the holder learns nothing of it.
3. **Expiry where the caller wants it.** A token signed with ``expires_at``
   carries it, signed; it is dead at ``now >= expires_at``. A token without
   one never expires (a cursor lives as long as its key).
4. **A key ring for rotation.** Sign with the first key, verify with any
   (each in constant time, every key tried, so the timing says nothing of
   which matched). Roll over by putting the new key first and dropping the
   old one once no token it signed can still be needed.
5. **Canonical base64url only.** A token with two spellings could pass a
   cache or a log filter in one form and verify in the other, so any
   spelling but the one we made is refused.
6. **Typed failures.** Every refusal is an :class:`InvalidToken` subclass;
   callers translate it to what their peer expects (-32602 for a cursor or a
   ``requestState``, a login page for a cookie) and never read its text.
7. **Integrity only, not secrecy.** The body is readable by whoever holds
   the token; put nothing secret in it.

Wire form: ``base64url(head ‖ body) "." base64url(tag)``, unpadded, where
``head`` is ``0x00`` (no expiry) or ``0x01`` and the expiry as a big-endian
IEEE 754 double, and ``tag`` is the first ``TAG_BYTES`` bytes of
HMAC-SHA256(key, ``field(purpose) ‖ binding ‖ head ‖ body``); ``field(x)`` is
x's length as four big-endian bytes then x in UTF-8, and ``binding`` is
``0x00`` without ``bound_to`` and ``0x01 ‖ field(bound_to)`` with it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
import secrets
import struct
from typing import TYPE_CHECKING, Final

from gateway.errors import GatewayError

if TYPE_CHECKING:
    from collections.abc import Sequence

# 192 bits of HMAC-SHA256: past any forging budget, and a whole number of
# base64 characters (32), so every character of the tag counts.
TAG_BYTES: Final = 24
MIN_KEY_BYTES: Final = 16
_NO_EXPIRY: Final = b"\x00"
_EXPIRY: Final = b"\x01"
_EXPIRY_FORMAT: Final = struct.Struct(">d")
_FIELD_LENGTH: Final = struct.Struct(">I")


class InvalidToken(GatewayError):
    """A token this gateway did not issue for this purpose, or one that is dead.

    Callers catch this one class; the subclasses say which check failed, for
    logs and metrics only (never for the peer, who learns nothing of why).
    """


class TokenMalformed(InvalidToken):
    """Not a token at all: not ASCII, not two base64url parts, not canonical."""


class BadSignature(InvalidToken):
    """Well formed, but no key of the ring signed it for this purpose and party."""


class TokenExpired(InvalidToken):
    """Signed by us, but past its expiry (or checked without a clock)."""


class WeakKey(GatewayError, ValueError):
    """A key ring without keys, or with a key too short for the HMAC to mean much."""


def key_from_secret(secret: str | bytes) -> bytes:
    """A full-length key for a configured secret; a random one when it is empty.

    Any configured string works, and replicas sharing it derive the same key;
    an empty secret gives tokens that die with the process, which is safe,
    just not shareable between replicas.
    """
    if isinstance(secret, str):
        secret = secret.encode("utf-8", "surrogatepass")
    return hashlib.sha256(secret).digest() if secret else secrets.token_bytes(32)


def keys_from_secret(secret: str | bytes | Sequence[str]) -> list[bytes]:
    """The key ring of a configured secret: one string, or a list, newest first.

    A list rotates without a reload's grace period: put the new secret
    first (it signs) and keep the old one after it (it still verifies)
    until no token it signed can be needed; each replica may take the new
    list at its own pace. One string or an empty list is as
    :func:`key_from_secret`.
    """
    if isinstance(secret, (str, bytes)) or not secret:
        return [key_from_secret(secret if isinstance(secret, (str, bytes)) else "")]
    return [key_from_secret(one) for one in secret]


def _field(text: str) -> bytes:
    data = text.encode("utf-8", "surrogatepass")
    return _FIELD_LENGTH.pack(len(data)) + data


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise TokenMalformed("not base64url") from None
    if _b64(data) != text:
        raise TokenMalformed("not canonical base64url")
    return data


class Keyring:
    """Signs and verifies tokens with a ring of keys (rules 1-6).

    Args:
        keys: HMAC keys, newest (the one that signs) first; each at least
            ``MIN_KEY_BYTES`` long (use :func:`key_from_secret` for a
            configured string).

    Raises:
        WeakKey: no key, or a key too short.
    """

    def __init__(self, keys: Sequence[bytes]) -> None:
        if not keys or any(len(k) < MIN_KEY_BYTES for k in keys):
            raise WeakKey(f"need at least one key of {MIN_KEY_BYTES}+ bytes")
        self._keys = tuple(keys)

    @property
    def keys(self) -> tuple[bytes, ...]:
        """The keys, newest (the one that signs) first."""
        return self._keys

    @staticmethod
    def _tag(key: bytes, purpose: str, bound_to: str | None, signed: bytes) -> bytes:
        binding = b"\x00" if bound_to is None else b"\x01" + _field(bound_to)
        message = _field(purpose) + binding + signed
        return hmac.new(key, message, hashlib.sha256).digest()[:TAG_BYTES]

    def sign(
        self,
        purpose: str,
        body: bytes,
        *,
        bound_to: str | None = None,
        expires_at: float | None = None,
    ) -> str:
        """The token for ``body``, valid for ``purpose`` (and ``bound_to``) only.

        Args:
            purpose: what the token is; it verifies for nothing else.
            body: what the token carries, readable by its holder.
            bound_to: the party it is for (in the MAC, not in the token).
            expires_at: the verifier's clock reading at which it dies.
        """
        head = _NO_EXPIRY if expires_at is None else _EXPIRY + _EXPIRY_FORMAT.pack(expires_at)
        signed = head + body
        return f"{_b64(signed)}.{_b64(self._tag(self._keys[0], purpose, bound_to, signed))}"

    def verify(
        self,
        purpose: str,
        token: str,
        *,
        bound_to: str | None = None,
        now: float | None = None,
    ) -> bytes:
        """The body of a token we signed for ``purpose`` (and ``bound_to``), if still alive.

        Args:
            purpose: what the token was presented as.
            token: the token, as the peer sent it.
            bound_to: the party presenting it (as given to :meth:`sign`).
            now: the clock to read an expiry against; a token with an
                expiry is refused without one.

        Raises:
            TokenMalformed: not a token.
            BadSignature: not signed by a key of the ring for this purpose
                and party (tampered, truncated, foreign or rotated out).
            TokenExpired: signed by us, but dead.
        """
        if not token.isascii():
            raise TokenMalformed("not ASCII")
        body_text, dot, tag_text = token.partition(".")
        if not dot or not body_text or not tag_text:
            raise TokenMalformed("not two parts")
        signed, tag = _unb64(body_text), _unb64(tag_text)
        if len(tag) != TAG_BYTES or not signed:
            raise TokenMalformed("wrong lengths")
        matches = [
            hmac.compare_digest(self._tag(key, purpose, bound_to, signed), tag)
            for key in self._keys
        ]
        if not any(matches):
            raise BadSignature("signature does not match")
        if signed[:1] == _NO_EXPIRY:
            return signed[1:]
        if signed[:1] != _EXPIRY or len(signed) < 1 + _EXPIRY_FORMAT.size:
            raise TokenMalformed("unknown head")  # pragma: no cover - only our own heads are signed
        (expires_at,) = _EXPIRY_FORMAT.unpack_from(signed, 1)
        if now is None or math.isnan(expires_at) or now >= expires_at:
            raise TokenExpired("expired")
        return signed[1 + _EXPIRY_FORMAT.size :]
