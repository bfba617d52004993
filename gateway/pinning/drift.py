"""What changed between a pinned definition and a backend's new one, classified (sans-IO).

Rules:

1. **Every class that applies.** A change carries each class its edits
   fall into (:class:`Drift`); a change with a different digest always
   carries at least one class (anything not analysed below is
   ``description``), and two definitions with one digest carry none.
2. **Text.** Each text a model reads (title, description, an argument's or
   a schema property's description, defaults and examples) is compared on
   its own: equal once whitespace and punctuation are set aside is
   ``cosmetic``, otherwise ``description``; a URL or address the old text
   did not have adds ``url_added``; a marker of text addressing the model
   (:mod:`gateway.pinning.markers`) the old text did not have adds
   ``addresses_model``.
3. **Input schema, by what it admits.** A change that lets the model send
   something it could not before is ``schema_widened``: a new property, a
   dropped ``required`` entry, ``additionalProperties`` opened, an
   ``enum`` grown or dropped, a ``pattern`` or ``format`` changed or
   dropped, a maximum raised or dropped, a minimum lowered or dropped, a
   type added, an ``anyOf``/``oneOf`` branch added, and any keyword these
   rules do not analyse (a changed ``$ref``, ``allOf``, ``not``, ...):
   unknown counts as widened. The reverse is ``schema_narrowed``.
4. **Annotations, by the spec's defaults.** ``readOnlyHint`` true → not,
   ``destructiveHint`` becoming true (or added as true), ``idempotentHint``
   true → not, ``openWorldHint`` false → not: ``annotations_weakened``.
5. **Output schema**: any change of ``outputSchema`` other than its texts
   is ``output_schema``.
6. **Prompt arguments** are a schema: a new argument or one no longer
   required widens, the reverse narrows. A resource template's
   ``uriTemplate`` changing widens (it changes what the model reads).
7. **Skills** (SEP-2640): each frontmatter field is a text (rule 2, at
   ``frontmatter.description``); a file added, removed, or listed with
   another digest or size is ``files_changed`` (the bytes a model reads
   changed, and the gateway does not read them to say how).
8. The findings are data a person reads: each names its class, its place
   (``inputSchema.properties.command``) and what happened.
"""

from __future__ import annotations

import enum
import re
import unicodedata
from typing import Any, Final

import msgspec

from gateway.pinning.definitions import PinKind, digest
from gateway.pinning.markers import addresses, model_markers

__all__ = ["Drift", "Finding", "classes", "classify"]


class Drift(enum.Enum):
    """The classes of change (rule 1); the values are the names people and metrics see."""

    COSMETIC = "cosmetic"
    DESCRIPTION = "description"
    URL_ADDED = "url_added"
    ADDRESSES_MODEL = "addresses_model"
    SCHEMA_WIDENED = "schema_widened"
    SCHEMA_NARROWED = "schema_narrowed"
    ANNOTATIONS_WEAKENED = "annotations_weakened"
    OUTPUT_SCHEMA = "output_schema"
    FILES_CHANGED = "files_changed"
    ADDED = "added"
    REMOVED = "removed"


class Finding(msgspec.Struct, frozen=True):
    """One classified edit (rule 7)."""

    drift: Drift
    place: str
    detail: str


#: Schema keywords whose values are texts for people and models (rule 2).
_TEXT_KEYWORDS: Final = frozenset({"title", "description", "default", "examples", "$comment"})
_UPPER_BOUNDS: Final = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
_LOWER_BOUNDS: Final = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_ANALYSED: Final = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "enum",
        "const",
        "pattern",
        "format",
        "items",
        "anyOf",
        "oneOf",
        *_UPPER_BOUNDS,
        *_LOWER_BOUNDS,
        *_TEXT_KEYWORDS,
    }
)
_PUNCTUATION_OR_SPACE: Final = re.compile(r"[\s\W_]+", re.UNICODE)


def _normal(text: str) -> str:
    return _PUNCTUATION_OR_SPACE.sub("", unicodedata.normalize("NFKC", text))


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else msgspec.json.encode(value).decode()


