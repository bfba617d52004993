"""One list walked over a live session: the I/O half of ``backends.listing``.

``listing`` decides, page by page, what to ask next and when to stop (the
guards against endless cursors and huge lists); this drives it against a
session, with the backend's request timeout on each page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from gateway.backends import listing
from gateway.errors import ProtocolError

if TYPE_CHECKING:
    from gateway.catalog.snapshot import Kind
    from gateway.config import BackendConfig
    from gateway.session.peer import Peer


async def walk(peer: Peer, kind: Kind, config: BackendConfig) -> listing.Listed | listing.Failed:
    """Walk one list's pages; a page's error answer is the walk's to judge.

    Raises:
        trio.TooSlowError: a page got no answer within ``timeouts.request``.
        TransportError: the session broke.
    """
    step: listing.Step = listing.begin(
        kind, max_pages=config.max_list_pages, max_items=config.max_list_items
    )
    while isinstance(step, listing.PageRequest):
        try:
            with trio.fail_after(config.timeouts.request):
                answer = await peer.request(step.method, step.params)
        except ProtocolError as exc:
            step = listing.step(step, exc)
        else:
            step = listing.step(step, answer)
    return step


__all__ = ["walk"]
