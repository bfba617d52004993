"""Opaque, signed, keyset pagination cursors (sans-IO).

A cursor names the list kind and the public key of the last item returned.
The next page is every item after that key in sort order, in whatever
snapshot is current: so a walk never repeats an item and never skips one
that was present for the whole walk, while backends come and go between
pages. No state is kept; any replica with the same secret can continue a
walk.

Wire form: ``base64url(json(payload)) "." base64url(hmac_sha256(secret, payload))[:22]``.
The tag is the first 22 base64url characters of the 256-bit HMAC, six bits
each: 132 bits. Anything else decodes to a ``LocalProtocolError`` with
code -32602 and a message saying what was wrong, never an exception of
another type.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from typing import TYPE_CHECKING, Final

import msgspec

from gateway.errors import INVALID_PARAMS, LocalProtocolError

if TYPE_CHECKING:
    from collections.abc import Callable

_TAG_CHARS: Final = 22  # base64url characters kept of the HMAC (module docstring)
# Generous: a passthrough backend's own cursor rides inside ours, and a long
# URI can be a keyset key. The request body limit bounds it anyway.
MAX_CURSOR_CHARS: Final = 65536


class CursorPayload(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a cursor remembers: the list and where the last page ended.

    ``after`` is the public key of the last cached item returned. When the
    walk has reached the backends listed in passthrough mode, ``backend``
    names the one being walked and ``backend_cursor`` is that backend's own
    cursor (None: its first page). ``profile`` is the profile whose list is
    walked ("" for the main endpoint), so a cursor from one profile is
    -32602 on another rather than a window into a list it does not show.
    """

    kind: str
    after: str = ""
    backend: str = ""
    backend_cursor: str | None = None
    profile: str = ""


_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(CursorPayload)


def _key_for(secret: str | bytes) -> bytes:
    if isinstance(secret, str):
        secret = secret.encode("utf-8")
    return secret or secrets.token_bytes(32)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class CursorCodec:
    """Makes and checks cursors with one secret.

    Args:
        secret: the HMAC key; empty means a random key for this process
            (cursors then die with the process, which is safe, just not
            shareable between replicas).
    """

    def __init__(
        self, secret: str | bytes = "", clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._key = _key_for(secret)
        self._clock = clock
        # The key before the last rotation, and until when it still verifies.
        self._previous: bytes | None = None
        self._previous_until = 0.0

    def rotate(self, secret: str | bytes, grace: float) -> None:
        """Sign with a new secret from now on; the old one verifies for ``grace`` seconds.

        A reload that rotates ``pagination.cursor_secret`` must not break
        every host's list walk in progress, so the key before it is kept
        for a while (a key ring of two).
        """
        self._previous = self._key
        self._previous_until = self._clock() + grace
        self._key = _key_for(secret)

    def _tag(self, body: bytes, principal: str | None, key: bytes | None = None) -> str:
        # A principal's cursor is signed over its key too, so that it verifies
        # for nobody else; without auth the tag is over the body alone.
        signed = body if principal is None else f"principal\0{principal}\0".encode() + body
        digest = hmac.new(key or self._key, signed, hashlib.sha256).digest()
        return _b64(digest)[:_TAG_CHARS]

    def _verifies(self, body: bytes, tag: str, principal: str | None) -> bool:
        if hmac.compare_digest(self._tag(body, principal).encode(), tag.encode()):
            return True
        previous = self._previous
        if previous is None or self._clock() >= self._previous_until:
            return False
        return hmac.compare_digest(self._tag(body, principal, previous).encode(), tag.encode())

    def encode(self, payload: CursorPayload, principal: str | None = None) -> str:
        """The opaque, signed form of a position in a walk, for ``principal`` only."""
        body = _encoder.encode(payload)
        return f"{_b64(body)}.{self._tag(body, principal)}"

    def decode(
        self, cursor: object, kind: str, profile: str = "", principal: str | None = None
    ) -> CursorPayload:
        """The position a cursor the client sent back names.

        A cursor made for another principal fails like a tampered one.

        Args:
            cursor: what the client sent.
            kind: the list it was sent for.
            profile: the profile it was sent to ("" for the main endpoint).
            principal: the caller's principal key (None without auth).

        Raises:
            LocalProtocolError: -32602 for anything that is not a cursor we
                issued for this kind of list.
        """

        def invalid(why: str) -> LocalProtocolError:
            return LocalProtocolError(f"invalid cursor: {why}", INVALID_PARAMS)

        if not isinstance(cursor, str):
            raise invalid(f"expected a string, got {type(cursor).__name__}")
        if len(cursor) > MAX_CURSOR_CHARS:
            raise invalid("too long")
        body_text, dot, tag = cursor.partition(".")
        if not dot or not body_text or not tag:
            raise invalid("malformed")
        try:
            body = _unb64(body_text)
        except (binascii.Error, ValueError):
            raise invalid("malformed") from None
        if not tag.isascii() or not self._verifies(body, tag, principal):
            raise invalid("signature does not match (tampered, truncated or from another gateway)")
        try:
            payload = _decoder.decode(body)
        except msgspec.DecodeError:  # pragma: no cover - only our own signed bodies get here
            raise invalid("malformed") from None
        if payload.kind != kind:
            raise invalid(f"issued for {payload.kind}, not {kind}")
        if payload.profile != profile:
            # No name in the message: a profile's client learns nothing of others.
            raise invalid("issued for another endpoint")
        return payload
