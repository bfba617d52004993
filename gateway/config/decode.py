"""Decoding a parsed config into :class:`GatewayConfig`, with every problem at its place.

msgspec stops at the first error, but whoever runs ``mcp-gateway check``
wants to see everything that is wrong, each at its place
(``backends[2].timeouts.request: must not exceed max_total (600.0)``). So:

1. The whole tree is converted with ``msgspec.convert(..., strict=False)``
   (so ``port: ${PORT}``, a string, still becomes an int). msgspec checks
   every type, bound and rule of the schema; a valid file costs one call.
2. When that fails, the tree is decoded part by part, each part again by
   msgspec: every section, every backend, every field. A part that fails is
   split further, until the failing part is one value; that value is then
   described from what the schema declares for it (its type, its
   ``msgspec.Meta`` bound, its choices) and what the file holds there.
   Keys are compared with the Struct's fields, so every unknown key is
   named (with a "did you mean") and every missing one too.
3. A Struct whose fields all decoded is built, which runs its
   ``__post_init__`` rules; their :class:`~gateway.config.schema.Invalid`
   names the field of each problem.

The place of a problem is where this walk stands, so no msgspec message
is ever parsed, and there is no second copy of msgspec's type checks here.
"""

from __future__ import annotations

import difflib
import types
from typing import (
    Annotated,
    Any,
    Final,
    Literal,
    TypeGuard,
    TypeVar,
    Union,
    cast,
    get_args,
    get_origin,
)

import msgspec

from gateway.config.problems import Problems, join, kind
from gateway.config.schema import Base, Invalid, NamingConfig, tag_table
from gateway.config.schema_backends import BackendBase, BackendConfig
from gateway.config.schema_gateway import BackendIdentity, GatewayConfig, backend_problems

__all__ = ["decode", "decode_backend"]


class _Failed:
    """The type of :data:`_FAILED`."""


# A part that did not decode; its problems are recorded.
_FAILED: Final = _Failed()

_S = TypeVar("_S", bound=Base)

# What msgspec raises for a value it cannot take: a ValidationError, or a
# UnicodeEncodeError for a string holding a lone surrogate (a YAML "\ud800"
# escape) where it tries to read a number or a bool from the text.
_REFUSED: Final = (msgspec.ValidationError, UnicodeEncodeError)


def decode(data: object, problems: Problems) -> GatewayConfig | None:
    """Decode a parsed (and expanded) YAML tree.

    Args:
        data: the document; None (an empty file) means all defaults.
        problems: where every problem is recorded.

    Returns:
        The configuration, or None when a problem was found.
    """
    if data is None:
        return GatewayConfig()
    if not isinstance(data, dict):
        problems.add("", f"expected a mapping at the top level, got {kind(data)}")
        return None
    try:
        return msgspec.convert(data, GatewayConfig, strict=False)
    except _REFUSED:
        pass  # find every problem, part by part
    fields, ok = _decode_fields(GatewayConfig, data, "", problems)
    if ok:
        config = _build(GatewayConfig, fields, "", problems)
        return config if isinstance(config, GatewayConfig) else None
    # Some part is broken, so GatewayConfig's rules did not run. The ones
    # across backends still can: a duplicate is worth knowing about now.
    # A broken naming section would only make every prefix look wrong.
    naming = fields.get("naming") if "naming" in data else NamingConfig()
    identities = _identities(data.get("backends"))
    for place, message in backend_problems(
        identities, naming if isinstance(naming, NamingConfig) else None
    ):
        problems.add(place, message)
    return None


