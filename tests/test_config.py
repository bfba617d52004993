"""Specification of the config file: shape, defaults, env expansion and problems."""

from __future__ import annotations

from textwrap import dedent
from typing import TYPE_CHECKING, get_args

import msgspec
import pytest

from gateway.config import (
    BACKEND_CLASSES,
    TRANSPORTS,
    BackendBase,
    BackendConfig,
    GatewayConfig,
    HttpBackend,
    ItemFilter,
    LoggingConfig,
    NamingConfig,
    PaginationConfig,
    RestartPolicy,
    ServerConfig,
    SseBackend,
    StdioBackend,
    Timeouts,
    WebSocketBackend,
    format_problems,
    load,
    parse,
)
from gateway.config.schema import Invalid, tag_table
from gateway.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

DESIGN_EXAMPLE = """\
server: {host: 127.0.0.1, port: 8000, path: /mcp}
naming: {separator: "__", max_length: 64}
pagination: {page_size: 100, cursor_secret: "${MCP_GATEWAY_CURSOR_SECRET:-}"}
backends:
  - name: notes                 # [a-z0-9][a-z0-9-]*, unique
    prefix: notes               # default: the name; "" mounts it unprefixed
    transport: stdio            # stdio | http | sse | websocket
    command: python
    args: ["-m", "mcp_gateway_demo.notes"]
    env: {NOTES_DIR: /var/lib/notes}
    session: auto               # auto | shared | per_client
    required: false
    timeouts: {connect: 5, initialize: 30, request: 60, max_total: 600, reset_on_progress: true}
    tools: {include: ["*"], exclude: []}
  - name: search
    transport: http             # sse and websocket take `url` too
    url: https://search.example/mcp
    headers: {Authorization: "Bearer ${SEARCH_TOKEN}"}
"""

# The one required field that says where each transport's backend is.
TARGETS = {
    "stdio": "command: run-me",
    "http": "url: https://h.example/mcp",
    "sse": "url: http://h.example/sse",
    "websocket": "url: wss://h.example/ws",
}


def problems_of(text: str, env: Mapping[str, str] | None = None) -> list[str]:
    """The problems ``parse`` reports for ``text`` (it must fail)."""
    with pytest.raises(ConfigError) as info:
        parse(dedent(text), env={} if env is None else env)
    return info.value.problems


def parse_ok(text: str, env: Mapping[str, str] | None = None) -> GatewayConfig:
    """Parse ``text`` with a controlled environment (never the real one)."""
    return parse(dedent(text), env={} if env is None else env)


def stdio(name: str, **extra: str) -> str:
    """A minimal stdio backend as a YAML flow mapping."""
    fields = {"name": name, "transport": "stdio", "command": "x", **extra}
    return "{" + ", ".join(f"{k}: {v!r}" for k, v in fields.items()) + "}"


# --- defaults and shape ---------------------------------------------------


@pytest.mark.parametrize("text", ["", "# only a comment\n", "server:\nbackends:\n"])
def test_an_empty_file_or_empty_sections_give_all_defaults(text: str) -> None:
    """Gateway choice: nothing configured means a loopback gateway with no backends."""
    config = parse_ok(text)
    assert config == GatewayConfig()
    assert config.server == ServerConfig(host="127.0.0.1", port=8000, path="/mcp")
    assert config.server.max_body_bytes == 4 * 1024 * 1024
    assert config.naming == NamingConfig(separator="__", max_length=64)
    assert config.pagination == PaginationConfig(page_size=100, cursor_secret="")
    assert config.logging == LoggingConfig(level="info", format="auto")
    assert config.backends == []


def test_backend_defaults_fill_every_optional_field() -> None:
    """DESIGN: a backend needs only name, transport and its transport's target."""
    (backend,) = parse_ok(f"backends: [{stdio('notes')}]").backends
    assert isinstance(backend, StdioBackend)
    assert backend.prefix is None
    assert backend.session == "auto"
    assert (backend.required, backend.enabled) == (False, True)
    assert backend.timeouts == Timeouts(connect=5.0, initialize=30.0, request=60.0, max_total=600.0)
    assert backend.restart == RestartPolicy(initial_delay=0.5, max_delay=60.0, multiplier=2.0)
    assert backend.tools == ItemFilter(include=["*"], exclude=[])
    assert (backend.args, backend.env, backend.cwd, backend.inherit_env) == ([], {}, None, True)
    assert backend.max_line_bytes == 16 * 1024 * 1024


