"""A tool's ``inputSchema`` as HTML form fields, and the posted form back as arguments (sans-IO).

Rules:

1. Each top-level property is one field: ``string``, ``number``,
   ``integer`` and ``boolean`` get inputs of their own; a property with an
   ``enum`` is a choice among its values; anything else (``object``,
   ``array``, a union, no type) is a JSON textarea.
2. A field left empty is left out of the arguments, unless the schema
   requires it: then it is a :class:`FormError` naming the field, as is a
   value that does not parse as its type. The backend checks the rest of
   the schema; the form only shapes the values.
3. Enum choices travel as their JSON text, so ``1`` and ``"1"`` stay apart.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Final, Literal

from gateway.errors import GatewayError

FieldKind = Literal["string", "number", "integer", "boolean", "enum", "json"]

_SCALARS: Final = ("string", "number", "integer", "boolean")
#: Form field names are prefixed so no property can collide with the CSRF field.
PREFIX: Final = "arg."


class FormError(GatewayError, ValueError):
    """A posted value that cannot become its argument.

    Args:
        field: the property name.
        problem: what is wrong, for the operator.
    """

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


@dataclass(frozen=True, slots=True)
class FormField:
    """One input of the call form.

    Attributes:
        name: the property name (the argument's key).
        kind: which input (rule 1).
        required: whether the schema requires it.
        description: the property's description ("" when none).
        choices: for ``enum``, each value's JSON text (rule 3).
        default: the schema's default as the input's initial text ("" when none).
    """

    name: str
    kind: FieldKind
    required: bool
    description: str = ""
    choices: tuple[str, ...] = ()
    default: str = ""

    @property
    def input_name(self) -> str:
        """The HTML ``name`` of the input."""
        return PREFIX + self.name


def form_fields(schema: object) -> list[FormField]:
    """The fields of a tool's ``inputSchema``, in the schema's property order."""
    if not isinstance(schema, dict):
        return []
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return []
    required = schema.get("required")
    wanted = set(required) if isinstance(required, list) else set()
    return [_field(str(name), spec, name in wanted) for name, spec in properties.items()]


def _field(name: str, spec: object, required: bool) -> FormField:
    spec = spec if isinstance(spec, dict) else {}
    description = spec.get("description")
    text = description if isinstance(description, str) else ""
    enum = spec.get("enum")
    default = spec.get("default")
    if isinstance(enum, list) and enum:
        choices = tuple(json.dumps(value) for value in enum)
        initial = json.dumps(default) if "default" in spec else ""
        return FormField(name, "enum", required, text, choices, initial)
    kind = spec.get("type")
    if kind in _SCALARS:
        initial = "" if default is None or isinstance(default, dict | list) else str(default)
        if kind == "boolean" and isinstance(default, bool):
            initial = "true" if default else "false"
        return FormField(name, kind, required, text, default=initial)
    initial = json.dumps(default, indent=2) if "default" in spec else ""
    return FormField(name, "json", required, text, default=initial)


def arguments(fields: list[FormField], form: dict[str, str]) -> dict[str, Any]:
    """The ``arguments`` of a ``tools/call`` from the posted form.

    Raises:
        FormError: a required field left empty, or a value not of its type.
    """
    result: dict[str, Any] = {}
    for field in fields:
        raw = form.get(field.input_name, "")
        if raw.strip() == "" and field.kind != "string":
            raw = ""
        if raw == "":
            if field.required:
                raise FormError(field.name, "is required")
            continue
        result[field.name] = _value(field, raw)
    return result


def _value(field: FormField, raw: str) -> Any:
    if field.kind == "string":
        return raw
    if field.kind == "integer":
        try:
            return int(raw.strip())
        except ValueError:
            raise FormError(field.name, f"{raw[:40]!r} is not an integer") from None
    if field.kind == "number":
        try:
            number = float(raw.strip())
        except ValueError:
            raise FormError(field.name, f"{raw[:40]!r} is not a number") from None
        if not math.isfinite(number):
            raise FormError(field.name, "must be a finite number")
        return int(number) if number.is_integer() and "." not in raw and "e" not in raw else number
    if field.kind == "boolean":
        if raw not in ("true", "false"):
            raise FormError(field.name, "must be true or false")
        return raw == "true"
    if field.kind == "enum" and raw not in field.choices:
        raise FormError(field.name, "is not one of the allowed values")
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise FormError(field.name, f"is not valid JSON ({exc.msg} at {exc.pos})") from None