class _Collector:
    def __init__(self) -> None:
        self.findings: list[Finding] = []

    def add(self, drift: Drift, place: str, detail: str) -> None:
        self.findings.append(Finding(drift, place, detail))

    def text(self, place: str, old: Any, new: Any) -> None:
        """Rule 2 for one text place; ``old`` None means the text is new."""
        if old == new or (new is None and old is None):
            return
        if new is None:
            self.add(Drift.DESCRIPTION, place, "removed")
            return
        old_text, new_text = ("" if old is None else _as_text(old)), _as_text(new)
        added = sorted(addresses(new_text) - addresses(old_text))
        before = {(m.kind, m.excerpt) for m in model_markers(old_text)}
        markers = [m for m in model_markers(new_text) if (m.kind, m.excerpt) not in before]
        # Hidden characters are punctuation to a normaliser: cosmetic only
        # when nothing a person must see came with the edit.
        if old is not None and not added and not markers and _normal(old_text) == _normal(new_text):
            self.add(Drift.COSMETIC, place, "whitespace or punctuation")
            return
        self.add(Drift.DESCRIPTION, place, "added" if old is None else "changed")
        if added:
            self.add(Drift.URL_ADDED, place, ", ".join(added)[:200])
        for marker in markers:
            self.add(Drift.ADDRESSES_MODEL, place, f"{marker.kind.value}: {marker.excerpt}")

    def texts(self, place: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        for key in sorted((old.keys() | new.keys()) & _TEXT_KEYWORDS):
            self.text(f"{place}.{key}" if place else key, old.get(key), new.get(key))

    def schema(self, place: str, old: Any, new: Any, widened: Drift, narrowed: Drift) -> None:
        """Rule 3, recursively; ``widened``/``narrowed`` are the classes to use."""
        if old == new:
            return
        if not isinstance(old, dict) or not isinstance(new, dict):
            # true/false schemas, or a schema replaced by another shape.
            if new is True or new == {}:
                self.add(widened, place, "now admits anything")
            elif new is False:
                self.add(narrowed, place, "now admits nothing")
            else:
                self.add(widened, place, "replaced")
            return
        self.texts(place, old, new)
        self._types(place, old.get("type"), new.get("type"), widened, narrowed)
        self._properties(place, old, new, widened, narrowed)
        self._required(place, old.get("required", []), new.get("required", []), widened, narrowed)
        self._additional(place, old, new, widened, narrowed)
        self._choices(place, "enum", old.get("enum"), new.get("enum"), widened, narrowed)
        if old.get("const") != new.get("const"):
            kind = widened if "const" in old else narrowed
            self.add(kind, f"{place}.const", "changed" if "const" in new else "removed")
        for key in ("pattern", "format"):
            if old.get(key) != new.get(key):
                kind = narrowed if key not in old else widened
                self.add(kind, f"{place}.{key}", "added" if key not in old else "changed")
        self._bounds(place, old, new, widened, narrowed)
        if "items" in old or "items" in new:
            self.schema(
                f"{place}.items", old.get("items", {}), new.get("items", {}), widened, narrowed
            )
        for key in ("anyOf", "oneOf"):
            self._choices(place, key, old.get(key), new.get(key), widened, narrowed)
        for key in sorted((old.keys() | new.keys()) - _ANALYSED):
            if old.get(key) != new.get(key):
                self.add(widened, f"{place}.{key}", "changed (not analysed: counted as widened)")

    def _types(self, place: str, old: Any, new: Any, widened: Drift, narrowed: Drift) -> None:
        if old == new:
            return
        if new is None:
            self.add(widened, f"{place}.type", "removed")
            return
        if old is None:
            self.add(narrowed, f"{place}.type", "added")
            return
        old_set = set(old) if isinstance(old, list) else {old}
        new_set = set(new) if isinstance(new, list) else {new}
        # An integer is a number: integer -> number widens, number -> integer narrows.
        if new_set - old_set and not (new_set - old_set <= {"integer"} and "number" in old_set):
            self.add(widened, f"{place}.type", f"now also {sorted(new_set - old_set)}")
        if old_set - new_set and not (old_set - new_set <= {"integer"} and "number" in new_set):
            self.add(narrowed, f"{place}.type", f"no longer {sorted(old_set - new_set)}")

    def _properties(
        self, place: str, old: dict[str, Any], new: dict[str, Any], widened: Drift, narrowed: Drift
    ) -> None:
        before, after = old.get("properties", {}), new.get("properties", {})
        if not isinstance(before, dict) or not isinstance(after, dict):
            if before != after:
                self.add(widened, f"{place}.properties", "changed (not analysed)")
            return
        required = set(new.get("required", []))
        for name in sorted(before.keys() | after.keys()):
            where = f"{place}.properties.{name}"
            if name not in before:
                detail = "new required parameter" if name in required else "new parameter"
                self.add(widened, where, detail)
                if isinstance(after[name], dict):
                    self.texts(where, {}, after[name])
            elif name not in after:
                self.add(narrowed, where, "parameter removed")
            else:
                self.schema(where, before[name], after[name], widened, narrowed)

    def _required(self, place: str, old: Any, new: Any, widened: Drift, narrowed: Drift) -> None:
        before = set(old) if isinstance(old, list) else set()
        after = set(new) if isinstance(new, list) else set()
        for name in sorted(before - after):
            self.add(widened, f"{place}.required", f"{name} no longer required")
        for name in sorted(after - before):
            self.add(narrowed, f"{place}.required", f"{name} now required")

    def _additional(
        self, place: str, old: dict[str, Any], new: dict[str, Any], widened: Drift, narrowed: Drift
    ) -> None:
        key = "additionalProperties"
        if old.get(key) == new.get(key):
            return
        if old.get(key) is False:
            self.add(widened, f"{place}.{key}", "opened: free-form parameters")
        elif new.get(key) is False:
            self.add(narrowed, f"{place}.{key}", "closed")
        else:
            self.schema(f"{place}.{key}", old.get(key, True), new.get(key, True), widened, narrowed)

    def _choices(
        self, place: str, key: str, old: Any, new: Any, widened: Drift, narrowed: Drift
    ) -> None:
        if old == new:
            return
        where = f"{place}.{key}"
        if new is None:
            self.add(widened, where, "removed")
            return
        if old is None:
            self.add(narrowed, where, "added")
            return
        before = {digest({"v": v}) for v in old} if isinstance(old, list) else set()
        after = {digest({"v": v}) for v in new} if isinstance(new, list) else set()
        if after - before:
            self.add(widened, where, f"{len(after - before)} choice(s) added")
        if before - after:
            self.add(narrowed, where, f"{len(before - after)} choice(s) removed")
        if before == after:
            self.add(Drift.COSMETIC, where, "reordered")

    def _bounds(
        self, place: str, old: dict[str, Any], new: dict[str, Any], widened: Drift, narrowed: Drift
    ) -> None:
        for key in (*_UPPER_BOUNDS, *_LOWER_BOUNDS):
            a, b = old.get(key), new.get(key)
            if a == b:
                continue
            upper = key in _UPPER_BOUNDS
            if b is None:
                self.add(widened, f"{place}.{key}", "removed")
            elif a is None:
                self.add(narrowed, f"{place}.{key}", "added")
            elif not isinstance(a, int | float) or not isinstance(b, int | float):
                self.add(widened, f"{place}.{key}", "changed")
            elif (b > a) == upper:
                self.add(widened, f"{place}.{key}", f"{a} -> {b}")
            else:
                self.add(narrowed, f"{place}.{key}", f"{a} -> {b}")


#: The annotations' defaults, from the spec's ToolAnnotations.
_HINT_DEFAULTS: Final = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}
#: The value each hint has when it promises the safer behaviour.
_SAFE_VALUE: Final = {
    "readOnlyHint": True,
    "destructiveHint": False,
    "idempotentHint": True,
    "openWorldHint": False,
}


