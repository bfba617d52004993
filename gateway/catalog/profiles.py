"""Profiles: named subsets of the one catalog snapshot (sans-IO, issue 15).

Rules:

1. One decision: :meth:`Profile.admits` says whether an item (its kind, its
   public name or URI, the backend behind it) belongs to a profile. Lists
   are built with it, and every request that names an item (call, get,
   read, subscribe, complete) resolves through the restricted snapshot it
   built, so an item outside the profile is exactly as unknown as an item
   that does not exist: same code, same message, no hint.
2. A profile view is a :class:`~gateway.catalog.snapshot.Snapshot` of its
   own whose lists hold the *same* ``Entry`` objects as the shared snapshot
   (no item is copied or re-encoded), so its memory is a few pointers per
   item of its own, and every page, cursor and lookup already written
   against a snapshot works on it unchanged.
3. The prefix table of a view keeps only the profile's backends: a name
   under the prefix of a backend outside the profile is unknown (-32602),
   not "backend unavailable", even while that backend is down.
4. A profile that selects everything is served the shared snapshot itself:
   the main endpoint costs nothing.
5. Views are rebuilt when the shared snapshot is swapped (build-then-swap,
   as the snapshot itself), and :meth:`ProfileViews.refresh` says which
   profiles' lists changed, so ``list_changed`` reaches only their clients.
6. A profile in search mode still *serves* all its tools (a direct
   ``tools/call`` by public name works), but *lists* only the gateway's
   two search tools and its pinned tools (``Snapshot.listed``).
7. An override gives a tool or prompt another public name and/or
   description on one profile. Only overridden items are re-encoded; the
   renamed entry keeps the backend's original name, so it routes as
   before, and the old public name is unknown on the profile. A new name
   that would take a name the profile already shows is not applied (the
   item keeps its name) and is reported in the view's ``problems``: every
   public name leads to exactly one item.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from fnmatch import translate
from typing import TYPE_CHECKING, Any, Final

import msgspec

from gateway.catalog.naming import public_skill_name, skill_files, split_uri
from gateway.catalog.search_tools import search_mode_tools
from gateway.catalog.snapshot import Entry, Kind, KindView, Snapshot
from gateway.protocol.skills import SKILL_FILE, skill_root

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

DEFAULT_PROFILE: Final = "default"
_GLOB_CHARS: Final = frozenset("*?[")
FULL: Final = "full"
SEARCH: Final = "search"
_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(dict[str, Any])


@dataclass(frozen=True, slots=True)
class Override:
    """A new public name and/or description for one item on one profile (rule 7)."""

    name: str | None = None
    description: str | None = None


@dataclass(frozen=True, slots=True)
class Globs:
    """Include/exclude ``fnmatchcase`` globs (case-sensitive, as MCP names are)."""

    include: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = ()

    @property
    def everything(self) -> bool:
        """Whether the globs let every name through (so no filtering is needed)."""
        return "*" in self.include and not self.exclude

    def allows(self, name: str) -> bool:
        """Whether ``name`` matches an include glob and no exclude glob."""
        return _matches(self.include, name) and not _matches(self.exclude, name)


def _matches(patterns: tuple[str, ...], name: str) -> bool:
    literals, pattern = _compiled(patterns)
    return name in literals or (pattern is not None and pattern.match(name) is not None)


@functools.lru_cache(maxsize=256)
def _compiled(patterns: tuple[str, ...]) -> tuple[frozenset[str], re.Pattern[str] | None]:
    """Literal names as a set, the globs as one regex: a view of 10,000 items
    checks each name once, not once per pattern (``fnmatchcase`` semantics)."""
    literals = frozenset(p for p in patterns if not _GLOB_CHARS & set(p))
    globs = [translate(p) for p in patterns if p not in literals]
    return literals, re.compile("|".join(f"(?:{g})" for g in globs)) if globs else None


@dataclass(frozen=True, slots=True)
class Profile:
    """What one profile selects.

    Attributes:
        name: its path segment (``default``: the main path).
        backends: by configured backend name.
        tools: by public tool name.
        prompts: by public prompt name.
        resources: by public resource URI and public URI template.
        skills: by public skill name (``catalog.naming.public_skill_name``);
            a skill is also held to ``resources`` by its every file's URI.
        mode: ``full`` lists the profile's tools; ``search`` lists the
            gateway's search tools and ``pinned`` instead (rule 6).
        pinned: public tool names listed in search mode too.
        overrides: per kind (tools, prompts), by public name, what changes.
    """

    name: str
    backends: Globs = field(default_factory=Globs)
    tools: Globs = field(default_factory=Globs)
    prompts: Globs = field(default_factory=Globs)
    resources: Globs = field(default_factory=Globs)
    skills: Globs = field(default_factory=Globs)
    mode: str = FULL
    pinned: tuple[str, ...] = ()
    overrides: Mapping[Kind, Mapping[str, Override]] = field(default_factory=dict)

    @property
    def everything(self) -> bool:
        """Whether this profile serves and lists the whole catalog (rule 4)."""
        return (
            self.mode == FULL
            and not any(self.overrides.values())
            and all(
                g.everything
                for g in (self.backends, self.tools, self.prompts, self.resources, self.skills)
            )
        )

    def names(self, kind: Kind) -> Globs:
        """The globs over public names (or URIs) of one kind."""
        if kind is Kind.TOOLS:
            return self.tools
        if kind is Kind.PROMPTS:
            return self.prompts
        return self.resources

    def admits(self, kind: Kind, public: str, backend: str) -> bool:
        """The one decision (rule 1): is this item part of the profile?

        Args:
            kind: the item's list.
            public: its public name, URI or URI template.
            backend: the configured name of the backend that serves it.
        """
        return self.backends.allows(backend) and self.names(kind).allows(public)


EVERYTHING: Final = Profile(DEFAULT_PROFILE)


def _public_prefix(entry: Entry) -> str:
    """The prefix a URI entry's public key carries (``prefix+uri``), "" for none."""
    extra = len(entry.key) - len(entry.original)
    return entry.key[: extra - 1] if extra > 0 else ""