def test_the_design_example_parses() -> None:
    """DESIGN "Config shape": the documented example is a valid config."""
    config = parse(DESIGN_EXAMPLE, env={"SEARCH_TOKEN": "s3cret"})
    notes, search = config.backends
    assert isinstance(notes, StdioBackend)
    assert notes.command == "python"
    assert notes.args == ["-m", "mcp_gateway_demo.notes"]
    assert notes.env == {"NOTES_DIR": "/var/lib/notes"}
    assert notes.timeouts.connect == 5.0
    assert isinstance(notes.timeouts.max_total, float)
    assert isinstance(search, HttpBackend)
    assert search.url == "https://search.example/mcp"
    assert search.headers == {"Authorization": "Bearer s3cret"}
    assert config.pagination.cursor_secret == ""


@pytest.mark.parametrize(
    ("transport", "cls"),
    [
        ("stdio", StdioBackend),
        ("http", HttpBackend),
        ("sse", SseBackend),
        ("websocket", WebSocketBackend),
    ],
)
def test_the_transport_tag_picks_the_backend_class(transport: str, cls: type[BackendBase]) -> None:
    """DESIGN: `transport` is the tag of a union of backend kinds."""
    target = TARGETS[transport]
    (backend,) = parse_ok(
        f"backends:\n  - name: b\n    transport: {transport}\n    {target}\n"
    ).backends
    assert type(backend) is cls
    assert backend.transport == transport


def test_a_loaded_config_is_immutable() -> None:
    """Gateway choice: one config value is shared by every task, so it is frozen."""
    config = parse_ok("")
    with pytest.raises(AttributeError):
        config.server = ServerConfig()  # type: ignore[misc]  # the point of the test


def test_the_config_round_trips_through_msgspec_with_its_tag() -> None:
    """Gateway choice: `trio-mcp-gateway check` can print the effective config."""
    config = parse(DESIGN_EXAMPLE, env={"SEARCH_TOKEN": "t"})
    assert msgspec.convert(msgspec.to_builtins(config), GatewayConfig) == config


# --- unknown keys ---------------------------------------------------------


def test_an_unknown_top_level_key_is_rejected_with_a_suggestion() -> None:
    """Gateway choice: typos fail loudly instead of falling back to defaults."""
    assert problems_of("sever: {port: 1}\n") == ["sever: unknown field, did you mean `server`?"]


def test_an_unknown_nested_key_is_rejected_at_its_place() -> None:
    """Gateway choice: the place names the exact nested key."""
    assert problems_of(
        "backends: [{name: a, transport: stdio, command: x, timeouts: {reqest: 5}}]\n"
    ) == ["backends[0].timeouts.reqest: unknown field, did you mean `request`?"]


def test_an_unknown_backend_key_is_rejected_with_a_suggestion() -> None:
    """Gateway choice: a misspelt backend field names the field it probably meant."""
    text = """\
    backends:
      - name: notes
        transport: stdio
        comand: python
    """
    assert problems_of(text) == [
        "backends[0].comand: unknown field, did you mean `command`?",
        "backends[0].command: required field missing",
    ]


def test_an_unknown_key_like_no_field_gets_no_suggestion() -> None:
    """Gateway choice: no far-fetched guesses."""
    assert problems_of("server: {zzzzzz: 1}\n") == ["server.zzzzzz: unknown field"]


def test_a_field_of_another_transport_is_unknown_for_this_one() -> None:
    """DESIGN: each transport has its own fields; `url` means nothing to stdio."""
    assert problems_of(f"backends: [{stdio('a', url='http://x')}]") == [
        "backends[0].url: unknown field"
    ]


def test_a_missing_transport_lists_the_valid_ones() -> None:
    """Gateway choice: the tag is required, and the message says what it may be."""
    assert problems_of("backends: [{name: a, command: x}]") == [
        "backends[0].transport: required field missing (one of: stdio, http, sse, websocket)"
    ]


def test_an_unknown_transport_lists_the_valid_ones() -> None:
    """Gateway choice: an unknown tag names the valid ones."""
    assert problems_of("backends: [{name: a, transport: pigeon}]") == [
        "backends[0].transport: unknown transport 'pigeon' (one of: stdio, http, sse, websocket)"
    ]


# --- all problems at once -------------------------------------------------


