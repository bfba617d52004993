"""A tool's input schema as form fields, and the posted form back as arguments."""

from __future__ import annotations

import pytest

from gateway.console.forms import FormError, arguments, form_fields

SCHEMA = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "What to say"},
        "count": {"type": "integer", "default": 2},
        "ratio": {"type": "number"},
        "loud": {"type": "boolean", "default": False},
        "mode": {"enum": ["a", "b", 1]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "meta": {"type": "object"},
        "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    },
    "required": ["text", "count"],
}


def test_each_type_gets_its_input() -> None:
    fields = form_fields(SCHEMA)
    assert [(f.name, f.kind, f.required) for f in fields] == [
        ("text", "string", True),
        ("count", "integer", True),
        ("ratio", "number", False),
        ("loud", "boolean", False),
        ("mode", "enum", False),
        ("tags", "json", False),
        ("meta", "json", False),
        ("either", "json", False),
    ]
    named = {f.name: f for f in fields}
    assert named["text"].description == "What to say"
    assert named["count"].default == "2"
    assert named["loud"].default == "false"
    assert named["mode"].choices == ('"a"', '"b"', "1")
    assert named["text"].input_name == "arg.text"


def test_no_schema_no_fields() -> None:
    assert form_fields(None) == []
    assert form_fields({"type": "object"}) == []
    assert form_fields({"properties": []}) == []


def test_form_to_arguments() -> None:
    fields = form_fields(SCHEMA)
    form = {
        "arg.text": "hi there",
        "arg.count": " 3 ",
        "arg.ratio": "0.5",
        "arg.loud": "true",
        "arg.mode": "1",
        "arg.tags": '["x", "y"]',
        "arg.meta": "",
        "arg.either": '"s"',
        "csrf": "ignored",
    }
    assert arguments(fields, form) == {
        "text": "hi there",
        "count": 3,
        "ratio": 0.5,
        "loud": True,
        "mode": 1,
        "tags": ["x", "y"],
        "either": "s",
    }


def test_whole_numbers_stay_integers_for_number_fields() -> None:
    fields = form_fields({"properties": {"n": {"type": "number"}}})
    assert arguments(fields, {"arg.n": "4"}) == {"n": 4}
    assert arguments(fields, {"arg.n": "4.0"}) == {"n": 4.0}


@pytest.mark.parametrize(
    ("form", "field", "problem"),
    [
        ({"arg.count": "1"}, "text", "is required"),
        ({"arg.text": "x"}, "count", "is required"),
        ({"arg.text": "x", "arg.count": "1.5"}, "count", "not an integer"),
        ({"arg.text": "x", "arg.count": "1", "arg.ratio": "abc"}, "ratio", "not a number"),
        ({"arg.text": "x", "arg.count": "1", "arg.ratio": "nan"}, "ratio", "finite"),
        ({"arg.text": "x", "arg.count": "1", "arg.loud": "yes"}, "loud", "true or false"),
        ({"arg.text": "x", "arg.count": "1", "arg.mode": '"c"'}, "mode", "allowed values"),
        ({"arg.text": "x", "arg.count": "1", "arg.tags": "[1,"}, "tags", "not valid JSON"),
    ],
)
def test_bad_values_name_their_field(form: dict[str, str], field: str, problem: str) -> None:
    with pytest.raises(FormError) as caught:
        arguments(form_fields(SCHEMA), form)
    assert caught.value.field == field
    assert problem in caught.value.problem


def test_an_empty_string_is_a_value_for_a_string_field() -> None:
    fields = form_fields({"properties": {"s": {"type": "string"}}, "required": ["s"]})
    with pytest.raises(FormError):
        arguments(fields, {"arg.s": ""})
    assert arguments(fields, {"arg.s": "  "}) == {"s": "  "}
