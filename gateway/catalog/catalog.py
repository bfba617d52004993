"""The catalog a gateway keeps: the current snapshot, and how one backend's change gets in.

Backends publish and withdraw listings as they come, go and change; each
change makes a new ``Snapshot`` (``catalog.snapshot``) and reports which
kinds of list changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.catalog.snapshot import (
    EMPTY_SNAPSHOT,
    BackendListing,
    Candidate,
    Kind,
    KindView,
    Prepared,
    Snapshot,
    merge,
    prepare_listing,
    routing,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from gateway.catalog.naming import NamingRules


class Catalog:
    """The current snapshot and the listings it was built from.

    Backends publish and withdraw listings; each change makes a new
    snapshot (sharing all it can with the last, see ``kindview``) and
    reports which kinds of list actually changed, so the gateway sends
    ``list_changed`` only when a host would see a difference.
    """

    def __init__(self, rules: NamingRules, prefixes: Mapping[str, str] | None = None) -> None:
        self._rules = rules
        self._prefixes = dict(prefixes or {})
        self._listings: dict[str, BackendListing] = {}
        # backend -> (the listing it was prepared from, the prepared items)
        self._prepared: dict[str, tuple[BackendListing, Prepared]] = {}
        self.snapshot: Snapshot = EMPTY_SNAPSHOT
        # Whether the snapshot has no clash, rename or duplicate (``merge``).
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
        return self._change(listing.backend)

    def withdraw(self, backend: str) -> frozenset[Kind]:
        """Remove a backend's items (it went down); returns the kinds that changed."""
        if self._listings.pop(backend, None) is None:
            return frozenset()
        return self._change(backend)

    def _change(self, backend: str) -> frozenset[Kind]:
        """Merge one backend's change in, visiting only that backend's items.

        Everything here is proportional to the backend (plus the chunk index
        of each edited view and, when a backend comes or goes, the routing
        table), never to the catalog: issue 17's scale row measures it.
        """
        kept = self._prepared.pop(backend, None)
        before = kept[1] if kept is not None else None
        listing = self._listings.get(backend)
        after = None
        if listing is not None:
            reused = kept is not None and kept[0] is listing
            after = (
                before if reused and before is not None else prepare_listing(listing, self._rules)
            )
            self._prepared[backend] = (listing, after)
            if any(problems for _, problems in after.values()):
                self._troubled.add(backend)
            else:
                self._troubled.discard(backend)
        else:
            self._troubled.discard(backend)
        merged = _merged_in(self.snapshot, backend, before, after) if self._clean else None
        if merged is None:
            return self._rebuild()
        views, changed = merged
        old = self.snapshot
        if listing is not None and kept is not None and kept[0].prefix == listing.prefix:
            prefixes, unprefixed = old.prefixes, old.unprefixed  # the same routing table
        else:
            listings = [self._listings[name] for name in sorted(self._listings)]
            prefixes, unprefixed = routing(listings, self._prefixes)
        self.snapshot = Snapshot(
            views=views, prefixes=prefixes, unprefixed=unprefixed, problems=self._problems()
        )
        return changed

    def _problems(self) -> tuple[str, ...]:
        """The skipped items of troubled backends (in a clean snapshot, the only problems)."""
        troubled = sorted(self._troubled)
        return tuple(
            problem
            for kind in Kind
            for name in troubled
            for problem in self._prepared[name][1][kind][1]
        )

    def _rebuild(self) -> frozenset[Kind]:
        """The whole merge from every backend's kept items: the definition of the catalog."""
        old = self.snapshot
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
        new, self._clean = merge(listings, self._rules, prefixes=self._prefixes, prepared=prepared)
        self.snapshot = new
        return frozenset(kind for kind in Kind if old.view(kind) != new.view(kind))


# -- one backend's change, merged in without a rebuild --------------------------------------
#
# A whole rebuild visits every item of every backend: with a thousand
# backends coming up one by one, that is quadratic. While no two backends
# claim the same public name (the usual case: each has its own prefix), a
# change only removes that backend's keys and adds its new ones, which
# ``KindView.edited`` does by rebuilding the few chunks that hold them. The
# kinds that changed come from comparing the backend's own items before and
# after, never whole views. Anything else (a clash, a rename, a duplicate)
# takes the whole rebuild, which is the definition:
# tests/catalog/test_incremental.py checks the two agree.


def _replaced(
    view: KindView, backend: str, gone: Sequence[Candidate], came: Sequence[Candidate]
) -> tuple[KindView, bool] | None:
    """``view`` with ``backend``'s ``gone`` items swapped for ``came``, and whether it changed.

    None on any clash or duplicate: only a whole rebuild can say who wins.
    """
    if not gone and not came:
        return view, False
    came_by_key = {c.entry.key: c.entry for c in came}
    if len(came_by_key) != len(came):
        return None
    for key in came_by_key:
        owner = view.get(key)
        if owner is not None and owner.backend != backend:
            return None
    gone_by_key = {c.entry.key: c.entry for c in gone}
    if gone_by_key == came_by_key:  # the same items: the view (and its entries) stay
        return view, False
    removed = [key for key in gone_by_key if key not in came_by_key]
    put = {key: entry for key, entry in came_by_key.items() if gone_by_key.get(key) != entry}
    return view.edited(removed, put), True


def _merged_in(
    old: Snapshot, backend: str, before: Prepared | None, after: Prepared | None
) -> tuple[dict[Kind, KindView], frozenset[Kind]] | None:
    """Every kind's view after one backend's change and the kinds that changed.

    None when only a rebuild can tell.
    """
    views: dict[Kind, KindView] = {}
    changed: set[Kind] = set()
    for kind in Kind:
        gone = before[kind][0] if before is not None else ()
        came = after[kind][0] if after is not None else ()
        replaced = _replaced(old.views[kind], backend, gone, came)
        if replaced is None:
            return None
        views[kind] = replaced[0]
        if replaced[1]:
            changed.add(kind)
    return views, frozenset(changed)