def test_every_problem_in_a_file_is_reported_at_once() -> None:
    """Gateway choice: one run of `check` shows everything wrong, each at its place."""
    text = """\
    server:
      port: eighty
      path: mcp
    naming: {separator: "__", max_length: 64}
    logging: {level: loud}
    backends:
      - name: notes
        transport: stdio
        comand: python
      - name: search
        transport: http
        url: ftp://search.example
        timeouts: {request: 700}
      - name: other
        transport: stdio
      - name: search
        transport: websocket
        url: wss://x.example
        headers: {Authorization: "Bearer ${SEARCH_TOKEN}"}
    """
    assert set(problems_of(text)) == {
        "server.port: expected int, got str 'eighty'",
        "logging.level: must be one of: debug, info, warning, error (got 'loud')",
        "backends[0].comand: unknown field, did you mean `command`?",
        "backends[0].command: required field missing",
        "backends[1].url: must start with http:// or https:// (got 'ftp://search.example')",
        "backends[1].timeouts.request: must not exceed max_total (600.0)",
        "backends[2].command: required field missing",
        "backends[3].name: duplicate backend name 'search' (also backends[1])",
        "backends[3].headers.Authorization: environment variable SEARCH_TOKEN is not set",
    }


def test_semantic_problems_of_decoded_backends_are_reported_beside_type_problems() -> None:
    """Gateway choice: a failing section does not hide duplicates found elsewhere."""
    text = f"""\
    server: {{port: nope}}
    backends: [{stdio("a")}, {stdio("a")}]
    """
    assert problems_of(text) == [
        "server.port: expected int, got str 'nope'",
        "backends[1].name: duplicate backend name 'a' (also backends[0])",
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("server: {port: 70000}", "server.port: must be between 0 and 65535 (got 70000)"),
        ("server: {port: true}", "server.port: expected int, got bool True"),
        ("server: {path: mcp}", "server.path: must start with '/' (got 'mcp')"),
        ("server: 8000", "server: expected a mapping, got int"),
        ("server: {allowed_hosts: x}", "server.allowed_hosts: expected a list, got str"),
        ("pagination: {page_size: -1}", "pagination.page_size: must be 0 or more (got -1)"),
        ("naming: {max_length: 8}", "naming.max_length: must be between 16 and 128 (got 8)"),
        ("naming: {separator: ''}", "naming.separator: must not be empty"),
        (
            "naming: {separator: '.'}",
            "naming.separator: may contain only letters, digits, '_' and '-' (got '.')",
        ),
        (
            "logging: {format: xml}",
            "logging.format: must be one of: auto, json, console (got 'xml')",
        ),
        (
            f"backends: [{stdio('a', session='solo')}]",
            "backends[0].session: must be one of: auto, shared, per_principal, per_client "
            "(got 'solo')",
        ),
        (
            "backends: [{name: a, transport: stdio, command: x, timeouts: {connect: 0}}]",
            "backends[0].timeouts.connect: must be positive (got 0.0)",
        ),
        (
            "backends: [{name: a, transport: stdio, command: x, restart: {multiplier: 0.5}}]",
            "backends[0].restart.multiplier: must be 1 or more (got 0.5)",
        ),
        (
            "backends: [{name: a, transport: stdio, command: x, restart: {initial_delay: -1}}]",
            "backends[0].restart.initial_delay: must be positive (got -1.0)",
        ),
        (
            "backends: [{name: a, transport: stdio, command: x, args: [1]}]",
            "backends[0].args[0]: expected str, got int 1",
        ),
        (
            "backends: [{name: a, transport: stdio, command: x, env: {DEBUG: 1}}]",
            "backends[0].env.DEBUG: expected str, got int 1",
        ),
        (
            "backends: [{name: a, transport: sse, url: 'ws://x'}]",
            "backends[0].url: must start with http:// or https:// (got 'ws://x')",
        ),
        (
            "backends: [{name: a, transport: websocket, url: 'https://x'}]",
            "backends[0].url: must start with ws:// or wss:// (got 'https://x')",
        ),
        (
            "backends: [{name: a, transport: http, url: 'https://x', client_key: k.pem}]",
            "backends[0].client_key: needs client_cert as well",
        ),
        (
            f"backends: [{stdio('My_Notes')}]",
            "backends[0].name: 'My_Notes' is not a valid name (lowercase letters, digits and "
            "'-', starting with a letter or digit)",
        ),
        (
            f"backends: [{stdio('a', prefix='-a')}]",
            "backends[0].prefix: '-a' is not a valid prefix (\"\" or lowercase letters, digits "
            "and '-', starting with a letter or digit)",
        ),
        ("backends: {a: 1}", "backends: expected a list, got a mapping"),
        ("backends: [5]", "backends[0]: expected a mapping, got int"),
        ("backends: [null]", "backends[0]: expected a mapping, got null"),
        ("server: {port: 1.5}", "server.port: expected int, got float 1.5"),
        ("server: {host: [h]}", "server.host: expected str, got a list"),
        (
            f"backends: [{stdio('a', command='')}]",
            "backends[0].command: must not be empty",
        ),
        (
            "backends: [{name: a, transport: stdio, command: x, prefix: 3}]",
            "backends[0].prefix: expected str or null, got int 3",
        ),
        (
            "backends: [{name: a, transport: stdio, command: x, env: {1: one}}]",
            "backends[0].env.1: keys must be strings, got int",
        ),
        (
            "backends: [{name: a, transport: stdio, command: x, restart: {initial_delay: 9, "
            "max_delay: 5}}]",
            "backends[0].restart.initial_delay: must not exceed max_delay (5.0)",
        ),
        ("[1, 2]", "<top>: expected a mapping at the top level, got a list"),
    ],
)
def test_each_invalid_value_is_a_problem_at_its_place(text: str, problem: str) -> None:
    """Gateway choice: types and ranges are checked, each reported where it is."""
    assert problems_of(text) == [problem]


