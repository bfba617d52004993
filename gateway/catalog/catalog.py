"""The catalog a gateway keeps: the current snapshot, and how one backend's change gets in.

Backends publish and withdraw listings as they come, go and change; each
change makes a new ``Snapshot`` (``catalog.snapshot``) and reports which
kinds of list changed.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from gateway.catalog.snapshot import (
    EMPTY_SNAPSHOT,
    BackendListing,
    Candidate,
    Entry,
    Kind,
    KindView,
    Prepared,
    Snapshot,
    build_snapshot,
    prepare_listing,
    routing,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from gateway.catalog.naming import NamingRules


class Catalog:
    """The current snapshot and the listings it was built from.

    Backends publish and withdraw listings; each change builds a whole new
    snapshot and reports which kinds of list actually changed, so the
    gateway sends ``list_changed`` only when a host would see a difference.
    """

    def __init__(self, rules: NamingRules, prefixes: Mapping[str, str] | None = None) -> None:
        self._rules = rules
        self._prefixes = dict(prefixes or {})
        self._listings: dict[str, BackendListing] = {}
        # backend -> (the listing it was prepared from, the prepared items)
        self._prepared: dict[str, tuple[BackendListing, Prepared]] = {}
        self.snapshot: Snapshot = EMPTY_SNAPSHOT
        # Whether the snapshot has no clash, rename or duplicate (``_is_clean``).
        self._clean = True
        # Backends whose listing has items the catalog skips (no valid identity).
        self._troubled: set[str] = set()
        self._rebuild()

    def set_prefixes(self, prefixes: Mapping[str, str]) -> None:
        """Replace the configured prefix table (on reload)."""
        self._prefixes = dict(prefixes)
        self._rebuild()

    def publish(self, listing: BackendListing) -> frozenset[Kind]:
        """Add or replace one backend's listing; returns the kinds that changed."""
        self._listings[listing.backend] = listing
        return self._rebuild(listing.backend)

    def withdraw(self, backend: str) -> frozenset[Kind]:
        """Remove a backend's items (it went down); returns the kinds that changed."""
        if self._listings.pop(backend, None) is None:
            return frozenset()
        return self._rebuild(backend)

    def _rebuild(self, changed: str | None = None) -> frozenset[Kind]:
        old = self.snapshot
        kept_before = self._prepared.get(changed) if changed is not None else None
        before = kept_before[1] if kept_before is not None else None
        prepared: dict[str, Prepared] = {}
        for name, listing in self._listings.items():
            kept = self._prepared.get(name)
            if kept is None or kept[0] is not listing:
                kept = (listing, prepare_listing(listing, self._rules))
                if any(problems for _, problems in kept[1].values()):
                    self._troubled.add(name)
                else:
                    self._troubled.discard(name)
            prepared[name] = kept[1]
            self._prepared[name] = kept
        for name in list(self._prepared):
            if name not in self._listings:
                del self._prepared[name]
                self._troubled.discard(name)
        listings = [self._listings[name] for name in sorted(self._listings)]
        views = None
        if changed is not None and self._clean:
            views = _merged_in(old, changed, before, prepared.get(changed))
        if views is None:
            new = build_snapshot(listings, self._rules, prefixes=self._prefixes, prepared=prepared)
            self._clean = _is_clean(new, prepared)
        else:
            prefixes, unprefixed = routing(listings, self._prefixes)
            troubled = sorted(self._troubled)  # backends with items of their own skipped
            problems = tuple(
                problem for kind in Kind for name in troubled for problem in prepared[name][kind][1]
            )
            new = Snapshot(views=views, prefixes=prefixes, unprefixed=unprefixed, problems=problems)
        self.snapshot = new
        return frozenset(kind for kind in Kind if old.view(kind).entries != new.view(kind).entries)


# -- one backend's change, merged in without a rebuild --------------------------------------
#
# A whole rebuild visits every item of every backend: with a thousand
# backends coming up one by one, that is quadratic, and a 100,000-tool
# catalog spent tens of milliseconds on each change of a 100-tool backend.
# While no two backends claim the same public name (the usual case: each
# has its own prefix), a change only removes that backend's keys and adds
# its new ones; the rest of the merge is C-level copying. Anything else (a
# clash, a rename, a duplicate) takes the whole rebuild, which is the
# definition: tests/catalog/test_incremental.py checks the two agree.


