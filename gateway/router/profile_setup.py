"""Profiles from the configuration, and the figures a profile costs a host's context.

The decisions are in :mod:`gateway.catalog.profiles` (sans-IO); this module
turns the ``profiles:`` section into them, and measures what a profile's
``tools/list`` weighs (issue 15, "budget figures"): the bytes a host's
model reads on every turn, and an estimate of its tokens at
:data:`BYTES_PER_TOKEN`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from gateway.catalog.pages import render_page
from gateway.catalog.profiles import Globs, Override, Profile, ProfileViews
from gateway.catalog.snapshot import Kind

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from gateway.catalog.snapshot import KindView, Snapshot
    from gateway.config import ItemFilter, ProfileConfig
    from gateway.config.schema_profiles import Override as OverrideConfig
    from gateway.telemetry.metrics import Metrics

# The usual rule of thumb for English and JSON under BPE tokenizers; an
# estimate, labelled as one wherever it is shown.
BYTES_PER_TOKEN: Final = 4


def _globs(item_filter: ItemFilter) -> Globs:
    return Globs(tuple(item_filter.include), tuple(item_filter.exclude))


def profile_from_config(config: ProfileConfig) -> Profile:
    """The sans-IO profile a ``profiles:`` entry describes."""
    return Profile(
        config.name,
        backends=_globs(config.backends),
        tools=_globs(config.tools),
        prompts=_globs(config.prompts),
        resources=_globs(config.resources),
        skills=_globs(config.skills),
        mode=config.mode,
        pinned=tuple(config.pinned),
        overrides={
            Kind.TOOLS: _overrides(config.overrides.tools),
            Kind.PROMPTS: _overrides(config.overrides.prompts),
        },
    )


def _overrides(table: Mapping[str, OverrideConfig]) -> dict[str, Override]:
    return {name: Override(o.name, o.description) for name, o in table.items()}


def profile_views(configs: Iterable[ProfileConfig], separator: str = "__") -> ProfileViews:
    """The views of every configured profile (and ``default``)."""
    return ProfileViews((profile_from_config(c) for c in configs), separator)


@dataclass(frozen=True, slots=True)
class Budget:
    """What one profile shows, and what its ``tools/list`` weighs.

    Attributes:
        profile: its name.
        items: per kind, how many items it serves (in search mode, the
            tools it can find and call, not the few it lists).
        tools_list_bytes: the size of its whole ``tools/list`` result, in
            one page, as the gateway encodes it (in search mode: the search
            tools and the pinned ones).
    """

    profile: str
    items: dict[Kind, int]
    tools_list_bytes: int

    @property
    def tools_list_tokens(self) -> int:
        """The estimated tokens of the ``tools/list`` result (bytes / 4, rounded up)."""
        return -(-self.tools_list_bytes // BYTES_PER_TOKEN)


def budget(views: ProfileViews, name: str, snapshot: Snapshot) -> Budget:
    """Measure one profile's view of ``snapshot``.

    Raises:
        KeyError: no such profile.
    """
    view = views.view(name, snapshot)
    tools = view.listed(Kind.TOOLS)
    return Budget(name, {kind: len(view.view(kind)) for kind in Kind}, list_bytes(tools))


_EMPTY_TOOLS_LIST: Final = len(bytes(render_page(Kind.TOOLS.value, [], None)))


def list_bytes(entries: KindView) -> int:
    """The size of ``render_page`` over ``entries`` in one page, without building it.

    Counted rather than rendered: the gauges are refreshed on every catalog
    change, and rendering 10,000 tools would allocate megabytes each time;
    the view keeps each chunk's count, so after a change only new chunks
    are counted (issue 17).
    """
    return _EMPTY_TOOLS_LIST + entries.encoded_size() + max(len(entries) - 1, 0)


def budgets(views: ProfileViews, names: Iterable[str], snapshot: Snapshot) -> list[Budget]:
    """Measure several profiles' views of one snapshot.

    Raises:
        KeyError: one of ``names`` is no profile.
    """
    return [budget(views, name, snapshot) for name in names]


def record_catalog(
    metrics: Metrics, views: ProfileViews, snapshot: Snapshot, backends: Iterable[str]
) -> None:
    """Set the catalog's item gauges per backend and the profiles' figures (after each swap)."""
    for kind in Kind:
        counts = snapshot.view(kind).backend_counts()
        for name in backends:
            metrics.catalog_items.labels(backend=name, kind=kind.value).set(counts[name])
    record_budgets(metrics, views, snapshot)


def record_budgets(metrics: Metrics, views: ProfileViews, snapshot: Snapshot) -> None:
    """Set the ``mcp_gateway_profile_*`` gauges for every profile (after each swap)."""
    for figures in budgets(views, views.names, snapshot):
        for kind, count in figures.items.items():
            metrics.profile_items.labels(profile=figures.profile, kind=kind.value).set(count)
        metrics.profile_tools_list_bytes.labels(profile=figures.profile).set(
            figures.tools_list_bytes
        )
        metrics.profile_tools_list_tokens.labels(profile=figures.profile).set(
            figures.tools_list_tokens
        )


def report(figures: Sequence[Budget], problems: Sequence[str] = ()) -> str:
    """The text ``mcp-gateway catalog`` prints: one line per profile, then catalog problems."""
    lines = [
        f"{'profile':<20} {'tools':>6} {'prompts':>7} {'resources':>9} {'templates':>9} "
        f"{'tools/list bytes':>16} {'~tokens':>8}"
    ]
    lines.extend(
        f"{b.profile:<20} {b.items[Kind.TOOLS]:>6} {b.items[Kind.PROMPTS]:>7} "
        f"{b.items[Kind.RESOURCES]:>9} {b.items[Kind.TEMPLATES]:>9} "
        f"{b.tools_list_bytes:>16} {b.tools_list_tokens:>8}"
        for b in figures
    )
    lines.append(f"(~tokens: bytes / {BYTES_PER_TOKEN}, an estimate)")
    lines.extend(f"problem: {p}" for p in problems)
    return "\n".join(lines)
