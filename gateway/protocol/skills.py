"""The Skills extension (SEP-2640) as the gateway sees it: ids, methods, URI rewriting.

Rules:

1. A backend serves skills when it declares ``io.modelcontextprotocol/skills``
   under ``capabilities.extensions`` (in its initialize result or its
   ``server/discover`` answer); ``directoryRead: true`` in that entry adds
   ``resources/directory/read``.
2. A skill entry's URIs (its ``uri`` and every ``resources[].uri``) are
   resource URIs and get the resource rules (``catalog.naming`` rule 2):
   ``skill://git-workflow/SKILL.md`` of the backend ``alpha`` becomes
   ``alpha+skill://git-workflow/SKILL.md``. The skill path is untouched, so
   its last segment still equals ``frontmatter.name``.
3. Nothing else in an entry changes: ``frontmatter``, ``digest`` and ``size``
   describe the file's bytes, which the gateway never rewrites, so a host
   that verifies them against what ``resources/read`` returns through the
   gateway finds them equal. References inside a ``SKILL.md`` are relative
   (resolved against the skill's root, which is the public URI's), so no
   file content has to name the gateway's URIs.
4. A skill's *public name*, which profiles and the access policy match
   (``skills:`` globs), is the last segment of its skill path under the
   backend's prefix, formed as tools are: ``alpha__git-workflow``. It is a
   name for configuration only; no payload carries it.

Theory of operation: sans-IO; the router hands in a URI mapper and the
backend's bytes and gets the public bytes back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import msgspec

from gateway.protocol import mcp

if TYPE_CHECKING:
    from collections.abc import Mapping

EXTENSION: Final = "io.modelcontextprotocol/skills"
LIST_METHOD: Final = "skills/list"
GET_METHOD: Final = "skills/get"
DIRECTORY_READ_METHOD: Final = "resources/directory/read"
SKILL_FILE: Final = "SKILL.md"

UriMap = Callable[[str], str]


def declared(capabilities: Mapping[str, Any]) -> dict[str, Any] | None:
    """The backend's skills extension settings (rule 1); None when it does not declare it."""
    extensions = capabilities.get("extensions")
    if not isinstance(extensions, dict):
        return None
    settings = extensions.get(EXTENSION)
    return settings if isinstance(settings, dict) else None


def reads_directories(capabilities: Mapping[str, Any]) -> bool:
    """Whether the backend serves ``resources/directory/read`` (``directoryRead: true``)."""
    settings = declared(capabilities)
    return settings is not None and settings.get("directoryRead") is True


def public_entry(entry: Mapping[str, Any], map_uri: UriMap) -> dict[str, Any]:
    """A skill entry with its URIs mapped (rule 2); every other field as it was (rule 3)."""
    out = dict(entry)
    uri = out.get("uri")
    if isinstance(uri, str):
        out["uri"] = map_uri(uri)
    files = out.get("resources")
    if isinstance(files, list):
        out["resources"] = [
            {**item, "uri": map_uri(item["uri"])}
            if isinstance(item, dict) and isinstance(item.get("uri"), str)
            else item
            for item in files
        ]
    return out


def rewrite_get_result(result: msgspec.Raw, map_uri: UriMap) -> msgspec.Raw:
    """A ``skills/get`` result with the entry's URIs mapped."""
    body = mcp.decode_object(result)
    if body is None or not isinstance(body.get("skill"), dict):
        return result
    body["skill"] = public_entry(body["skill"], map_uri)
    return mcp.encode(body)


def with_entry(result: msgspec.Raw, entry: bytes) -> msgspec.Raw:
    """A ``skills/get`` result carrying ``entry`` (a catalog entry's JSON) as its skill.

    What a host is shown of a skill whose pin holds (``pinning: hold``):
    the approved entry, every other field of the result as the backend sent it.
    """
    body = mcp.decode_object(result)
    item = mcp.decode_object(msgspec.Raw(entry))
    if body is None or item is None:
        return result
    body["skill"] = item
    return mcp.encode(body)


def rewrite_directory_result(result: msgspec.Raw, map_uri: UriMap) -> msgspec.Raw:
    """A ``resources/directory/read`` result with its children's URIs mapped."""
    body = mcp.decode_object(result)
    children = None if body is None else body.get("resources")
    if body is None or not isinstance(children, list):
        return result
    body["resources"] = [
        {**child, "uri": map_uri(child["uri"])}
        if isinstance(child, dict) and isinstance(child.get("uri"), str)
        else child
        for child in children
    ]
    return mcp.encode(body)


def skill_name(uri: str) -> str:
    """The skill name a ``SKILL.md`` URI carries: its skill path's last segment (rule 4).

    ``skill://acme/billing/refunds/SKILL.md`` -> ``refunds``; a URI that does
    not end in ``/SKILL.md`` names its own last segment.
    """
    _, _, rest = uri.partition("://")
    path = rest or uri
    if path.endswith("/" + SKILL_FILE):
        path = path[: -len(SKILL_FILE) - 1]
    return path.rstrip("/").rpartition("/")[2]


def skill_root(uri: str) -> str:
    """The directory a ``SKILL.md`` URI's skill lives in (no trailing slash)."""
    if uri.endswith("/" + SKILL_FILE):
        return uri[: -len(SKILL_FILE) - 1]
    return uri
