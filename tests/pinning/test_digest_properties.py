"""Properties of the canonical digest and the classifier over generated definitions (Hypothesis)."""

from __future__ import annotations

import copy
import random
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gateway.pinning.definitions import digest, pinned_definition
from gateway.pinning.drift import classify

scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=20)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
tools = st.fixed_dictionaries(
    {"name": st.text(min_size=1, max_size=10)},
    optional={
        "title": st.text(max_size=30),
        "description": st.text(max_size=60),
        "inputSchema": st.dictionaries(st.text(max_size=12), json_values, max_size=5),
        "outputSchema": st.dictionaries(st.text(max_size=12), json_values, max_size=3),
        "annotations": st.dictionaries(
            st.sampled_from(
                ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint", "title"]
            ),
            st.booleans(),
        ),
    },
)


def shuffled(value: Any, rng: random.Random) -> Any:
    """The same JSON value with every object's keys in another order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


@given(tools, st.randoms())
def test_the_digest_is_stable_under_key_order(tool: dict[str, Any], rng: random.Random) -> None:
    """Rule 2 of definitions: key order is not drift at all."""
    definition = pinned_definition("tool", tool)
    assert digest(shuffled(definition, rng)) == digest(definition)
    assert classify("tool", definition, shuffled(definition, rng)) == []


def leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a scalar in ``value``."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in leaves(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in leaves(v, (*path, i))]
    return [path]


@given(tools, st.data())
def test_any_semantic_edit_changes_the_digest_and_is_classified(
    tool: dict[str, Any], data: st.DataObject
) -> None:
    """Rule 1 of drift: a different digest always carries a class; an edit of any value
    (a leaf replaced by a different JSON value) is a different digest."""
    old = pinned_definition("tool", tool)
    paths = leaves(old)
    path = data.draw(st.sampled_from(paths))
    new_value = data.draw(json_values)
    node: Any = old
    for key in path[:-1]:
        node = node[key]
    if (
        not path
        or node[path[-1]] == new_value
        or (type(node[path[-1]]) is not type(new_value) and node[path[-1]] == new_value)
    ):
        return

    new = copy.deepcopy(old)
    target: Any = new
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new_value
    assert digest(new) != digest(old)
    assert classify("tool", old, new) != []


@given(tools, tools)
def test_the_classifier_never_raises_and_is_empty_exactly_on_equal_digests(
    a: dict[str, Any], b: dict[str, Any]
) -> None:
    """Rule 1 of drift, over arbitrary (even nonsensical) schemas."""
    old, new = pinned_definition("tool", a), pinned_definition("tool", b)
    findings = classify("tool", old, new)
    assert (findings == []) == (digest(old) == digest(new))
