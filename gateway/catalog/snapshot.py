"""The merged, namespaced catalog as one immutable value.

Build-then-swap: ``build_snapshot`` makes a new ``Snapshot`` from every
backend's listing; the router swaps the reference. A list walk or a call in
progress keeps the snapshot it started with and never waits for a refresh.

Each item is encoded once, at build time, in its public form: serving a page
is joining pre-encoded bytes, with no per-request JSON work.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import msgspec

from gateway.catalog.kinds import Kind as Kind  # the catalog's callers name it from here
from gateway.catalog.kindview import EMPTY_VIEW
from gateway.catalog.kindview import Entry as Entry  # the catalog's callers name it from here
from gateway.catalog.kindview import KindView as KindView
from gateway.catalog.naming import NamingRules, public_name, public_uri, split_uri
from gateway.protocol import skills

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

_encoder: Final = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class BackendListing:
    """What one live backend contributes: its prefix and raw list items.

    Items are the backend's own JSON objects, already filtered by the
    backend's include/exclude rules.
    """

    backend: str
    prefix: str
    tools: tuple[dict[str, Any], ...] = ()
    prompts: tuple[dict[str, Any], ...] = ()
    resources: tuple[dict[str, Any], ...] = ()
    templates: tuple[dict[str, Any], ...] = ()
    skills: tuple[dict[str, Any], ...] = ()
    on_collision: str = "error"

    def items(self, kind: Kind) -> tuple[dict[str, Any], ...]:
        """The listing's items of one kind."""
        if kind is Kind.TOOLS:
            return self.tools
        if kind is Kind.PROMPTS:
            return self.prompts
        if kind is Kind.RESOURCES:
            return self.resources
        if kind is Kind.SKILLS:
            return self.skills
        return self.templates


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The catalog at one moment. Never mutated; replaced whole."""

    views: Mapping[Kind, KindView]
    prefixes: Mapping[str, str]
    unprefixed: tuple[str, ...]
    problems: tuple[str, ...] = ()
    # A profile's view (catalog.profiles) decides which routed-by-prefix
    # URIs it admits: (public URI, backend) -> bool; None admits all.
    admits_uri: Callable[[str, str], bool] | None = None
    # A profile in search mode lists other tools than it serves: the
    # gateway's two search tools and its pinned tools (catalog.profiles).
    listed_tools: KindView | None = None
    # A profile's tool overrides: the catalog's public name -> the profile's
    # (the search index knows tools by the former).
    renamed_tools: Mapping[str, str] = field(default_factory=dict)
    # Every tool override applied in a profile's view (renamed or only
    # redescribed): the catalog's public name -> the profile's. The search
    # index keeps the profile's text for these (catalog.search rule 5).
    overridden_tools: Mapping[str, str] = field(default_factory=dict)

    def view(self, kind: Kind) -> KindView:
        """The sorted view of one kind: every item a request may name."""
        return self.views[kind]

    def listed(self, kind: Kind) -> KindView:
        """The sorted items a list request shows (``view`` but in search mode)."""
        if kind is Kind.TOOLS and self.listed_tools is not None:
            return self.listed_tools
        return self.views[kind]

    def resolve(self, kind: Kind, public: str) -> Entry | None:
        """The entry behind a public tool or prompt name, or None."""
        return self.views[kind].get(public)

    def resolve_uri(self, public: str) -> tuple[str, str] | None:
        """(backend, original URI) for a public resource URI, or None.

        Resources are routed by prefix, not by list membership: a URI that
        matches a backend's template is valid though never listed.
        """
        listed = self.views[Kind.RESOURCES].get(public)
        if listed is not None:
            # A listed URI is routed to whoever listed it: an unprefixed
            # backend's "svn+ssh://..." must not go to the backend "svn".
            return listed.backend, listed.original
        prefix, original = split_uri(public, frozenset(self.prefixes))
        if prefix:
            found = self.prefixes[prefix], original
        elif self.unprefixed:
            found = self.unprefixed[0], public
        else:
            return None
        if self.admits_uri is not None and not self.admits_uri(public, found[0]):
            return None
        return found


EMPTY_SNAPSHOT: Final = Snapshot(views=dict.fromkeys(Kind, EMPTY_VIEW), prefixes={}, unprefixed=())


def _public_key(kind: Kind, prefix: str, original: str, rules: NamingRules) -> str:
    if kind in (Kind.TOOLS, Kind.PROMPTS):
        return public_name(prefix, original, rules)
    return public_uri(prefix, original)


@dataclass(frozen=True, slots=True)
class Candidate:
    """One item of one backend, named and encoded under its primary public key."""

    entry: Entry
    item: dict[str, Any]


# Per backend and kind: its candidates in listing order, and its own problems.
Prepared = dict[Kind, tuple[list[Candidate], list[str]]]


def _make_entry(kind: Kind, backend: str, key: str, original: str, item: dict[str, Any]) -> Entry:
    public_item = dict(item)
    if kind is Kind.SKILLS:
        # The files' URIs take the skill URI's public form (protocol.skills rule 2).
        head = key[: len(key) - len(original)]
        public_item = skills.public_entry(item, lambda uri: head + uri)
    public_item[kind.identity_key] = key
    return Entry(key, backend, original, _encoder.encode(public_item))


def prepare_listing(listing: BackendListing, rules: NamingRules) -> Prepared:
    """Name and encode one backend's items: the costly part of a rebuild.

    Depends on nothing but the listing, so the catalog keeps the result for
    as long as the backend's listing is the same object, and a change of one
    backend re-encodes only that backend's items.
    """
    prepared: Prepared = {}
    for kind in Kind:
        id_key = kind.identity_key
        candidates: list[Candidate] = []
        problems: list[str] = []
        for item in listing.items(kind):
            original = item.get(id_key)
            if not isinstance(original, str) or not original:
                problems.append(
                    f"{listing.backend}: {kind.value} item without a valid {id_key!r} skipped"
                )
                continue
            key = _public_key(kind, listing.prefix, original, rules)
            candidates.append(
                Candidate(_make_entry(kind, listing.backend, key, original, item), item)
            )
        prepared[kind] = (candidates, problems)
    return prepared


def build_snapshot(
    listings: Iterable[BackendListing],
    rules: NamingRules,
    *,
    prefixes: Mapping[str, str] | None = None,
    prepared: Mapping[str, Prepared] | None = None,
) -> Snapshot:
    """Merge backend listings into a new snapshot.

    Args:
        listings: one per backend that is up.
        rules: naming rules from config.
        prefixes: every configured non-empty prefix → backend name, including
            backends that are down, so their URIs still resolve (to an
            "unavailable" error rather than "unknown resource").
        prepared: per backend name, the result of ``_prepare`` for exactly
            that listing, when the caller kept it (see ``Catalog``).

    Items without a string identity, duplicates within a backend and public
    names that would collide are left out and described in ``problems``; a
    misbehaving backend costs its own bad items, never the catalog.
    """
    return merge(listings, rules, prefixes=prefixes, prepared=prepared)[0]


def merge(
    listings: Iterable[BackendListing],
    rules: NamingRules,
    *,
    prefixes: Mapping[str, str] | None = None,
    prepared: Mapping[str, Prepared] | None = None,
) -> tuple[Snapshot, bool]:
    """``build_snapshot``, and whether no two candidates claimed one public key.

    The second value is what ``Catalog`` needs to merge later changes in
    without a rebuild: with no clash (hence no rename and no duplicate),
    every candidate holds its own key. Known here for free, where a check
    afterwards would visit the catalog again.
    """
    listings = list(listings)
    clean = True
    ready = {
        lst.backend: (prepared or {}).get(lst.backend) or prepare_listing(lst, rules)
        for lst in listings
    }
    problems: list[str] = []
    views: dict[Kind, KindView] = {}
    for kind in Kind:
        found: dict[str, Entry] = {}
        for listing in listings:
            candidates, own_problems = ready[listing.backend][kind]
            problems.extend(own_problems)
            for candidate in candidates:
                entry = candidate.entry
                clash = found.get(entry.key)
                if clash is not None:
                    clean = False
                if clash is not None and listing.on_collision == "rename":
                    key = _public_key(kind, listing.backend, entry.original, rules)
                    entry = _make_entry(kind, listing.backend, key, entry.original, candidate.item)
                    clash = found.get(key)
                if clash is not None:
                    if listing.on_collision != "skip" or clash.backend == listing.backend:
                        problems.append(
                            f"{listing.backend}: {kind.value} {entry.original!r} skipped: public "
                            f"name {entry.key!r} already taken by "
                            f"{clash.backend}:{clash.original!r}"
                        )
                    continue
                found[entry.key] = entry
        views[kind] = KindView(map(found.__getitem__, sorted(found)))
    all_prefixes, unprefixed = routing(listings, prefixes)
    snapshot = Snapshot(
        views=views, prefixes=all_prefixes, unprefixed=unprefixed, problems=tuple(problems)
    )
    return snapshot, clean


def routing(
    listings: Iterable[BackendListing], prefixes: Mapping[str, str] | None
) -> tuple[dict[str, str], tuple[str, ...]]:
    """Every prefix → its backend (configured ones first), and the unprefixed backends."""
    all_prefixes = dict(prefixes or {})
    unprefixed = []
    for listing in listings:
        if listing.prefix:
            all_prefixes.setdefault(listing.prefix, listing.backend)
        else:
            unprefixed.append(listing.backend)
    return all_prefixes, tuple(sorted(unprefixed))
