"""The configuration schema, the ``consent:`` block: the token vault and the OAuth callback.

Backends with ``auth: {type: user_consent}`` act for each person with that
person's own OAuth token (``gateway.consent``). Those tokens are sealed
with the vault's keys (``vault_key_file`` or ``vault_key_env``: exactly one)
before they reach the state store, and
the authorization server sends the person back to ``callback_path`` on the
gateway's public origin (``server.public_url``, else the bind).
"""

from __future__ import annotations

import re
from typing import Annotated, Final, TypeAlias

from msgspec import Meta

from gateway.config.schema import Base, Invalid

__all__ = ["ConsentConfig"]

_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

Lifetime: TypeAlias = Annotated[
    float, Meta(gt=0, le=3600, extra={"problem": "must be above 0 and at most 3600 s"})
]


class ConsentConfig(Base, frozen=True, kw_only=True):
    """Where tokens of consenting people are kept and where their browser comes back.

    Attributes:
        vault_key_file: a file of base64 32-byte keys, one a line, newest
            first (the first seals, every one opens: rotation); required as
            soon as a backend uses ``user_consent`` (or ``vault_key_env``).
        vault_key_env: the name of an environment variable holding the same
            keys (one per line, or separated by commas or spaces), for
            platforms that hand secrets over as variables; exactly one of
            ``vault_key_file`` and ``vault_key_env`` is set.
        callback_path: the path of the OAuth redirect URI on the gateway.
        login_timeout: seconds a consent link, and the login it starts,
            stays usable; a waiting call waits at most this long.
    """

    vault_key_file: str = ""
    vault_key_env: str = ""
    callback_path: str = "/oauth/callback"
    login_timeout: Lifetime = 600.0

    def __post_init__(self) -> None:
        if self.vault_key_file and self.vault_key_env:
            raise Invalid(
                ("vault_key_file", "set consent.vault_key_file or consent.vault_key_env, not both")
            )
        if self.vault_key_env and not _ENV_NAME.fullmatch(self.vault_key_env):
            raise Invalid(("vault_key_env", "must be an environment variable's name"))
        if not self.callback_path.startswith("/") or "?" in self.callback_path:
            raise Invalid(("callback_path", "must be a path starting with '/', no query"))
        if self.callback_path.rstrip("/").startswith("/oauth/start"):
            raise Invalid(("callback_path", "/oauth/start is the gateway's login start path"))
