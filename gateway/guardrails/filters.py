"""The built-in guardrail filters and the chain that runs them (sans-IO).

Rules:

1. **Typed decisions.** A filter returns :class:`Allow`, :class:`Modify`
   (the payload as it should travel on) or :class:`Deny` (the filter's
   name and a reason a host may read); never an exception, never a
   message to parse. The chain runs the filters that apply to the point
   and the item in order; a :class:`Modify` feeds the next filter; the
   first :class:`Deny` ends the run.
2. **The boundary holds.** A filter that raises is a bug of the gateway's,
   not the caller's: :func:`run_chain` turns it into a :class:`Deny` with
   reason ``filter_error`` (fail closed) and says which filter; it never
   lets the exception out and never loses the payload's id (ids are not
   in the payload at all).
3. **Copy on change.** Payloads are decoded JSON; a filter that changes
   nothing returns :class:`Allow` and the payload is passed on untouched;
   one that changes something builds a new payload and leaves the old one
   as it was.
4. **Nothing logged of the payload.** A decision carries the filter's name
   and a reason written by the filter (a secret's kind, a byte count, an
   argument's name), never the payload's text.
"""

from __future__ import annotations

import fnmatch
import re
import unicodedata
from typing import TYPE_CHECKING, Any, Final

import msgspec

from gateway.config.schema_filters import (
    ArgumentsFilter,
    FilterConfig,
    MarkersFilter,
    SchemaFilter,
    SecretsFilter,
    SizeFilter,
)
from gateway.guardrails.secrets import find_secrets, redact
from gateway.pinning.markers import MarkerKind, model_markers

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = [
    "Allow",
    "Decision",
    "Deny",
    "Modify",
    "Subject",
    "builtin_decision",
    "encoded_size",
    "filter_name",
    "run_chain",
]

_ENCODER: Final = msgspec.json.Encoder()
#: Characters of a string :func:`encoded_size` encodes at a time.
_SIZE_SLICE: Final = 64 * 1024


class Allow(msgspec.Struct, frozen=True):
    """Pass the payload on as it is."""


class Modify(msgspec.Struct, frozen=True):
    """Pass this payload on instead (redacted, truncated)."""

    payload: dict[str, Any]
    filter: str
    reason: str


class Deny(msgspec.Struct, frozen=True):
    """Refuse: the request never reaches the backend, the result never the host."""

    filter: str
    reason: str


Decision = Allow | Modify | Deny


class Unavailable(msgspec.Struct, frozen=True):
    """An external filter's ``fail: closed``: the service could not decide, so the payload
    is refused (``guardrails.external`` rule 2). Here, beside the decisions, so the chain
    can tell it apart without loading the HTTP client."""

    filter: str
    detail: str


class Subject(msgspec.Struct, frozen=True, kw_only=True):
    """What a filter looks at.

    Attributes:
        point: ``requests``, ``results``, ``lists`` or ``backend_requests``.
        item: the public name of the tool (or prompt, resource URI)
            concerned; a list's tool; "" for a backend's request.
        payload: ``{"name", "arguments"}`` for a request; the result for a
            result; one tool definition for a list; the params of a
            backend's request.
        principal: who calls ("" without auth).
        profile: the profile the request came through.
        backend: the backend concerned.
        input_schema: the tool's ``inputSchema`` (requests), for ``schema``.
    """

    point: str
    item: str
    payload: dict[str, Any]
    principal: str = ""
    profile: str = "default"
    backend: str = ""
    input_schema: dict[str, Any] | None = None


def filter_name(config: FilterConfig, position: int) -> str:
    """The name decisions carry: the configured one, else ``TYPE#POSITION``."""
    if config.name:
        return config.name
    return f"{type(config).__struct_config__.tag}#{position}"


def _applies(config: FilterConfig, subject: Subject) -> bool:
    if subject.point not in config.points():
        return False
    if not subject.item:
        return True
    return any(fnmatch.fnmatchcase(subject.item, glob) for glob in config.tools)


