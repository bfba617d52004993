"""Where a config comes from: the file's text, its YAML, and ``${ENV}`` expansion.

1. **YAML** with PyYAML's safe loader, plus a duplicate-key check: a second
   ``backends:`` key would otherwise silently replace the first. Each
   duplicate is reported with its line and column.
2. **Environment expansion** of ``${VAR}`` and ``${VAR:-default}`` inside
   string *values*, after parsing, so an environment value can never inject
   YAML structure; ``$${`` is a literal ``${``. Expanded values stay strings
   (the decoder converts ``port: ${PORT}`` to an int).

:func:`read_text` is the only file I/O of the config package but one: the
host files of ``backends_from``, read by :mod:`gateway.config.backends_from`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import yaml

from gateway.config.problems import TOP, Problems, join
from gateway.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["NOT_YAML", "read_text", "read_yaml", "Unresolved", "expand"]


class _NotYaml:
    """The type of :data:`NOT_YAML`."""


# What read_yaml returns for text that is not YAML at all (its problem is recorded).
NOT_YAML: Final = _NotYaml()


def read_text(path: str | os.PathLike[str]) -> str:
    """The text of a config file.

    Args:
        path: the YAML file (UTF-8).

    Returns:
        Its contents.

    Raises:
        ConfigError: when the file cannot be read or is not UTF-8; ``path``
            is set to the file name.
    """
    name = os.fspath(path)
    try:
        return Path(name).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [f"{TOP}: not UTF-8 text ({exc.reason} at byte {exc.start})"], name
        ) from exc
    except OSError as exc:
        raise ConfigError([f"{TOP}: cannot read the file: {exc.strerror or exc}"], name) from exc


class _Loader(yaml.SafeLoader):
    """safe_load's loader, noting duplicate keys instead of keeping the last."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicates: list[str] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            # "<<" merge keys legitimately repeat and override.
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                if key_node.value in seen:
                    mark = key_node.start_mark
                    self.duplicates.append(
                        f"line {mark.line + 1}, column {mark.column + 1}: "
                        f"duplicate key {key_node.value!r}"
                    )
                seen.add(key_node.value)
        return super().construct_mapping(node, deep=deep)


def read_yaml(text: str, problems: Problems) -> object:
    """Parse a YAML document, recording its problems.

    Args:
        text: the document.
        problems: where syntax errors and duplicate keys are recorded.

    Returns:
        The parsed document (with the last of duplicate keys, so that the
        other problems in the file are found too), or :data:`NOT_YAML`.
    """
    loader: _Loader | None = None
    try:
        loader = _Loader(text)  # checks the characters already
        data = loader.get_single_data()
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        problems.add(
            f"line {line}, column {column}",
            f"invalid YAML: {exc.reason} (character #x{exc.character:04x})",
        )
        return NOT_YAML
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = exc.problem or exc.context or "invalid YAML"
        if exc.context and exc.problem:
            what = f"{exc.problem} ({exc.context})"
        place = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problems.add(place, f"invalid YAML: {what}")
        return NOT_YAML
    finally:
        if loader is not None:
            loader.dispose()
    problems.items.extend(loader.duplicates)
    return data


# "$${" escapes; "${NAME}" or "${NAME:-default}" expands; any other "${" is malformed.
# A default may hold "$" but not "${": nesting is not supported, and refusing it
# is clearer than half-expanding it.
_REFERENCE: Final = re.compile(
    r"\$\$\{|\$\{(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>(?:[^}$]|\$(?!\{))*))?\})?"
)


class Unresolved(dict[str, str]):
    """An environment that leaves every ``${VAR}`` to the one the gateway will run in.

    ``import`` checks a host file's servers on the decoding path
    ``backends_from`` takes, but prints the references, not their values:
    under this environment a reference to a variable is no problem, and its
    place is muted, since what stands there is only known where the gateway
    runs (an unset variable is reported there, by ``check`` or at start).
    """


def expand(data: object, env: Mapping[str, str], problems: Problems) -> object:
    """Expand ``${...}`` references in every string value (not key) of a YAML tree.

    A value whose expansion fails is reported once and its place muted.

    Args:
        data: the parsed document.
        env: the variables.
        problems: where unset variables, malformed references and recursive
            aliases are recorded.

    Returns:
        A copy of the tree with references replaced.
    """
    return _expand(data, "", env, problems, set())


def _expand(
    node: object, place: str, env: Mapping[str, str], problems: Problems, active: set[int]
) -> object:
    if isinstance(node, str):
        return _expand_string(node, place, env, problems)
    if isinstance(node, dict | list):
        # A YAML alias can make a node contain itself.
        if id(node) in active:
            problems.add(place, "recursive YAML alias")
            problems.mute(place)
            return node
        active.add(id(node))
        try:
            if isinstance(node, dict):
                return {
                    k: _expand(v, join(place, k), env, problems, active) for k, v in node.items()
                }
            return [_expand(v, f"{place}[{i}]", env, problems, active) for i, v in enumerate(node)]
        finally:
            active.discard(id(node))
    return node


def _expand_string(text: str, place: str, env: Mapping[str, str], problems: Problems) -> str:
    failures: list[str] = []
    unresolved = False

    def substitute(match: re.Match[str]) -> str:
        whole = match.group(0)
        if whole == "$${":
            return "${"
        name = match.group("name")
        if name is None:
            failures.append(
                "malformed ${...} reference (use ${NAME} or ${NAME:-default}; $${ for a literal ${)"
            )
            return whole
        if isinstance(env, Unresolved):
            nonlocal unresolved
            unresolved = True
            return ""
        value = env.get(name)
        default = match.group("default")
        if default is not None:
            # Shell ":-": the default also replaces an empty value.
            return value or default
        if value is None:
            failures.append(f"environment variable {name} is not set")
            return ""
        return value

    result = _REFERENCE.sub(substitute, text)
    for failure in failures:
        problems.add(place, failure)
    if failures or unresolved:
        problems.mute(place)
    return result
