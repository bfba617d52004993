"""Specification tests for ``gateway.catalog.naming`` (reversible namespacing).

Properties (STYLE rule 10): every public name is host-safe, stable and
distinct, and a round trip through a built catalog snapshot gives back the
backend and the original name or URI, or says why it could not.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.catalog.naming import NamingRules, public_name, public_uri, split_uri
from gateway.catalog.snapshot import BackendListing, Kind, Snapshot, build_snapshot

RULES = NamingRules()
SHORT_FORM = re.compile(r"(?P<head>.*)-(?P<hash>[0-9a-f]{8})")


def host_safe(name: str, max_length: int = RULES.max_length) -> bool:
    return re.fullmatch(rf"[A-Za-z0-9_-]{{1,{max_length}}}", name) is not None


# --- public_name ------------------------------------------------------------


def test_plain_name_is_prefix_separator_name() -> None:
    """Gateway choice: a host-safe name becomes prefix + "__" + name."""
    assert public_name("github", "create_issue", RULES) == "github__create_issue"


def test_empty_prefix_keeps_the_name() -> None:
    """Gateway choice: an unprefixed backend's names are public as they are."""
    assert public_name("", "create_issue", RULES) == "create_issue"


def test_custom_separator_is_used() -> None:
    """Gateway choice: the separator comes from config naming.separator."""
    assert public_name("gh", "x", NamingRules(separator="-")) == "gh-x"


def test_name_of_exactly_max_length_is_kept_plain() -> None:
    """Gateway choice: the short form is used only when the plain name does not fit."""
    original = "a" * (64 - len("p__"))
    assert public_name("p", original, RULES) == "p__" + original


@pytest.mark.parametrize(
    "original",
    [
        "a" * 62,
        "x" * 500,
        "files.read",
        "dir/sub/tool",
        "tool with spaces",
        "ünïcödé",
        "emoji-😀",
        "工具",
        "tab\there",
        "\ud800lone-surrogate",
    ],
)
def test_name_that_would_break_hosts_gets_a_stable_host_safe_short_form(original: str) -> None:
    """Gateway choice: too long or disallowed characters yields allowed chars + "-" + hash."""
    name = public_name("p", original, RULES)
    assert host_safe(name)
    assert name.startswith("p__")
    match = SHORT_FORM.fullmatch(name)
    assert match is not None
    assert public_name("p", original, RULES) == name


def test_short_form_is_pinned_across_processes() -> None:
    """Gateway choice: the hash is blake2b of the original, so restarts and replicas agree."""
    assert public_name("", "x.y", RULES) == "x_y-cbd175d4"
    assert public_name("p", "x.y", RULES) == "p__x_y-cbd175d4"


def test_short_form_keeps_as_much_of_the_original_as_fits() -> None:
    """Gateway choice: the readable part is the sanitized original, cut to fit max_length."""
    name = public_name("p", "a.b" + "c" * 100, RULES)
    assert len(name) == RULES.max_length
    assert name.startswith("p__a_bccc")


def test_prefix_that_leaves_no_room_is_a_value_error() -> None:
    """Gateway choice: config validation prevents it; the function refuses rather than lies."""
    with pytest.raises(ValueError, match="too long"):
        public_name("p" * 60, "x.y", NamingRules(max_length=64))


def test_plain_name_equal_to_another_names_short_form_is_reported_not_lost() -> None:
    """Gateway choice: a plain/short-form clash within a backend keeps the first, reported."""
    short_tail = public_name("p", "x.y", RULES).removeprefix("p__")
    snapshot = build_snapshot(
        [BackendListing("b", "p", tools=({"name": "x.y"}, {"name": short_tail}))], RULES
    )
    assert snapshot.view(Kind.TOOLS).keys() == ("p__" + short_tail,)
    entry = snapshot.resolve(Kind.TOOLS, "p__" + short_tail)
    assert entry is not None
    assert entry.original == "x.y"
    assert any(repr(short_tail) in problem for problem in snapshot.problems)


SLUG = st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)
SEPARATORS = st.sampled_from(["__", "_", "-", "--", "_x_"])