# --- environment expansion ------------------------------------------------


def test_env_references_expand_inside_string_values() -> None:
    """DESIGN: `${VAR}` in a string value is replaced by the variable's value."""
    text = """\
    backends:
      - {name: s, transport: http, url: "${BASE}/mcp", headers: {Authorization: "Bearer ${TOKEN}"}}
    """
    (backend,) = parse_ok(text, {"BASE": "https://s.example", "TOKEN": "t0k"}).backends
    assert isinstance(backend, HttpBackend)
    assert backend.url == "https://s.example/mcp"
    assert backend.headers == {"Authorization": "Bearer t0k"}


@pytest.mark.parametrize(
    ("env", "expected"), [({}, "dflt"), ({"S": ""}, "dflt"), ({"S": "v"}, "v")]
)
def test_an_env_default_applies_when_the_variable_is_unset_or_empty(
    env: dict[str, str], expected: str
) -> None:
    """Gateway choice: `${VAR:-default}` follows the shell's `:-`."""
    config = parse_ok("pagination: {cursor_secret: '${S:-dflt}'}", env)
    assert config.pagination.cursor_secret == expected


def test_an_unset_env_reference_is_a_problem_at_its_place_and_nothing_more() -> None:
    """Gateway choice: an unset variable is named once, without follow-up noise."""
    text = """\
    server: {port: "${PORT}"}
    backends:
      - {name: a, transport: stdio, command: x}
      - name: search
        transport: http
        url: "${SEARCH_URL}"
        headers: {Authorization: "Bearer ${SEARCH_TOKEN}"}
    """
    assert problems_of(text, {"SEARCH_URL": "https://s.example"}) == [
        "server.port: environment variable PORT is not set",
        "backends[1].headers.Authorization: environment variable SEARCH_TOKEN is not set",
    ]


def test_double_dollar_brace_is_a_literal_dollar_brace() -> None:
    """Gateway choice: `$${` escapes, so a header can carry a literal `${`."""
    text = "backends: [{name: a, transport: stdio, command: x, args: ['$${HOME} ${X}']}]"
    config = parse_ok(text, {"X": "x"})
    assert isinstance(config.backends[0], StdioBackend)
    assert config.backends[0].args == ["${HOME} x"]


def test_an_expanded_string_converts_to_an_int_field() -> None:
    """Gateway choice: expanded values are strings, decoded leniently into numbers."""
    config = parse_ok("server: {port: '${PORT}'}\nbackends: []\n", {"PORT": "8123"})
    assert config.server.port == 8123
    assert problems_of("server: {port: '${PORT}'}", {"PORT": "eighty"}) == [
        "server.port: expected int, got str 'eighty'"
    ]


def test_an_env_value_can_never_inject_yaml_structure() -> None:
    """Gateway choice: expansion runs after parsing, so a value stays one string."""
    hostile = "x\nbackends: [{name: evil, transport: stdio, command: sh}]"
    config = parse_ok("pagination: {cursor_secret: '${S}'}", {"S": hostile})
    assert config.pagination.cursor_secret == hostile
    assert config.backends == []


def test_an_expanded_value_is_not_expanded_again() -> None:
    """Gateway choice: a value that itself holds `${...}` is taken literally."""
    config = parse_ok("pagination: {cursor_secret: '${S}'}", {"S": "${OTHER}"})
    assert config.pagination.cursor_secret == "${OTHER}"


def test_a_malformed_env_reference_is_a_problem() -> None:
    """Gateway choice: a `${` that is neither a reference nor escaped is refused."""
    assert problems_of("pagination: {cursor_secret: '${1X}'}") == [
        "pagination.cursor_secret: malformed ${...} reference "
        "(use ${NAME} or ${NAME:-default}; $${ for a literal ${)"
    ]


