"""The configuration schema, admin part: the operator console at ``/admin``.

Off unless ``enabled``. The console shows every backend, session and
error, and can call tools and close sessions, so it is admin-only: its
credentials are ``admin.tokens`` and ``auth.admin_tokens`` (either works),
and the tokens of principals a ``policy:`` rule grants ``role: admin``.
On a bind other people can reach, a console with no credential at all
would be open to them, so that is a config problem, found by ``check``
before the gateway starts (:func:`admin_problems`).
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from gateway.config.schema import Base, Invalid

#: The hosts that only this machine can reach. The frontend has a fuller
#: check (``frontend.origin.is_loopback_host``); the config layer may not
#: import it, and these are the spellings a bind address takes.
_LOOPBACK_PREFIXES = ("127.", "::1", "localhost", "[::1]")

ConsolePath = Annotated[
    str,
    Meta(
        pattern=r"^/[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*$",
        extra={"problem": "{value!r} must be an absolute path like /admin (no trailing slash)"},
    ),
]


class AdminConfig(Base, frozen=True, kw_only=True):
    """The operator console (``docs/console.md``).

    Attributes:
        enabled: serve the console; off by default.
        path: where it is served, on the main listener.
        tokens: admin tokens for the console (besides ``auth.admin_tokens``);
            empty entries (``${VAR:-}`` unset) are ignored.
        session_ttl: seconds a console login cookie stays valid.
    """

    enabled: bool = False
    path: ConsolePath = "/admin"
    tokens: list[str] = msgspec.field(default_factory=list)
    session_ttl: Annotated[float, Meta(gt=0, le=7 * 86400)] = 8 * 3600.0

    def __post_init__(self) -> None:
        if self.path in ("/mcp", "/sse", "/messages", "/healthz", "/readyz", "/metrics"):
            raise Invalid(("path", f"{self.path} is one of the gateway's own paths"))


def is_loopback_bind(host: str) -> bool:
    """Whether a bind address is reachable from this machine only."""
    return host.startswith(_LOOPBACK_PREFIXES)


def admin_problems(
    admin: AdminConfig,
    bind_host: str,
    admin_tokens: list[str],
    mcp_path: str,
    admin_role: bool = False,
) -> list[tuple[str, str]]:
    """The rules across sections: credentials off loopback, no clash with the MCP path.

    ``admin_role``: a ``policy:`` rule grants ``role: admin`` (its principals
    are console credentials too).
    """
    problems: list[tuple[str, str]] = []
    if not admin.enabled:
        return problems
    credentials = [t for t in [*admin.tokens, *admin_tokens] if t]
    if not credentials and not admin_role and not is_loopback_bind(bind_host):
        problems.append(
            (
                "admin.enabled",
                f"the console on a non-loopback bind ({bind_host}) needs an admin "
                "credential: set admin.tokens or auth.admin_tokens (or a policy rule "
                "with role: admin)",
            )
        )
    base = mcp_path.rstrip("/")
    if admin.path == base or (base and admin.path.startswith(base + "/")):
        problems.append(("admin.path", f"{admin.path} is inside the MCP path {mcp_path}"))
    return problems
