"""Routing headers of MCP 2026-07-28: ``Mcp-Method``, ``Mcp-Name``, ``Mcp-Param-*``.

Streamable HTTP mirrors parts of the body into headers so intermediaries can
route without parsing JSON; whoever processes the body must prove the two
agree (``S/basic/transports/streamable-http.mdx`` §Request Metadata). The
rules kept here, each with its section in that file:

- Header names are case-insensitive, values case-sensitive (§Case
  Sensitivity). A routing header sent twice is a mismatch: a first-copy
  reader and a last-copy reader would route differently.
- ``Mcp-Method`` is the body's ``method`` on every request; ``Mcp-Name`` is
  ``params.name`` (tools/call, prompts/get), ``params.uri`` (resources/read)
  or ``params.taskId`` (tasks/*, ext-tasks §Routing Headers) (§Standard
  Request Headers).
- A value outside printable ASCII, with edge whitespace, or looking like the
  sentinel itself travels as ``=?base64?<base64 of UTF-8>?=``; markers are
  exact and lowercase; both ``Mcp-Name`` and ``Mcp-Param-*`` use it (§Value
  Encoding). A malformed or non-canonical sentinel is a mismatch.
- ``x-mcp-header`` on a property of a tool's ``inputSchema`` names
  ``Mcp-Param-{X}``: a non-empty RFC 9110 token, unique case-insensitively,
  on a ``string``/``integer``/``boolean`` property reached from the root by
  ``properties`` keys only; any other placement invalidates the tool, which
  is dropped from tools/list (§Schema Extension; ``S/server/tools.mdx``).
- Strings render as-is, integers in decimal, booleans ``true``/``false``;
  ``null`` or absent omits the header; integers compare numerically (§Value
  Encoding, §Server Validation). Every failure is -32020, HTTP 400.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

import msgspec

from gateway.errors import GatewayError
from gateway.protocol.stateless.error_codes import HeaderMismatch

MCP_PROTOCOL_VERSION_HEADER: Final = "mcp-protocol-version"
MCP_METHOD_HEADER: Final = "mcp-method"
MCP_NAME_HEADER: Final = "mcp-name"
MCP_PARAM_PREFIX: Final = "mcp-param-"
X_MCP_HEADER: Final = "x-mcp-header"

# Which params key Mcp-Name mirrors, per method (streamable-http.mdx
# §Standard Request Headers; ext-tasks §Routing Headers for tasks/*).
NAME_SOURCE: Final[Mapping[str, str]] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
_ROUTING: Final = frozenset({MCP_PROTOCOL_VERSION_HEADER, MCP_METHOD_HEADER, MCP_NAME_HEADER})

_PREFIX: Final = "=?base64?"
_SUFFIX: Final = "?="
_SAFE: Final = re.compile(r"[\x20-\x7e]*")
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_PRIMITIVES: Final = frozenset({"string", "integer", "boolean"})
# Keywords whose values are subschemas that are *not* reached through a
# `properties` chain: an annotation below one of them is invalid.
_SUB_ONE: Final = frozenset(
    {
        "items",
        "contains",
        "additionalProperties",
        "unevaluatedItems",
        "unevaluatedProperties",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)
_SUB_LIST: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SUB_MAP: Final = frozenset({"$defs", "definitions", "patternProperties", "dependentSchemas"})


class InvalidAnnotation(GatewayError):
    """A tool definition whose ``x-mcp-header`` use breaks the spec's rules.

    A fault of the tool, not of a request: the caller drops the tool.
    """


class DroppedTool(msgspec.Struct, frozen=True, kw_only=True):
    """A tool left out of tools/list because of its ``x-mcp-header`` use.

    Attributes:
        name: the tool's name as the backend gave it (``None`` if absent).
        reason: one human sentence, for the warning the spec asks us to log.
    """

    name: str | None
    reason: str


class Annotation(msgspec.Struct, frozen=True, kw_only=True):
    """One valid ``x-mcp-header`` annotation.

    Attributes:
        path: the ``properties`` keys from the schema root to the property.
        header: the ``X`` of ``Mcp-Param-X``, as the schema spells it.
        type: ``string``, ``integer`` or ``boolean``.
    """

    path: tuple[str, ...]
    header: str
    type: str


# --- value encoding ----------------------------------------------------------


def _is_sentinel(value: str) -> bool:
    return value.startswith(_PREFIX) and value.endswith(_SUFFIX) and len(value) >= 11


def encode_value(value: str) -> str:
    """The header form of ``value``: itself if header-safe, else the base64 sentinel.

    HTAB is a legal field-value byte (RFC 9110) but a control character, and
    the spec sends control characters encoded, so we encode it too.
    """
    if _SAFE.fullmatch(value) and value == value.strip(" ") and not _is_sentinel(value):
        return value
    return _PREFIX + base64.b64encode(value.encode("utf-8")).decode("ascii") + _SUFFIX


def decode_value(raw: str, header: str) -> str:
    """The value a received header carries, the base64 sentinel undone.

    Raises:
        HeaderMismatch: characters outside printable ASCII, or a sentinel
            whose payload is not canonical base64 of UTF-8.
    """
    if not _SAFE.fullmatch(raw):
        raise HeaderMismatch(f"{header} header contains invalid characters")
    if not _is_sentinel(raw):
        return raw
    payload = raw[len(_PREFIX) : -len(_SUFFIX)]
    try:
        data = base64.b64decode(payload, validate=True)
        text = data.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise HeaderMismatch(f"{header} header has a malformed base64 value") from None
    # b64decode accepts stray low bits in the last character; a value with
    # two spellings could route one way and execute another.
    if base64.b64encode(data).decode("ascii") != payload:
        raise HeaderMismatch(f"{header} header has a malformed base64 value")
    return text


def fold_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """Headers keyed by lowercase name.

    Pass raw ``(name, value)`` pairs to have duplicates caught: a mapping has
    already hidden them.

    Raises:
        HeaderMismatch: a routing or ``Mcp-Param-*`` header given twice.
    """
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    folded: dict[str, str] = {}
    for name, value in pairs:
        key = name.lower()
        if key in folded and (key in _ROUTING or key.startswith(MCP_PARAM_PREFIX)):
            raise HeaderMismatch(f"{name} header appears more than once")
        folded[key] = value
    return folded


# --- standard headers ---------------------------------------------------------


def standard_headers(method: str, params: Mapping[str, Any], version: str) -> dict[str, str]:
    """The ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` a request needs."""
    out = {"MCP-Protocol-Version": version, "Mcp-Method": method}
    key = NAME_SOURCE.get(method)
    if key is not None and isinstance(params.get(key), str):
        out["Mcp-Name"] = encode_value(params[key])
    return out


def check_standard_headers(
    method: str, params: Mapping[str, Any], body_version: object, headers: Mapping[str, str]
) -> None:
    """Prove ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` match the body.

    Args:
        method: the body's method.
        params: the body's params.
        body_version: ``_meta``'s protocol version, whatever its type.
        headers: the output of :func:`fold_headers`.

    Raises:
        HeaderMismatch: a header missing, malformed or different from the body.
    """
    version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
    if version is None or version != body_version:
        raise HeaderMismatch("MCP-Protocol-Version header does not match _meta protocolVersion")
    if headers.get(MCP_METHOD_HEADER) != method:
        raise HeaderMismatch("Mcp-Method header does not match the request method")
    key = NAME_SOURCE.get(method)
    if key is None or not isinstance(params.get(key), str):
        # No name in the body is the method's own -32602, not a header fault.
        return
    raw = headers.get(MCP_NAME_HEADER)
    if raw is None:
        raise HeaderMismatch(f"Mcp-Name header is required for {method}")
    if decode_value(raw, "Mcp-Name") != params.get(key):
        raise HeaderMismatch(f"Mcp-Name header does not match params.{key}")


# --- x-mcp-header annotations ------------------------------------------------


def _positions(schema: object) -> Iterator[tuple[tuple[str, ...] | None, dict[str, Any]]]:
    """Every subschema with its ``properties`` path, ``None`` once off that chain.

    Iterative, and never follows ``$ref``, so any finite JSON terminates.
    """
    stack: list[tuple[tuple[str, ...] | None, object]] = [((), schema)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield path, node
        for keyword, value in node.items():
            if keyword == "properties" and isinstance(value, dict):
                stack.extend(
                    (None if path is None else (*path, name), sub) for name, sub in value.items()
                )
            elif keyword in _SUB_ONE:
                stack.append((None, value))
            elif keyword in _SUB_LIST and isinstance(value, list):
                stack.extend((None, sub) for sub in value)
            elif keyword in _SUB_MAP and isinstance(value, dict):
                stack.extend((None, sub) for sub in value.values())


def header_annotations(input_schema: object) -> tuple[Annotation, ...]:
    """The valid ``x-mcp-header`` annotations of a tool's ``inputSchema``.

    Raises:
        InvalidAnnotation: the first problem, so a caller that forgot to
            drop the tool fails loudly instead of mirroring half of it.
    """
    found: list[Annotation] = []
    seen: dict[str, str] = {}
    for path, node in _positions(input_schema):
        if X_MCP_HEADER not in node:
            continue
        header = node[X_MCP_HEADER]
        if not path:
            raise InvalidAnnotation("x-mcp-header is not reachable through properties alone")
        where = ".".join(path)
        if not isinstance(header, str) or not _TOKEN.fullmatch(header):
            raise InvalidAnnotation(f"x-mcp-header on {where!r} is not an HTTP token")
        kind = node.get("type")
        if not isinstance(kind, str) or kind not in _PRIMITIVES:
            raise InvalidAnnotation(f"x-mcp-header on {where!r} needs type string/integer/boolean")
        if header.lower() in seen:
            first = seen[header.lower()]
            raise InvalidAnnotation(f"x-mcp-header {header!r} on {where!r} repeats {first!r}")
        seen[header.lower()] = where
        found.append(Annotation(path=path, header=header, type=kind))
    return tuple(sorted(found, key=lambda a: a.path))


def invalid_reason(input_schema: object) -> str | None:
    """Why a tool's ``x-mcp-header`` use makes it invalid, or ``None`` if it is fine."""
    try:
        header_annotations(input_schema)
    except InvalidAnnotation as exc:
        return str(exc)
    return None


