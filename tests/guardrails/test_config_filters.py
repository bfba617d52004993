"""The ``filters:`` keys of the config file: top level, per profile, per backend."""

from __future__ import annotations

from textwrap import dedent

import pytest

from gateway.config import parse
from gateway.config.schema_filters import ArgumentsFilter, ExternalFilter, SecretsFilter
from gateway.errors import ConfigError


def problems_of(text: str) -> list[str]:
    """The problems ``parse`` reports for ``text`` (it must fail)."""
    with pytest.raises(ConfigError) as info:
        parse(dedent(text), env={})
    return info.value.problems


def test_filters_are_read_at_the_top_level_per_profile_and_per_backend() -> None:
    """gateway choice: the three places a chain is configured (issue 29's config names)."""
    config = parse(
        dedent(
            """
            filters:
              - {type: secrets, at: [results]}
            profiles:
              - name: ops
                filters: [{type: arguments, deny: ["rm -rf"]}]
            backends:
              - name: web
                transport: stdio
                command: x
                filters: [{type: external, url: "http://127.0.0.1:1/decide", fail: open}]
            """
        ),
        env={},
    )
    assert config.filters == [SecretsFilter(at=["results"])]
    assert config.profiles[0].filters == [ArgumentsFilter(deny=["rm -rf"])]
    backend_filter = config.backends[0].filters[0]
    assert isinstance(backend_filter, ExternalFilter)
    assert backend_filter.fail == "open"
    assert backend_filter.timeout == 2.0


def test_no_filters_is_the_default_everywhere() -> None:
    """gateway choice: a file without the key runs no chain."""
    config = parse(
        "profiles: [{name: a}]\nbackends: [{name: b, transport: stdio, command: x}]\n", env={}
    )
    assert config.filters == []
    assert config.profiles[0].filters == []
    assert config.backends[0].filters == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("filters: [{type: nope}]", "filters[0].type: unknown type 'nope'"),
        ("filters: [{at: [results]}]", "filters[0].type: required field missing"),
        (
            'filters: [{type: arguments, deny: ["(x"]}]',
            "filters[0].deny[0]: not a regular expression",
        ),
        ("filters: [{type: size}]", "filters[0].max_bytes: required field missing"),
        ("filters: [{type: size, max_bytes: 0}]", "filters[0].max_bytes:"),
        ("filters: [{type: secrets, at: [everywhere]}]", "filters[0].at[0]:"),
        ("filters: [{type: secrets, action: shout}]", "filters[0].action:"),
        (
            "filters: [{type: external, url: 'ftp://x'}]",
            "filters[0].url: must be an http:// or https:// URL",
        ),
        ("filters: [{type: external, url: 'http://x', fail: maybe}]", "filters[0].fail:"),
        (
            "filters: [{type: secrets, on: [results]}]",
            "YAML reads `on:` as true), did you mean `at`?",
        ),
        (
            "profiles: [{name: a, filters: [{type: nope}]}]",
            "profiles[0].filters[0].type: unknown type",
        ),
    ],
)
def test_a_wrong_filter_is_a_problem_at_its_place(text: str, problem: str) -> None:
    """gateway choice: a filter that cannot work stops the start, saying where and why."""
    found = problems_of(text + "\n")
    assert any(problem in p for p in found), found
