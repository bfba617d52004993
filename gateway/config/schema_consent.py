"""The configuration schema, the ``consent:`` block: the token vault and the OAuth callback.

Backends with ``auth: {type: user_consent}`` act for each person with that
person's own OAuth token (``gateway.consent``). Those tokens are sealed
with the keys of ``vault_key_file`` before they reach the state store, and
the authorization server sends the person back to ``callback_path`` on the
gateway's public origin (``server.public_url``, else the bind).
"""

from __future__ import annotations

from typing import Annotated, TypeAlias

from msgspec import Meta

from gateway.config.schema import Base, Invalid

__all__ = ["ConsentConfig"]

Lifetime: TypeAlias = Annotated[
    float, Meta(gt=0, le=3600, extra={"problem": "must be above 0 and at most 3600 s"})
]


class ConsentConfig(Base, frozen=True, kw_only=True):
    """Where tokens of consenting people are kept and where their browser comes back.

    Attributes:
        vault_key_file: a file of base64 32-byte keys, one a line, newest
            first (the first seals, every one opens: rotation); required as
            soon as a backend uses ``user_consent``.
        callback_path: the path of the OAuth redirect URI on the gateway.
        login_timeout: seconds a consent link, and the login it starts,
            stays usable; a waiting call waits at most this long.
    """

    vault_key_file: str = ""
    callback_path: str = "/oauth/callback"
    login_timeout: Lifetime = 600.0

    def __post_init__(self) -> None:
        if not self.callback_path.startswith("/") or "?" in self.callback_path:
            raise Invalid(("callback_path", "must be a path starting with '/', no query"))
        if self.callback_path.rstrip("/").startswith("/oauth/start"):
            raise Invalid(("callback_path", "/oauth/start is the gateway's login start path"))