def _annotations(out: _Collector, old: Any, new: Any) -> None:
    before = old if isinstance(old, dict) else {}
    after = new if isinstance(new, dict) else {}
    if before == after:
        return
    out.texts("annotations", before, after)
    for hint, safe in _SAFE_VALUE.items():
        was = before.get(hint, _HINT_DEFAULTS[hint])
        now = after.get(hint, _HINT_DEFAULTS[hint])
        if was == safe and now != safe:
            out.add(Drift.ANNOTATIONS_WEAKENED, f"annotations.{hint}", f"{was} -> {now}")
        elif hint == "destructiveHint" and after.get(hint) is True and before.get(hint) is not True:
            out.add(Drift.ANNOTATIONS_WEAKENED, f"annotations.{hint}", "now declared true")
    for key in sorted((before.keys() | after.keys()) - _SAFE_VALUE.keys() - {"title"}):
        if before.get(key) != after.get(key):
            out.add(Drift.DESCRIPTION, f"annotations.{key}", "changed")


def _prompt_arguments(out: _Collector, old: Any, new: Any) -> None:
    before = {a.get("name"): a for a in old or [] if isinstance(a, dict)}
    after = {a.get("name"): a for a in new or [] if isinstance(a, dict)}
    for name in sorted(before.keys() | after.keys(), key=str):
        where = f"arguments.{name}"
        if name not in before:
            detail = "new required argument" if after[name].get("required") else "new argument"
            out.add(Drift.SCHEMA_WIDENED, where, detail)
            out.texts(where, {}, after[name])
        elif name not in after:
            out.add(Drift.SCHEMA_NARROWED, where, "argument removed")
        else:
            a, b = before[name], after[name]
            out.texts(where, a, b)
            if bool(a.get("required")) and not b.get("required"):
                out.add(Drift.SCHEMA_WIDENED, where, "no longer required")
            elif b.get("required") and not a.get("required"):
                out.add(Drift.SCHEMA_NARROWED, where, "now required")
    if before.keys() == after.keys() and list(before) != list(after):
        out.add(Drift.COSMETIC, "arguments", "reordered")


