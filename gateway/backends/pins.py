"""Each backend's listing through its pins before the catalog publishes it (pinning's trio driver).

Rules:

1. **Judged on the publish path, synchronously**, on the pin book's copy
   (``gateway.pinning.book`` rule 1): what the catalog publishes is the
   gate's verdict (``gateway.pinning.gate``), so hosts of both eras, which
   read the same catalog, see the same pinned definitions.
2. **Unjudged is unseen.** Until the book is read from the store, the
   listing of a backend whose mode is not ``off`` is kept out of the
   catalog: no host is shown a definition the pins did not see.
3. **Writes follow.** Changed records are copied into the book at once
   and written by a task of their own (compare-and-set); a lost race
   re-reads the record and judges that backend's listing again.
4. **Drift is counted and logged once per change**: one
   ``pins.drift`` line with the backend, kind, public name and classes
   (never the text), at warning level except under ``record``; an item
   the backend listed when last judged and no longer lists is ``removed``; the
   ``drift_detected_total{backend,class}`` counter and the
   ``pins_pending{backend}`` gauge follow.
5. **Decisions travel.** An approval or rejection on any replica reaches
   every replica's book (its channel); each judges that backend's listing
   again, so hosts get ``list_changed`` and the approved definition.
6. A store that does not answer delays loading and writing (retried each
   second); it never fails a listing or a call.
7. **A listing the pins cannot judge** (a definition nested past Python's
   recursion limit) is logged (``pins.judge_failed``) and kept out of the
   catalog under ``hold`` and ``block`` (fail closed), published as it is
   under ``record`` and ``warn``; it never fails the backend.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any, Final

import structlog
import trio

from gateway.catalog.naming import public_name, public_uri
from gateway.catalog.snapshot import Kind
from gateway.pinning.book import PinBook
from gateway.pinning.drift import Drift, classes
from gateway.pinning.gate import NAME_FIELD, judge_listing, pin_key
from gateway.pinning.ledger import PinMode, PinRecord
from gateway.store.api import StoreUnavailable

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from gateway.backends.listing import Items
    from gateway.catalog.naming import NamingRules
    from gateway.catalog.snapshot import BackendListing
    from gateway.pinning.baseline import BackendIdentity, Baseline
    from gateway.pinning.definitions import PinKind
    from gateway.pinning.gate import PinKey
    from gateway.store.api import Store
    from gateway.telemetry.metrics import Metrics

__all__ = ["KIND_OF", "PinGuard", "pin_view", "public_of"]

logger = structlog.get_logger("gateway.pins")

#: The catalog's lists that pins cover, and the pin kind of each.
KIND_OF: Final[dict[Kind, PinKind]] = {
    Kind.TOOLS: "tool",
    Kind.PROMPTS: "prompt",
    Kind.TEMPLATES: "resource_template",
    Kind.SKILLS: "skill",
}
#: Seconds between attempts while the store does not answer (rule 6).
RETRY: Final = 1.0


def public_of(record: PinRecord, prefix: str, rules: NamingRules) -> str:
    """The public name (URI template, skill URI) hosts know ``record``'s item by."""
    if record.kind in ("resource_template", "skill"):
        return public_uri(prefix, record.name)
    try:
        return public_name(prefix, record.name, rules)
    except ValueError:
        return record.name


def pin_view(record: PinRecord, public: str) -> dict[str, Any]:
    """A record as people and the admin API read it: names, classes, both definitions."""
    pending = record.pending
    return {
        "backend": record.backend,
        "kind": record.kind,
        "name": record.name,
        "public": public,
        "pinned_digest": record.pinned.digest if record.pinned is not None else None,
        "pinned": record.pinned.definition if record.pinned is not None else None,
        "pinned_by": record.pinned.by if record.pinned is not None else None,
        "pending_digest": pending.digest if pending is not None else None,
        "pending": pending.definition if pending is not None else None,
        "classes": sorted(d.value for d in classes(pending.findings)) if pending else [],
        "findings": [
            {"class": f.drift.value, "place": f.place, "detail": f.detail}
            for f in (pending.findings if pending is not None else [])
        ],
        "seen_at": pending.seen_at if pending is not None else None,
    }