def test_parse_reads_os_environ_when_no_env_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """Gateway choice: the real environment is the default source of variables."""
    monkeypatch.setenv("MCP_GATEWAY_TEST_SECRET", "from-environ")
    config = parse("pagination: {cursor_secret: '${MCP_GATEWAY_TEST_SECRET}'}")
    assert config.pagination.cursor_secret == "from-environ"


# --- names, prefixes, separator -------------------------------------------


def test_duplicate_backend_names_are_rejected() -> None:
    """DESIGN: backend names are unique."""
    text = f"backends: [{stdio('a')}, {stdio('notes', prefix='n1')}, {stdio('b')}, " + (
        f"{stdio('notes', prefix='n2')}]"
    )
    assert problems_of(text) == [
        "backends[3].name: duplicate backend name 'notes' (also backends[1])"
    ]


def test_duplicate_prefixes_are_rejected_whether_set_or_defaulted() -> None:
    """DESIGN: prefixes keep backends apart, so no two may share one."""
    text = f"backends: [{stdio('a', prefix='p')}, {stdio('p')}, {stdio('b', prefix='p')}]"
    assert problems_of(text) == [
        "backends[1].name: duplicate prefix 'p' (also backends[0]); the prefix defaults to "
        "the name, set `prefix` to choose another",
        "backends[2].prefix: duplicate prefix 'p' (also backends[0])",
    ]


def test_several_backends_may_be_mounted_unprefixed() -> None:
    """DESIGN: `prefix: ""` mounts a backend unprefixed; that is not a duplicate."""
    config = parse_ok(f"backends: [{stdio('a', prefix='')}, {stdio('b', prefix='')}]")
    assert [b.public_prefix for b in config.backends] == ["", ""]


def test_the_public_prefix_defaults_to_the_name() -> None:
    """DESIGN: prefix defaults to the name."""
    config = parse_ok(f"backends: [{stdio('notes')}, {stdio('search', prefix='s')}]")
    assert [b.public_prefix for b in config.backends] == ["notes", "s"]


def test_a_prefix_containing_the_separator_is_rejected() -> None:
    """DESIGN: the separator never occurs in a prefix, so public names cannot collide."""
    text = f"naming: {{separator: '-'}}\nbackends: [{stdio('a', prefix='my-notes')}]"
    assert problems_of(text) == [
        "backends[0].prefix: prefix 'my-notes' contains or runs into the naming separator "
        "'-', so public names could collide"
    ]


def test_a_prefix_running_into_the_separator_is_rejected() -> None:
    """Gateway choice: prefix "ab" with separator "bb" gives "abbbx", also "a"+"bb"+"bx"."""
    text = f"naming: {{separator: bb}}\nbackends: [{stdio('ab')}]"
    assert problems_of(text) == [
        "backends[0].name: prefix 'ab' contains or runs into the naming separator 'bb', so "
        "public names could collide; the prefix defaults to the name, set `prefix` to choose "
        "another"
    ]


def test_a_prefix_must_leave_room_for_a_shortened_name() -> None:
    """Gateway choice: catalog/naming.py needs room for one character and a hash suffix."""
    text = f"naming: {{max_length: 16}}\nbackends: [{stdio('a', prefix='abcde')}]"
    assert problems_of(text) == [
        "backends[0].prefix: prefix 'abcde' is too long: with separator '__' and "
        "naming.max_length 16 it may have at most 4 characters"
    ]


def test_an_invalid_separator_is_reported_once_not_against_every_prefix() -> None:
    """Gateway choice: a wrong naming section does not make every prefix look wrong."""
    text = f"naming: {{separator: 'a.'}}\nbackends: [{stdio('a')}, {stdio('ba')}]"
    assert problems_of(text) == [
        "naming.separator: may contain only letters, digits, '_' and '-' (got 'a.')"
    ]


# --- behaviour of the structs ---------------------------------------------


@pytest.mark.parametrize(
    ("transport", "session", "authenticated", "expected"),
    [
        ("stdio", "auto", False, "shared"),
        ("stdio", "auto", True, "per_principal"),
        ("http", "auto", False, "per_client"),
        ("http", "auto", True, "per_client"),
        ("sse", "auto", True, "per_client"),
        ("websocket", "auto", False, "per_client"),
        ("stdio", "per_client", True, "per_client"),
        ("stdio", "per_principal", False, "per_principal"),
        ("stdio", "shared", True, "shared"),
        ("http", "shared", False, "shared"),
    ],
)
def test_effective_session_resolves_auto_by_transport_and_auth(
    transport: str, session: str, authenticated: bool, expected: str
) -> None:
    """DESIGN: auto is per_client for network backends; for stdio per_principal with auth."""
    target = TARGETS[transport]
    text = f"backends:\n  - {{name: b, transport: {transport}, session: {session}, {target}}}"
    (backend,) = parse_ok(text).backends
    assert backend.effective_session(authenticated) == expected


