"""The ``pinning:`` config block and ``backends[].pinning`` (gateway.config.schema_pinning)."""

from __future__ import annotations

import pytest

from gateway.config.loading import parse
from gateway.errors import ConfigError

BACKEND = "backends:\n  - {name: a, transport: stdio, command: x%s}\n"


def test_pinning_is_off_by_default_so_nothing_is_written_unasked() -> None:
    """gateway choice: pinning writes to the store, which an operator opts into."""
    config = parse(BACKEND % "")
    assert config.pins.mode_name == "off"
    assert config.backends[0].pin_mode(config.pins) == ("off", False)


def test_yaml_off_and_false_both_mean_off() -> None:
    """spec (issue 27): ``mode: off`` (a YAML boolean) and ``false`` both mean off."""
    assert parse("pinning: {mode: off}\n").pins.mode_name == "off"
    assert parse("pinning: false\n").pins.mode_name == "off"
    config = parse("pinning: {mode: hold}\n" + BACKEND % ", pinning: false")
    assert config.backends[0].pin_mode(config.pins) == ("off", False)


def test_a_backend_overrides_the_top_level_mode_and_hold_new() -> None:
    """gateway choice: ``backends[].pinning`` is a mode name or ``{mode, hold_new}``."""
    config = parse("pinning: {mode: record, hold_new: true}\n" + BACKEND % ", pinning: block")
    assert config.backends[0].pin_mode(config.pins) == ("block", True)
    long = parse(
        "pinning: {mode: record, hold_new: true}\n"
        + BACKEND % ", pinning: {mode: hold, hold_new: false}"
    )
    assert long.backends[0].pin_mode(long.pins) == ("hold", False)


@pytest.mark.parametrize(
    "text",
    [
        "pinning: {mode: sometimes}\n",
        "pinning: {mode: true}\n",
        "pinning: true\n",
        "pinning: {baseline: pins.json}\n",
        BACKEND % ", pinning: maybe",
    ],
)
def test_a_pinning_value_that_names_no_mode_is_refused(text: str) -> None:
    """gateway choice: a mode that is not one of the five fails the load, at its place."""
    with pytest.raises(ConfigError):
        parse(text)
