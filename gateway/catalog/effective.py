"""Effective views: a profile's view narrowed to what one access admits (sans-IO, issue 16).

Rules:

1. An effective view is a :class:`~gateway.catalog.snapshot.Snapshot` of
   its own, built from a profile's view exactly as a profile's view is
   built from the shared snapshot: the same ``Entry`` objects, a few
   pointers per item. Every lookup, page and cursor written against a
   snapshot works on it unchanged, so an item it leaves out is unknown
   (-32602) in every request that names it, with no special case.
2. Which items stay is one predicate, ``admits(kind, public)``, the
   policy's decision (``identity.policy``); resource URIs routed by prefix
   (a template's instances) go through it too (``admits_uri``). A skill
   (SEP-2640) is matched by its public skill name (``Kind.SKILLS``) and
   stays only when its ``SKILL.md`` and every file it lists are admitted as
   resources. A skill left out by its name is unknown every way, as on a
   profile (``catalog.profiles``): its directories and files are not read,
   nor is an unlisted skill's ``SKILL.md`` whose name is left out.
3. The gateway's own search-mode tools (backend ``""``) stay whenever the
   profile lists them: opening the profile grants its search.
4. :class:`EffectiveViews` keeps one view per (profile, key), where the
   key is the hashable access (``ProfileAccess``): memory grows with the
   distinct accesses, not the callers. A profile's views are dropped
   when its own view is replaced (a snapshot swap).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Final

from gateway.catalog.naming import public_skill_name, skill_files, split_uri
from gateway.catalog.snapshot import Entry, Kind, KindView, Snapshot
from gateway.protocol.skills import SKILL_FILE, skill_root

Admits = Callable[[Kind, str], bool]

#: The backend name of the gateway's own tools (``catalog.profiles.gateway_entries``).
GATEWAY_BACKEND: Final = ""


def _skill_name(entry: Entry, separator: str) -> str:
    """The public skill name of a catalog skill entry (``prefix+uri`` keys carry the prefix)."""
    extra = len(entry.key) - len(entry.original)
    prefix = entry.key[: extra - 1] if extra > 0 else ""
    return public_skill_name(prefix, entry.original, separator)


def _admitted(entry: Entry, kind: Kind, admits: Admits, separator: str) -> bool:
    if entry.backend == GATEWAY_BACKEND:
        return True
    if kind is not Kind.SKILLS:
        return admits(kind, entry.key)
    # A skill is shown only if its name is admitted and every file it lists
    # may be read (SEP-2640).
    return (
        admits(Kind.SKILLS, _skill_name(entry, separator))
        and admits(Kind.RESOURCES, entry.key)
        and all(admits(Kind.RESOURCES, uri) for uri in skill_files(entry.encoded))
    )


def _narrow(view: KindView, kind: Kind, admits: Admits, separator: str) -> KindView:
    entries = tuple(e for e in view if _admitted(e, kind, admits, separator))
    if len(entries) == len(view):
        return view
    return KindView(entries)


def _under(uri: str, roots: tuple[str, ...]) -> bool:
    """Whether ``uri`` is one of the skill directories ``roots`` or inside one."""
    return any(uri == root or uri.startswith(root + "/") for root in roots)


def narrow(view: Snapshot, admits: Admits, separator: str = "__") -> Snapshot:
    """``view`` with only the items ``admits`` lets through (rules 1-3).

    ``separator`` forms public skill names (``catalog.naming``).
    """
    base_uri = view.admits_uri
    views = {kind: _narrow(view.view(kind), kind, admits, separator) for kind in Kind}
    # The directories of the skills left out by name (rule 2).
    hidden_roots = tuple(
        skill_root(e.key)
        for e in view.view(Kind.SKILLS)
        if not admits(Kind.SKILLS, _skill_name(e, separator))
    )
    if hidden_roots:
        views[Kind.RESOURCES] = KindView(
            e for e in views[Kind.RESOURCES] if not _under(e.key, hidden_roots)
        )
    prefixes = frozenset(view.prefixes)

    def admits_uri(public: str, backend: str) -> bool:
        if base_uri is not None and not base_uri(public, backend):
            return False
        if not admits(Kind.RESOURCES, public) or _under(public, hidden_roots):
            return False
        if public.endswith("/" + SKILL_FILE):
            # An unlisted skill (skills/get answers for those too) by its name.
            prefix, original = split_uri(public, prefixes)
            return admits(Kind.SKILLS, public_skill_name(prefix, original, separator))
        return True

    listed = view.listed_tools
    return Snapshot(
        views=views,
        prefixes=view.prefixes,
        unprefixed=view.unprefixed,
        problems=view.problems,
        admits_uri=admits_uri,
        listed_tools=(None if listed is None else _narrow(listed, Kind.TOOLS, admits, separator)),
        renamed_tools=view.renamed_tools,
        overridden_tools=view.overridden_tools,
    )


def hidden(base: Snapshot, effective: Snapshot, kind: Kind) -> int:
    """How many listed items of ``kind`` the effective view hides (for one audit line)."""
    return len(base.listed(kind)) - len(effective.listed(kind))


def changed_kinds(before: Snapshot, after: Snapshot) -> frozenset[Kind]:
    """The kinds whose served or listed items differ between two views."""
    return frozenset(
        kind
        for kind in Kind
        if before.view(kind) != after.view(kind) or before.listed(kind) != after.listed(kind)
    )


class EffectiveViews:
    """The effective views in use, one per (profile, access key) (rule 4).

    Args:
        separator: the naming separator, which public skill names are formed with.
    """

    def __init__(self, separator: str = "__") -> None:
        self.separator = separator
        self._bases: dict[str, Snapshot] = {}
        self._views: dict[tuple[str, Hashable], Snapshot] = {}

    def __len__(self) -> int:
        return len(self._views)

    def view(self, profile: str, base: Snapshot, key: Hashable, admits: Admits) -> Snapshot:
        """The effective view of ``base`` (the profile's view) for ``key``.

        Args:
            profile: the profile's name.
            base: the profile's view of the current snapshot.
            key: the hashable access the view is for.
            admits: that access's decision; called only to build the view.
        """
        if self._bases.get(profile) is not base:
            self._bases[profile] = base
            self._views = {k: v for k, v in self._views.items() if k[0] != profile}
        found = self._views.get((profile, key))
        if found is None:
            found = self._views[(profile, key)] = narrow(base, admits, self.separator)
        return found

    def clear(self) -> None:
        """Forget every view (the policy changed)."""
        self._bases.clear()
        self._views.clear()


__all__ = ["Admits", "EffectiveViews", "changed_kinds", "hidden", "narrow"]
