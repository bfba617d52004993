"""A reload applied on one replica is applied by every replica sharing the store.

Rules:

1. **Announce, then follow.** A replica that applied a reload from its
   config file (SIGHUP, the console's button) bumps the store's reload
   generation (``reload:generation``, one atomic ``add``) and publishes it
   on the ``reload`` channel. Every replica follows: when it hears of a
   generation above the last it saw, it reloads its *own* config file (the
   replicas run on the same file, e.g. one ConfigMap), without announcing
   again. A token removed from ``auth.tokens`` or a policy changed on one
   replica is so in force on all.
2. **A bound even when a message is lost.** Pub/sub is at most once (a
   replica whose subscription broke misses the message), so each follower
   also reads the generation every :data:`POLL_INTERVAL` seconds: a missed
   announcement is followed within that bound; a delivered one within a
   round trip (measured in ``tests/store/test_reload_news.py``).
3. **A store that does not answer** delays the following (logged once per
   outage, ``reload.news_unavailable``); the replica keeps serving its
   config and catches up when the store answers.
4. Only with a shared store (``store.url``) and a config file: the embedded
   store serves one gateway, with no one to tell.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import structlog
import trio

from gateway.store.api import StoreUnavailable

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from gateway.store.api import Store

__all__ = ["CHANNEL", "GENERATION", "POLL_INTERVAL", "ReloadNews"]

logger = structlog.get_logger("gateway.runtime.reload")

CHANNEL: Final = "reload"
GENERATION: Final = "reload:generation"
#: Seconds between two reads of the generation: the bound when a message is lost.
POLL_INTERVAL: Final = 5.0


class ReloadNews:
    """Announces this replica's reloads and follows the others' (module rules).

    Args:
        store: the shared store.
        reload: reloads this replica's config file without announcing it;
            True when the new config was applied.
        poll: seconds between two reads of the generation (rule 2); None:
            :data:`POLL_INTERVAL`.
    """

    def __init__(
        self,
        store: Store,
        reload: Callable[[], Awaitable[bool]],
        *,
        poll: float | None = None,
    ) -> None:
        self._store = store
        self._reload = reload
        self._poll = POLL_INTERVAL if poll is None else poll
        self._seen = 0
        self._unavailable = False
        #: Set once the first subscription is open (tests wait for it).
        self.listening = trio.Event()

    async def announce(self) -> None:
        """Tell every replica that this one applied a reload (rule 1); best effort."""
        try:
            generation = await self._store.add(GENERATION)
            self._seen = max(self._seen, generation)
            await self._store.publish(CHANNEL, b"%d" % generation)
        except StoreUnavailable as exc:
            # The others follow when the store answers again (their poll).
            logger.warning("reload.news_unavailable", reason=exc.reason, step="announce")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Follow the other replicas' reloads until cancelled (rules 1-3)."""
        self._seen = await self._generation() or 0
        task_status.started()
        while True:
            try:
                async with self._store.subscribe(CHANNEL) as messages:
                    self.listening.set()
                    while True:
                        with trio.move_on_after(self._poll):
                            await messages.receive()
                        await self._catch_up()
            except (StoreUnavailable, trio.EndOfChannel, trio.BrokenResourceError) as exc:
                reason = exc.reason if isinstance(exc, StoreUnavailable) else "subscription ended"
                self._down(reason)
                await trio.sleep(self._poll)
                await self._catch_up()

    async def _generation(self) -> int | None:
        try:
            value = await self._store.get(GENERATION)
        except StoreUnavailable as exc:
            self._down(exc.reason)
            return None
        if self._unavailable:
            self._unavailable = False
            logger.info("reload.news_restored")
        return int(value) if value is not None else 0

    def _down(self, reason: str) -> None:
        if not self._unavailable:
            self._unavailable = True
            logger.warning("reload.news_unavailable", reason=reason, step="follow")

    async def _catch_up(self) -> None:
        generation = await self._generation()
        if generation is None or generation <= self._seen:
            return
        self._seen = generation
        applied = await self._reload()
        logger.info("reload.followed", generation=generation, applied=applied)
