"""One backend's whole listing through its pins: what hosts see, what calls are refused (sans-IO).

Rules:

1. **Item by item** through :func:`~gateway.pinning.ledger.meet`; the
   listing that comes out has, per item, what the decision shows: the
   backend's item as it is, the backend's item with the pinned fields put
   back (``hold``, ``block``), or nothing (a new item held for approval).
2. **The pinned fields only are put back**: a held item keeps the
   backend's other fields (``_meta``, icons), and a pinned field the pin
   does not have is removed, so hosts see exactly the approved text and
   schemas.
3. **Refusals are named**: ``block`` items are returned as ``(kind, name)``
   for the router to refuse calls to; nothing else is refused here.
4. **What to store** is returned, not stored: the caller persists the
   changed records (compare-and-set in the state store) and counts the
   drift.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from gateway.pinning.definitions import PINNED_FIELDS, PinKind, pinned_definition
from gateway.pinning.ledger import PinMode, PinRecord, meet

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["NAME_FIELD", "PinKey", "Verdict", "judge_listing", "pin_key", "shown_item"]

PinKey = tuple[str, str, str]  # backend, kind, original name

#: The field that names an item of each kind (its original name).
NAME_FIELD: dict[str, str] = {
    "tool": "name",
    "prompt": "name",
    "resource_template": "uriTemplate",
    "skill": "uri",
}


def pin_key(backend: str, kind: PinKind, name: str) -> PinKey:
    """The key of an item's pin record."""
    return (backend, kind, name)


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """What one listing becomes (module rules).

    Attributes:
        items: per kind, the items hosts are shown, in the backend's order.
        refused: ``(kind, name)`` of items whose calls are refused.
        changed: records to store (new pins, new pending changes).
        drifted: the records among ``changed`` that carry a new change.
        withheld: ``(kind, name)`` of the items that show their pin instead
            of the backend's definition, or are hidden: what a host is sent
            of them outside the listing (a skill's ``skills/get``, a held
            tool's call) must come from the pin too.
    """

    items: dict[str, tuple[dict[str, Any], ...]]
    refused: frozenset[tuple[str, str]]
    changed: list[PinRecord]
    drifted: list[PinRecord]
    withheld: frozenset[tuple[str, str]] = frozenset()

    @property
    def held(self) -> int:
        """How many items are withheld, for the gauge."""
        return len(self.withheld)


def shown_item(item: dict[str, Any], kind: PinKind, definition: dict[str, Any]) -> dict[str, Any]:
    """``item`` with its pinned fields replaced by ``definition``'s (rule 2)."""
    shown = {k: v for k, v in item.items() if k not in PINNED_FIELDS[kind]}
    shown.update(definition)
    return shown


def judge_listing(
    mode: PinMode,
    backend: str,
    items: Mapping[PinKind, tuple[dict[str, Any], ...]],
    records: Mapping[PinKey, PinRecord],
    *,
    now: float,
    hold_new: bool = False,
) -> Verdict:
    """Rules 1-4 over one backend's listing.

    Args:
        mode: the backend's pinning mode.
        backend: its name.
        items: its items by kind (original names), after its include/exclude.
        records: the known pin records (any backend's; looked up by key).
        now: wall time, for new records.
        hold_new: under ``hold``, new items wait for approval.

    Returns:
        The verdict.
    """
    shown: dict[str, tuple[dict[str, Any], ...]] = {}
    refused: set[tuple[str, str]] = set()
    changed: list[PinRecord] = []
    drifted: list[PinRecord] = []
    withheld: set[tuple[str, str]] = set()
    for kind, kind_items in items.items():
        out: list[dict[str, Any]] = []
        for item in kind_items:
            name = item.get(NAME_FIELD[kind])
            if not isinstance(name, str):
                out.append(item)  # the catalog reports an item without a name
                continue
            definition = pinned_definition(kind, item)
            record = records.get(pin_key(backend, kind, name))
            decision = meet(
                mode, record, kind, backend, name, definition, now=now, hold_new=hold_new
            )
            if decision.record is not None:
                changed.append(decision.record)
                if decision.drifted:
                    drifted.append(decision.record)
            if decision.refuse_calls:
                refused.add((kind, name))
            if decision.show is None:
                withheld.add((kind, name))
                continue
            if decision.show is definition:
                out.append(item)
            else:
                withheld.add((kind, name))
                out.append(shown_item(item, kind, decision.show))
        shown[kind] = tuple(out)
    return Verdict(
        items=shown,
        refused=frozenset(refused),
        changed=changed,
        drifted=drifted,
        withheld=frozenset(withheld),
    )