def _identities(backends: object) -> list[BackendIdentity]:
    """The name and prefix of every backend entry whose name decodes."""
    if not isinstance(backends, list):
        return []
    types_ = {field.name: field.type for field in msgspec.structs.fields(BackendBase)}
    found: list[BackendIdentity] = []
    for index, entry in enumerate(backends):
        if not isinstance(entry, dict):
            continue
        try:
            name = msgspec.convert(entry.get("name"), types_["name"], strict=False)
        except _REFUSED:
            continue
        try:
            prefix = msgspec.convert(entry.get("prefix"), types_["prefix"], strict=False)
        except _REFUSED:
            prefix = ""  # itself wrong, so kept out of the prefix rules, as "" is
        found.append(BackendIdentity(index, name, prefix))
    return found


def _decode(tp: Any, value: object, place: str, problems: Problems) -> object:
    """Decode ``value`` as ``tp``; on failure record every problem in it."""
    try:
        return msgspec.convert(value, tp, strict=False)
    except _REFUSED:
        pass
    if _is_struct(tp):
        return _decode_struct(tp, value, place, problems)
    optional = _optional_struct(tp)
    if optional is not None:  # ``auth: BackendAuth | None``: the null decoded above
        return _decode_struct(optional, value, place, problems)
    mapping = _struct_or_scalar(tp)
    if mapping is not None and isinstance(value, dict):
        # ``BackendsFrom | HostFilePath``: a mapping is the Struct, field by field.
        return _decode_struct(mapping, value, place, problems)
    tagged = _tagged_union(tp)
    if tagged is not None:
        return _decode_tagged(tagged, value, place, problems)
    inner = _optional(tp)
    if inner is not None and value is not None:
        # ``list[Rule] | None``: a problem inside the list is reported at
        # its own place, not as "expected a list or null".
        return _decode(inner, value, place, problems)
    origin = get_origin(tp)
    if origin is list:
        return _decode_list(get_args(tp)[0], value, place, problems)
    if origin is dict:
        return _decode_dict(get_args(tp), value, place, problems)
    problems.add(place, _describe(tp, value))
    return _FAILED


def _decode_struct(
    cls: type[Base], data: object, place: str, problems: Problems, *, tag: str = ""
) -> object:
    fields, ok = _decode_fields(cls, data, place, problems, tag=tag)
    return _build(cls, fields, place, problems) if ok else _FAILED


def _decode_fields(
    cls: type[Base], data: object, place: str, problems: Problems, *, tag: str = ""
) -> tuple[dict[str, object], bool]:
    """Decode each field of ``cls`` present in ``data``, in file order.

    Returns:
        The fields that decoded, and whether everything did (no unknown,
        missing or invalid field). The key ``tag``, when given, has been read
        by the caller already.
    """
    if not isinstance(data, dict):
        problems.add(place, f"expected a mapping, got {kind(data)}")
        return {}, False
    fields = {field.encode_name: field for field in msgspec.structs.fields(cls)}
    decoded: dict[str, object] = {}
    ok = True
    for key, raw in data.items():
        if tag and key == tag:
            continue
        field = fields.get(key) if isinstance(key, str) else None
        if field is None:
            problems.add(join(place, key), _unknown_field(key, [*fields, *([tag] if tag else [])]))
            ok = False
            continue
        value = _decode(
            field.type,
            _empty_section(field.type) if raw is None else raw,
            join(place, key),
            problems,
        )
        if value is _FAILED:
            ok = False
        else:
            decoded[field.name] = value
    for key, field in fields.items():
        if field.required and key not in data:
            problems.add(join(place, key), "required field missing")
            ok = False
    return decoded, ok


def _build(cls: type[_S], fields: dict[str, object], place: str, problems: Problems) -> object:
    """Construct ``cls`` from decoded fields, recording what its rules refuse."""
    try:
        return cls(**fields)
    except Invalid as exc:
        for where, message in exc.problems:
            problems.add(join(place, where), message)
        return _FAILED


def _empty_section(tp: Any) -> object:
    """What a key left empty stands for (``server:`` with every line commented out).

    YAML reads it as null; for a section (a Struct, or a list of them)
    that means an empty one. Any other field keeps the null, and a type
    that does not accept it says so.
    """
    if _is_struct(tp):
        return {}
    if get_origin(tp) is list:
        (item,) = get_args(tp)
        if _is_struct(item) or _tagged_union(item) or _struct_or_scalar(item):
            return []
    return None