def _skill(out: _Collector, old: dict[str, Any], new: dict[str, Any]) -> None:
    """Rule 7: frontmatter fields as texts, the listed files by digest and size."""
    before = old.get("frontmatter")
    after = new.get("frontmatter")
    before = before if isinstance(before, dict) else {}
    after = after if isinstance(after, dict) else {}
    for key in sorted(before.keys() | after.keys()):
        out.text(f"frontmatter.{key}", before.get(key), after.get(key))
    if old.get("uri") != new.get("uri"):
        out.add(Drift.DESCRIPTION, "uri", "changed")
    files: dict[str, list[dict[str, Any] | None]] = {}
    for side, entry in enumerate((old, new)):
        listed = entry.get("resources")
        for item in listed if isinstance(listed, list) else []:
            if isinstance(item, dict):
                files.setdefault(str(item.get("uri")), [None, None])[side] = item
    for uri, (was, now) in sorted(files.items()):
        where = f"resources.{uri}"
        if was is None:
            out.add(Drift.FILES_CHANGED, where, "file added")
        elif now is None:
            out.add(Drift.FILES_CHANGED, where, "file removed")
        elif (was.get("digest"), was.get("size")) != (now.get("digest"), now.get("size")):
            out.add(Drift.FILES_CHANGED, where, "digest or size changed")
        elif was != now:
            out.add(Drift.DESCRIPTION, where, "changed")


def classify(
    kind: PinKind, old: dict[str, Any] | None, new: dict[str, Any] | None
) -> list[Finding]:
    """Every finding between a pinned definition and a new one (module rules).

    Args:
        kind: what the definitions are.
        old: the pinned definition (:func:`~gateway.pinning.definitions.pinned_definition`);
            None when the item is new.
        new: the backend's definition now; None when the item was removed.

    Returns:
        The findings; empty exactly when both have one digest.
    """
    if old is None and new is None:
        return []
    if old is None:
        return [Finding(Drift.ADDED, "", "new item")]
    if new is None:
        return [Finding(Drift.REMOVED, "", "item removed")]
    if digest(old) == digest(new):
        return []
    out = _Collector()
    for key in ("title", "description", "mimeType"):
        out.text(key, old.get(key), new.get(key))
    if kind == "tool":
        out.schema(
            "inputSchema",
            old.get("inputSchema", {}),
            new.get("inputSchema", {}),
            Drift.SCHEMA_WIDENED,
            Drift.SCHEMA_NARROWED,
        )
        _annotations(out, old.get("annotations"), new.get("annotations"))
        if old.get("outputSchema") != new.get("outputSchema"):
            texts_only = _Collector()
            texts_only.schema(
                "outputSchema",
                old.get("outputSchema", {}),
                new.get("outputSchema", {}),
                Drift.OUTPUT_SCHEMA,
                Drift.OUTPUT_SCHEMA,
            )
            out.findings += texts_only.findings
    elif kind == "prompt":
        _prompt_arguments(out, old.get("arguments"), new.get("arguments"))
    elif kind == "resource_template" and old.get("uriTemplate") != new.get("uriTemplate"):
        out.add(Drift.SCHEMA_WIDENED, "uriTemplate", "changed")
    elif kind == "skill":
        _skill(out, old, new)
    analysed = {"name", "title", "description", "mimeType", "inputSchema", "annotations",
                "outputSchema", "arguments", "uriTemplate", "uri", "frontmatter",
                "resources"}  # fmt: skip
    for key in sorted((old.keys() | new.keys()) - analysed):
        if old.get(key) != new.get(key):
            out.add(Drift.DESCRIPTION, key, "changed")
    if not out.findings:
        # Rule 1: a different digest always carries a class (a change these
        # rules read as neutral, such as a key reordered inside a list).
        out.add(Drift.COSMETIC, "", "no semantic change found")
    return out.findings


def classes(findings: list[Finding]) -> frozenset[Drift]:
    """The set of classes a change carries.

    Args:
        findings: what :func:`classify` returned.

    Returns:
        Each class once.
    """
    return frozenset(f.drift for f in findings)
