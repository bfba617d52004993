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

from typing import TYPE_CHECKING, Final, Literal

import msgspec

from gateway.config.schema import Base, Name
from gateway.config.schema_backends import ItemFilter

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = ["DEFAULT_PROFILE", "RESERVED_PREFIX", "ProfileConfig", "profile_problems"]

# The profile ``{server.path}`` serves.
DEFAULT_PROFILE: Final = "default"
# The gateway's own tools are named under this prefix (issue 15, search
# mode), so no backend may claim it.
RESERVED_PREFIX: Final = "gateway"
_GLOB_CHARS: Final = frozenset("*?[")


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
        mode: ``full`` lists the profile's tools; ``search`` lists only
            ``gateway{sep}search_tools``, ``gateway{sep}call_tool`` and the
            ``pinned`` tools, and the model finds the rest by searching.
        pinned: public tool names that a search-mode profile lists as well.
    """

    name: Name
    backends: ItemFilter = msgspec.field(default_factory=ItemFilter)
    tools: ItemFilter = msgspec.field(default_factory=ItemFilter)
    prompts: ItemFilter = msgspec.field(default_factory=ItemFilter)
    resources: ItemFilter = msgspec.field(default_factory=ItemFilter)
    mode: Literal["full", "search"] = "full"
    pinned: list[str] = msgspec.field(default_factory=list)


def _is_literal(pattern: str) -> bool:
    return not (_GLOB_CHARS & set(pattern))


def profile_problems(
    profiles: Sequence[ProfileConfig], backend_names: Iterable[str]
) -> list[tuple[str, str]]:
    """Check profiles against each other and against the configured backends.

    A literal backend name (no glob characters) in a profile's
    ``backends.include`` or ``backends.exclude`` must name a configured
    backend: a typo there would silently empty or widen the profile.

    Args:
        profiles: the profiles, in file order.
        backend_names: the names of every configured backend.

    Returns:
        ``(place, message)`` pairs, places relative to the whole file.
    """
    known = frozenset(backend_names)
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
        if profile.pinned and profile.mode != "search":
            problems.append((f"{place}.pinned", "pinned tools are listed only in mode: search"))
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
