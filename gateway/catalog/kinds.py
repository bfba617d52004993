"""The kinds of listed item, and what the protocol calls each.

A module of its own so that the catalog's value types and its incremental
merge can both name a kind without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Mapping


class Kind(Enum):
    """The lists a server offers; values are the result keys.

    Everything the gateway needs to know per list (the field that names an
    item, the method that lists it, the capability that offers it, the
    notification that says it changed) is read from here, so a fifth list is
    one row in ``_ROWS``, not a hunt through the router and the backends.
    """

    TOOLS = "tools"
    PROMPTS = "prompts"
    RESOURCES = "resources"
    TEMPLATES = "resourceTemplates"
    # SEP-2640: offered under capabilities.extensions, changes announced
    # with resources/list_changed (the skills are resources).
    SKILLS = "skills"

    @property
    def identity_key(self) -> str:
        """The item field that identifies it (and that we namespace)."""
        return _ROWS[self].identity_key

    @property
    def list_method(self) -> str:
        """The MCP method that returns one page of this list."""
        return _ROWS[self].list_method

    @property
    def capability(self) -> str:
        """The server capability that offers this list (templates ride on ``resources``)."""
        return _ROWS[self].capability

    def offered_by(self, capabilities: Mapping[str, Any]) -> bool:
        """Whether a server's capabilities offer this list (skills: as an extension)."""
        if _ROWS[self].extension:
            extensions = capabilities.get("extensions")
            return isinstance(extensions, dict) and isinstance(
                extensions.get(self.capability), dict
            )
        return self.capability in capabilities

    @property
    def list_changed(self) -> str:
        """The notification that says this list changed (shared by resources and templates)."""
        return _ROWS[self].list_changed

    @staticmethod
    def changed_by(method: str) -> tuple[Kind, ...]:
        """The kinds a ``list_changed`` notification names; empty for any other method."""
        return _CHANGED_BY.get(method, ())


@dataclass(frozen=True, slots=True)
class _KindRow:
    identity_key: str
    list_method: str
    capability: str
    list_changed: str
    # The capability is an entry of ``capabilities.extensions``.
    extension: bool = False


_ROWS: Final = {
    Kind.TOOLS: _KindRow("name", "tools/list", "tools", "notifications/tools/list_changed"),
    Kind.PROMPTS: _KindRow("name", "prompts/list", "prompts", "notifications/prompts/list_changed"),
    Kind.RESOURCES: _KindRow(
        "uri", "resources/list", "resources", "notifications/resources/list_changed"
    ),
    Kind.TEMPLATES: _KindRow(
        "uriTemplate",
        "resources/templates/list",
        "resources",
        "notifications/resources/list_changed",
    ),
    Kind.SKILLS: _KindRow(
        "uri",
        "skills/list",
        "io.modelcontextprotocol/skills",
        "notifications/resources/list_changed",
        extension=True,
    ),
}
# One resources/list_changed covers both resource lists (spec: resources).
_CHANGED_BY: Final = {
    method: tuple(kind for kind, row in _ROWS.items() if row.list_changed == method)
    for method in dict.fromkeys(row.list_changed for row in _ROWS.values())
}
