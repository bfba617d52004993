"""What the gateway tells a host about itself in its InitializeResult.

tools, prompts and resources are always offered: backends come and go and
the lists change with them (list_changed). The rest follow what the live
backends offer at the time of the host's initialize.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from gateway import __version__
from gateway.backends.backend import BackendState
from gateway.protocol import mcp
from gateway.router.views import subscribable

if TYPE_CHECKING:
    import msgspec

    from gateway.router.views import PoolView

SERVER_NAME: Final = "mcp-gateway"


def server_capabilities(pool: PoolView) -> dict[str, Any]:
    """Capabilities to advertise to a host, from the backends up right now."""
    live = [b for b in pool.backends.values() if b.state is BackendState.UP]
    resources: dict[str, Any] = {"listChanged": True}
    if any(subscribable(b) for b in live):
        resources["subscribe"] = True
    caps: dict[str, Any] = {
        "tools": {"listChanged": True},
        "prompts": {"listChanged": True},
        "resources": resources,
    }
    if any(b.offers("completions") for b in live):
        caps["completions"] = {}
    if any(b.offers("logging") for b in live):
        caps["logging"] = {}
    return caps


def instructions(pool: PoolView) -> str | None:
    """The backends' own instructions, each under its prefix."""
    parts = []
    for name in sorted(pool.backends):
        backend = pool.backends[name]
        info = backend.info
        if info is not None and info.instructions:
            label = backend.prefix or backend.name
            parts.append(f"## {label}\n{info.instructions.strip()}")
    return "\n\n".join(parts) or None


def initialize_result(pool: PoolView, version: str) -> msgspec.Raw:
    """The InitializeResult for a host that negotiated ``version``."""
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": server_capabilities(pool),
        "serverInfo": {"name": SERVER_NAME, "version": __version__},
    }
    text = instructions(pool)
    if text:
        result["instructions"] = text
    return mcp.encode(result)