def tools_to_drop(tools: Iterable[object]) -> list[DroppedTool]:
    """The tools a Streamable HTTP client must leave out of tools/list, with reasons.

    ``S/server/tools.mdx`` §x-mcp-header: one bad annotation drops that tool
    only, and the drop SHOULD be logged with the tool's name and the reason.
    """
    dropped: list[DroppedTool] = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        reason = invalid_reason(tool.get("inputSchema"))
        if reason is not None:
            name = tool.get("name")
            dropped.append(DroppedTool(name=name if isinstance(name, str) else None, reason=reason))
    return dropped


# --- Mcp-Param-* ----------------------------------------------------------------


def _value_at(arguments: object, path: tuple[str, ...]) -> object:
    node = arguments
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _render(value: object) -> str | None:
    """The header text for an argument value; ``None`` when nothing is mirrored."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        return value
    return None


def param_headers(input_schema: object, arguments: object) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers a tools/call with ``arguments`` carries.

    Keys are spelled ``Mcp-Param-{X}`` with the schema's own ``X``; values are
    already encoded. Absent, ``null`` and non-scalar values send no header.
    """
    out: dict[str, str] = {}
    for ann in header_annotations(input_schema):
        text = _render(_value_at(arguments, ann.path))
        if text is not None:
            out[f"Mcp-Param-{ann.header}"] = encode_value(text)
    return out


