"""The configuration schema, backend credentials: what the gateway presents to a backend.

A network backend's ``auth:`` block says how the gateway authenticates
*itself* to that backend. The caller's own token never travels on: it is
either replaced by the gateway's credential (``static``,
``client_credentials``) or exchanged for one made for that backend
(``token_exchange``, RFC 8693). What each key means is in
docs/security.md ("Credentials to backends"); the grants themselves are in
:mod:`gateway.backends.credentials.grants`.

Every secret accepts a ``*_file`` twin (a Kubernetes secret mount) as well
as ``${VAR}`` expansion; files are read when a token is requested (and for
``static``, when a backend session opens), so a rotated file is used
without a restart.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeAlias

import msgspec
from msgspec import Meta

from gateway.config.schema import Base, Invalid

__all__ = ["BackendAuth", "BackendAuthType", "ClientAuthMethod"]

BackendAuthType: TypeAlias = Literal[
    "static", "client_credentials", "token_exchange", "user_consent"
]
ClientAuthMethod: TypeAlias = Literal[
    "client_secret_basic", "client_secret_post", "private_key_jwt"
]
SigningAlgorithm: TypeAlias = Literal["RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA"]

TokenUrl: TypeAlias = Annotated[
    str,
    Meta(
        pattern="(?i)^(https?://.+)?$",
        extra={"problem": "must start with http:// or https:// (got {value!r})"},
    ),
]
Skew: TypeAlias = Annotated[
    float, Meta(ge=0, extra={"problem": "must be 0 or more seconds (got {value!r})"})
]
Fraction: TypeAlias = Annotated[
    float, Meta(ge=0, lt=1, extra={"problem": "must be at least 0 and below 1 (got {value!r})"})
]


class BackendAuth(Base, frozen=True, kw_only=True):
    """How the gateway authenticates to one network backend.

    Attributes:
        type: ``static`` (a fixed bearer token), ``client_credentials``
            (OAuth 2.0, the gateway's own identity) or ``token_exchange``
            (RFC 8693, the caller's token exchanged for one made for this
            backend) or ``user_consent`` (each principal's own token, got by
            the authorization code grant with PKCE once that person consented
            in a browser; ``gateway.consent``).
        token: the bearer token of ``static``.
        token_file: a file holding ``token`` (read when a session opens).
        token_url: the authorization server's token endpoint.
        client_id: the gateway's client id there.
        client_secret: its secret.
        client_secret_file: a file holding ``client_secret`` (read per token
            request, so a rotated Kubernetes secret is picked up).
        private_key_file: the PEM private key that signs the client assertion
            of ``private_key_jwt`` (read per token request, like a secret file).
        signing_algorithm: the assertion's JWS algorithm (``RS256`` default;
            the key's type must match).
        assertion_audience: the assertion's ``aud``: the token endpoint by
            default (RFC 7523); some servers want their issuer URL instead.
        client_auth: ``client_secret_basic`` (HTTP Basic, the default),
            ``private_key_jwt`` (a signed assertion, RFC 7523) or
            ``client_secret_post`` (in the form).
        scopes: the scopes asked for (``scope``, space separated on the wire).
        audience: the ``audience`` parameter (token exchange; many IdPs
            also take it with client credentials).
        resource: the ``resource`` indicator (RFC 8707), usually the
            backend's URL.
        refresh_skew: seconds before expiry a cached token is replaced.
        refresh_fraction: ... or this share of its lifetime, whichever is
            longer (a 60 s token with 0.1 is replaced 30 s early at the
            default skew, a 1 h token 6 min early).
        catalog: with ``token_exchange`` or ``user_consent``, the gateway's
            own credential for the shared session that lists the catalog
            (``static`` or ``client_credentials``); without it that session
            sends none.
        authorization_server: with ``user_consent``, the issuer URL of the
            backend's authorization server; empty: discovered from the
            backend's protected resource metadata (RFC 9728).

    With ``user_consent``, ``client_id`` may be left out: the gateway then
    uses a client ID metadata document it serves, or registers itself
    (RFC 7591), whichever the authorization server offers.
    """

    type: BackendAuthType
    token: str = ""
    token_file: str = ""
    token_url: TokenUrl = ""
    client_id: str = ""
    client_secret: str = ""
    client_secret_file: str = ""
    client_auth: ClientAuthMethod = "client_secret_basic"
    private_key_file: str = ""
    signing_algorithm: SigningAlgorithm = "RS256"
    assertion_audience: str = ""
    scopes: list[str] = msgspec.field(default_factory=list)
    audience: str = ""
    resource: str = ""
    refresh_skew: Skew = 30.0
    refresh_fraction: Fraction = 0.1
    catalog: BackendAuth | None = None
    authorization_server: TokenUrl = ""

    def __post_init__(self) -> None:
        problems: list[tuple[str, str]] = []
        if self.type == "static":
            if bool(self.token) == bool(self.token_file):
                problems.append(("token", "static needs token or token_file (exactly one)"))
        elif self.type == "user_consent":
            problems += self._consent_problems()
        else:
            if not self.token_url:
                problems.append(("token_url", f"{self.type} needs the token endpoint"))
            if not self.client_id:
                problems.append(("client_id", f"{self.type} needs a client id"))
            if self.client_secret and self.client_secret_file:
                problems.append(
                    ("client_secret_file", "set client_secret or client_secret_file, not both")
                )
            if self.client_auth == "private_key_jwt":
                if not self.private_key_file:
                    problems.append(("private_key_file", "private_key_jwt needs the signing key"))
                if self.client_secret or self.client_secret_file:
                    problems.append(
                        ("client_secret", "private_key_jwt signs with a key, not a secret")
                    )
            elif self.private_key_file or self.assertion_audience:
                problems.append(("private_key_file", "only client_auth: private_key_jwt uses it"))
            if self.token or self.token_file:
                problems.append(("token", f"only static takes a token; {self.type} requests one"))
        if self.authorization_server and self.type != "user_consent":
            problems.append(("authorization_server", "only user_consent discovers a server"))
        if self.catalog is not None:
            if self.type not in ("token_exchange", "user_consent"):
                problems.append(
                    (
                        "catalog",
                        "only token_exchange and user_consent have a separate catalog credential",
                    )
                )
            elif self.catalog.type in ("token_exchange", "user_consent"):
                problems.append(
                    (
                        "catalog.type",
                        "the catalog session has no caller: static or client_credentials",
                    )
                )
        if problems:
            raise Invalid(*problems)

    def _consent_problems(self) -> list[tuple[str, str]]:
        problems: list[tuple[str, str]] = []
        if (self.client_secret or self.client_secret_file) and not self.client_id:
            problems.append(("client_secret", "a client secret goes with its client_id"))
        if self.client_secret and self.client_secret_file:
            problems.append(
                ("client_secret_file", "set client_secret or client_secret_file, not both")
            )
        if self.token or self.token_file:
            problems.append(("token", "user_consent gets each person's token; it takes none"))
        if self.client_auth == "private_key_jwt" or self.private_key_file:
            problems.append(("client_auth", "user_consent authenticates with a secret or none"))
        return problems

    @property
    def acts_for_callers(self) -> bool:
        """Whether each caller gets a token of its own (``token_exchange``, ``user_consent``)."""
        return self.type in ("token_exchange", "user_consent")

    @property
    def catalog_auth(self) -> BackendAuth | None:
        """The credential of the shared (catalog) session: this one, or ``catalog``."""
        return self.catalog if self.acts_for_callers else self
