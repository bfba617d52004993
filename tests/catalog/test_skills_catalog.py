"""Skills (SEP-2640) in the catalog: namespaced entries, and the ``skills:`` globs of profiles
and of the access policy."""

from __future__ import annotations

import json
from typing import Any, Final

import pytest

from gateway.catalog.effective import narrow
from gateway.catalog.naming import NamingRules, public_skill_name
from gateway.catalog.profiles import Globs, Profile, restrict
from gateway.catalog.snapshot import BackendListing, Kind, Snapshot, build_snapshot
from gateway.config import ItemRules, PolicyRule
from gateway.identity.policy import Policy
from gateway.protocol.skills import skill_name

DIGEST: Final = "sha256:" + "0" * 64


def entry(path: str, *files: str) -> dict[str, Any]:
    """A skill entry at ``skill://{path}`` listing SKILL.md and ``files``."""
    uri = f"skill://{path}/SKILL.md"
    listed = [uri, *(f"skill://{path}/{f}" for f in files)]
    return {
        "uri": uri,
        "frontmatter": {"name": path.rsplit("/", 1)[-1], "description": "d"},
        "resources": [{"uri": u, "digest": DIGEST, "size": 1} for u in listed],
    }


def snapshot() -> Snapshot:
    """Two prefixed skills backends, a skill of the same path on each."""
    return build_snapshot(
        [
            BackendListing(
                "alpha",
                "a",
                skills=(entry("git-workflow", "refs/B.md"), entry("acme/billing/refunds", "t.md")),
                resources=({"uri": "skill://git-workflow/SKILL.md", "name": "SKILL.md"},),
            ),
            BackendListing("beta", "b", skills=(entry("git-workflow"),)),
        ],
        NamingRules(),
    )


def test_skill_entries_take_the_resource_prefix_on_every_uri_and_nothing_else() -> None:
    """Gateway choice: ``p+skill://`` on the entry and each file; digests, sizes, frontmatter
    unchanged (spec: the frontmatter must equal the SKILL.md's)."""
    view = snapshot().view(Kind.SKILLS)
    assert view.keys() == (
        "a+skill://acme/billing/refunds/SKILL.md",
        "a+skill://git-workflow/SKILL.md",
        "b+skill://git-workflow/SKILL.md",
    )
    found = view.get("a+skill://git-workflow/SKILL.md")
    assert found is not None and found.original == "skill://git-workflow/SKILL.md"
    item = json.loads(found.encoded)
    assert item["frontmatter"] == {"name": "git-workflow", "description": "d"}
    assert item["resources"] == [
        {"uri": "a+skill://git-workflow/SKILL.md", "digest": DIGEST, "size": 1},
        {"uri": "a+skill://git-workflow/refs/B.md", "digest": DIGEST, "size": 1},
    ]


@pytest.mark.parametrize(
    ("uri", "name"),
    [
        ("skill://git-workflow/SKILL.md", "git-workflow"),
        ("skill://acme/billing/refunds/SKILL.md", "refunds"),
        ("github://owner/repo/skills/pdf/SKILL.md", "pdf"),
    ],
)
def test_a_skill_name_is_the_last_segment_of_its_skill_path(uri: str, name: str) -> None:
    """Spec (SEP-2640): the final skill-path segment is the skill's name."""
    assert skill_name(uri) == name
    assert public_skill_name("p", uri, "__") == f"p__{name}"
    assert public_skill_name("", uri, "__") == name


# (skills globs, resources globs) -> the public skill URIs the profile lists,
# and which file and directory URIs stay readable.
TABLE: Final = [
    (Globs(), Globs(), ["a+acme", "a+git", "b+git"], {"a+git": True, "a+acme": True}),
    (
        Globs(exclude=("a__git-workflow",)),
        Globs(),
        ["a+acme", "b+git"],
        {"a+git": False, "a+acme": True, "b+git": True},
    ),
    (Globs(include=("*__refunds",)), Globs(), ["a+acme"], {"a+git": False, "b+git": False}),
    (
        Globs(include=("b__*",)),
        Globs(),
        ["b+git"],
        {"a+acme": False, "a+git": False, "b+git": True},
    ),
    # A skill one of whose files the profile cannot read is not shown.
    (Globs(), Globs(exclude=("a+skill://git-workflow/refs/*",)), ["a+acme", "b+git"], {}),
]
SHORT: Final = {
    "a+acme": "a+skill://acme/billing/refunds/SKILL.md",
    "a+git": "a+skill://git-workflow/SKILL.md",
    "b+git": "b+skill://git-workflow/SKILL.md",
}
BACKEND: Final = {"a": "alpha", "b": "beta"}