_DECIMAL: Final = re.compile(r"-?[0-9]+(?:\.0+)?")


def _matches(ann: Annotation, value: object, received: str) -> bool:
    if ann.type == "integer" and not isinstance(value, bool) and isinstance(value, int | float):
        # "42.0" and "42" are the same integer (§Server Validation); exact
        # integer arithmetic, so values past 2**53 still compare correctly.
        if _DECIMAL.fullmatch(received) is None:
            return False
        return float(value).is_integer() and int(received.split(".")[0]) == int(value)
    return received == _render(value)


def check_param_headers(
    input_schema: object, arguments: object, headers: Mapping[str, str]
) -> None:
    """Prove each ``Mcp-Param-*`` the tool declares agrees with the arguments.

    Headers the tool does not declare are ignored here (an intermediary
    forwards them untouched, §Server Behavior for Custom Headers).

    Args:
        input_schema: the public tool's schema; one with an invalid
            annotation is never checked (conforming clients dropped it).
        arguments: the call's ``arguments``.
        headers: the output of :func:`fold_headers`.

    Raises:
        HeaderMismatch: a header missing while the value is present, present
            while the value is absent, malformed, or different.
    """
    if invalid_reason(input_schema) is not None:
        return
    for ann in header_annotations(input_schema):
        name = f"Mcp-Param-{ann.header}"
        raw = headers.get(name.lower())
        value = _value_at(arguments, ann.path)
        expected = _render(value)
        if raw is None:
            if expected is not None:
                raise HeaderMismatch(f"{name} header is missing")
            continue
        received = decode_value(raw, name)
        if expected is None or not _matches(ann, value, received):
            raise HeaderMismatch(f"{name} header does not match the arguments")
