"""The ``profiles:`` section and the reserved prefix (issue 15, step 1)."""

from __future__ import annotations

from textwrap import dedent

import pytest

from gateway.config import DEFAULT_PROFILE, ProfileConfig, parse
from gateway.errors import ConfigError


def problems_of(text: str) -> list[str]:
    """The problems ``parse`` reports for ``text`` (it must fail)."""
    with pytest.raises(ConfigError) as info:
        parse(dedent(text), env={})
    return info.value.problems


BACKENDS = """
backends:
  - {name: files, transport: stdio, command: x}
  - {name: web, transport: stdio, command: y}
"""


def test_profiles_parse_with_their_filters_and_default_to_everything() -> None:
    """Gateway choice (issue 15): every filter defaults to include everything."""
    config = parse(
        BACKENDS
        + dedent(
            """
            profiles:
              - name: coding
                backends: {include: [files]}
                tools: {exclude: ["files__write_*"]}
              - name: all
            """
        ),
        env={},
    )
    coding, everything = config.profiles
    assert coding.name == "coding"
    assert coding.backends.allows("files") and not coding.backends.allows("web")
    assert not coding.tools.allows("files__write_file")
    assert coding.tools.allows("files__read_file")
    assert everything == ProfileConfig(name="all")
    assert DEFAULT_PROFILE == "default"


def test_a_config_without_profiles_has_none() -> None:
    """Gateway choice: no section, no profiles; the main path still serves everything."""
    assert parse(BACKENDS, env={}).profiles == []


@pytest.mark.parametrize("name", ["Coding", "-x", "a_b", "", "a/b"])
def test_a_profile_name_must_be_a_path_safe_name(name: str) -> None:
    """Gateway choice (issue 15): `[a-z0-9][a-z0-9-]*`, since it becomes a path segment."""
    problems = problems_of(BACKENDS + f"profiles:\n  - name: {name!r}\n")
    assert len(problems) == 1
    assert problems[0].startswith("profiles[0].name:")


def test_duplicate_profile_names_are_refused_at_the_second() -> None:
    """Gateway choice: two profiles on one path cannot both be served."""
    problems = problems_of(BACKENDS + "profiles:\n  - name: a\n  - name: b\n  - name: a\n")
    assert problems == ["profiles[2].name: duplicate profile name 'a' (also profiles[0])"]


def test_a_literal_backend_name_in_a_profile_must_exist() -> None:
    """Gateway choice: a typo in a profile's backends would silently empty it."""
    problems = problems_of(
        BACKENDS
        + "profiles:\n  - name: a\n    backends: {include: [file, 'w*'], exclude: [nope]}\n"
    )
    assert problems == [
        "profiles[0].backends.include[0]: no backend is named 'file'",
        "profiles[0].backends.exclude[0]: no backend is named 'nope'",
    ]


def test_an_unknown_profile_key_is_refused_at_its_place() -> None:
    """Spec of the config: unknown keys are typos (forbid_unknown_fields)."""
    problems = problems_of(BACKENDS + "profiles:\n  - name: a\n    tool: {include: ['*']}\n")
    assert problems == ["profiles[0].tool: unknown field, did you mean `tools`?"]


@pytest.mark.parametrize(
    ("backend", "place"),
    [
        ("{name: gateway, transport: stdio, command: x}", "backends[0].name"),
        ("{name: gw, prefix: gateway, transport: stdio, command: x}", "backends[0].prefix"),
    ],
)
def test_the_prefix_gateway_is_reserved(backend: str, place: str) -> None:
    """Issue 15: `gateway` names the gateway's own tools; no backend may claim it."""
    problems = problems_of(f"backends:\n  - {backend}\n")
    assert len(problems) == 1
    assert problems[0].startswith(f"{place}: prefix 'gateway' is reserved")


def test_the_reserved_prefix_is_reported_even_when_another_section_is_broken() -> None:
    """Gateway choice: `check` shows every problem at once."""
    problems = problems_of(
        "server: {port: -1}\nbackends:\n  - {name: gateway, transport: stdio, command: x}\n"
    )
    assert any(p.startswith("backends[0].name: prefix 'gateway' is reserved") for p in problems)


def test_mode_defaults_to_full_and_search_takes_pinned_tools() -> None:
    """Issue 15: `mode: full | search` (default full), `pinned` listed in search mode."""
    config = parse(
        BACKENDS
        + "profiles:\n  - name: a\n  - name: b\n    mode: search\n    pinned: [files__x]\n",
        env={},
    )
    assert [(p.mode, p.pinned) for p in config.profiles] == [("full", []), ("search", ["files__x"])]


