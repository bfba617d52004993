"""Opaque, signed, keyset pagination cursors (sans-IO).

A cursor names the list kind and the public key of the last item returned.
The next page is every item after that key in sort order, in whatever
snapshot is current: so a walk never repeats an item and never skips one
that was present for the whole walk, while backends come and go between
pages. No state is kept; any replica with the same secret can continue a
walk.

Wire form: a ``protocol.signing`` token of purpose ``cursor`` whose body is
the JSON of the :class:`CursorPayload`, bound to the caller's principal
when there is one, without expiry (a cursor lives as long as its key). The
keys are ``signing.keys_from_secret(pagination.cursor_secret)``. Anything else
decodes to a ``LocalProtocolError`` with code -32602 and a message saying
what was wrong, never an exception of another type.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

import msgspec

from gateway.errors import INVALID_PARAMS, LocalProtocolError
from gateway.protocol.signing import (
    BadSignature,
    InvalidToken,
    Keyring,
    TokenMalformed,
    keys_from_secret,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

PURPOSE: Final = "cursor"
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


class CursorCodec:
    """Makes and checks cursors with one secret.

    Args:
        secret: what the HMAC key is derived from, or a list of them
            (newest first: it signs, the others still verify); empty means
            a random key for this process (cursors then die with the
            process, which is safe, just not shareable between replicas).
        clock: what the grace period after :meth:`rotate` is measured on.
    """

    def __init__(
        self,
        secret: str | bytes | Sequence[str] = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self._current = Keyring(keys_from_secret(secret))
        # The ring with the key before the last rotation, and until when it serves.
        self._rotated = self._current
        self._rotated_until = 0.0

    def rotate(self, secret: str | bytes | Sequence[str], grace: float) -> None:
        """Sign with a new secret from now on; the old one verifies for ``grace`` seconds.

        A reload that rotates ``pagination.cursor_secret`` must not break
        every host's list walk in progress, so the key before it is kept
        for a while (a key ring of two).
        """
        previous, self._current = self._current, Keyring(keys_from_secret(secret))
        self._rotated = Keyring([*self._current.keys, *previous.keys])
        self._rotated_until = self._clock() + grace

    def _ring(self) -> Keyring:
        if self._clock() < self._rotated_until:
            return self._rotated
        return self._current

    def encode(self, payload: CursorPayload, principal: str | None = None) -> str:
        """The opaque, signed form of a position in a walk, for ``principal`` only."""
        return self._ring().sign(PURPOSE, _encoder.encode(payload), bound_to=principal)

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
        try:
            body = self._ring().verify(PURPOSE, cursor, bound_to=principal)
        except TokenMalformed:
            raise invalid("malformed") from None
        except BadSignature:
            raise invalid(
                "signature does not match (tampered, truncated or from another gateway)"
            ) from None
        except InvalidToken:  # pragma: no cover - cursors carry no expiry
            raise invalid("malformed") from None
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
