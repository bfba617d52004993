"""Console logins in the state store: valid on every replica, ended by logout.

Rules:

1. **One key for every replica.** The HMAC key that signs login cookies and
   CSRF tokens is made once, by whichever gateway asks first, and kept in
   the store (``console:key``, put-if-absent, no expiry); every gateway
   sharing the store reads the same key, so a cookie or a form made by one
   replica is accepted by the others. Nothing to configure or distribute.
2. **A login is a record.** Logging in writes ``console:login:<sha256 of
   the cookie's nonce>`` with ``admin.session_ttl`` of life (the store's
   expiry); a cookie counts only while its signature, its own expiry *and*
   its record hold. Logging out deletes the record, so the cookie is
   refused on every replica at once, even if a browser kept it.
3. **No store, no cookie logins.** When the store does not answer, a
   cookie cannot be checked: the console answers 503 and says that bearer
   admin tokens still work (they need no store once the key is known).
   Logins are never accepted unchecked (fail closed: the console acts on
   the gateway).
4. Without a store (a console built alone, in tests) the key is random per
   process and a valid signed cookie is enough, as before.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from typing import TYPE_CHECKING, Final

from gateway.console.caller import ConsoleDenied
from gateway.console.csrf import Signer
from gateway.store.api import StoreUnavailable

if TYPE_CHECKING:
    from gateway.store.api import Store

__all__ = ["KEY", "LoginBook", "login_key"]

#: Where the console's signing key lives in the store (rule 1).
KEY: Final = "console:key"
_KEY_BYTES: Final = 32


def login_key(nonce: str) -> str:
    """The store key of the login whose cookie carries ``nonce`` (rule 2)."""
    return "console:login:" + hashlib.sha256(nonce.encode("ascii")).hexdigest()


def _unavailable(exc: StoreUnavailable) -> ConsoleDenied:
    return ConsoleDenied(
        503,
        "the state store does not answer, so console logins cannot be checked "
        f"({exc.reason}); an admin bearer token still works",
    )


class LoginBook:
    """Console login records and the shared signing key (module rules).

    Args:
        store: the state store; None keeps the per-process behaviour (rule 4).
        signer: a signer to use as is (tests); None reads or makes the key.
    """

    def __init__(self, store: Store | None, signer: Signer | None = None) -> None:
        self._store = store
        self._signer = signer if signer is not None or store is not None else Signer()

    @property
    def known_signer(self) -> Signer:
        """The signer, once :meth:`signer` has read the key (every request does first)."""
        assert self._signer is not None, "LoginBook.signer() not awaited yet"
        return self._signer

    async def signer(self) -> Signer:
        """The signer under the shared key, read from the store once (rule 1).

        Raises:
            ConsoleDenied: 503 when the store does not answer.
        """
        if self._signer is not None:
            return self._signer
        assert self._store is not None
        try:
            await self._store.put_new(KEY, secrets.token_bytes(_KEY_BYTES))
            key = await self._store.get(KEY)
        except StoreUnavailable as exc:
            raise _unavailable(exc) from None
        if key is None:  # deleted between the two steps: the next request makes it again
            raise ConsoleDenied(503, "the console's signing key is being replaced; try again")
        self._signer = Signer(key)
        return self._signer

    async def open(self, ttl: float) -> str:
        """A new login: its cookie value, its record written for ``ttl`` seconds.

        Raises:
            ConsoleDenied: 503 when the store does not answer.
        """
        signer = await self.signer()
        now = time.time()
        value = signer.login_cookie(now, ttl)
        nonce = signer.cookie_identity(value, now)
        assert nonce is not None
        if self._store is not None:
            try:
                await self._store.put(login_key(nonce), b"1", ttl=ttl)
            except StoreUnavailable as exc:
                raise _unavailable(exc) from None
        return value

    async def identity(self, cookie: str) -> str | None:
        """The nonce of a cookie whose login holds (rule 2); None otherwise.

        Raises:
            ConsoleDenied: 503 when the store does not answer.
        """
        nonce = (await self.signer()).cookie_identity(cookie, time.time())
        if nonce is None or self._store is None:
            return nonce
        try:
            held = await self._store.get(login_key(nonce))
        except StoreUnavailable as exc:
            raise _unavailable(exc) from None
        return nonce if held is not None else None

    async def close(self, nonce: str) -> None:
        """End the login with this nonce on every replica (logout); best effort.

        Raises:
            ConsoleDenied: 503 when the store does not answer (the login
                would otherwise outlive its logout elsewhere).
        """
        if self._store is None:
            return
        try:
            await self._store.delete(login_key(nonce))
        except StoreUnavailable as exc:
            raise _unavailable(exc) from None
