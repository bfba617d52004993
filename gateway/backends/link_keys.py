"""Which backend session a host's call goes to: the key of a link, pure.

Rules:

1. ``per_client``: a client session's own key is its id; nothing is shared.
2. ``per_principal``: the key is the principal and a digest of the client
   capabilities its host declared (those the gateway bridges: roots,
   sampling, elicitation). Hosts of one principal that declare different
   capabilities get different sessions, so what a session declares towards
   the backend is always true of every host it serves.
3. A client whose principal is unknown (auth off) shares only with other
   unauthenticated clients of the same capabilities: ``per_principal``
   without auth separates hosts by what they can do, never by who they are.
4. A session declares towards the backend exactly the host's bridged
   capabilities, nothing the host did not declare.
5. ``per_principal`` keys also carry a digest of the roots the host
   listed (``router/host_roots.roots_digest``; the router asks a host that declared
   ``roots`` before its first call, and again after its
   ``notifications/roots/list_changed``): hosts of one principal with
   other roots get other sessions, so the roots a session's backend is
   told are those of every host it serves. ``None``: no roots known (the
   host declared none, or has not been asked yet).
"""

from __future__ import annotations

import hashlib
from typing import Any, Final, Literal

import msgspec

#: The client capabilities the gateway relays to hosts (router/to_clients).
BRIDGED_CAPABILITIES: Final = ("roots", "sampling", "elicitation")

LinkMode = Literal["per_principal", "per_client"]

_ENCODER: Final = msgspec.json.Encoder(order="sorted")


def declared(capabilities: dict[str, Any]) -> dict[str, Any]:
    """The host's capabilities the gateway declares on its behalf (rule 4)."""
    return {
        name: value if isinstance(value, dict) else {}
        for name in BRIDGED_CAPABILITIES
        if (value := capabilities.get(name)) is not None
    }


def link_key(
    mode: LinkMode,
    client: str,
    principal: str | None,
    capabilities: dict[str, Any],
    roots: str | None = None,
) -> str:
    """The key of the backend session that serves ``client`` (rules 1-3, 5)."""
    if mode == "per_client":
        return client
    digest = hashlib.sha256(_ENCODER.encode(declared(capabilities))).hexdigest()[:16]
    who = "anonymous" if principal is None else f"principal:{principal}"
    return f"{who}#{digest}" if roots is None else f"{who}#{digest}#roots:{roots}"