def _is_clean(snapshot: Snapshot, prepared: Mapping[str, Prepared]) -> bool:
    """Whether every candidate holds its own public key: no clash, rename or duplicate."""
    for kind in Kind:
        by_key = snapshot.views[kind].by_key
        for candidates, _ in (ready[kind] for ready in prepared.values()):
            if any(by_key.get(c.entry.key) is not c.entry for c in candidates):
                return False
    return True


def _replaced(
    view: KindView, backend: str, gone: Sequence[Candidate], came: Sequence[Candidate]
) -> KindView | None:
    """``view`` with ``backend``'s ``gone`` items swapped for ``came``; None on any clash."""
    if not gone and not came:
        return view
    gone_keys = [c.entry.key for c in gone]
    came_keys = [c.entry.key for c in came]
    if len(set(came_keys)) != len(came_keys):
        return None
    for key in came_keys:
        owner = view.by_key.get(key)
        if owner is not None and owner.backend != backend:
            return None
    came_set = set(came_keys)
    dropped = set(gone_keys).difference(came_set)
    added = sorted(came_set.difference(gone_keys))
    # Only keys that leave are deleted: a dict with deletions in it copies
    # item by item, one without them as one block.
    found = dict(view.by_key)
    for key in dropped:
        del found[key]
    found.update((c.entry.key, c.entry) for c in came)
    if not dropped and not added:  # the same names: the keys stay, items change in place
        same = list(view.entries)
        for key in came_set:
            same[bisect.bisect_left(view.keys, key)] = found[key]
        return KindView(tuple(same), view.keys, found)
    keys, entries = _cut(view.keys, view.entries, dropped)
    for key in came_set.intersection(gone_keys):  # kept keys, new items
        entries[bisect.bisect_left(keys, key)] = found[key]
    if added:
        keys, entries = _spliced(keys, entries, added, found)
    return KindView(tuple(entries), tuple(keys), found)


# Both splices below move whole runs of the sorted lists with slices (C-level
# copies); the Python-level loops are as long as the backend's change.


def _cut(
    keys: Sequence[str], entries: Sequence[Entry], dropped: set[str]
) -> tuple[list[str], list[Entry]]:
    """``keys`` and ``entries`` without the positions of ``dropped``."""
    if not dropped:
        return list(keys), list(entries)
    kept_keys: list[str] = []
    kept_entries: list[Entry] = []
    start = 0
    for cut in sorted(bisect.bisect_left(keys, key) for key in dropped):
        kept_keys += keys[start:cut]
        kept_entries += entries[start:cut]
        start = cut + 1
    kept_keys += keys[start:]
    kept_entries += entries[start:]
    return kept_keys, kept_entries


def _spliced(
    keys: list[str], entries: list[Entry], added: list[str], found: Mapping[str, Entry]
) -> tuple[list[str], list[Entry]]:
    """``keys`` and ``entries`` with the sorted new ``added`` keys in their places."""
    out_keys: list[str] = []
    out_entries: list[Entry] = []
    start = 0
    for key in added:
        place = bisect.bisect_left(keys, key, start)
        out_keys += keys[start:place]
        out_entries += entries[start:place]
        out_keys.append(key)
        out_entries.append(found[key])
        start = place
    out_keys += keys[start:]
    out_entries += entries[start:]
    return out_keys, out_entries


def _merged_in(
    old: Snapshot, backend: str, before: Prepared | None, after: Prepared | None
) -> dict[Kind, KindView] | None:
    """Every kind's view after one backend's change, or None when only a rebuild can tell."""
    views: dict[Kind, KindView] = {}
    for kind in Kind:
        gone = before[kind][0] if before is not None else ()
        came = after[kind][0] if after is not None else ()
        view = _replaced(old.views[kind], backend, gone, came)
        if view is None:
            return None
        views[kind] = view
    return views
