"""Sealed opaque tokens: ``requestState`` now, cursors and task ids later (sans-IO).

A modern client echoes ``requestState`` byte-exact on its retry, but to the
server it is attacker-controlled input; one that steers business logic MUST
be integrity-protected and rejected on failure, and SHOULD bind the
principal, a short expiry and the originating request (method plus a digest
of its salient params) (``S/basic/patterns/mrtr.mdx`` §Server Requirements).
The gateway also needs to know which backend a token belongs to, so that a
retry reaching any replica lands on the right backend with the backend's
own state restored byte for byte.

Wire form: a ``protocol.signing`` token of the given purpose whose body is
a msgpack-encoded :class:`Sealed`, with the expiry in the token. The
signing codec's rules hold (purpose in the MAC, so a cursor never verifies
as a requestState and vice versa; canonical base64url only; a key ring,
seal with the first, verify with any). Besides:

- Integrity only, not secrecy: the backend's state is readable by whoever
  holds the token (the SDK encrypts; we sign, as our cursors do). Backends
  that put secrets in their state must encrypt it themselves.
- Every failure is one :class:`InvalidSealedToken` (-32602, "Invalid or
  expired requestState", as the SDK answers); the failed check is in
  ``reason`` for logs only.
- Single use is *not* enforced here; the spec leaves that to the server
  where it matters (mrtr.mdx, Warning).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import TYPE_CHECKING, Any, Final

import msgspec

from gateway.protocol.signing import (
    BadSignature,
    Keyring,
    TokenExpired,
    TokenMalformed,
)
from gateway.protocol.stateless.error_codes import InvalidSealedToken

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

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
        method: the method of the request the token was issued for.
        params_digest: :func:`request_digest` of that request's params.
        state: the backend's own opaque state, restored byte for byte.
    """

    backend: str
    principal: str | None
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


class Sealer:
    """Seals and unseals tokens with a ring of keys.

    Args:
        keys: HMAC keys, newest first; each at least ``signing.MIN_KEY_BYTES`` long.
            Roll over by putting the new key first and dropping the old one
            after the longest token lifetime.

    Raises:
        WeakKey: no key, or a key too short (a ``ValueError``).
    """

    def __init__(self, keys: Sequence[bytes]) -> None:
        self._ring = Keyring(keys)

    @property
    def keys(self) -> tuple[bytes, ...]:
        """The keys, newest (the one that seals) first."""
        return self._ring.keys

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
                method=method,
                params_digest=request_digest(params),
                state=state,
            )
        )
        return self._ring.sign(purpose, body, expires_at=now + ttl)

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
        try:
            body = self._ring.verify(purpose, token, now=now)
        except TokenMalformed:
            raise bad("malformed") from None
        except BadSignature:
            raise bad("signature") from None
        except TokenExpired:
            raise bad("expired") from None
        try:
            sealed = _decoder.decode(body)
        except msgspec.DecodeError:  # pragma: no cover - only our own signed bodies get here
            raise bad("malformed") from None
        if sealed.principal != principal:
            raise bad("principal")
        if sealed.method != method or not hmac.compare_digest(
            sealed.params_digest, request_digest(params)
        ):
            raise bad("request")
        return sealed
