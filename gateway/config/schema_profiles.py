"""The configuration schema, part four: profiles, the per-endpoint subsets of the catalog.

A profile is served at ``{server.path}/{name}`` and shows one subset of the
one merged catalog (issue 15): the backends it selects, and of their items
the public names (resources: public URIs and URI templates) its globs
select. ``{server.path}`` itself serves the profile ``default``, which is
everything unless a profile of that name is configured.

Globs are matched with ``fnmatchcase`` (case-sensitive, as MCP names are),
against *public* names, so a profile is written in the names a host sees.
The rules across profiles (unique names, backend names that exist) see the
backends too, so they are :func:`profile_problems`, called by
:class:`~gateway.config.schema_gateway.GatewayConfig`.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Final, Literal

import msgspec

from gateway.config.schema import Base, Invalid, Name
from gateway.config.schema_backends import ItemFilter
from gateway.config.schema_cache import ToolCache
from gateway.config.schema_filters import FilterConfig

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["DEFAULT_PROFILE", "RESERVED_PREFIX", "ProfileConfig", "profile_problems"]

# The profile ``{server.path}`` serves.
DEFAULT_PROFILE: Final = "default"
# The gateway's own tools are named under this prefix (issue 15, search
# mode), so no backend may claim it.
RESERVED_PREFIX: Final = "gateway"
_GLOB_CHARS: Final = frozenset("*?[")
# The gateway's own paths (frontend.asgi): with server.path "/", a profile of
# one of these names would be shadowed by them.
_GATEWAY_PATHS: Final = frozenset({"healthz", "readyz", "metrics", "sse", "messages"})
# Tool names as 2025-11-25 recommends them (SEP-986): what every host accepts.
_ITEM_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,128}")


class Override(Base, frozen=True, kw_only=True):
    """A profile's new public name and/or description for one tool or prompt.

    Attributes:
        name: the name the profile's hosts see instead (1-128 of
            ``A-Za-z0-9_.-``); the old public name is unknown on the profile.
        description: the description they see instead.
    """

    name: str | None = None
    description: str | None = None

    def __post_init__(self) -> None:
        if self.name is None and self.description is None:
            raise Invalid(("", "an override needs a new name, a new description, or both"))
        if self.name is not None and not _ITEM_NAME.fullmatch(self.name):
            raise Invalid(
                ("name", f"{self.name!r} is not a valid name (1-128 of A-Z a-z 0-9 _ - .)")
            )


class Overrides(Base, frozen=True, kw_only=True):
    """Per kind, the overrides by the item's public name (the catalog's, before any rename).

    Attributes:
        tools: by public tool name.
        prompts: by public prompt name.
    """

    tools: dict[str, Override] = msgspec.field(default_factory=dict)
    prompts: dict[str, Override] = msgspec.field(default_factory=dict)


class ProfileConfig(Base, frozen=True, kw_only=True):
    """One profile: a named subset of the merged catalog, served on its own path.

    Attributes:
        name: the path segment after ``server.path``; ``default`` names the
            subset served at ``server.path`` itself.
        backends: which backends (by configured name) contribute items.
        tools: which tools, by public name.
        prompts: which prompts, by public name.
        resources: which resources and resource templates, by public URI or
            public URI template.
        skills: which skills (SEP-2640), by public skill name
            (``prefix{sep}name``, the name being the last segment of the
            skill's path); an excluded skill's files are unknown too.
        mode: ``full`` lists the profile's tools; ``search`` lists only
            ``gateway{sep}search_tools``, ``gateway{sep}call_tool`` and the
            ``pinned`` tools, and the model finds the rest by searching.
        pinned: public tool names that a search-mode profile lists as well
            (after overrides: a renamed tool is pinned by its new name).
        overrides: new names and descriptions of some tools and prompts.
        filters: guardrail filters for calls through this profile, run after
            the top-level ones and before the backend's.
        cache: the tools whose calls may be answered from the response
            cache (``gateway.config.schema_cache``); None: none.
    """

    name: Name
    backends: ItemFilter = msgspec.field(default_factory=ItemFilter)
    tools: ItemFilter = msgspec.field(default_factory=ItemFilter)
    prompts: ItemFilter = msgspec.field(default_factory=ItemFilter)
    resources: ItemFilter = msgspec.field(default_factory=ItemFilter)
    skills: ItemFilter = msgspec.field(default_factory=ItemFilter)
    mode: Literal["full", "search"] = "full"
    pinned: list[str] = msgspec.field(default_factory=list)
    overrides: Overrides = msgspec.field(default_factory=Overrides)
    filters: list[FilterConfig] = msgspec.field(default_factory=list)
    cache: ToolCache | None = None


def _is_literal(pattern: str) -> bool:
    return not (_GLOB_CHARS & set(pattern))


def _override_problems(
    profile: ProfileConfig, place: str, prefixes: Mapping[str, str], separator: str
) -> list[tuple[str, str]]:
    """Overrides must name items the profile can have, and stay reversible."""
    problems: list[tuple[str, str]] = []
    mine = {b: p for b, p in prefixes.items() if _allows(profile.backends, b)}
    unprefixed = any(not p for p in mine.values())
    reserved = RESERVED_PREFIX + separator
    for kind, table, names in (
        ("tools", profile.overrides.tools, profile.tools),
        ("prompts", profile.overrides.prompts, profile.prompts),
    ):
        new_names: dict[str, str] = {}
        for source, override in table.items():
            at = f"{place}.overrides.{kind}.{source}"
            head, sep, _ = source.partition(separator)
            if not (sep and head in mine.values()) and not unprefixed:
                problems.append((at, f"no backend of this profile has a {kind[:-1]} {source!r}"))
            elif not _allows(names, source):
                problems.append((at, f"{source!r} is excluded by this profile's {kind} filter"))
            new = override.name
            if new is None:
                continue
            if new.startswith(reserved):
                problems.append((f"{at}.name", f"the prefix {reserved!r} is reserved"))
            if new in new_names:
                problems.append(
                    (f"{at}.name", f"{new!r} is also the new name of {new_names[new]!r}")
                )
            elif new != source and new in table:
                why = f"{new!r} is itself renamed here: a rename must be reversible"
                problems.append((f"{at}.name", why))
            new_names[new] = source
    return problems


def _pinned_problems(
    profile: ProfileConfig, place: str, prefixes: Mapping[str, str], separator: str
) -> list[tuple[str, str]]:
    """A pinned name must be one the profile can show: a new name, or under one of its prefixes."""
    mine = {p for b, p in prefixes.items() if _allows(profile.backends, b)}
    if "" in mine:
        return []  # an unprefixed backend may offer any name
    renamed = {o.name for o in profile.overrides.tools.values() if o.name is not None}
    problems: list[tuple[str, str]] = []
    for index, name in enumerate(profile.pinned):
        head, sep, _ = name.partition(separator)
        if name in profile.overrides.tools and profile.overrides.tools[name].name:
            why = f"{name!r} is renamed by this profile's overrides: pin its new name"
        elif name in renamed or (sep and head in mine):
            continue
        else:
            why = f"no backend of this profile has a tool {name!r}"
        problems.append((f"{place}.pinned[{index}]", why))
    return problems


def _allows(item_filter: ItemFilter, name: str) -> bool:
    return any(fnmatchcase(name, p) for p in item_filter.include) and not any(
        fnmatchcase(name, p) for p in item_filter.exclude
    )


def profile_problems(
    profiles: Sequence[ProfileConfig],
    prefixes: Mapping[str, str],
    separator: str = "__",
    server_path: str = "/mcp",
) -> list[tuple[str, str]]:
    """Check profiles against each other and against the configured backends.

    A literal backend name (no glob characters) in a profile's
    ``backends.include`` or ``backends.exclude`` must name a configured
    backend: a typo there would silently empty or widen the profile. An
    override must name an item the profile can have (under the prefix of
    one of its backends, not excluded by its own filter), and a new name
    must be unique in the profile and not another overridden name, so
    every public name still leads back to one item.

    Args:
        profiles: the profiles, in file order.
        prefixes: every configured backend's name → its public prefix.
        separator: the naming separator.
        server_path: ``server.path``; profiles are served under it.

    Returns:
        ``(place, message)`` pairs, places relative to the whole file.
    """
    known = frozenset(prefixes)
    problems: list[tuple[str, str]] = []
    seen: dict[str, int] = {}
    for position, profile in enumerate(profiles):
        place = f"profiles[{position}]"
        first = seen.get(profile.name)
        if first is not None:
            problems.append(
                (
                    f"{place}.name",
                    f"duplicate profile name {profile.name!r} (also profiles[{first}])",
                )
            )
        else:
            seen[profile.name] = position
        if server_path.rstrip("/") == "" and profile.name in _GATEWAY_PATHS:
            problems.append(
                (
                    f"{place}.name",
                    f"with server.path '/', a profile named {profile.name!r} would be "
                    f"hidden by the gateway's own /{profile.name}",
                )
            )
        problems += _override_problems(profile, place, prefixes, separator)
        if profile.pinned and profile.mode != "search":
            problems.append((f"{place}.pinned", "pinned tools are listed only in mode: search"))
        problems += _pinned_problems(profile, place, prefixes, separator)
        for key, patterns in (
            ("include", profile.backends.include),
            ("exclude", profile.backends.exclude),
        ):
            for index, pattern in enumerate(patterns):
                if _is_literal(pattern) and pattern not in known:
                    problems.append(
                        (
                            f"{place}.backends.{key}[{index}]",
                            f"no backend is named {pattern!r}",
                        )
                    )
    return problems