@settings(max_examples=300, deadline=None)
@given(
    prefix=st.just("") | SLUG,
    original=st.text(max_size=150),
    separator=SEPARATORS,
    max_length=st.integers(min_value=32, max_value=128),
)
def test_public_name_is_always_host_safe_and_stable(
    prefix: str, original: str, separator: str, max_length: int
) -> None:
    """Spec: public names match ^[A-Za-z0-9_-]{1,max}$ for any original, every time."""
    rules = NamingRules(separator=separator, max_length=max_length)
    name = public_name(prefix, original, rules)
    assert host_safe(name, max_length)
    assert public_name(prefix, original, rules) == name
    if prefix:
        assert name.startswith(prefix + separator)


@settings(max_examples=200, deadline=None)
@given(prefix=st.just("") | SLUG, originals=st.lists(st.text(max_size=100), unique=True))
def test_distinct_originals_get_distinct_short_forms(prefix: str, originals: list[str]) -> None:
    """Gateway choice: the hash tells apart originals that sanitize and truncate alike."""
    plain_head = f"{prefix}{RULES.separator}" if prefix else ""
    short_forms = [
        public_name(prefix, original, RULES)
        for original in originals
        if public_name(prefix, original, RULES) != plain_head + original
    ]
    assert len(set(short_forms)) == len(short_forms)


def test_distinct_originals_that_sanitize_alike_get_distinct_short_forms() -> None:
    """Gateway choice: "a.b", "a/b" and "a b" all read a_b but hash apart."""
    names = {public_name("p", original, RULES) for original in ("a.b", "a/b", "a b", "a_b.")}
    assert len(names) == 4


# --- URIs -------------------------------------------------------------------


def test_public_uri_prefixes_the_scheme() -> None:
    """Gateway choice: "p+scheme:" is a valid scheme (RFC 3986 allows "+")."""
    assert public_uri("fs", "file:///etc/hosts") == "fs+file:///etc/hosts"
    assert public_uri("fs", "file:///{path}") == "fs+file:///{path}"
    assert public_uri("", "file:///x") == "file:///x"


@pytest.mark.parametrize(
    ("public", "expected"),
    [
        ("fs+file:///x", ("fs", "file:///x")),
        ("fs+git+ssh://h/r", ("fs", "git+ssh://h/r")),
        ("other+file:///x", ("", "other+file:///x")),
        ("file:///x", ("", "file:///x")),
        ("+file:///x", ("", "+file:///x")),
        ("fs", ("", "fs")),
        ("fs+", ("fs", "")),
        ("", ("", "")),
    ],
)
def test_split_uri_splits_at_the_first_plus_only_for_known_prefixes(
    public: str, expected: tuple[str, str]
) -> None:
    """Gateway choice: text before the first "+" is a prefix only when it is a known one."""
    assert split_uri(public, frozenset({"fs", "db"})) == expected


@given(prefix=SLUG, uri=st.text())
def test_split_uri_reverses_public_uri(prefix: str, uri: str) -> None:
    """Spec: split_uri(public_uri(p, u)) == (p, u) for every configured prefix."""
    assert split_uri(public_uri(prefix, uri), frozenset({prefix, "zz-other"})) == (prefix, uri)


# --- round trips through a built snapshot ------------------------------------

NAMES = st.one_of(st.text(max_size=20), st.text(min_size=55, max_size=120))
# URIs come from msgspec-decoded JSON, which cannot hold lone surrogates.
URI_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)


@st.composite
def backends(
    draw: st.DrawFn, items: st.SearchStrategy[str], allow_unprefixed: bool
) -> list[tuple[str, str, list[str]]]:
    """(backend name, prefix, originals) with unique names and unique prefixes."""
    names = draw(st.lists(SLUG, min_size=1, max_size=4, unique=True))
    prefixes = draw(st.lists(SLUG, min_size=len(names), max_size=len(names), unique=True))
    if allow_unprefixed and draw(st.booleans()):
        prefixes[0] = ""
    return [(n, p, draw(st.lists(items, max_size=8))) for n, p in zip(names, prefixes, strict=True)]


def named_in_problems(snapshot: Snapshot, backend: str, original: str) -> bool:
    if not original:
        return any(
            p.startswith(f"{backend}: ") and "without a valid" in p for p in snapshot.problems
        )
    return any(p.startswith(f"{backend}: ") and repr(original) in p for p in snapshot.problems)