class PinGuard:
    """Rules 1-6 for every backend of one gateway.

    Args:
        modes: a backend's pinning mode and ``hold_new``, by name.
        prefixes: a backend's public prefix, by name (for public names).
        rules: the naming rules.
        metrics: where drift is counted; None in tests that do not look.
        clock: wall time, for the records.
    """

    def __init__(
        self,
        modes: Callable[[str], tuple[PinMode, bool]],
        prefixes: Callable[[str], str],
        rules: NamingRules,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._modes = modes
        self._prefixes = prefixes
        self._rules = rules
        self._metrics = metrics
        self._clock = clock
        self.book: PinBook | None = None
        self.loaded = False
        self.refused: dict[str, frozenset[tuple[str, str]]] = {}
        self.withheld: dict[str, frozenset[tuple[str, str]]] = {}
        self.republish: Callable[[str | None], None] = lambda _backend: None
        """Judge a backend's listing again (None: every backend); the pool sets it."""
        self._unsaved: dict[PinKey, PinRecord] = {}
        # What each backend listed when last judged, for ``removed`` (rule 4).
        self._listed: dict[str, set[tuple[PinKind, str]]] = {}
        self._wake = trio.Event()
        self._writing = trio.Lock()

    def configure(
        self, modes: Callable[[str], tuple[PinMode, bool]], prefixes: Callable[[str], str]
    ) -> None:
        """A reload's modes and prefixes (the backends it changed restart and list again)."""
        self._modes = modes
        self._prefixes = prefixes

    def gated(self, backend: str) -> bool:
        """Whether ``backend``'s listings go through its pins (its mode is not ``off``)."""
        return self._modes(backend)[0] is not PinMode.OFF

    def judge(self, listing: BackendListing) -> BackendListing | None:
        """Rules 1-4: what the catalog publishes of ``listing``; None keeps it out for now."""
        backend = listing.backend
        mode, hold_new = self._modes(backend)
        if mode is PinMode.OFF:
            self.refused.pop(backend, None)
            self.withheld.pop(backend, None)
            return listing
        book = self.book
        if book is None or not self.loaded:
            return None
        offered = {KIND_OF[kind]: listing.items(kind) for kind in KIND_OF}
        try:
            verdict = judge_listing(
                mode, backend, offered, book.records, now=self._clock(), hold_new=hold_new
            )
        except (RecursionError, ValueError, TypeError) as exc:
            # A definition the canonical form cannot take (nested past Python's
            # recursion limit): rule 7, never a failed backend or pool.
            held = mode in (PinMode.HOLD, PinMode.BLOCK)
            logger.error("pins.judge_failed", backend=backend, error=type(exc).__name__, held=held)
            return None if held else listing
        for record in verdict.changed:
            key = pin_key(record.backend, record.kind, record.name)
            book.records[key] = record
            self._unsaved[key] = record
        if verdict.changed:
            self._wake.set()
        for record in verdict.drifted:
            self._drifted(mode, record, listing.prefix)
        self.refused[backend] = verdict.refused
        self.withheld[backend] = verdict.withheld
        self._removed(mode, listing, offered)
        self._count_pending(backend)
        return dataclasses.replace(
            listing,
            tools=verdict.items["tool"],
            prompts=verdict.items["prompt"],
            templates=verdict.items["resource_template"],
            skills=verdict.items["skill"],
        )

    def refuses(self, backend: str, kind: Kind, name: str) -> bool:
        """Whether calls to ``backend``'s item ``name`` are refused (``block``)."""
        pin_kind = KIND_OF.get(kind)
        return pin_kind is not None and (pin_kind, name) in self.refused.get(backend, frozenset())

    def withholds(self, backend: str, kind: Kind, name: str) -> bool:
        """Whether hosts are shown ``backend``'s item ``name`` as pinned, or not at all (hold)."""
        pin_kind = KIND_OF.get(kind)
        return pin_kind is not None and (pin_kind, name) in self.withheld.get(backend, frozenset())

    def _drifted(self, mode: PinMode, record: PinRecord, prefix: str) -> None:
        pending = record.pending
        if pending is None:
            return
        found = sorted(d.value for d in classes(pending.findings))
        if self._metrics is not None:
            for name in found:
                self._metrics.drift_detected.labels(backend=record.backend, **{"class": name}).inc()
        log = logger.info if mode is PinMode.RECORD else logger.warning
        log(
            "pins.drift",
            backend=record.backend,
            kind=record.kind,
            public=public_of(record, prefix, self._rules),
            classes=found,
            mode=mode.value,
            digest=pending.digest,
        )

    def _removed(
        self, mode: PinMode, listing: BackendListing, offered: Mapping[PinKind, Items]
    ) -> None:
        """Rule 4 for items the backend listed last time and no longer does (class ``removed``).

        The pin stays (the ledger's rule 5); the removal is counted and
        logged once, when the listing that lacks the item is judged.
        """
        names = {
            (kind, name)
            for kind, items in offered.items()
            for item in items
            if isinstance(name := item.get(NAME_FIELD[kind]), str)
        }
        before = self._listed.get(listing.backend)
        self._listed[listing.backend] = names
        if before is None:
            return
        for kind, name in sorted(before - names):
            if self._metrics is not None:
                self._metrics.drift_detected.labels(
                    backend=listing.backend, **{"class": Drift.REMOVED.value}
                ).inc()
            public = public_of(
                PinRecord(kind=kind, backend=listing.backend, name=name),
                listing.prefix,
                self._rules,
            )
            log = logger.info if mode is PinMode.RECORD else logger.warning
            log(
                "pins.drift",
                backend=listing.backend,
                kind=kind,
                public=public,
                classes=[Drift.REMOVED.value],
                mode=mode.value,
            )

    def _count_pending(self, backend: str) -> None:
        if self._metrics is None or self.book is None:
            return
        waiting = sum(
            1 for key, r in self.book.records.items() if key[0] == backend and r.pending is not None
        )
        self._metrics.pins_pending.labels(backend=backend).set(waiting)

    def pending(self, backend: str | None = None) -> list[dict[str, Any]]:
        """Every change waiting for a person, as :func:`pin_view` shows it."""
        if self.book is None:
            return []
        return [
            pin_view(r, public_of(r, self._prefixes(r.backend), self._rules))
            for r in self.book.pending(backend)
        ]

    def find(self, public: str) -> PinRecord | None:
        """The record hosts know by ``public`` (or by ``backend:kind:name``), if any."""
        if self.book is None:
            return None
        for record in self.book.records.values():
            if public in (
                public_of(record, self._prefixes(record.backend), self._rules),
                f"{record.backend}:{record.kind}:{record.name}",
            ):
                return record
        return None

    async def decide(
        self, records: list[PinRecord], *, approved: bool, by: str
    ) -> list[dict[str, Any]]:
        """Approve or reject each record's pending change; returns what was decided.

        Every decision is logged with who and when (``pins.approved`` or
        ``pins.rejected``) and travels to every replica (rule 5).
        """
        book = self.book
        if book is None:
            return []
        await self.flush()
        done: list[dict[str, Any]] = []
        for record in records:
            now = self._clock()
            decided = await book.decide(
                record.backend, record.kind, record.name, approved=approved, by=by, now=now
            )
            if decided is None:
                continue
            public = public_of(decided, self._prefixes(decided.backend), self._rules)
            logger.warning(
                "pins.approved" if approved else "pins.rejected",
                backend=decided.backend,
                kind=decided.kind,
                public=public,
                by=by,
                at=now,
                digest=decided.pinned.digest if approved and decided.pinned else None,
            )
            done.append(pin_view(decided, public))
            self.republish(decided.backend)
        return done

    def export(self, identities: Mapping[str, BackendIdentity]) -> Baseline:
        """The unsigned baseline of every approved pin (``gateway.pinning.exchange``)."""
        records = [] if self.book is None else list(self.book.records.values())
        # Here, not at the top: baselines load cryptography (Ed25519), which a
        # gateway that never exports or imports one does not need (start path).
        from gateway.pinning.exchange import baseline_document

        return baseline_document(records, identities)

    async def import_baseline(self, document: Baseline) -> int:
        """Pin ``document``'s definitions as approved; returns how many records changed."""
        book = self.book
        if book is None:
            return 0
        from gateway.pinning.exchange import imported_records

        changed = imported_records(document, book.records, now=self._clock())
        await book.save(changed)
        for backend in sorted({r.backend for r in changed}):
            self.republish(backend)
        logger.warning("pins.imported", items=len(document.items), changed=len(changed))
        return len(changed)

    def _heard(self, backend: str) -> None:
        self.republish(backend)

    async def run(
        self,
        store: Store,
        baseline: Baseline | None = None,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Load the book, import the baseline, then listen and write until cancelled (rules 2-6)."""
        self.book = PinBook(store, on_decided=self._heard)
        task_status.started()
        failures = 0
        while True:
            try:
                count = await self.book.load()
                if baseline is not None:
                    await self.import_baseline(baseline)
                break
            except StoreUnavailable as exc:
                # One warning per outage; the retries after it at debug.
                log = logger.warning if failures == 0 else logger.debug
                log("pins.load_failed", error=str(exc), attempts=failures + 1)
                failures += 1
                await trio.sleep(RETRY)
        self.loaded = True
        logger.info("pins.loaded", records=count)
        self.republish(None)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._listen)
            nursery.start_soon(self._write)

    async def _listen(self) -> None:
        assert self.book is not None
        while True:
            try:
                await self.book.run()
            except StoreUnavailable as exc:
                logger.warning("pins.listen_failed", error=str(exc))
            await trio.sleep(RETRY)

    async def _write(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            await self.flush()
            if self._unsaved:
                await trio.sleep(RETRY)
                self._wake.set()

    async def flush(self) -> None:
        """Write what the gate changed (rule 3); what the store refused stays queued.

        A decision flushes first, so it reads the record the gate made.
        """
        book = self.book
        if book is None:
            return
        async with self._writing:
            batch, self._unsaved = self._unsaved, {}
            lost: set[str] = set()
            for key, record in batch.items():
                try:
                    await book.save([record])
                except StoreUnavailable as exc:
                    logger.warning("pins.save_failed", error=str(exc))
                    self._unsaved.setdefault(key, record)
                    continue
                if book.records.get(key) is not record:
                    lost.add(record.backend)  # another replica wrote first (rule 3)
        for backend in sorted(lost):
            self.republish(backend)