@pytest.mark.parametrize(
    ("item_filter", "name", "allowed"),
    [
        (ItemFilter(), "anything", True),
        (ItemFilter(include=["read_*"]), "read_file", True),
        (ItemFilter(include=["read_*"]), "write_file", False),
        (ItemFilter(exclude=["*_admin"]), "drop_admin", False),
        (ItemFilter(include=["drop_*"], exclude=["*_admin"]), "drop_admin", False),
        (ItemFilter(include=[]), "anything", False),
        (ItemFilter(include=["Read"]), "read", False),
    ],
)
def test_item_filter_needs_an_include_match_and_no_exclude_match(
    item_filter: ItemFilter, name: str, allowed: bool
) -> None:
    """Gateway choice: exclude wins over include; globs are case-sensitive like MCP names."""
    assert item_filter.allows(name) is allowed


# --- YAML -----------------------------------------------------------------


def test_a_yaml_syntax_error_reports_line_and_column() -> None:
    """Gateway choice: a broken file points at where the parser stopped."""
    text = "server:\n  port: 8000\n  path: : /mcp\n"
    assert problems_of(text) == [
        "line 3, column 9: invalid YAML: mapping values are not allowed here"
    ]


def test_yaml_error_context_is_kept_in_the_message() -> None:
    """Gateway choice: the parser's "while parsing ..." context helps find the spot."""
    assert problems_of("a: [1,\n") == [
        "line 2, column 1: invalid YAML: expected the node content, but found '<stream end>' "
        "(while parsing a flow node)"
    ]


def test_a_control_character_reports_line_and_column() -> None:
    """Gateway choice: even a reader error points at its place."""
    assert problems_of("server: {}\nab\x00") == [
        "line 2, column 3: invalid YAML: special characters are not allowed (character #x0000)"
    ]


def test_python_specific_yaml_tags_are_refused() -> None:
    """Gateway choice: safe loading; a config file can never construct objects."""
    assert problems_of("server: !!python/object/apply:os.getcwd []") == [
        "line 1, column 9: invalid YAML: could not determine a constructor for the tag "
        "'tag:yaml.org,2002:python/object/apply:os.getcwd'"
    ]


def test_a_recursive_yaml_alias_is_a_problem_not_a_hang() -> None:
    """Gateway choice: a self-referencing node is reported instead of recursing forever."""
    assert problems_of("server: {allowed_hosts: &x [*x]}") == [
        "server.allowed_hosts[0]: recursive YAML alias",
    ]


def test_a_duplicate_yaml_key_is_a_problem() -> None:
    """Gateway choice: a second `backends:` would otherwise silently replace the first."""
    text = "backends: []\nserver: {}\nbackends: []\n"
    assert problems_of(text) == ["line 3, column 1: duplicate key 'backends'"]


def test_yaml_merge_keys_may_override_merged_values() -> None:
    """Gateway choice: `<<:` overrides are not duplicate keys."""
    text = """\
    backends:
      - &base {name: a, transport: stdio, command: x, required: true}
      - {<<: *base, name: b, required: false}
    """
    first, second = parse_ok(text).backends
    assert (first.name, first.required, second.name, second.required) == ("a", True, "b", False)


# --- files ----------------------------------------------------------------


def test_load_reads_a_file(tmp_path: Path) -> None:
    """Gateway choice: load() is parse() of the file's text."""
    path = tmp_path / "gateway.yaml"
    path.write_text(DESIGN_EXAMPLE, encoding="utf-8")
    assert load(path, {"SEARCH_TOKEN": "t"}) == parse(DESIGN_EXAMPLE, env={"SEARCH_TOKEN": "t"})


def test_load_reports_problems_with_the_file_path(tmp_path: Path) -> None:
    """Gateway choice: every printed problem starts with the file it is in."""
    path = tmp_path / "gateway.yaml"
    path.write_text("sever: {}\nserver: {port: x}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load(str(path), {})
    assert info.value.path == str(path)
    assert format_problems(info.value) == (
        f"{path}: sever: unknown field, did you mean `server`?\n"
        f"{path}: server.port: expected int, got str 'x'"
    )


def test_load_reports_a_missing_file(tmp_path: Path) -> None:
    """Gateway choice: an unreadable file is a ConfigError too, not an OSError."""
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError) as info:
        load(path, {})
    assert info.value.path == str(path)
    assert info.value.problems == ["<top>: cannot read the file: No such file or directory"]


