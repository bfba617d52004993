"""What a host on an older revision must not be sent (sans-IO).

Backends speak their newest revision to the gateway; a host may have
negotiated an older one. Fields and content types that the host's revision
does not define are taken out of what it receives, and content it could not
render is turned into text that says the same:

- 2025-06-18 added tool ``title``/``outputSchema``, ``structuredContent``,
  ``resource_link`` content, ``title`` on prompts, resources and templates.
- 2025-11-25 added ``icons`` and tool ``execution``.
- 2025-03-26 added tool ``annotations`` and ``audio`` content.

Only what is listed here is touched; everything else passes as it came.
Hosts on 2025-11-25 pay nothing: ``needs_downgrade`` is checked first.
"""

from __future__ import annotations

from typing import Any, Final

from gateway.protocol.versions import LATEST_VERSION

_ADDED_IN: Final = {
    "tools": {
        "title": "2025-06-18",
        "outputSchema": "2025-06-18",
        "icons": "2025-11-25",
        "execution": "2025-11-25",
        "annotations": "2025-03-26",
    },
    "prompts": {"title": "2025-06-18", "icons": "2025-11-25"},
    "resources": {"title": "2025-06-18", "icons": "2025-11-25"},
    "resourceTemplates": {"title": "2025-06-18", "icons": "2025-11-25"},
}


def needs_downgrade(version: str) -> bool:
    """Whether a host on ``version`` must have newer fields removed."""
    return version < LATEST_VERSION


def list_item(kind: str, item: dict[str, Any], version: str) -> dict[str, Any]:
    """A list item without the fields ``version`` does not define."""
    added = _ADDED_IN.get(kind, {})
    return {k: v for k, v in item.items() if k not in added or added[k] <= version}


def _block(block: Any, version: str) -> Any:
    if not isinstance(block, dict):
        return block
    kind = block.get("type")
    if kind == "resource_link" and version < "2025-06-18":
        name = block.get("name") or block.get("uri")
        return {"type": "text", "text": f"[resource: {name}] {block.get('uri', '')}".strip()}
    if kind == "audio" and version < "2025-03-26":
        return {"type": "text", "text": f"[audio content, {block.get('mimeType', 'unknown type')}]"}
    return block


def call_result(body: dict[str, Any], version: str) -> dict[str, Any]:
    """A tools/call result as a host on ``version`` can read it."""
    if version < "2025-06-18":
        body.pop("structuredContent", None)
    content = body.get("content")
    if isinstance(content, list):
        body["content"] = [_block(block, version) for block in content]
    return body


def prompt_result(body: dict[str, Any], version: str) -> dict[str, Any]:
    """A prompts/get result as a host on ``version`` can read it."""
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in messages:
            if isinstance(message, dict):
                message["content"] = _block(message.get("content"), version)
    return body
