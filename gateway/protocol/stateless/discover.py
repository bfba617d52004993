"""The gateway's own ``server/discover`` answer, built from the merged view (sans-IO).

``server/discover`` MUST be implemented; it takes only ``_meta`` and answers
``resultType: "complete"``, ``supportedVersions``, ``capabilities``, the
cache hints, optionally ``instructions``, and SHOULD carry
``_meta["io.modelcontextprotocol/serverInfo"]`` (``S/server/discover.mdx``;
schema.ts ``DiscoverResult``). The gateway answers it itself, never by
relaying one backend's answer. Rules (gateway choices marked):

- ``supportedVersions`` lists what the *gateway* serves on this leg, newest
  first, handshake versions included: a dual-era server names both (the
  example in ``S/basic/versioning.mdx`` does), and a backend's versions
  are the backend leg's business.
- ``capabilities`` is the union of the backends' (``listChanged`` and
  ``subscribe`` true if any backend's is; ``logging``/``completions``
  present if any has them), limited by the caller to what the gateway can
  bridge: an ``extensions`` or ``experimental`` entry is kept only when
  named in ``allow_extensions``/``allow_experimental`` (gateway choice: an
  extension the gateway cannot route is an extension it does not offer).
- ``instructions`` from several backends are joined, each under a
  ``## <backend>`` heading so a model can tell whose advice it reads
  (gateway choice); none at all means the field is omitted.
- Hints: the merged backends' hint (``caching.merge_hints``), passed in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from gateway.protocol.stateless.cache_hints import COMPLETE, CacheHint
from gateway.protocol.stateless.envelope import SERVER_INFO_KEY

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

_FLAGS: Final = {
    "prompts": ("listChanged",),
    "resources": ("subscribe", "listChanged"),
    "tools": ("listChanged",),
}
_PRESENCE: Final = ("logging", "completions")


def merge_capabilities(
    backends: Iterable[Mapping[str, Any]],
    allow_extensions: Iterable[str] = (),
    allow_experimental: Iterable[str] = (),
) -> dict[str, Any]:
    """The union of the backends' ServerCapabilities the gateway can honour.

    Args:
        backends: each backend's ``capabilities`` (from discover or initialize).
        allow_extensions: extension ids the gateway implements or routes.
        allow_experimental: experimental keys it passes through.

    Returns:
        A ServerCapabilities object; flags appear only when true.
    """
    ext_ok, exp_ok = set(allow_extensions), set(allow_experimental)
    out: dict[str, Any] = {}
    for caps in backends:
        for name, flags in _FLAGS.items():
            mine = caps.get(name)
            if not isinstance(mine, dict):
                continue
            merged = out.setdefault(name, {})
            for flag in flags:
                if mine.get(flag) is True:
                    merged[flag] = True
        for name in _PRESENCE:
            if isinstance(caps.get(name), dict):
                out.setdefault(name, {})
        for group, allowed in (("extensions", ext_ok), ("experimental", exp_ok)):
            entries = caps.get(group)
            if not isinstance(entries, dict):
                continue
            for key, settings in entries.items():
                if key in allowed and isinstance(settings, dict):
                    out.setdefault(group, {}).setdefault(key, dict(settings))
    return out


def merge_instructions(by_backend: Iterable[tuple[str, str | None]]) -> str | None:
    """The backends' instructions as one text, each under its backend's name.

    One backend's text passes as it is; blank texts are skipped.
    """
    parts = [(name, text.strip()) for name, text in by_backend if text and text.strip()]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0][1]
    return "\n\n".join(f"## {name}\n\n{text}" for name, text in parts)


def discover_result(
    *,
    supported_versions: Iterable[str],
    capabilities: Mapping[str, Any],
    server_info: Mapping[str, Any],
    hint: CacheHint,
    instructions: str | None = None,
) -> dict[str, Any]:
    """A complete ``DiscoverResult``.

    Args:
        supported_versions: every version the gateway serves, newest first.
        capabilities: from :func:`merge_capabilities`.
        server_info: the gateway's own ``Implementation`` (name, version).
        hint: the merged cache hint.
        instructions: from :func:`merge_instructions`.

    Raises:
        ValueError: an empty version list (a client could pick nothing).
    """
    versions = list(supported_versions)
    if not versions:
        raise ValueError("server/discover needs at least one supported version")
    result: dict[str, Any] = {
        "resultType": COMPLETE,
        "supportedVersions": versions,
        "capabilities": dict(capabilities),
        **hint.as_fields(),
        "_meta": {SERVER_INFO_KEY: dict(server_info)},
    }
    if instructions is not None:
        result["instructions"] = instructions
    return result
