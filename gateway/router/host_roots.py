"""What each handshake-era host's roots are, as a digest the backend session key carries.

Rules:

1. A host that declared ``roots`` is asked ``roots/list`` once, before its
   first call to a backend whose sessions are its principal's
   (``BackendView.keyed_by_roots``; a ``per_client`` session is the host's
   alone and needs no key), on that call's stream; the answer's digest
   (``roots_digest``) joins its principal's session key, so hosts
   of one principal with other roots never share a backend session.
2. ``notifications/roots/list_changed`` from the host marks its digest
   stale; its next such call asks again, and when the digest changed the
   backends re-key the host (``BackendView.rekey_client``).
3. Calls of one host wait for one question, never ask twice at once.
4. A host that does not answer within ``ROOTS_WAIT`` or answers with an
   error is keyed as having no roots known (one warning line): its call
   goes on, on the session of its principal and capabilities.
5. A 2026-07-28 request has no roots to ask outside a call (roots only come
   as an MRTR answer); its key is its principal and capabilities.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import msgspec
import structlog
import trio

from gateway.errors import GatewayError
from gateway.protocol import mcp

if TYPE_CHECKING:
    from collections.abc import Callable

    from gateway.router.neighbours import ClientPeer, Emit

logger = structlog.get_logger("gateway.router")

# How long a host may take to list its roots (software answers, no person).
ROOTS_WAIT: Final = 10.0

_ENCODER: Final = msgspec.json.Encoder(order="sorted")


def roots_digest(roots: object) -> str:
    """A digest of a host's ``roots/list`` answer, the same for the same roots in any order.

    Only ``uri`` and ``name`` of each root count; anything that is not a list
    of objects digests as the empty list.
    """
    entries = roots if isinstance(roots, list) else []
    canonical = sorted(
        (str(entry.get("uri")), str(entry.get("name") or ""))
        for entry in entries
        if isinstance(entry, dict)
    )
    return hashlib.sha256(_ENCODER.encode(canonical)).hexdigest()[:16]


@dataclass(eq=False)
class _Known:
    """One host's roots digest and whether it must be asked again."""

    digest: str | None = None
    stale: bool = True
    asked: bool = False
    asking: trio.Lock = field(default_factory=trio.Lock)


class HostRoots:
    """The roots digest of each handshake-era client session (rules 1-5).

    Args:
        on_change: called with a session id whose digest changed (rule 2).
    """

    def __init__(self, on_change: Callable[[str], None] = lambda _session_id: None) -> None:
        self._hosts: dict[str, _Known] = {}
        self.on_change = on_change

    def digest_of(self, session_id: str) -> str | None:
        """The digest of the host's roots as last listed; None when none is known."""
        known = self._hosts.get(session_id)
        return known.digest if known is not None else None

    def changed(self, session_id: str) -> None:
        """The host sent ``notifications/roots/list_changed`` (rule 2)."""
        known = self._hosts.get(session_id)
        if known is not None:
            known.stale = True

    def closed(self, session_id: str) -> None:
        """The client session ended."""
        self._hosts.pop(session_id, None)

    async def ensure(self, client: ClientPeer, emit: Emit | None) -> None:
        """Ask the host for its roots when they are not known (rules 1-4)."""
        if "roots" not in client.capabilities:
            return
        known = self._hosts.setdefault(client.session_id, _Known())
        async with known.asking:
            if not known.stale:
                return
            before, asked = known.digest, known.asked
            known.digest = await self._ask(client, emit)
            known.stale, known.asked = False, True
        if asked and known.digest != before:
            self.on_change(client.session_id)

    async def _ask(self, client: ClientPeer, emit: Emit | None) -> str | None:
        """The digest of the host's answer to ``roots/list``; None when it gave none."""
        with trio.move_on_after(ROOTS_WAIT):
            try:
                answer = mcp.decode_object(await client.request("roots/list", None, emit))
            except GatewayError as exc:
                logger.warning("client.roots.unanswered", client=client.session_id, error=str(exc))
                return None
            return roots_digest((answer or {}).get("roots"))
        logger.warning("client.roots.unanswered", client=client.session_id, seconds=ROOTS_WAIT)
        return None