@settings(max_examples=200, deadline=None)
@given(backends(NAMES, allow_unprefixed=True))
def test_every_tool_round_trips_through_the_snapshot_or_is_reported(
    spec: list[tuple[str, str, list[str]]],
) -> None:
    """Spec: resolve(public) gives back backend and original; nothing is lost silently."""
    listings = [
        BackendListing(name, prefix, tools=tuple({"name": o} for o in originals))
        for name, prefix, originals in spec
    ]
    snapshot = build_snapshot(listings, RULES)
    view = snapshot.view(Kind.TOOLS)
    assert len(set(view.keys())) == len(view.keys())
    assert list(view.keys()) == sorted(view.keys())
    prefix_of = {name: prefix for name, prefix, _ in spec}
    for entry in view:
        assert host_safe(entry.key)
        assert entry.key == public_name(prefix_of[entry.backend], entry.original, RULES)
        resolved = snapshot.resolve(Kind.TOOLS, entry.key)
        assert resolved is not None
        assert resolved.original == entry.original
        assert resolved.backend == entry.backend
    for name, prefix, originals in spec:
        for original in originals:
            resolved = snapshot.resolve(Kind.TOOLS, public_name(prefix, original, RULES))
            kept = resolved is not None and (resolved.backend, resolved.original) == (
                name,
                original,
            )
            assert kept or named_in_problems(snapshot, name, original)


@settings(max_examples=200, deadline=None)
@given(backends(URI_TEXT, allow_unprefixed=False))
def test_every_resource_uri_round_trips_through_resolve_uri_or_is_reported(
    spec: list[tuple[str, str, list[str]]],
) -> None:
    """Spec: resolve_uri(public) gives back (backend, original URI); nothing is lost silently."""
    listings = [
        BackendListing(
            name,
            prefix,
            resources=tuple({"uri": o, "name": "r"} for o in originals),
            templates=tuple({"uriTemplate": o + "{x}", "name": "t"} for o in originals),
        )
        for name, prefix, originals in spec
    ]
    snapshot = build_snapshot(listings, RULES)
    for kind in (Kind.RESOURCES, Kind.TEMPLATES):
        view = snapshot.view(kind)
        assert len(set(view.keys())) == len(view.keys())
        for entry in view:
            assert snapshot.resolve_uri(entry.key) == (entry.backend, entry.original)
    for name, prefix, originals in spec:
        for original in originals:
            public = public_uri(prefix, original)
            listed: Any = snapshot.view(Kind.RESOURCES).get(public)
            kept = listed is not None and (listed.backend, listed.original) == (name, original)
            assert kept or named_in_problems(snapshot, name, original)
            if original:
                assert snapshot.resolve_uri(public) == (name, original)


# --- whatever a host sends back ---------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(spec=backends(NAMES, allow_unprefixed=True), asked=NAMES | st.text(max_size=80))
def test_any_name_a_host_sends_resolves_to_nothing_or_to_exactly_that_listed_name(
    spec: list[tuple[str, str, list[str]]], asked: str
) -> None:
    """Spec: a tool name from a host (any text, lone surrogates included) resolves to None
    or to the entry listed under exactly that name; it never raises."""
    listings = [
        BackendListing(name, prefix, tools=tuple({"name": o} for o in originals))
        for name, prefix, originals in spec
    ]
    snapshot = build_snapshot(listings, RULES)
    entry = snapshot.resolve(Kind.TOOLS, asked)
    assert entry is None or (entry.key == asked and asked in snapshot.view(Kind.TOOLS))
    if entry is not None:
        prefix = {name: prefix for name, prefix, _ in spec}[entry.backend]
        assert public_name(prefix, entry.original, RULES) == asked


@settings(max_examples=200, deadline=None)
@given(spec=backends(URI_TEXT, allow_unprefixed=True), asked=st.text(max_size=60))
def test_any_uri_a_host_sends_resolves_to_nothing_or_to_a_backend_that_would_publish_it(
    spec: list[tuple[str, str, list[str]]], asked: str
) -> None:
    """Spec: a resource URI from a host (any text) resolves to None or to a backend whose
    public form of the resolved URI is exactly what the host sent; it never raises."""
    listings = [
        BackendListing(name, prefix, resources=tuple({"uri": o, "name": "r"} for o in originals))
        for name, prefix, originals in spec
    ]
    snapshot = build_snapshot(listings, RULES)
    resolved = snapshot.resolve_uri(asked)
    if resolved is not None:
        backend, original = resolved
        prefix = {name: prefix for name, prefix, _ in spec}[backend]
        assert public_uri(prefix, original) == asked
