"""What the gateway tells a host about itself in its InitializeResult.

tools, prompts and resources are always offered: backends come and go and
the lists change with them (list_changed). The rest follow what the live
backends offer at the time of the host's initialize. On a profile's
endpoint only the profile's backends count (``catalog.profiles``), so a
host learns nothing of the others, not even their instructions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from gateway import __version__
from gateway.backends.state import BackendState
from gateway.protocol import mcp, skills
from gateway.router.neighbours import subscribable

if TYPE_CHECKING:
    from collections.abc import Callable

    import msgspec

    from gateway.router.neighbours import PoolView

SERVER_NAME: Final = "mcp-gateway"


def _everyone(backend: str) -> bool:
    return True


def server_capabilities(pool: PoolView, shown: Callable[[str], bool] = _everyone) -> dict[str, Any]:
    """Capabilities to advertise to a host, from the ``shown`` backends up right now."""
    live = [b for b in pool.backends.values() if b.state is BackendState.UP and shown(b.name)]
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
    serving = [b for b in live if b.offers(skills.EXTENSION) and b.info is not None]
    if serving:
        # SEP-2640 under capabilities.extensions, for hosts of both eras:
        # 2025-11-25 defines no such field, but the TypeScript SDK sends and
        # reads it in the initialize result too (docs/skills.md).
        settings: dict[str, Any] = {}
        if any(skills.reads_directories(b.info.capabilities) for b in serving if b.info):
            settings["directoryRead"] = True
        caps.setdefault("extensions", {})[skills.EXTENSION] = settings
    return caps


def instructions(pool: PoolView, shown: Callable[[str], bool] = _everyone) -> str | None:
    """The ``shown`` backends' own instructions, each under its prefix."""
    parts = []
    for name in sorted(pool.backends):
        if not shown(name):
            continue
        backend = pool.backends[name]
        info = backend.info
        if info is not None and info.instructions:
            label = backend.prefix or backend.name
            parts.append(f"## {label}\n{info.instructions.strip()}")
    return "\n\n".join(parts) or None


def initialize_result(
    pool: PoolView, version: str, shown: Callable[[str], bool] = _everyone
) -> msgspec.Raw:
    """The InitializeResult for a host that negotiated ``version``."""
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": server_capabilities(pool, shown),
        "serverInfo": {"name": SERVER_NAME, "version": __version__},
    }
    text = instructions(pool, shown)
    if text:
        result["instructions"] = text
    return mcp.encode(result)
