"""What a pin covers of each kind of definition, and its canonical digest (sans-IO).

Rules:

1. **What a model reads is pinned.** A tool's name, title, description,
   input and output schemas and annotations; a prompt's name, title,
   description and arguments; a resource template's URI template, name,
   title, description and MIME type; a skill's (SEP-2640) ``SKILL.md`` URI,
   frontmatter (its name, description and every other field) and the files
   its entry lists with their digests and sizes, which stand for the bytes
   a model reads. Fields outside these (``_meta``, icons) are not
   instructions to a model and do not drift a pin.
2. **Canonical JSON, RFC 8785.** The digest is SHA-256 over the JSON
   Canonicalization Scheme of the pinned fields (the ``rfc8785`` package,
   Trail of Bits': pure Python, typed, the RFC's test vectors), so key
   order and JSON whitespace are not drift at all, and the same definition
   has the same digest on every replica, in every baseline file.
3. **Computed once per definition.** JCS in pure Python costs about a
   third of a millisecond per tool; a backend that lists again mostly
   lists what it listed before. The digest is remembered by the
   definition's msgspec encoding with sorted keys (C, microseconds): equal
   encodings are equal JSON values, so equal digests; the memory is
   bounded (``CACHE_SIZE``, emptied whole when full).
4. **Keys for every kind.** A pin's key is ``(kind, backend, original
   name)``; a skill's name is its original ``SKILL.md`` URI.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final, Literal

import msgspec
import rfc8785

__all__ = ["PINNED_FIELDS", "PinKind", "digest", "pinned_definition"]

PinKind = Literal["tool", "prompt", "resource_template", "skill"]

#: The fields of each kind that a pin covers (rule 1).
PINNED_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "tool": ("name", "title", "description", "inputSchema", "outputSchema", "annotations"),
    "prompt": ("name", "title", "description", "arguments"),
    "resource_template": ("uriTemplate", "name", "title", "description", "mimeType"),
    "skill": ("uri", "frontmatter", "resources"),
}


def pinned_definition(kind: PinKind, item: dict[str, Any]) -> dict[str, Any]:
    """The part of ``item`` a pin covers (rule 1), as the backend declared it.

    Args:
        kind: what ``item`` is.
        item: the definition from the backend's list (its original names).

    Returns:
        A new dict with only the pinned fields that ``item`` has.
    """
    return {key: item[key] for key in PINNED_FIELDS[kind] if key in item}


#: JCS carries numbers as IEEE doubles; an integer beyond this is pinned by
#: its decimal text instead (a schema's ``maximum: 2**63``), so it still
#: digests, exactly, rather than failing or rounding.
_SAFE_INTEGER: Final = 2**53 - 1


def _jcs_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jcs_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jcs_safe(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _SAFE_INTEGER:
        return f"\u0000int:{value}"
    return value


#: Digests remembered (rule 3): a catalog of 10,000 tools, several versions each.
CACHE_SIZE: Final = 65_536
_SORTED: Final = msgspec.json.Encoder(order="sorted")
_cache: dict[bytes, str] = {}


def digest(definition: dict[str, Any]) -> str:
    """The canonical digest of a pinned definition (rules 2 and 3).

    Args:
        definition: what :func:`pinned_definition` returned (decoded JSON:
            msgspec never yields NaN or infinities from JSON text).

    Returns:
        ``sha256:`` and 64 hex digits.
    """
    key = _SORTED.encode(definition)
    known = _cache.get(key)
    if known is not None:
        return known
    canonical = rfc8785.dumps(_jcs_safe(definition))
    found = "sha256:" + hashlib.sha256(canonical).hexdigest()
    if len(_cache) >= CACHE_SIZE:
        _cache.clear()
    _cache[key] = found
    return found
