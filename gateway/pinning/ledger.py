"""The pin of one item and what the gateway does when a backend's definition meets it (sans-IO).

Rules:

1. **One record per item**, keyed ``(backend, kind, original name)``: the
   approved definition (the pin), at most one pending change, and the
   digests a person rejected. The record is the whole truth; replicas share
   it through the state store and update it by compare-and-set.
2. **First sight pins**, except under ``hold`` with ``hold_new``: then a new
   item waits, hidden, until a person approves it.
3. **A change** (a digest other than the pin's) becomes the pending change,
   with its findings, unless it was rejected before (then it stays out of
   the way, and the pin keeps being served). What hosts see by mode:

   ========  =====================  ==================================
   mode      a changed item shows   a call to it
   ========  =====================  ==================================
   off       the new definition     goes through
   record    the new definition     goes through (the change is listed)
   warn      the new definition     goes through (and a warning is logged)
   hold      the pinned definition  goes through, as the host was shown
   block     the pinned definition  is refused (-32602, awaits approval)
   ========  =====================  ==================================

4. **Approval** makes the pending definition the pin (hosts get
   ``list_changed``); **rejection** drops the pending change and remembers
   its digest. Both are audited with who and when by the caller.
5. A definition the backend no longer offers is not served, whatever its
   pin; the pin stays, so the item coming back changed is still drift.
"""

from __future__ import annotations

import enum
from typing import Any, Final

import msgspec

from gateway.pinning.definitions import PinKind, digest
from gateway.pinning.drift import Finding, classify

__all__ = [
    "MAX_REJECTED",
    "Decision",
    "PinMode",
    "PinRecord",
    "Pinned",
    "Proposal",
    "approve",
    "meet",
    "reject",
]

#: Rejected digests remembered per item; older ones are forgotten first.
MAX_REJECTED: Final = 16


class PinMode(enum.Enum):
    """``pinning.mode`` (rule 3's table)."""

    OFF = "off"
    RECORD = "record"
    WARN = "warn"
    HOLD = "hold"
    BLOCK = "block"


class Pinned(msgspec.Struct, frozen=True, kw_only=True):
    """An approved definition: what hosts may be shown."""

    digest: str
    definition: dict[str, Any]
    by: str
    at: float


class Proposal(msgspec.Struct, frozen=True, kw_only=True):
    """A change waiting for a person."""

    digest: str
    definition: dict[str, Any]
    findings: list[Finding]
    seen_at: float


class PinRecord(msgspec.Struct, frozen=True, kw_only=True):
    """Rule 1: everything known of one item's pin."""

    kind: PinKind
    backend: str
    name: str
    pinned: Pinned | None = None
    pending: Proposal | None = None
    rejected: list[str] = msgspec.field(default_factory=list)


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """What to do with one item of a backend's list.

    Attributes:
        show: the definition hosts are shown; None hides the item.
        refuse_calls: calls to it are refused until a person approves.
        record: the record to store; None when it did not change.
        drifted: the change is new (count it, log it).
    """

    show: dict[str, Any] | None
    refuse_calls: bool = False
    record: PinRecord | None = None
    drifted: bool = False


def meet(
    mode: PinMode,
    record: PinRecord | None,
    kind: PinKind,
    backend: str,
    name: str,
    definition: dict[str, Any],
    *,
    now: float,
    hold_new: bool = False,
) -> Decision:
    """Rules 2 and 3: a backend offers ``definition`` for an item whose record is ``record``.

    Args:
        mode: the backend's pinning mode.
        record: the item's record, None on first sight.
        kind: the item's kind.
        backend: the backend's name.
        name: the item's original name.
        definition: the pinned fields of what the backend offers now.
        now: wall time, for the record.
        hold_new: under ``hold``, new items wait for approval too.

    Returns:
        What hosts see and what to store.
    """
    if mode is PinMode.OFF:
        return Decision(show=definition)
    offered = digest(definition)
    if record is None or record.pinned is None:
        if mode is PinMode.HOLD and hold_new:
            pending = Proposal(
                digest=offered,
                definition=definition,
                findings=classify(kind, None, definition),
                seen_at=now,
            )
            base = record or PinRecord(kind=kind, backend=backend, name=name)
            if base.pending is not None and base.pending.digest == offered:
                return Decision(show=None)
            if offered in base.rejected:
                return Decision(show=None)
            return Decision(
                show=None, record=msgspec.structs.replace(base, pending=pending), drifted=True
            )
        pin = Pinned(digest=offered, definition=definition, by="first sight", at=now)
        return Decision(
            show=definition, record=PinRecord(kind=kind, backend=backend, name=name, pinned=pin)
        )
    pinned = record.pinned
    if offered == pinned.digest:
        if record.pending is None:
            return Decision(show=definition)
        # The backend went back to the pinned definition: nothing waits any more.
        return Decision(show=definition, record=msgspec.structs.replace(record, pending=None))
    serve_pin = mode in (PinMode.HOLD, PinMode.BLOCK)
    shown = pinned.definition if serve_pin else definition
    refuse = mode is PinMode.BLOCK
    if offered in record.rejected or (
        record.pending is not None and record.pending.digest == offered
    ):
        return Decision(show=shown, refuse_calls=refuse)
    proposal = Proposal(
        digest=offered,
        definition=definition,
        findings=classify(kind, pinned.definition, definition),
        seen_at=now,
    )
    return Decision(
        show=shown,
        refuse_calls=refuse,
        record=msgspec.structs.replace(record, pending=proposal),
        drifted=True,
    )


def approve(record: PinRecord, *, by: str, now: float) -> PinRecord:
    """Rule 4: the pending change becomes the pin.

    Args:
        record: an item's record with a pending change.
        by: who approved (a console user, ``cli``, ``baseline``).
        now: wall time.

    Returns:
        The new record; ``record`` itself when nothing was pending.
    """
    if record.pending is None:
        return record
    pin = Pinned(digest=record.pending.digest, definition=record.pending.definition, by=by, at=now)
    rejected = [d for d in record.rejected if d != pin.digest]
    return msgspec.structs.replace(record, pinned=pin, pending=None, rejected=rejected)


def reject(record: PinRecord) -> PinRecord:
    """Rule 4: drop the pending change and remember its digest.

    Args:
        record: an item's record with a pending change.

    Returns:
        The new record; ``record`` itself when nothing was pending.
    """
    if record.pending is None:
        return record
    rejected = [*record.rejected, record.pending.digest][-MAX_REJECTED:]
    return msgspec.structs.replace(record, pending=None, rejected=rejected)
