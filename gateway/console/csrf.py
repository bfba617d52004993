"""Console credentials as signed strings: the login cookie and the CSRF token (sans-IO).

Both are ``protocol.signing`` tokens under the console's key, so they share
its rules (purpose in the MAC, constant-time checks, canonical base64url).

Rules:

1. A login cookie is a token of purpose ``console-login`` carrying a random
   nonce and an expiry (Unix seconds). It says nothing secret, and only
   this gateway (its key is random per process) can make one; it is
   refused from its expiry on.
2. A CSRF token is a token of purpose ``console-csrf`` bound to the
   *credential's* identity: the cookie's nonce, or a digest of the bearer
   token. A page embeds it in every form; a POST must send it back. A
   cross-site page can make the browser send the cookie but cannot read
   the token (it is not in the cookie, and the page is same-origin only),
   so it cannot forge a POST.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Final

from gateway.protocol.signing import InvalidToken, Keyring

COOKIE_NAME: Final = "mcp_gateway_console"
CSRF_FIELD: Final = "csrf"
_NONCE_BYTES: Final = 18
LOGIN: Final = "console-login"
CSRF: Final = "console-csrf"


class Signer:
    """Makes and checks login cookies and CSRF tokens under one key.

    Args:
        key: the HMAC key; a fresh random one by default, so a restart
            logs every console user out (nothing to configure or leak).
    """

    def __init__(self, key: bytes | None = None) -> None:
        self._ring = Keyring([key if key is not None else secrets.token_bytes(32)])

    def login_cookie(self, now: float, ttl: float) -> str:
        """A fresh cookie value valid for ``ttl`` seconds from ``now`` (Unix seconds)."""
        nonce = secrets.token_urlsafe(_NONCE_BYTES).encode("ascii")
        return self._ring.sign(LOGIN, nonce, expires_at=now + ttl)

    def cookie_identity(self, value: str, now: float) -> str | None:
        """The nonce of a valid, unexpired cookie; None for anything else."""
        try:
            return self._ring.verify(LOGIN, value, now=now).decode("ascii")
        except (InvalidToken, UnicodeDecodeError):
            return None

    def csrf_token(self, identity: str) -> str:
        """The CSRF token for a credential's identity (rule 2)."""
        return self._ring.sign(CSRF, b"", bound_to=identity)

    def csrf_ok(self, identity: str, token: str) -> bool:
        """Whether ``token`` is the CSRF token of ``identity``."""
        try:
            self._ring.verify(CSRF, token, bound_to=identity)
        except InvalidToken:
            return False
        return True


def bearer_identity(token: bytes) -> str:
    """The identity of a bearer credential for its CSRF token (not the token itself)."""
    return "bearer-" + hashlib.sha256(token).hexdigest()
