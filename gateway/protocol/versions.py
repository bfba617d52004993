"""Which protocol revisions the gateway speaks, and how a leg picks one.

Each leg negotiates on its own: a host may speak 2024-11-05 to us while we
speak 2025-11-25 to a backend. The rules are the spec's (lifecycle,
"Version Negotiation"): the client offers its newest; a server that knows it
answers with it, otherwise with its own newest.
"""

from __future__ import annotations

from typing import Final

SUPPORTED_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_VERSION: Final = SUPPORTED_VERSIONS[-1]


def negotiate_as_server(requested: object) -> str:
    """The version the gateway answers a host's ``initialize`` with.

    Anything we do not know (``1.0.0``, a future date, a non-string) gets
    our newest: it is then the host's call to disconnect (robustness A20).
    """
    if isinstance(requested, str) and requested in SUPPORTED_VERSIONS:
        return requested
    return LATEST_VERSION


def accept_as_client(answered: object) -> str | None:
    """The version a backend answered, if the gateway can use it, else None."""
    if isinstance(answered, str) and answered in SUPPORTED_VERSIONS:
        return answered
    return None


def supports_batches(version: str) -> bool:
    """JSON-RPC batches exist only in 2025-03-26; later revisions dropped them."""
    return version == "2025-03-26"


def resource_not_found_code(version: str) -> int:
    """The error code for resources/read of an unknown URI on this revision.

    2025-06-18 named -32002 explicitly; older hosts got -32602 from most
    servers; 2026-07-28 removed -32002 again in favour of -32602 (sep-2164).
    """
    return -32002 if "2025-06-18" <= version < "2026-07-28" else -32602
