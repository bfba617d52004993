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

import msgspec
from msgspec import Meta

from gateway.config.schema import Base, Invalid

__all__ = ["ConsentConfig", "LoginBinding"]

_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

Lifetime: TypeAlias = Annotated[
    float, Meta(gt=0, le=3600, extra={"problem": "must be above 0 and at most 3600 s"})
]


class LoginBinding(Base, frozen=True, kw_only=True):
    """``consent.bind_login``: who opens a sign-in link must first sign in as its caller.

    The gateway is an OpenID Connect client of ``issuer`` (the issuer of the
    callers' JWTs); the ID token's ``iss`` and ``sub`` must be those of the
    principal the link was made for, else the link ends there.

    Attributes:
        client_id: the gateway's client at that issuer (its redirect URI is
            the consent callback).
        client_secret: its secret; empty for a public client.
        client_secret_file: a file holding it, instead.
        issuer: the OpenID provider; empty: ``auth.jwt.issuer``.
        scopes: asked for in the login (``openid`` is always among them).
    """

    client_id: str
    client_secret: str = ""
    client_secret_file: str = ""
    issuer: str = ""
    scopes: list[str] = msgspec.field(default_factory=lambda: ["openid"])

    def __post_init__(self) -> None:
        if not self.client_id:
            raise Invalid(("client_id", "bind_login needs the gateway's client id at the issuer"))
        if self.client_secret and self.client_secret_file:
            raise Invalid(
                ("client_secret_file", "set client_secret or client_secret_file, not both")
            )
        if self.issuer and not self.issuer.startswith(("https://", "http://")):
            raise Invalid(("issuer", "must be an http(s) URL"))


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
        bind_login: off (null, the default): the single-use link is the
            proof of who asked. Set: opening a link first requires an
            OpenID Connect login whose issuer and subject are the link's
            principal's (callers with JWTs only).
    """

    vault_key_file: str = ""
    vault_key_env: str = ""
    callback_path: str = "/oauth/callback"
    login_timeout: Lifetime = 600.0
    bind_login: LoginBinding | None = None

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