def _skill_admitted(entry: Entry, profile: Profile, separator: str) -> bool:
    """A skill stays when its public name is selected and every file it lists is."""
    name = public_skill_name(_public_prefix(entry), entry.original, separator)
    if not profile.skills.allows(name):
        return False
    return all(profile.resources.allows(uri) for uri in skill_files(entry.encoded))


def _under(uri: str, roots: tuple[str, ...]) -> bool:
    """Whether ``uri`` is one of the skill directories ``roots`` or inside one."""
    return any(uri == root or uri.startswith(root + "/") for root in roots)


def _restrict_view(
    view: KindView,
    kind: Kind,
    profile: Profile,
    problems: list[str],
    aliases: dict[str, str],
    applied: dict[str, str],
    separator: str = "__",
) -> KindView:
    table = profile.overrides.get(kind)
    names = profile.names(kind)
    skills = kind is Kind.SKILLS and not (profile.skills.everything and names.everything)
    if profile.backends.everything and names.everything and not table and not skills:
        return view
    backends: dict[str, bool] = {}

    def admitted(entry: Entry) -> bool:
        allowed = backends.get(entry.backend)
        if allowed is None:
            allowed = backends[entry.backend] = profile.backends.allows(entry.backend)
        if skills and allowed and not _skill_admitted(entry, profile, separator):
            return False
        return allowed and names.allows(entry.key)

    # The same decision as ``Profile.admits``, with each backend's part asked once.
    entries = tuple(e for e in view if admitted(e))
    if table:
        entries = _overridden(entries, kind, table, problems, aliases, applied)
    return KindView(entries)


def _overridden(
    entries: tuple[Entry, ...],
    kind: Kind,
    table: Mapping[str, Override],
    problems: list[str],
    aliases: dict[str, str],
    applied: dict[str, str],
) -> tuple[Entry, ...]:
    """Rule 7: the overridden entries re-encoded, the rest shared; sorted by new key.

    ``aliases`` gets old -> new name per rename, ``applied`` per override applied.
    """
    taken = {e.key for e in entries if e.key not in table or table[e.key].name is None}
    out: list[Entry] = []
    for entry in entries:
        override = table.get(entry.key)
        if override is None:
            out.append(entry)
            continue
        key = override.name or entry.key
        if key != entry.key and key in taken:
            problems.append(
                f"profile override of {kind.value} {entry.key!r} not applied: "
                f"{key!r} is already a {kind.value[:-1]} of the profile"
            )
            out.append(entry)
            continue
        taken.add(key)
        item = _decoder.decode(entry.encoded)
        item[kind.identity_key] = key
        if override.description is not None:
            item["description"] = override.description
        out.append(Entry(key, entry.backend, entry.original, _encoder.encode(item)))
        applied[entry.key] = key
        if key != entry.key:
            aliases[entry.key] = key
    out.sort(key=lambda e: e.key)
    return tuple(out)


def gateway_entries(separator: str) -> tuple[Entry, ...]:
    """The gateway's own search-mode tools as catalog entries (backend "")."""
    return tuple(
        Entry(tool["name"], "", tool["name"], _encoder.encode(tool))
        for tool in search_mode_tools(separator)
    )


def _listed_tools(view: KindView, profile: Profile, gateway: tuple[Entry, ...]) -> KindView:
    pinned = [entry for name in profile.pinned if (entry := view.get(name)) is not None]
    return KindView(sorted({e.key: e for e in (*gateway, *pinned)}.values(), key=lambda e: e.key))