def _optional(tp: Any) -> Any:
    """``X`` of ``X | None`` when X is a list, dict or Struct; None for anything else."""
    if not (isinstance(tp, types.UnionType) or get_origin(tp) is Union):
        return None
    members = [m for m in get_args(tp) if m is not type(None)]
    if len(members) != 1 or len(get_args(tp)) != 2:
        return None
    inner = members[0]
    return inner if _is_struct(inner) or get_origin(inner) in (list, dict) else None


def _is_struct(tp: Any) -> TypeGuard[type[Base]]:
    return isinstance(tp, type) and issubclass(tp, Base)


def _optional_struct(tp: Any) -> type[Base] | None:
    """``S`` of a ``S | None`` field, so its problems are reported field by field."""
    args = [arg for arg in get_args(tp) if arg is not type(None)]
    if len(args) == 1 and len(get_args(tp)) == 2 and _is_struct(args[0]):
        return args[0]
    return None


def _struct_or_scalar(tp: Any) -> type[Base] | None:
    """``S`` of a union of one Struct and scalars (a shorthand), so a mapping is read as ``S``."""
    if not (isinstance(tp, types.UnionType) or get_origin(tp) is Union):
        return None
    structs = [m for m in get_args(tp) if _is_struct(m)]
    return structs[0] if len(structs) == 1 else None


def _tagged_union(tp: Any) -> tuple[str, dict[str, type[Base]]] | None:
    """The tag field and tag table of a union of tagged Structs; None for anything else."""
    if not (isinstance(tp, types.UnionType) or get_origin(tp) is Union):
        return None
    members = get_args(tp)
    if not all(_is_struct(m) for m in members):
        return None
    tag_field = members[0].__struct_config__.tag_field
    return (tag_field, tag_table(tp)) if isinstance(tag_field, str) else None


def _decode_tagged(
    tagged: tuple[str, dict[str, type[Base]]], data: object, place: str, problems: Problems
) -> object:
    tag_field, classes = tagged
    if not isinstance(data, dict):
        problems.add(place, f"expected a mapping, got {kind(data)}")
        return _FAILED
    choices = ", ".join(classes)
    if tag_field not in data:
        problems.add(join(place, tag_field), f"required field missing (one of: {choices})")
        return _FAILED
    tag = data[tag_field]
    cls = classes.get(tag) if isinstance(tag, str) else None
    if cls is None:
        problems.add(join(place, tag_field), f"unknown {tag_field} {tag!r} (one of: {choices})")
        return _FAILED
    return _decode_struct(cls, data, place, problems, tag=tag_field)


def _decode_list(item_type: Any, value: object, place: str, problems: Problems) -> object:
    if not isinstance(value, list):
        problems.add(place, f"expected a list, got {kind(value)}")
        return _FAILED
    items = [_decode(item_type, item, f"{place}[{i}]", problems) for i, item in enumerate(value)]
    return _FAILED if any(item is _FAILED for item in items) else items


def _decode_dict(
    key_value: tuple[Any, ...], value: object, place: str, problems: Problems
) -> object:
    # Every dict in the schema has str keys (env, headers).
    if not isinstance(value, dict):
        problems.add(place, f"expected a mapping, got {kind(value)}")
        return _FAILED
    _, value_type = key_value
    result: dict[str, object] = {}
    ok = True
    for key, item in value.items():
        if not isinstance(key, str):
            problems.add(join(place, key), f"keys must be strings, got {kind(key)}")
            ok = False
            continue
        decoded = _decode(value_type, item, join(place, key), problems)
        ok = ok and decoded is not _FAILED
        result[key] = decoded
    return result if ok else _FAILED


