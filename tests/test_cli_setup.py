"""Specification of ``init``, ``schema`` and the choice of config file (issue 19)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Final

import jsonschema
import pytest
import yaml

from gateway.cli.config_files import CONFIG_ENV, choose_config, data_file, schema_text
from gateway.config import load
from tests.test_cli_hosts import run

ROOT: Final = Path(__file__).resolve().parent.parent
SCHEMA_COPIES: Final = (ROOT / "config" / "gateway.schema.json", data_file("gateway.schema.json"))
# Every config the project ships, and the schema reference each starts with.
SHIPPED: Final = (
    (ROOT / "config" / "gateway.yaml", "gateway.schema.json"),
    (data_file("default.yaml"), "gateway.schema.json"),
    (data_file("starter.yaml"), "gateway.schema.json"),
)


@pytest.fixture(autouse=True)
def _python_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """main() sets MCP_GATEWAY_PYTHON for the process; keep that inside each test."""
    monkeypatch.setenv("MCP_GATEWAY_PYTHON", sys.executable)


@pytest.mark.parametrize("path", SCHEMA_COPIES, ids=lambda p: str(Path(p).relative_to(ROOT)))
def test_the_committed_schema_is_the_one_the_structs_generate(path: Path) -> None:
    """Issue 19: config/gateway.schema.json (and its packaged copy) stay in sync."""
    assert path.read_text() == schema_text(), (
        f"{path} is out of date with the config Structs: run `make schema` and commit it"
    )


@pytest.mark.parametrize(("path", "schema"), SHIPPED, ids=lambda p: str(p).rsplit("/", 1)[-1])
def test_every_shipped_config_points_editors_at_the_schema_and_validates_against_it(
    path: Path, schema: str
) -> None:
    """Issue 19: the yaml-language-server comment comes first; the file satisfies the schema."""
    first = path.read_text().splitlines()[0]
    assert first == f"# yaml-language-server: $schema={schema}"
    assert (path.parent / schema).is_file() or path.parent.name == "data"
    document = yaml.safe_load(path.read_text())
    jsonschema.Draft202012Validator(json.loads(schema_text())).validate(document)


def test_the_schema_refuses_what_check_refuses_where_it_can() -> None:
    """Issue 19: an editor flags a typo and a wrong transport; `check` stays the authority."""
    validator = jsonschema.Draft202012Validator(json.loads(schema_text()))
    assert not validator.is_valid({"server": {"prt": 1}})
    assert not validator.is_valid({"backends": [{"name": "a", "transport": "htp", "url": "x"}]})
    assert not validator.is_valid({"backends_from": [{"path": "x", "format": "zed"}]})
    assert validator.is_valid({"backends_from": [{"path": "x", "format": "vscode"}]})


def test_schema_prints_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 19: `trio-mcp-gateway schema` is the one command that regenerates the file."""
    code, out, _ = run(capsys, "schema")
    assert code == 0
    assert out == schema_text()
    assert json.loads(out)["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_init_writes_a_starter_that_check_accepts_and_refuses_to_overwrite(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 19: `init [PATH]` writes a commented starter; --force to overwrite."""
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "init", "conf/gw.yaml")
    assert code == 0
    assert out == "wrote conf/gw.yaml\nwrote conf/gateway.schema.json\n"
    starter = tmp_path / "conf" / "gw.yaml"
    assert starter.read_text() == data_file("starter.yaml").read_text()
    assert (tmp_path / "conf" / "gateway.schema.json").read_text() == schema_text()
    assert [b.name for b in load(starter, env={"MCP_GATEWAY_PYTHON": "python3"}).backends] == [
        "notes"
    ]
    code, _, _ = run(capsys, "check", "-c", "conf/gw.yaml")
    assert code == 0
    starter.write_text("# mine\n")
    code, _, err = run(capsys, "init", "conf/gw.yaml")
    assert code == 2
    assert err == "trio-mcp-gateway init: conf/gw.yaml exists (use --force to overwrite it)\n"
    assert starter.read_text() == "# mine\n"
    code, _, _ = run(capsys, "init", "conf/gw.yaml", "--force")
    assert code == 0
    assert starter.read_text() == data_file("starter.yaml").read_text()


def test_without_c_the_config_is_the_env_var_then_the_repository_file_then_the_packaged_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 19: an installed wheel runs with no repository at hand."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    assert choose_config("mine.yaml") == ("mine.yaml", "-c")
    assert choose_config(None) == (str(data_file("default.yaml")), "packaged default")
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "gateway.yaml").write_text("")
    assert choose_config(None) == ("config/gateway.yaml", "./config/gateway.yaml")
    monkeypatch.setenv(CONFIG_ENV, "/etc/mcp-gateway/gateway.yaml")
    assert choose_config(None) == ("/etc/mcp-gateway/gateway.yaml", CONFIG_ENV)


def test_the_packaged_default_serves_the_demo_backends_with_this_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 19: ${MCP_GATEWAY_PYTHON} is the interpreter running the gateway."""
    config = load(data_file("default.yaml"), env={"MCP_GATEWAY_PYTHON": "/opt/py/bin/python"})
    assert [
        (b.name, getattr(b, "command", ""), getattr(b, "args", [])) for b in config.backends
    ] == [
        ("notes", "/opt/py/bin/python", ["-m", "mcp_gateway_demo.notes"]),
        ("toolbox", "/opt/py/bin/python", ["-m", "mcp_gateway_demo.toolbox"]),
    ]