def test_load_reports_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    """Gateway choice: the encoding problem is named, with where it is."""
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"server: {host: caf\xe9}\n")
    with pytest.raises(ConfigError) as info:
        load(path, {})
    assert info.value.problems == ["<top>: not UTF-8 text (invalid continuation byte at byte 18)"]


def test_format_problems_without_a_path_prints_bare_problems() -> None:
    """Gateway choice: text parsed without a source has no file prefix."""
    assert format_problems(ConfigError(["a: b", "c: d"])) == "a: b\nc: d"


# --- the schema on its own ------------------------------------------------


def test_the_transport_table_is_read_off_the_tagged_union() -> None:
    """Gateway choice: a backend kind is declared once, as a member of `BackendConfig`."""
    members = get_args(BackendConfig)
    assert {cls.__struct_config__.tag: cls for cls in members} == BACKEND_CLASSES
    assert list(BACKEND_CLASSES.values()) == list(members)
    assert TRANSPORTS == ("stdio", "http", "sse", "websocket")


def test_a_tag_table_names_each_member_of_a_union_by_its_tag() -> None:
    """Gateway choice: the decoder finds a tagged union's classes the same way."""

    class Pigeon(BackendBase, tag="pigeon", frozen=True, kw_only=True):
        """A made-up transport."""

    assert tag_table(StdioBackend | Pigeon) == {"stdio": StdioBackend, "pigeon": Pigeon}
    with pytest.raises(TypeError):
        tag_table(StdioBackend | None)


def test_a_bound_is_enforced_by_msgspec_itself_at_its_place() -> None:
    """Gateway choice: bounds are `msgspec.Meta` constraints, so plain msgspec refuses them."""
    data = {"backends": [{"name": "a", "transport": "stdio", "command": "x"}]}
    data["backends"][0]["health"] = {"ping_timeout": 0}
    with pytest.raises(
        msgspec.ValidationError, match=r"at `\$\.backends\[0\]\.health\.ping_timeout`"
    ):
        msgspec.convert(data, GatewayConfig)


def test_a_bound_nested_in_a_backend_is_reported_at_its_place_in_words() -> None:
    """Gateway choice: a Meta bound without its own words is phrased from the bound."""
    text = f"""\
    backends:
      - {stdio("a")}
      - {{name: b, transport: stdio, command: x, health: {{ping_timeout: 0}}}}
    """
    assert problems_of(text) == ["backends[1].health.ping_timeout: must be positive (got 0.0)"]


def test_a_rule_across_fields_is_a_post_init_naming_its_field() -> None:
    """Gateway choice: msgspec reports a `__post_init__` rule, and its Invalid keeps the field."""
    with pytest.raises(Invalid) as direct:
        Timeouts(request=700.0)
    assert direct.value.problems == (("request", "must not exceed max_total (600.0)"),)
    with pytest.raises(msgspec.ValidationError) as decoded:
        msgspec.convert({"request": 700}, Timeouts)
    assert isinstance(decoded.value.__cause__, Invalid)


def test_duplicate_backends_are_refused_by_msgspec_alone() -> None:
    """Gateway choice: the rules across backends are the schema's, not only the decoder's."""
    backend = {"name": "a", "transport": "stdio", "command": "x"}
    with pytest.raises(msgspec.ValidationError) as info:
        msgspec.convert({"backends": [backend, backend]}, GatewayConfig)
    assert isinstance(info.value.__cause__, Invalid)
    assert info.value.__cause__.problems == (
        ("backends[1].name", "duplicate backend name 'a' (also backends[0])"),
    )


def test_a_rule_across_fields_waits_until_its_fields_are_valid() -> None:
    """Gateway choice: a field already wrong draws no second complaint from its struct's rules."""
    text = """\
    backends:
      - {name: a, transport: stdio, command: x, timeouts: {connect: 0, request: 9, max_total: 5}}
    """
    assert problems_of(text) == ["backends[0].timeouts.connect: must be positive (got 0.0)"]


def test_a_duplicate_name_is_found_even_when_that_backend_is_broken_elsewhere() -> None:
    """Gateway choice: one run of `check` shows the duplicate together with the typo."""
    text = f"backends: [{{name: a, transport: stdio, comand: x}}, {stdio('a')}]"
    assert problems_of(text) == [
        "backends[0].comand: unknown field, did you mean `command`?",
        "backends[0].command: required field missing",
        "backends[1].name: duplicate backend name 'a' (also backends[0])",
    ]


