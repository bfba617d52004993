"""The documentation stands on its own: every relative link resolves.

A newcomer has only the repository, so the README, CONTRIBUTING and the
pages under ``docs/`` must link only to files that exist in it, and to
headings that exist in those files (issue 13, "The repository stands on its
own"). Anchors follow GitHub's rule for heading ids.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted(
    [
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        ROOT / "deploy" / "README.md",
        ROOT / "tests" / "robustness" / "README.md",
        *(ROOT / "docs").glob("*.md"),
    ]
)
# [text](target) outside code; images too. Targets with spaces are not used.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
HTML_ANCHOR = re.compile(r'<a id="([^"]+)"></a>')


def _slug(heading: str) -> str:
    """GitHub's heading id: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    anchors = set(HTML_ANCHOR.findall(text))
    for heading in HEADING.findall(text):
        slug = _slug(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code is not a link
    return LINK.findall(text)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_to_a_file_and_heading_in_the_repository(
    page: Path,
) -> None:
    """Gateway choice: documentation links never leave the repository unresolved."""
    broken = []
    for target in _links(page):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        missing = not resolved.exists() or not resolved.is_relative_to(ROOT)
        if missing or (anchor and resolved.is_file() and anchor not in _anchors(resolved)):
            broken.append(target)
    assert broken == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_points_outside_the_repository_for_its_rules(page: Path) -> None:
    """Gateway choice: design, style and robustness rules live in docs/, not outside the repo."""
    team_folder = "shared"  # the team's documents outside the repository
    assert f"../{team_folder}" not in page.read_text(encoding="utf-8")
    assert f"/work/{team_folder}" not in page.read_text(encoding="utf-8")


def test_every_test_the_robustness_catalogue_names_exists() -> None:
    """Gateway choice: each row of docs/robustness.md names tests that are really there."""
    catalogue = (ROOT / "docs" / "robustness.md").read_text(encoding="utf-8")
    defined = {
        match
        for path in (ROOT / "tests").rglob("test_*.py")
        for match in re.findall(r"def (test_\w+)", path.read_text(encoding="utf-8"))
    }
    named = set(re.findall(r"::(test_\w+)", catalogue))
    assert named, "the catalogue names no test"
    assert named - defined == set()
