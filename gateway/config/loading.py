"""The pipeline: text → YAML → ``${ENV}`` → Structs, and printing what went wrong.

Every problem found on the way is collected, so one :class:`ConfigError`
lists them all, each at its place.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.config.backends_from import resolve
from gateway.config.decode import decode
from gateway.config.problems import Problems
from gateway.config.source import NOT_YAML, expand, read_text, read_yaml
from gateway.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from gateway.config.schema_gateway import GatewayConfig

__all__ = ["parse", "load", "format_problems"]


def parse(
    text: str, *, env: Mapping[str, str] | None = None, source: str | None = None
) -> GatewayConfig:
    """Build a config from YAML text, reporting every problem at once.

    Args:
        text: the YAML document. Empty (or only comments) means all defaults.
        env: variables for ``${VAR}`` expansion; ``os.environ`` when None.
        source: the file name to put in the error, if the text came from one;
            ``backends_from`` paths are relative to its folder (else to the
            working directory).

    Returns:
        The validated configuration.

    Raises:
        ConfigError: with one ``place: message`` line per problem found.
    """
    problems = Problems()
    data = read_yaml(text, problems)
    if data is not NOT_YAML:
        variables = os.environ if env is None else env
        config = decode(expand(data, variables, problems), problems)
        if not problems.items and config is not None:
            base_dir = Path(source).parent if source else Path.cwd()
            config = resolve(config, base_dir, variables, problems)
        if not problems.items and config is not None:
            return config
    raise ConfigError(problems.items, source)


def load(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> GatewayConfig:
    """Read and validate a config file.

    Args:
        path: the YAML file (UTF-8).
        env: variables for ``${VAR}`` expansion; ``os.environ`` when None.

    Returns:
        The validated configuration.

    Raises:
        ConfigError: when the file cannot be read or has problems; ``path`` is
            set to the file name.
    """
    return parse(read_text(path), env=env, source=os.fspath(path))


def format_problems(err: ConfigError) -> str:
    """Render a ConfigError for a terminal: one problem per line.

    Each line starts with the file path when there is one, so editors and
    terminals can jump to the file (``gateway.yaml: server.port: ...``).

    Args:
        err: the error raised by :func:`parse` or :func:`load`.

    Returns:
        The lines joined with newlines, without a trailing newline.
    """
    head = f"{err.path}: " if err.path else ""
    return "\n".join(head + problem for problem in err.problems)