def test_problems_are_listed_in_the_order_of_the_file() -> None:
    """Gateway choice: the list reads top to bottom like the file it points into."""
    text = """\
    backends:
      - {name: a, transport: stdio, command: x, max_pending: -1, stop_grace: 0}
    server: {port: x}
    """
    assert problems_of(text) == [
        "backends[0].max_pending: must be 0 (no limit) or more",
        "backends[0].stop_grace: must be positive (got 0.0)",
        "server.port: expected int, got str 'x'",
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("server: {max_sessions: 0}", "server.max_sessions: must be positive (got 0)"),
        ("limits: {token_rate: -1}", "limits.token_rate: must be 0 (off) or more"),
        (
            "backends: [{name: a, transport: http, url: 'HTTPS://x', prefix: 'My'}]",
            "backends[0].prefix: 'My' is not a valid prefix (\"\" or lowercase letters, digits "
            "and '-', starting with a letter or digit)",
        ),
        ("naming: {max_length: 129}", "naming.max_length: must be between 16 and 128 (got 129)"),
    ],
)
def test_each_bound_has_words_for_a_person(text: str, problem: str) -> None:
    """Gateway choice: a bound's failure reads like the rest, never as msgspec's message."""
    assert problems_of(text) == [problem]


def test_backend_protocol_defaults_to_auto_and_takes_each_era() -> None:
    """Gateway choice: every backend is probed (``auto``) unless its config pins an era."""
    config = parse_ok(
        f"""
        backends:
          - {stdio("a")}
          - {stdio("b", protocol="modern")}
          - {stdio("c", protocol="legacy")}
        """
    )
    assert [b.protocol for b in config.backends] == ["auto", "modern", "legacy"]


def test_backend_protocol_rejects_unknown_values_and_modern_over_http_sse() -> None:
    """Gateway choice: a typo and an era the transport cannot carry both fail at load."""
    problems = problems_of(
        f"""
        backends:
          - {stdio("a", protocol="stateless")}
          - {{name: b, transport: sse, url: "http://127.0.0.1:1/sse", protocol: modern}}
        """
    )
    assert len(problems) == 2
    assert problems[0].startswith("backends[0].protocol: ")
    assert "'stateless'" in problems[0]
    assert problems[1] == (
        "backends[1].protocol: the HTTP+SSE transport is handshake-era only: use auto or legacy"
    )


# --- server.engine and server.tls ---------------------------------------------


def test_the_engine_defaults_to_h11_and_takes_hypercorn() -> None:
    """server.engine: h11 unless hypercorn is asked for; anything else is refused."""
    assert parse_ok("").server.engine == "h11"
    assert parse_ok("server: {engine: hypercorn}").server.engine == "hypercorn"
    [problem] = problems_of("server: {engine: uvicorn}")
    assert problem.startswith("server.engine"), problem


def test_tls_needs_both_files_and_is_off_without_them() -> None:
    """server.tls: off by default; a certificate without its key (or the reverse) is an
    error at the missing one, not a silent plain-HTTP start."""
    assert not parse_ok("").server.tls.enabled
    tls = parse_ok("server: {tls: {cert_file: c.pem, key_file: k.pem}}").server.tls
    assert tls.enabled and (tls.cert_file, tls.key_file) == ("c.pem", "k.pem")
    [problem] = problems_of("server: {tls: {cert_file: c.pem}}")
    assert problem.startswith("server.tls.key_file"), problem
    [problem] = problems_of("server: {tls: {key_file: k.pem}}")
    assert problem.startswith("server.tls.cert_file"), problem


def test_a_signing_secret_may_be_a_list_newest_first_for_rotation() -> None:
    """Gateway choice (docs/security.md, signed tokens): a list signs with its first secret."""
    config = parse_ok(
        '{"pagination": {"cursor_secret": ["new", "old"]}, "mrtr": {"state_secret": ["s"]}}'
    )
    assert config.pagination.cursor_secret == ["new", "old"]
    assert config.mrtr.state_secret == ["s"]


@pytest.mark.parametrize(
    ("text", "place"),
    [
        ('{"pagination": {"cursor_secret": []}}', "pagination.cursor_secret"),
        ('{"pagination": {"cursor_secret": ["a", ""]}}', "pagination.cursor_secret"),
        ('{"mrtr": {"state_secret": [""]}}', "mrtr.state_secret"),
    ],
)
def test_an_empty_list_of_secrets_or_an_empty_secret_in_one_is_refused(
    text: str, place: str
) -> None:
    """Gateway choice: a list of secrets says which to sign with; an empty one says nothing."""
    assert problems_of(text) == [
        f"{place}: a list of secrets needs at least one, and none of them empty"
    ]