@pytest.mark.parametrize(("skills", "resources", "listed", "readable"), TABLE)
def test_a_profile_selects_skills_by_public_name_and_hides_the_rest_every_way(
    skills: Globs, resources: Globs, listed: list[str], readable: dict[str, bool]
) -> None:
    """Gateway choice: ``skills:`` globs match ``prefix__name``; an excluded skill's entry,
    SKILL.md, files and directories are unknown on the profile (listed or not)."""
    view = restrict(snapshot(), Profile("p", skills=skills, resources=resources))
    assert list(view.view(Kind.SKILLS).keys()) == [SHORT[k] for k in listed]
    for short, expected in readable.items():
        uri = SHORT[short]
        root = uri.removesuffix("/SKILL.md")
        for public in (uri, root, root + "/t.md", root + "/refs/B.md"):
            assert (view.resolve_uri(public) is not None) is expected, public
    # A SKILL.md listed in resources/list goes with its skill.
    shown = "a+skill://git-workflow/SKILL.md" in view.view(Kind.RESOURCES)
    assert shown is readable.get("a+git", True)


def test_an_unlisted_skill_is_judged_by_the_name_its_uri_carries() -> None:
    """Gateway choice: skills/get answers for unlisted skills, so their URI is checked too."""
    view = restrict(snapshot(), Profile("p", skills=Globs(exclude=("a__secret",))))
    assert view.resolve_uri("a+skill://secret/SKILL.md") is None
    assert view.resolve_uri("a+skill://open/SKILL.md") == ("alpha", "skill://open/SKILL.md")


def test_a_policy_shows_a_skill_only_if_it_may_read_every_file() -> None:
    """Spec (SEP-2640) / gateway choice: the policy matches skills by their public URIs."""

    def admits(kind: Kind, public: str) -> bool:
        return not public.startswith("a+skill://acme/billing/refunds/t")

    view = narrow(snapshot(), admits)
    assert view.view(Kind.SKILLS).keys() == (
        "a+skill://git-workflow/SKILL.md",
        "b+skill://git-workflow/SKILL.md",
    )


# A policy's skills rules (allow, deny) -> the public skill URIs it lists,
# and which file and directory URIs stay readable.
POLICY_TABLE: Final = [
    (ItemRules(), ["a+acme", "a+git", "b+git"], {"a+git": True, "a+acme": True, "b+git": True}),
    (
        ItemRules(deny=["a__git-workflow"]),
        ["a+acme", "b+git"],
        {"a+git": False, "a+acme": True, "b+git": True},
    ),
    (ItemRules(allow=["*__refunds"]), ["a+acme"], {"a+git": False, "b+git": False}),
    (
        ItemRules(allow=["b__*", "a__*"], deny=["*__git-*"]),
        ["a+acme"],
        {"a+acme": True, "a+git": False, "b+git": False},
    ),
]


def policy_view(skills: ItemRules, resources: ItemRules | None = None) -> Snapshot:
    """The snapshot narrowed to what one everyone-rule with these globs admits."""
    rule = PolicyRule(
        everyone=True, profiles=["*"], skills=skills, resources=resources or ItemRules()
    )
    policy = Policy.from_config([rule])
    assert policy is not None
    return narrow(snapshot(), policy.decide(None).on("default").admitter())


@pytest.mark.parametrize(("skills", "listed", "readable"), POLICY_TABLE)
def test_a_policy_selects_skills_by_public_name_and_hides_the_rest_every_way(
    skills: ItemRules, listed: list[str], readable: dict[str, bool]
) -> None:
    """Gateway choice: a policy's ``skills:`` globs match ``prefix__name`` as a profile's do;
    a skill left out is unknown: entry, SKILL.md, files, directories (listed or not)."""
    view = policy_view(skills)
    assert list(view.view(Kind.SKILLS).keys()) == [SHORT[k] for k in listed]
    for short, expected in readable.items():
        uri = SHORT[short]
        root = uri.removesuffix("/SKILL.md")
        for public in (uri, root, root + "/t.md", root + "/refs/B.md"):
            assert (view.resolve_uri(public) is not None) is expected, public
    shown = "a+skill://git-workflow/SKILL.md" in view.view(Kind.RESOURCES)
    assert shown is readable["a+git"]


def test_a_policy_judges_an_unlisted_skill_by_the_name_its_uri_carries() -> None:
    """Gateway choice: skills/get answers for unlisted skills, so the policy checks their URI."""
    view = policy_view(ItemRules(deny=["a__secret"]))
    assert view.resolve_uri("a+skill://secret/SKILL.md") is None
    assert view.resolve_uri("a+skill://secret/notes.md") == ("alpha", "skill://secret/notes.md")
    assert view.resolve_uri("a+skill://open/SKILL.md") == ("alpha", "skill://open/SKILL.md")


def test_a_policy_still_holds_a_skill_to_the_resources_of_its_files() -> None:
    """Gateway choice: a skill one of whose files is denied as a resource is not shown, but
    its other files stay readable (only a skill denied by name is unknown every way)."""
    view = policy_view(ItemRules(), ItemRules(deny=["a+skill://git-workflow/refs/*"]))
    assert view.view(Kind.SKILLS).keys() == (
        "a+skill://acme/billing/refunds/SKILL.md",
        "b+skill://git-workflow/SKILL.md",
    )
    assert view.resolve_uri("a+skill://git-workflow/SKILL.md") is not None
    assert view.resolve_uri("a+skill://git-workflow/refs/B.md") is None
