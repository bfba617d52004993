"""Pin records to a baseline document and back (sans-IO).

Rules:

1. **Export** carries every approved pin (its full definition), sorted by
   key, and the portable identity of each backend that has one; pending
   changes and rejections stay in the store: a baseline is what a team
   approved, not what it is still deciding.
2. **Import** makes each item's definition the approved pin, by
   ``baseline``; a pending change with the same digest is settled by it,
   one with another digest keeps waiting (the baseline does not decide
   what it has not seen). Records equal to what they were are not
   returned, so importing one file twice writes nothing the second time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from gateway.pinning.baseline import BackendIdentity, Baseline, BaselineItem
from gateway.pinning.gate import pin_key
from gateway.pinning.ledger import Pinned, PinRecord

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from gateway.pinning.gate import PinKey

__all__ = ["baseline_document", "imported_records"]


def baseline_document(
    records: Iterable[PinRecord], identities: Mapping[str, BackendIdentity]
) -> Baseline:
    """Rule 1: the unsigned baseline of ``records``' approved pins.

    Args:
        records: pin records (any order).
        identities: each configured backend's portable identity, by name.

    Returns:
        The document, to sign with ``encode_baseline``.
    """
    items = [
        BaselineItem(
            backend=r.backend,
            kind=r.kind,
            name=r.name,
            digest=r.pinned.digest,
            definition=r.pinned.definition,
        )
        for r in sorted(records, key=lambda r: pin_key(r.backend, r.kind, r.name))
        if r.pinned is not None
    ]
    named = sorted({item.backend for item in items})
    backends = [identities.get(name) or BackendIdentity(name=name) for name in named]
    return Baseline(backends=backends, items=items)


def imported_records(
    document: Baseline, records: Mapping[PinKey, PinRecord], *, now: float
) -> list[PinRecord]:
    """Rule 2: the records that change when ``document`` is imported.

    Args:
        document: a verified baseline.
        records: the known records, by key.
        now: wall time, for the pins.

    Returns:
        The new records, in the document's order.
    """
    out: list[PinRecord] = []
    for item in document.items:
        key = pin_key(item.backend, item.kind, item.name)
        base = records.get(key) or PinRecord(kind=item.kind, backend=item.backend, name=item.name)
        if base.pinned is not None and base.pinned.digest == item.digest:
            continue
        pending = base.pending
        if pending is not None and pending.digest == item.digest:
            pending = None
        pin = Pinned(digest=item.digest, definition=item.definition, by="baseline", at=now)
        rejected = [d for d in base.rejected if d != item.digest]
        out.append(msgspec.structs.replace(base, pinned=pin, pending=pending, rejected=rejected))
    return out
