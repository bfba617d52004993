"""Console credentials as signed strings: the login cookie and the CSRF token (sans-IO).

Rules:

1. A login cookie is ``<expiry>.<nonce>.<mac>``: the expiry (Unix seconds)
   and a random nonce, signed with HMAC-SHA256 under the console's key. It
   says nothing secret, and only this gateway (its key is random per
   process) can make one; it is refused after its expiry.
2. A CSRF token is an HMAC of the *credential's* identity: the cookie's
   nonce, or a digest of the bearer token. A page embeds it in every form;
   a POST must send it back. A cross-site page can make the browser send
   the cookie but cannot read the token (it is not in the cookie, and the
   page is same-origin only), so it cannot forge a POST.
3. Every comparison is ``hmac.compare_digest``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Final

COOKIE_NAME: Final = "mcp_gateway_console"
CSRF_FIELD: Final = "csrf"
_NONCE_BYTES: Final = 18


class Signer:
    """Makes and checks login cookies and CSRF tokens under one key.

    Args:
        key: the HMAC key; a fresh random one by default, so a restart
            logs every console user out (nothing to configure or leak).
    """

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key if key is not None else secrets.token_bytes(32)

    def _mac(self, purpose: str, value: str) -> str:
        message = f"{purpose}\x00{value}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def login_cookie(self, now: float, ttl: float) -> str:
        """A fresh cookie value valid for ``ttl`` seconds from ``now`` (Unix seconds)."""
        body = f"{int(now + ttl)}.{secrets.token_urlsafe(_NONCE_BYTES)}"
        return f"{body}.{self._mac('cookie', body)}"

    def cookie_identity(self, value: str, now: float) -> str | None:
        """The nonce of a valid, unexpired cookie; None for anything else."""
        body, _, mac = value.rpartition(".")
        expiry, _, nonce = body.partition(".")
        if not (expiry.isdigit() and nonce and mac):
            return None
        if not hmac.compare_digest(mac, self._mac("cookie", body)):
            return None
        return nonce if int(expiry) > now else None

    def csrf_token(self, identity: str) -> str:
        """The CSRF token for a credential's identity (rule 2)."""
        return self._mac("csrf", identity)

    def csrf_ok(self, identity: str, token: str) -> bool:
        """Whether ``token`` is the CSRF token of ``identity``."""
        return hmac.compare_digest(token.encode(), self.csrf_token(identity).encode())


def bearer_identity(token: bytes) -> str:
    """The identity of a bearer credential for its CSRF token (not the token itself)."""
    return "bearer-" + hashlib.sha256(token).hexdigest()
