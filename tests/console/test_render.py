"""Templates: autoescaped, and the Config page says what the last reload did."""

from __future__ import annotations

import json

import pytest

from gateway.config import parse
from gateway.console.page_data import config_page
from gateway.console.render import Renderer, _duration, _moment, _ms, _percent
from gateway.runtime.reload import ReloadOutcome

COMMON = {"base": "/admin", "csrf": "c" * 64, "active": "config", "nav": True}


def render_config(outcome: ReloadOutcome | None, can_reload: bool = True) -> str:
    config = parse(json.dumps({"backends": []}), env={})
    page = config_page(config, outcome, can_reload)
    return Renderer().page("config.html", **COMMON, page=page).decode()


def test_a_rejected_reload_lists_its_problems_escaped() -> None:
    html = render_config(
        ReloadOutcome(0.0, False, problems=["backends[0].name: '<script>' is not a valid name"])
    )
    assert "rejected" in html and "1970-01-01 00:00:00 UTC" in html
    assert "&lt;script&gt;" in html and "<script>'" not in html


def test_an_applied_reload_names_what_changed_and_what_waits() -> None:
    html = render_config(
        ReloadOutcome(0.0, True, changed=["auth", "limits"], needs_restart=["server.port"])
    )
    assert "applied" in html
    assert "<code>auth</code>, <code>limits</code>" in html
    assert "Waiting for a restart: <code>server.port</code>" in html


def test_without_a_file_there_is_no_reload_button() -> None:
    html = render_config(None, can_reload=False)
    assert "No reload since the gateway started (it was started without a config file)" in html
    assert 'action="/admin/reload"' not in html
    assert 'action="/admin/reload"' in render_config(None)


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (None, "\\u2013"),
        (0.25, "250 ms"),
        (5, "5s"),
        (125, "2m 5s"),
        (7300, "2h 1m"),
        (90000, "1d 1h"),
    ],
)
def test_durations(seconds: float | None, shown: str) -> None:
    assert _duration(seconds) == shown.encode().decode("unicode_escape")


def test_figures() -> None:
    assert _ms(1.234) == "1.2 ms" and _ms(250.0) == "250 ms" and _ms(float("inf")) == "> 600 s"
    assert _percent(0.0123) == "1.2 %"
    assert _moment(1_700_000_000.0) == "2023-11-14 22:13:20 UTC"


def test_static_files_are_loaded_from_the_package() -> None:
    renderer = Renderer()
    assert set(renderer.static) == {"console.css", "live.js", "theme.js"}
    body, content_type = renderer.static["live.js"]
    assert b"EventSource" in body and content_type.startswith(b"text/javascript")


def test_the_tool_form_has_an_input_per_field_and_keeps_what_was_typed() -> None:
    from gateway.console.calls import CallResult
    from gateway.console.forms import form_fields
    from gateway.console.page_data import ToolPage

    schema = {
        "properties": {
            "mode": {"enum": ["fast", "slow"], "default": "slow"},
            "loud": {"type": "boolean"},
            "tags": {"type": "array", "description": "<b>list</b>"},
            "n": {"type": "integer"},
        },
        "required": ["mode"],
    }
    tool = ToolPage("t__x", "x", "t", "Does <x>", json.dumps(schema), form_fields(schema))
    html = (
        Renderer()
        .page(
            "tool.html",
            **COMMON,
            tool=tool,
            result=CallResult(ok=False, is_error=False, text='{"code": -32602}', duration_ms=1.0),
            problem="n: 'abc' is not an integer",
            values={"n": "abc", "tags": '["a"]'},
        )
        .decode()
    )
    assert '<option value="&#34;slow&#34;" selected>' in html  # the default chosen
    assert "(not set)" in html  # the optional boolean may stay unset
    assert 'name="arg.tags"' in html and "[&#34;a&#34;]</textarea>" in html
    assert 'name="arg.n" inputmode="decimal" value="abc"' in html
    assert "&lt;b&gt;list&lt;/b&gt;" in html and "Does &lt;x&gt;" in html
    assert "n: &#39;abc&#39; is not an integer" in html
    assert "Error" in html and 'class="result result-error"' in html


def test_a_tool_without_arguments_says_so() -> None:
    from gateway.console.page_data import ToolPage

    tool = ToolPage("t__now", "now", "t", "", "{}", [])
    html = (
        Renderer()
        .page("tool.html", **COMMON, tool=tool, result=None, problem="", values={})
        .decode()
    )
    assert "This tool takes no arguments." in html
