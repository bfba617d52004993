"""Commands that set a gateway up: which config file, ``init`` and ``schema``.

An installed wheel carries everything ``serve`` needs (issue 19): with no
``-c``, the config is ``$MCP_GATEWAY_CONFIG``, else ``./config/gateway.yaml``
(a clone of the repository), else the packaged ``gateway/data/default.yaml``;
the command line logs which one and why.
"""

from __future__ import annotations

import json
import os
import sys
from importlib.resources import files
from pathlib import Path
from typing import Final, NamedTuple

import msgspec

from gateway.config import GatewayConfig

__all__ = [
    "CONFIG_ENV",
    "PYTHON_ENV",
    "REPO_CONFIG",
    "SCHEMA_NAME",
    "ConfigChoice",
    "choose_config",
    "data_file",
    "schema_text",
    "init",
    "set_python_env",
]

CONFIG_ENV: Final = "MCP_GATEWAY_CONFIG"
# The Python running the gateway, for configs that start demo servers with it.
PYTHON_ENV: Final = "MCP_GATEWAY_PYTHON"
REPO_CONFIG: Final = "config/gateway.yaml"
SCHEMA_NAME: Final = "gateway.schema.json"


class ConfigChoice(NamedTuple):
    """The config file a command uses, and why that one.

    Attributes:
        path: the file.
        chosen_by: ``-c``, ``MCP_GATEWAY_CONFIG``, ``./config/gateway.yaml``
            or ``packaged default``.
    """

    path: str
    chosen_by: str


def data_file(name: str) -> Path:
    """A file shipped in ``gateway/data``.

    Args:
        name: its name.

    Returns:
        Its path (wheels install the package as plain files).
    """
    return Path(str(files("gateway.data").joinpath(name)))


def choose_config(given: str | None) -> ConfigChoice:
    """The config file to use when ``-c`` is ``given`` (or not).

    Args:
        given: the ``-c`` argument, None when absent.

    Returns:
        The file and the reason it was chosen.
    """
    if given is not None:
        return ConfigChoice(given, "-c")
    from_env = os.environ.get(CONFIG_ENV)
    if from_env:
        return ConfigChoice(from_env, CONFIG_ENV)
    if Path(REPO_CONFIG).is_file():
        return ConfigChoice(REPO_CONFIG, f"./{REPO_CONFIG}")
    return ConfigChoice(str(data_file("default.yaml")), "packaged default")


def schema_text() -> str:
    """The JSON Schema of the config file, generated from the config Structs.

    ``check`` stays the authority: the schema cannot express the rules
    across fields (``request <= max_total``, unique prefixes), and keys may
    hold ``${VAR}`` where the schema wants a number.

    Returns:
        The schema as indented JSON, with a final newline.
    """
    schema = msgspec.json.schema(GatewayConfig)
    document = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "mcp-gateway configuration",
        **schema,
    }
    return json.dumps(document, indent=2, sort_keys=False) + "\n"


def init(path: Path, *, force: bool) -> list[Path]:
    """Write the commented starter config, and the schema beside it for editors.

    Args:
        path: where the config goes.
        force: overwrite an existing file.

    Returns:
        The files written.

    Raises:
        FileExistsError: when ``path`` exists and ``force`` is not set.
    """
    if path.exists() and not force:
        raise FileExistsError(f"{path} exists (use --force to overwrite it)")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data_file("starter.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    # The starter's `$schema=gateway.schema.json` is relative to it.
    schema = path.parent / SCHEMA_NAME
    schema.write_text(schema_text(), encoding="utf-8")
    return [path, schema]


def set_python_env() -> None:
    """Make ``${MCP_GATEWAY_PYTHON}`` this interpreter, unless the environment sets it."""
    os.environ.setdefault(PYTHON_ENV, sys.executable)
