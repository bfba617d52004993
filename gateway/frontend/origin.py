"""Which Origin and Host header values may reach the MCP endpoints.

The spec asks servers to validate ``Origin`` on every request, against DNS
rebinding: a page on evil.example whose name resolves to 127.0.0.1 must not
be able to drive a gateway bound to loopback.
"""

from __future__ import annotations

import functools
import ipaddress
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from collections.abc import Callable

# Distinct (Host, Origin) pairs whose decision an OriginPolicy keeps.
ORIGIN_DECISIONS: Final = 256


@functools.lru_cache(maxsize=256)
def is_loopback_host(host: str) -> bool:
    """Whether a bind or Host name is loopback: only this machine can reach it."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_without_port(value: str) -> str:
    if value.startswith("["):
        return value.split("]", 1)[0] + "]"
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class OriginPolicy:
    """Which Origin and Host header values may reach the MCP endpoint.

    On a loopback bind, only loopback hosts and origins are accepted unless
    listed: that is what stops DNS rebinding (a page on evil.example whose
    name resolves to 127.0.0.1). On any other bind, Host is checked only
    when ``allowed_hosts`` is configured; Origin always is.
    """

    def __init__(
        self, bind_host: str, allowed_origins: list[str], allowed_hosts: list[str]
    ) -> None:
        self._loopback_bind = is_loopback_host(bind_host)
        self._origins = {o.rstrip("/").lower() for o in allowed_origins}
        self._hosts = {x.lower() for x in allowed_hosts}
        # ``check``: None when the Host and Origin values (raw, None when
        # absent) are allowed, else the reason for a 403. A host sends the same
        # pair on every request, so the decision is kept for the last
        # ``ORIGIN_DECISIONS`` pairs seen (a policy never changes: a reload
        # makes a new one).
        self.check: Callable[[bytes | None, bytes | None], str | None] = functools.lru_cache(
            maxsize=ORIGIN_DECISIONS
        )(self._decide)

    def _decide(self, host_raw: bytes | None, origin_raw: bytes | None) -> str | None:
        host = (host_raw or b"").decode("latin-1").lower()
        if host and host not in self._hosts:
            bare = _host_without_port(host)
            if bare not in self._hosts:
                if self._loopback_bind and not is_loopback_host(bare):
                    return f"Host {host[:100]!r} is not allowed"
                if not self._loopback_bind and self._hosts:
                    return f"Host {host[:100]!r} is not allowed"
        if origin_raw is None:
            return None
        origin = origin_raw.decode("latin-1").rstrip("/").lower()
        if origin in self._origins:
            return None
        if origin == "null":
            return "Origin 'null' is not allowed"
        parts = urlsplit(origin)
        if (
            parts.scheme in ("http", "https")
            and parts.hostname
            and is_loopback_host(parts.hostname)
        ):
            return None
        return f"Origin {origin[:100]!r} is not allowed"
