"""The catalog honours a 2026-07-28 backend's ``ttlMs`` for lists it is not told about.

A backend's list comes with a freshness promise (``S/server/utilities/
caching.mdx``): fresh while ``now < received + ttlMs``. The gateway serves
every host from its catalog, so the promise matters where nothing else says
a list changed.

Rules:

1. A list whose kind the backend declares ``listChanged`` is followed by the
   standing listen (``upstream_listen``): its ttl needs no action, a change
   is pushed.
2. A list with ``ttlMs > 0`` and no ``listChanged`` is re-listed once its ttl
   has run out: never sooner, so a backend's promise saves the relisting.
3. ``ttlMs: 0`` (or none, as every handshake-era backend) promises nothing
   and asks for a re-fetch on each use; the catalog does not poll for it
   (it would poll in a tight loop) and keeps the list until a change is
   heard or the backend restarts, as before.
4. The spec forbids treating ttl as a polling interval without jitter and
   backoff: each deadline gets up to ``JITTER`` more, and is never sooner
   than ``MIN_INTERVAL`` after the last listing.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Final

import trio

from gateway.catalog.snapshot import Kind

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from gateway.protocol.stateless.cache_hints import CacheHint

# Up to this fraction of the ttl is added to each deadline (rule 4).
JITTER: Final = 0.1
# No list is re-listed more often than this, whatever its ttl (rule 4).
MIN_INTERVAL: Final = 1.0
# A change of resources covers the templates and the skills too (SEP-2640: skills are resources).
_SECTION: Final = {
    Kind.TOOLS: "tools",
    Kind.PROMPTS: "prompts",
    Kind.RESOURCES: "resources",
    Kind.TEMPLATES: "resources",
    Kind.SKILLS: "resources",
}


def pushed(capabilities: Mapping[str, object]) -> frozenset[Kind]:
    """The lists whose changes the backend announces (rule 1)."""
    out = set()
    for kind, section in _SECTION.items():
        declared = capabilities.get(section)
        if isinstance(declared, dict) and declared.get("listChanged") is True:
            out.add(kind)
    return frozenset(out)


def deadlines(
    listed_at: Mapping[Kind, float],
    hints: Mapping[Kind, CacheHint],
    announced: frozenset[Kind],
    rng: random.Random | None = None,
) -> dict[Kind, float]:
    """When each list not announced and with a positive ttl goes stale (rules 2-4).

    Args:
        listed_at: when each list was last walked (trio clock).
        hints: each list's merged hint from that walk.
        announced: the lists the backend pushes changes of.
        rng: the jitter's source (tests seed it).
    """
    draw = (rng or random).random
    out: dict[Kind, float] = {}
    for kind, at in listed_at.items():
        hint = hints.get(kind)
        if kind in announced or hint is None or hint.ttl_ms <= 0:
            continue
        ttl = hint.ttl_ms / 1000
        out[kind] = at + max(MIN_INTERVAL, ttl * (1 + JITTER * draw()))
    return out


async def relist_when_stale(
    capabilities: Mapping[str, object],
    listed_at: Mapping[Kind, float],
    hints: Mapping[Kind, CacheHint],
    relisted: Callable[[], trio.Event],
    mark_changed: Callable[[tuple[Kind, ...]], None],
    rng: random.Random | None = None,
) -> None:
    """For the session's life: ask for a re-listing of each list its ttl made stale.

    Args:
        capabilities: the backend's, for which lists are announced instead.
        listed_at: the supervisor's record of when each list was walked.
        hints: the supervisor's hints of those walks.
        relisted: the event set after the next listing (deadlines move then).
        mark_changed: the supervisor's own re-listing trigger.
        rng: the jitter's source.
    """
    announced = pushed(capabilities)
    while True:
        walked = relisted()
        due = deadlines(listed_at, hints, announced, rng)
        if not due:
            await walked.wait()
            continue
        first = min(due.values())
        with trio.move_on_at(first):
            await walked.wait()
            continue
        now = trio.current_time()
        stale = tuple(kind for kind, at in due.items() if at <= now)
        mark_changed(stale)
        await walked.wait()  # the re-listing records new times before the next round


__all__ = ["JITTER", "MIN_INTERVAL", "deadlines", "pushed", "relist_when_stale"]