def _map_strings(value: Any, change: Callable[[str], str]) -> Any:
    """``value`` with ``change`` applied to every string in it; the same object when unchanged."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        items = [_map_strings(v, change) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        mapped = {k: _map_strings(v, change) for k, v in value.items()}
        return value if all(mapped[k] is value[k] for k in value) else mapped
    return value


def _strings(value: Any) -> list[str]:
    found: list[str] = []
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            found.append(node)
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            stack.extend(node.values())
    return found


def _string_size(text: str) -> int:
    if len(text) <= _SIZE_SLICE:
        return len(_ENCODER.encode(text))
    # A slice at a time: escapes belong to one character, so the slices'
    # sizes (less their quotes) add up to the whole's.
    return 2 + sum(
        len(_ENCODER.encode(text[at : at + _SIZE_SLICE])) - 2
        for at in range(0, len(text), _SIZE_SLICE)
    )


def encoded_size(value: Any) -> int:
    """The bytes ``value`` takes as JSON, without encoding all of it at once.

    A large string is measured a bounded slice at a time, so a 10 MiB
    result is sized without a 10 MiB copy beside it (``size`` filter;
    docs/performance.md, guardrails memory). Equal to
    ``len(msgspec.json.encode(value))`` for decoded JSON.
    """
    total = 0
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            total += _string_size(node)
        elif isinstance(node, dict):
            # braces, a colon per member, a comma between members
            total += 2 + len(node) + max(0, len(node) - 1)
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            total += 2 + max(0, len(node) - 1)
            stack.extend(node)
        else:
            total += len(_ENCODER.encode(node))
    return total


def _secrets(config: SecretsFilter, name: str, subject: Subject) -> Decision:
    kinds: set[str] = set()

    def scrub(text: str) -> str:
        spans = find_secrets(text)
        if not spans:
            return text
        kinds.update(span.kind for span in spans)
        return redact(text, spans)

    payload = _map_strings(subject.payload, scrub)
    if payload is subject.payload:
        return Allow()
    reason = "secret: " + ", ".join(sorted(kinds))
    if config.action == "deny":
        return Deny(name, reason)
    return Modify(payload, name, reason)


def _size(config: SizeFilter, name: str, subject: Subject) -> Decision:
    if subject.point == "requests":
        size = encoded_size(subject.payload.get("arguments") or {})
        if size > config.max_bytes:
            return Deny(name, f"arguments are {size} bytes, over {config.max_bytes}")
        return Allow()
    if subject.point != "results":
        size = encoded_size(subject.payload)
        if size > config.max_bytes:
            return Deny(name, f"{size} bytes, over {config.max_bytes}")
        return Allow()
    return _truncate(config.max_bytes, name, subject.payload)


def _truncate(budget: int, name: str, result: dict[str, Any]) -> Decision:
    """A result over ``budget`` bytes keeps its first blocks up to it, and says so."""
    total = encoded_size(result)
    if total <= budget:
        return Allow()
    kept: list[Any] = []
    used = 0
    for block in result.get("content") or []:
        size = encoded_size(block)
        if used + size <= budget:
            kept.append(block)
            used += size
            continue
        if isinstance(block, dict) and block.get("type") == "text":
            room = max(0, budget - used)
            text = str(block.get("text", ""))
            # at most ``room`` characters are at least ``room`` bytes
            cut = text[:room].encode()[:room].decode("utf-8", "ignore")
            if cut:
                kept.append({**block, "text": cut})
        break
    marker = f"[truncated by {name}: the result was {total} bytes, over {budget}]"
    kept.append({"type": "text", "text": marker})
    truncated = {k: v for k, v in result.items() if k != "structuredContent"}
    truncated["content"] = kept
    return Modify(truncated, name, f"truncated from {total} bytes")


def _arguments(config: ArgumentsFilter, name: str, subject: Subject) -> Decision:
    patterns = [re.compile(p) for p in config.deny]
    arguments = subject.payload.get("arguments") or {}
    for key, value in arguments.items() if isinstance(arguments, dict) else ():
        for text in _strings(value):
            for pattern in patterns:
                if pattern.search(text):
                    return Deny(name, f"argument {key!r} matches a denied pattern")
    return Allow()


def schema_violation(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """The first way ``arguments`` break ``schema``, with its path; None when they fit.

    A schema that is itself broken (or names what cannot be resolved) judges
    nothing: None. Shared by the ``schema`` filter and by pinning's held
    calls (``router.calls``), which check against the definition a host was shown.
    """
    # jsonschema is loaded by the first check, not by every gateway's start.
    from jsonschema import exceptions as schema_exceptions
    from jsonschema import validators
    from referencing import exceptions as reference_exceptions

    try:
        validator_class = validators.validator_for(schema)
        validator = validator_class(schema)
        error = schema_exceptions.best_match(validator.iter_errors(arguments))
    except (schema_exceptions.SchemaError, reference_exceptions.Unresolvable):
        return None
    if error is None:
        return None
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"arguments{path}: {error.message}"[:300]


def _schema(name: str, subject: Subject) -> Decision:
    schema = subject.input_schema
    if not schema:
        return Allow()
    # A broken schema is the backend's own to validate: allowed.
    problem = schema_violation(schema, subject.payload.get("arguments") or {})
    return Allow() if problem is None else Deny(name, problem)


_INSTRUCTION_KINDS: Final = frozenset({MarkerKind.INSTRUCTION, MarkerKind.HIDDEN_UNICODE})


def _markers(config: MarkersFilter, name: str, subject: Subject) -> Decision:
    found: set[str] = set()

    def clean(text: str) -> str:
        markers = [m for m in model_markers(text) if m.kind in _INSTRUCTION_KINDS]
        if not markers:
            return text
        found.update(m.kind.value for m in markers)
        cleaned = text
        if any(m.kind is MarkerKind.HIDDEN_UNICODE for m in markers):
            # One new string (not a list of every character and its join):
            # the format characters the text holds, translated away.
            cleaned = text.translate({ord(c): None for c in set(text) if _is_format(c)})
        for marker in markers:
            if marker.kind is MarkerKind.INSTRUCTION:
                cleaned = cleaned.replace(marker.excerpt, "[removed: instruction to the model]")
        return cleaned

    payload = _map_strings(subject.payload, clean)
    if payload is subject.payload:
        return Allow()
    reason = "text addressing the model: " + ", ".join(sorted(found))
    if config.action == "deny":
        return Deny(name, reason)
    return Modify(payload, name, reason)


def _is_format(char: str) -> bool:
    return unicodedata.category(char) == "Cf"


def builtin_decision(config: FilterConfig, name: str, subject: Subject) -> Decision | None:
    """One built-in filter's decision; None for a filter that is not built in (``external``)."""
    if isinstance(config, SecretsFilter):
        return _secrets(config, name, subject)
    if isinstance(config, SizeFilter):
        return _size(config, name, subject)
    if isinstance(config, ArgumentsFilter):
        return _arguments(config, name, subject)
    if isinstance(config, SchemaFilter):
        return _schema(name, subject)
    if isinstance(config, MarkersFilter):
        return _markers(config, name, subject)
    return None


def run_chain(filters: Sequence[FilterConfig], subject: Subject) -> tuple[Decision, list[Decision]]:
    """Every built-in filter that applies, in order (rule 1); external ones are skipped here.

    Args:
        filters: the chain (global, then profile, then backend filters).
        subject: what they look at.

    Returns:
        The overall decision (the last Modify's payload, or the Deny, or
        Allow) and each filter's own decision, for logs and metrics.
    """
    decisions: list[Decision] = []
    current = subject
    changed: Modify | None = None
    for position, config in enumerate(filters):
        if not _applies(config, current):
            continue
        name = filter_name(config, position)
        try:
            decision = builtin_decision(config, name, current)
        except Exception as exc:
            decision = Deny(name, f"filter_error: {type(exc).__name__}")
        if decision is None:
            continue
        decisions.append(decision)
        if isinstance(decision, Deny):
            return decision, decisions
        if isinstance(decision, Modify):
            changed = decision
            current = msgspec.structs.replace(current, payload=decision.payload)
    return (changed or Allow()), decisions