def test_an_unknown_mode_and_pinned_without_search_mode_are_refused() -> None:
    """Gateway choice: pinned tools in full mode would silently mean nothing."""
    assert problems_of(BACKENDS + "profiles:\n  - name: a\n    mode: grep\n") == [
        "profiles[0].mode: must be one of: full, search (got 'grep')"
    ]
    assert problems_of(BACKENDS + "profiles:\n  - name: a\n    pinned: [files__x]\n") == [
        "profiles[0].pinned: pinned tools are listed only in mode: search"
    ]


OVERRIDES = """
profiles:
  - name: a
    backends: {include: [files]}
    tools: {exclude: ["files__write_*"]}
    overrides:
      tools:
        files__read_file: {name: read, description: Read one file.}
        files__list: {description: List a folder.}
        web__fetch: {name: fetch}
        files__write_file: {name: write}
        files__stat: {name: read}
        files__move: {name: files__list}
        files__copy: {name: gateway__copy}
        files__zap: {}
        files__bad: {name: "has space"}
      prompts:
        nope: {name: x}
"""


def test_overrides_are_checked_for_items_that_cannot_exist_collisions_and_reversibility() -> None:
    """Issue 15: `check` reports overrides naming impossible items, collisions, bad names."""
    problems = problems_of(BACKENDS + OVERRIDES)
    at = "profiles[0].overrides"
    assert problems == [
        f"{at}.tools.files__zap: an override needs a new name, a new description, or both",
        f"{at}.tools.files__bad.name: 'has space' is not a valid name (1-128 of A-Z a-z 0-9 _ - .)",
    ]
    # Those two are shape problems, found first; with them fixed, the rules across items run.
    fixed = OVERRIDES.replace("files__zap: {}", "files__zap: {name: zap}").replace(
        'name: "has space"', "name: ok"
    )
    assert problems_of(BACKENDS + fixed) == [
        f"{at}.tools.web__fetch: no backend of this profile has a tool 'web__fetch'",
        f"{at}.tools.files__write_file: 'files__write_file' is excluded by this profile's "
        "tools filter",
        f"{at}.tools.files__stat.name: 'read' is also the new name of 'files__read_file'",
        f"{at}.tools.files__move.name: 'files__list' is itself renamed here: a rename must "
        "be reversible",
        f"{at}.tools.files__copy.name: the prefix 'gateway__' is reserved",
        f"{at}.prompts.nope: no backend of this profile has a prompt 'nope'",
    ]


def test_valid_overrides_parse() -> None:
    """Issue 15: a new name and/or a new description per public tool or prompt name."""
    config = parse(
        BACKENDS
        + "profiles:\n  - name: a\n    overrides:\n      tools:\n"
        + "        files__read_file: {name: read}\n"
        + "      prompts:\n        web__p: {description: d}\n",
        env={},
    )
    overrides = config.profiles[0].overrides
    assert overrides.tools["files__read_file"].name == "read"
    assert overrides.prompts["web__p"].description == "d"


def test_with_the_endpoint_at_the_root_a_profile_may_not_shadow_a_gateway_path() -> None:
    """Gateway choice: /metrics stays the metrics when server.path is "/"."""
    text = "server: {path: /}\n" + BACKENDS + "profiles:\n  - name: metrics\n  - name: tools\n"
    assert problems_of(text) == [
        "profiles[0].name: with server.path '/', a profile named 'metrics' would be hidden "
        "by the gateway's own /metrics"
    ]
    parse(BACKENDS + "profiles:\n  - name: metrics\n", env={})  # under /mcp: fine


def test_pinned_names_must_be_tools_the_profile_can_show() -> None:
    """Gateway choice: a pinned typo would silently list nothing."""
    text = BACKENDS + dedent(
        """
        profiles:
          - name: a
            mode: search
            backends: {include: [files]}
            pinned: [files__read, web__fetch, files__list, short, nodelimiter]
            overrides: {tools: {files__list: {name: short}}}
        """
    )
    assert problems_of(text) == [
        "profiles[0].pinned[1]: no backend of this profile has a tool 'web__fetch'",
        "profiles[0].pinned[2]: 'files__list' is renamed by this profile's overrides: pin its "
        "new name",
        "profiles[0].pinned[4]: no backend of this profile has a tool 'nodelimiter'",
    ]
