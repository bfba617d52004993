"""Sealed opaque tokens: ``requestState`` now, cursors and task ids later (sans-IO).

A modern client echoes ``requestState`` byte-exact on its retry, but to the
server it is attacker-controlled input; one that steers business logic MUST
be integrity-protected and rejected on failure, and SHOULD bind the
principal, a short expiry and the originating request (method plus a digest
of its salient params) (``S/basic/patterns/mrtr.mdx`` §Server Requirements).
The gateway also needs to know which backend a token belongs to, so that a
retry reaching any replica lands on the right backend with the backend's
own state restored byte for byte.

Wire form: ``base64url(body ‖ tag)`` unpadded, where ``body`` is a
msgspec-encoded :class:`Sealed` and ``tag`` is HMAC-SHA256 over
``purpose ‖ 0x00 ‖ body``, full 32 bytes. Rules:

- Integrity only, not secrecy: the backend's state is readable by whoever
  holds the token (the SDK encrypts; we sign, as our cursors do). Backends
  that put secrets in their state must encrypt it themselves.
- ``purpose`` is mixed into the MAC, so a cursor never verifies as a
  requestState and vice versa.
- The decoder accepts canonical base64url only: a token with two spellings
  could pass a cache or a log filter in one form and verify in the other.
- Keys rotate: seal with the first, verify with any (constant-time each).
- Every failure is one :class:`InvalidSealedToken` (-32602, "Invalid or
  expired requestState", as the SDK answers); the failed check is in
  ``reason`` for logs only.
- Single use is *not* enforced here; the spec leaves that to the server
  where it matters (mrtr.mdx, Warning).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from typing import TYPE_CHECKING, Any, Final

import msgspec

from gateway.protocol.stateless.error_codes import InvalidSealedToken

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

_TAG_BYTES: Final = 32
MIN_KEY_BYTES: Final = 16
# A backend's own state rides inside; the request body limit bounds it anyway.
MAX_TOKEN_CHARS: Final = 262144
# Params that change between an MRTR round and its retry, or that are
# envelope rather than request identity (mrtr.mdx §Client Requirements).
_UNBOUND_PARAMS: Final = frozenset({"_meta", "inputResponses", "requestState"})
REQUEST_STATE: Final = "requestState"


class Sealed(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    """What a sealed token carries.

    Attributes:
        backend: the configured name of the backend that owns the state.
        principal: the authenticated principal, or ``None`` when unauthenticated.
        expires_at: the caller's clock reading after which the token is dead.
        method: the method of the request the token was issued for.
        params_digest: :func:`request_digest` of that request's params.
        state: the backend's own opaque state, restored byte for byte.
    """

    backend: str
    principal: str | None
    expires_at: float
    method: str
    params_digest: bytes
    state: bytes


_encoder: Final = msgspec.msgpack.Encoder()
_decoder: Final = msgspec.msgpack.Decoder(Sealed)
_json: Final = msgspec.json.Encoder(order="sorted")


def request_digest(params: Mapping[str, Any] | None) -> bytes:
    """SHA-256 of a request's identity: its params minus ``_meta``, inputResponses, requestState.

    Keys are sorted, so two encodings of the same params agree.
    """
    salient = {k: v for k, v in (params or {}).items() if k not in _UNBOUND_PARAMS}
    return hashlib.sha256(_json.encode(salient)).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes | None:
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
    return data if _b64(data) == text else None


class Sealer:
    """Seals and unseals tokens with a ring of keys.

    Args:
        keys: HMAC keys, newest first; each at least ``MIN_KEY_BYTES`` long.
            Roll over by putting the new key first and dropping the old one
            after the longest token lifetime.

    Raises:
        ValueError: no key, or a key too short.
    """

    def __init__(self, keys: Sequence[bytes]) -> None:
        if not keys or any(len(k) < MIN_KEY_BYTES for k in keys):
            raise ValueError(f"need at least one key of {MIN_KEY_BYTES}+ bytes")
        self._keys = tuple(keys)

    @property
    def keys(self) -> tuple[bytes, ...]:
        """The keys, newest (the one that seals) first."""
        return self._keys

    @staticmethod
    def _tag(key: bytes, purpose: str, body: bytes) -> bytes:
        return hmac.new(key, purpose.encode() + b"\x00" + body, hashlib.sha256).digest()

    def seal(
        self,
        *,
        purpose: str,
        backend: str,
        principal: str | None,
        now: float,
        ttl: float,
        method: str,
        params: Mapping[str, Any] | None,
        state: bytes,
    ) -> str:
        """A token for ``state`` that only this request, principal and window accept.

        Args:
            purpose: what the token is (``requestState``, ``cursor``, ...).
            backend: the backend that owns the state.
            principal: who the request was authenticated as, or ``None``.
            now: the caller's clock, in seconds.
            ttl: seconds the token stays valid.
            method: the originating request's method.
            params: the originating request's params.
            state: the backend's own bytes.
        """
        body = _encoder.encode(
            Sealed(
                backend=backend,
                principal=principal,
                expires_at=now + ttl,
                method=method,
                params_digest=request_digest(params),
                state=state,
            )
        )
        return _b64(body + self._tag(self._keys[0], purpose, body))

    def unseal(
        self,
        token: object,
        *,
        purpose: str,
        principal: str | None,
        now: float,
        method: str,
        params: Mapping[str, Any] | None,
    ) -> Sealed:
        """The payload of a token, if it is ours, unexpired and for this request.

        Raises:
            InvalidSealedToken: for every failure, whatever the reason.
        """

        def bad(reason: str) -> InvalidSealedToken:
            return InvalidSealedToken(purpose, reason)

        if not isinstance(token, str) or not token.isascii() or len(token) > MAX_TOKEN_CHARS:
            raise bad("not a token")
        raw = _unb64(token)
        if raw is None or len(raw) <= _TAG_BYTES:
            raise bad("malformed")
        body, tag = raw[:-_TAG_BYTES], raw[-_TAG_BYTES:]
        matches = [hmac.compare_digest(self._tag(k, purpose, body), tag) for k in self._keys]
        if not any(matches):
            raise bad("signature")
        try:
            sealed = _decoder.decode(body)
        except msgspec.DecodeError:  # pragma: no cover - only our own signed bodies get here
            raise bad("malformed") from None
        if now >= sealed.expires_at:
            raise bad("expired")
        if sealed.principal != principal:
            raise bad("principal")
        if sealed.method != method or not hmac.compare_digest(
            sealed.params_digest, request_digest(params)
        ):
            raise bad("request")
        return sealed
