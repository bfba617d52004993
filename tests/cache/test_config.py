"""The ``cache:`` section and the opt-ins of backends and profiles (config/schema_cache)."""

from __future__ import annotations

from textwrap import dedent

import pytest

from gateway.config import parse
from gateway.config.schema_cache import DEFAULT_MAX_BYTES
from gateway.errors import ConfigError

BACKENDS = """
backends:
  - {name: files, transport: stdio, command: x, cache: {ttl: 5}}
  - {name: web, transport: stdio, command: y}
"""


def test_without_a_cache_section_the_cache_is_off() -> None:
    """Gateway choice: the cache is opt-in; absent means no cache at all."""
    assert parse(BACKENDS, env={}).cache is None


def test_an_empty_cache_section_turns_it_on_with_the_defaults() -> None:
    """Gateway choice: 64 MiB and 30 s for opt-ins without their own ttl."""
    config = parse(BACKENDS + "cache: {}\n", env={})
    assert config.cache is not None
    assert config.cache.enabled
    assert config.cache.max_bytes == DEFAULT_MAX_BYTES
    assert config.cache.default_ttl == 30.0
    assert config.backends[0].cache is not None
    assert config.backends[0].cache.ttl == 5
    assert config.backends[1].cache is None


def test_max_bytes_zero_turns_the_cache_off() -> None:
    """Gateway choice: 0 is off, as for the other bounds."""
    config = parse(BACKENDS + "cache: {max_bytes: 0}\n", env={})
    assert config.cache is not None
    assert not config.cache.enabled


def test_a_profile_names_its_cacheable_tools_by_glob() -> None:
    """Gateway choice: opt-in per profile, read-only tools unless the operator says so."""
    config = parse(
        BACKENDS
        + dedent(
            """
            cache: {default_ttl: 12}
            profiles:
              - name: coding
                cache: {tools: ["files__read_*"], ttl: 3}
            """
        ),
        env={},
    )
    tools = config.profiles[0].cache
    assert tools is not None
    assert tools.tools == ["files__read_*"]
    assert tools.ttl == 3
    assert not tools.allow_unannotated


@pytest.mark.parametrize(
    ("text", "place"),
    [
        ("cache: {max_bytes: -1}\n", "cache.max_bytes"),
        ("cache: {default_ttl: 0}\n", "cache.default_ttl"),
        ("profiles: [{name: p, cache: {tools: []}}]\n", "profiles[0].cache.tools"),
        ("profiles: [{name: p, cache: {tools: [a], scope: shared}}]\n", "profiles[0].cache.scope"),
    ],
)
def test_a_bad_cache_setting_is_refused_at_its_place(text: str, place: str) -> None:
    """Gateway choice: a clear error at the field, never a silent default."""
    with pytest.raises(ConfigError) as info:
        parse(BACKENDS + text, env={})
    assert any(place in problem for problem in info.value.problems), info.value.problems


def test_shared_without_a_store_url_is_refused_and_with_one_accepted() -> None:
    """Gateway choice: the embedded store serves one gateway; there is nothing to share."""
    with pytest.raises(ConfigError) as info:
        parse(BACKENDS + "cache: {shared: true}\n", env={})
    assert any("cache.shared" in p and "store.url" in p for p in info.value.problems)
    text = BACKENDS + "cache: {shared: true}\nstore: {url: 'redis://127.0.0.1:1/0'}\n"
    config = parse(text, env={})
    assert config.cache is not None and config.cache.shared
    assert not parse(BACKENDS + "cache: {}\n", env={}).cache.shared  # type: ignore[union-attr]
