"""Reversible namespacing of backend names and URIs.

Rules:

1. A tool or prompt ``name`` of a backend with prefix ``p`` becomes
   ``p{sep}name``; with the empty prefix it stays ``name``.
2. A resource URI or URI template ``u`` becomes ``p+u``. ``p+scheme`` is a
   valid URI scheme (RFC 3986 allows ``+`` in schemes), and a literal prefix
   keeps an RFC 6570 template a template.
3. A public tool or prompt name is kept within ``^[A-Za-z0-9_-]{1,max}$``
   (many hosts accept nothing else). A name that would break that - too long,
   or holding ``.``, ``/``, spaces - gets a *short form*: the allowed
   characters of the original, cut to fit, then ``-`` and a hash of the
   original. The hash makes it stable across restarts and replicas.

Theory of operation: reversal never parses a public name. The catalog
snapshot keeps a table from each public name to (backend, original name),
built from these functions, so a short form is exactly as reversible as a
plain one. For URIs the reverse is a prefix split: config validation
guarantees prefixes match ``[a-z0-9][a-z0-9-]*``, so the text before the
first ``+`` is a prefix or the URI belongs to an unprefixed backend.

Collisions are impossible by construction between backends: the separator
cannot occur inside a prefix (config validation), so the text before the
first separator names the backend. Within one backend two originals could in
theory map to one short form; the snapshot builder detects that and keeps the
first (reported as a problem, never a crash).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Final

import msgspec

from gateway.protocol.skills import skill_name

URI_PREFIX_SEPARATOR: Final = "+"
_DISALLOWED: Final = re.compile(r"[^A-Za-z0-9_-]")
_HASH_HEX_CHARS: Final = 8
_decoder: Final = msgspec.json.Decoder()


@dataclass(frozen=True, slots=True)
class NamingRules:
    """How public names are formed; from config ``naming``."""

    separator: str = "__"
    max_length: int = 64


def _is_host_safe(name: str, max_length: int) -> bool:
    return 0 < len(name) <= max_length and _DISALLOWED.search(name) is None


def _digest(original: str) -> str:
    return hashlib.blake2b(original.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()[
        :_HASH_HEX_CHARS
    ]


def public_name(prefix: str, original: str, rules: NamingRules) -> str:
    """The public name of a backend's tool or prompt.

    Raises:
        ValueError: when the prefix leaves no room for a short form; config
            validation keeps that from happening for configured prefixes.
    """
    head = f"{prefix}{rules.separator}" if prefix else ""
    plain = head + original
    if _is_host_safe(plain, rules.max_length):
        return plain
    tail = "-" + _digest(original)
    room = rules.max_length - len(head) - len(tail)
    if room < 1:
        raise ValueError(f"prefix {prefix!r} is too long for names of at most {rules.max_length}")
    return head + _DISALLOWED.sub("_", original)[:room] + tail


def public_uri(prefix: str, uri: str) -> str:
    """The public form of a resource URI or URI template."""
    return f"{prefix}{URI_PREFIX_SEPARATOR}{uri}" if prefix else uri


def public_skill_name(prefix: str, uri: str, separator: str) -> str:
    """The public name of a skill, which ``skills:`` globs match (``protocol.skills`` rule 4).

    The last segment of the skill's path under the backend's prefix, joined
    as a tool name is (``alpha__git-workflow``); never shortened, since no
    payload carries it.
    """
    name = skill_name(uri)
    return f"{prefix}{separator}{name}" if prefix else name


def skill_files(encoded: bytes) -> list[str]:
    """The public URIs of every file a catalog skill entry lists (none when ``dynamic``)."""
    item = _decoder.decode(encoded)
    files = item.get("resources") if isinstance(item, dict) else None
    if not isinstance(files, list):
        return []
    return [f["uri"] for f in files if isinstance(f, dict) and isinstance(f.get("uri"), str)]


def split_uri(public: str, prefixes: frozenset[str]) -> tuple[str, str]:
    """Split a public URI into (prefix, original URI).

    Returns ``("", public)`` when no known prefix matches: the URI then
    belongs to an unprefixed backend, if there is one.
    """
    head, sep, rest = public.partition(URI_PREFIX_SEPARATOR)
    if sep and head in prefixes:
        return head, rest
    return "", public
