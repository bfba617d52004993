"""docs/architecture.md shows the tree as built (issue 24, item 6).

The page's layout map is generated from ``gateway/`` by ``tests/layout_map.py``;
these tests hold the checked-in map equal to what the tree generates, so a
module moved, added or renamed without the map fails here with the command
that regenerates it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.layout_map import BEGIN, COMMAND, END, PAGE, layout_map, page_map, write


def test_the_layout_map_in_architecture_md_is_the_one_the_tree_generates() -> None:
    """Gateway choice: the map is generated from the modules' docstrings, never kept by hand."""
    assert page_map(PAGE.read_text(encoding="utf-8")) == layout_map(), (
        f"docs/architecture.md's layout map differs from the tree; regenerate it with `{COMMAND}`"
    )


def test_the_map_names_every_module_under_gateway_once() -> None:
    """Gateway choice: a module missing from the map, or a package without its room, fails."""
    root = PAGE.parent.parent / "gateway"
    text = layout_map()
    modules = [p for p in root.rglob("*.py") if p.name != "__init__.py"]
    for module in modules:
        indent = "  " * len(module.relative_to(root).parts)
        assert f"\n{indent}{module.name} " in text, module
    assert len(text.splitlines()) == 2 + len(modules) + len(list(root.rglob("__init__.py")))


def test_writing_the_map_replaces_only_what_stands_between_the_markers(tmp_path: Path) -> None:
    """Gateway choice: regenerating touches the map and nothing else of the page."""
    page = tmp_path / "architecture.md"
    page.write_text(f"# Before\n\n{BEGIN}\n```text\nold\n```\n{END}\n\nAfter.\n", encoding="utf-8")
    assert write(page) is True
    expected = f"# Before\n\n{BEGIN}\n{layout_map()}\n{END}\n\nAfter.\n"
    assert page.read_text(encoding="utf-8") == expected
    assert write(page) is False


def test_a_module_without_a_docstring_is_named_rather_than_mapped_blank(tmp_path: Path) -> None:
    """Gateway choice: a module's purpose is its docstring's first line, so one is required."""
    package = tmp_path / "gateway"
    package.mkdir()
    (package / "__init__.py").write_text('"""The package."""\n', encoding="utf-8")
    (package / "bare.py").write_text("X = 1\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bare\.py has no docstring"):
        layout_map(package)