def _unknown_field(key: object, known: list[str]) -> str:
    if key is True and "at" in known:
        # YAML 1.1 reads a bare `on:` as the boolean true (a filter's points are `at:`).
        return "unknown field (YAML reads `on:` as true), did you mean `at`?"
    close = difflib.get_close_matches(str(key), known, n=1)
    return f"unknown field, did you mean `{close[0]}`?" if close else "unknown field"


# --------------------------------------------------------------------------
# Describing one value that did not decode


def _describe(tp: Any, value: object) -> str:
    """Why ``value`` is not a ``tp``, from what the schema declares for it.

    ``tp`` is a scalar type, a ``Literal``, an ``Annotated`` bound or a union
    of those (``Prefix | None``); msgspec has already refused the value.
    """
    members = get_args(tp) if isinstance(tp, types.UnionType) or get_origin(tp) is Union else (tp,)
    choices = [str(c) for m in members if get_origin(m) is Literal for c in get_args(m)]
    if choices:
        shown = repr(value) if isinstance(value, str | int | float | bool) else kind(value)
        return f"must be one of: {', '.join(choices)} (got {shown})"
    for member in members:
        if get_origin(member) is not Annotated:
            continue
        base, *metadata = get_args(member)
        try:
            converted = msgspec.convert(value, base, strict=False)
        except _REFUSED:
            continue  # not even the right type
        for meta in metadata:
            if isinstance(meta, msgspec.Meta) and not _satisfies(converted, base, meta):
                return _bound_problem(meta, converted)
    expected = " or ".join(_type_words(m) for m in members)
    got = kind(value) + (f" {value!r}" if isinstance(value, str | int | float) else "")
    return f"expected {expected}, got {got}"


def _satisfies(value: object, base: Any, meta: msgspec.Meta) -> bool:
    try:
        msgspec.convert(value, Annotated[base, meta])
    except _REFUSED:
        return False
    return True


def _bound_problem(meta: msgspec.Meta, value: object) -> str:
    """The problem with a value outside a bound: the bound's own words, or words for it."""
    extra = meta.extra or {}
    if "problem" in extra:
        return str(extra["problem"]).format(value=value)
    if meta.min_length == 1:
        return "must not be empty"
    if meta.ge is not None and meta.le is not None:
        return f"must be between {meta.ge} and {meta.le} (got {value})"
    if meta.gt == 0:
        return f"must be positive (got {value})"
    if meta.ge is not None:
        return f"must be {meta.ge} or more (got {value})"
    if meta.gt is not None:
        return f"must be more than {meta.gt} (got {value})"
    if meta.le is not None:
        return f"must be at most {meta.le} (got {value})"
    if meta.lt is not None:
        return f"must be less than {meta.lt} (got {value})"
    if meta.min_length is not None:
        return f"must have a length of at least {meta.min_length}"
    if meta.max_length is not None:
        return f"must have a length of at most {meta.max_length}"
    return f"must match {meta.pattern!r} (got {value!r})"


def _type_words(tp: Any) -> str:
    """A type as a config reader says it: ``str``, ``null``, ``a list``, ``a mapping``."""
    if get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    origin = get_origin(tp) or tp
    if tp is type(None):
        return "null"
    if origin is list:
        return "a list"
    if origin is dict or (isinstance(origin, type) and issubclass(origin, msgspec.Struct)):
        return "a mapping"
    return origin.__name__ if isinstance(origin, type) else str(tp)


def decode_backend(data: object, place: str, problems: Problems) -> BackendConfig | None:
    """Decode one backend entry, recording every problem in it as :func:`decode` would.

    Used for the servers of host files (``backends_from``), so that they are
    validated exactly as a native ``backends:`` item.

    Args:
        data: the entry (expanded).
        place: its place, prefixed to every problem's.
        problems: where every problem is recorded.

    Returns:
        The backend, or None when a problem was found.
    """
    backend = _decode(BackendConfig, data, place, problems)
    return None if backend is _FAILED else cast("BackendConfig", backend)