def restrict(snapshot: Snapshot, profile: Profile, separator: str = "__") -> Snapshot:
    """The profile's view of a snapshot (rules 2-4, 6).

    Resource URIs that are not listed (a template's instances) are routed by
    prefix; the view's ``admits_uri`` applies the profile's decision to them
    too, so ``resources/read`` of an excluded URI is "not found".
    """
    if profile.everything:
        return snapshot
    problems: list[str] = []
    aliases: dict[str, str] = {}
    applied: dict[str, str] = {}
    views = {
        kind: _restrict_view(
            snapshot.view(kind),
            kind,
            profile,
            problems,
            aliases if kind is Kind.TOOLS else {},
            applied if kind is Kind.TOOLS else {},
            separator,
        )
        for kind in Kind
    }
    prefixes = {p: b for p, b in snapshot.prefixes.items() if profile.backends.allows(b)}
    unprefixed = tuple(b for b in snapshot.unprefixed if profile.backends.allows(b))
    # The directories of the skills left out: their files, directories and
    # SKILL.md are unknown on the profile, however they are asked for.
    hidden_roots: tuple[str, ...] = ()
    if not profile.skills.everything:
        kept = views[Kind.SKILLS]
        hidden_roots = tuple(
            skill_root(e.key) for e in snapshot.view(Kind.SKILLS) if e.key not in kept
        )
    if hidden_roots:
        # A skills server may list the files in resources/list as well.
        views[Kind.RESOURCES] = KindView(
            e for e in views[Kind.RESOURCES] if not _under(e.key, hidden_roots)
        )
    all_prefixes = frozenset(snapshot.prefixes)

    def admits_uri(public: str, backend: str) -> bool:
        if not profile.admits(Kind.RESOURCES, public, backend):
            return False
        if profile.skills.everything:
            return True
        if _under(public, hidden_roots):
            return False
        if public.endswith("/" + SKILL_FILE):
            # An unlisted skill (skills/get answers for those too) by its name.
            prefix, original = split_uri(public, all_prefixes)
            return profile.skills.allows(public_skill_name(prefix, original, separator))
        return True

    listed = (
        _listed_tools(views[Kind.TOOLS], profile, gateway_entries(separator))
        if profile.mode == SEARCH
        else None
    )
    return Snapshot(
        views=views,
        prefixes=prefixes,
        unprefixed=unprefixed,
        problems=(*snapshot.problems, *problems),
        renamed_tools=aliases,
        overridden_tools=applied,
        admits_uri=admits_uri,
        listed_tools=listed,
    )


class ProfileViews:
    """Every configured profile's view of the current snapshot.

    Args:
        profiles: the configured profiles; ``default`` is added (selecting
            everything) unless one of them has that name.
        separator: the naming separator, for the gateway's own tool names.
    """

    def __init__(self, profiles: Iterable[Profile] = (), separator: str = "__") -> None:
        self.separator = separator
        self._profiles: dict[str, Profile] = {DEFAULT_PROFILE: EVERYTHING}
        self._profiles.update((p.name, p) for p in profiles)
        self._source: Snapshot | None = None
        self._views: dict[str, Snapshot] = {}

    @property
    def searching(self) -> bool:
        """Whether any profile is in search mode (so a search index is needed)."""
        return any(p.mode == SEARCH for p in self._profiles.values())

    @property
    def names(self) -> tuple[str, ...]:
        """The served profiles' names, ``default`` included, sorted."""
        return tuple(sorted(self._profiles))

    def profile(self, name: str) -> Profile | None:
        """The profile of that name, or None when none is configured."""
        return self._profiles.get(name)

    def view(self, name: str, snapshot: Snapshot) -> Snapshot:
        """The profile's view of ``snapshot`` (kept until the next snapshot).

        Raises:
            KeyError: no such profile (the frontend answers 404 before this).
        """
        if snapshot is not self._source:
            self._source = snapshot
            self._views = {}
        view = self._views.get(name)
        if view is None:
            view = restrict(snapshot, self._profiles[name], self.separator)
            self._views[name] = view
        return view

    def refresh(self, old: Snapshot, new: Snapshot) -> Mapping[str, frozenset[Kind]]:
        """After a swap: per profile, the kinds whose list changed (rule 5).

        Profiles with no change are left out, so their clients hear nothing.
        """
        kept = self._views if self._source is old else {}
        changed: dict[str, frozenset[Kind]] = {}
        for name, profile in self._profiles.items():
            before = kept.get(name) or restrict(old, profile, self.separator)
            after = self.view(name, new)
            kinds = frozenset(
                kind
                for kind in Kind
                if before.view(kind) != after.view(kind)
                or before.listed(kind) != after.listed(kind)
            )
            if kinds:
                changed[name] = kinds
        return changed
