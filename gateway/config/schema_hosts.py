"""The configuration schema, part four: ``backends_from``, MCP servers listed in a host's file.

People who adopt the gateway already have their servers written down in
their host's format (issue 19). Each entry names one such file; every
server in it becomes a backend, validated as a native one
(:mod:`gateway.config.backends_from`).
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal, TypeAlias, get_args

import msgspec
from msgspec import Meta

from gateway.config.schema import Base

__all__ = ["HostFormat", "HOST_FORMATS", "BackendsFrom", "HostFilePath", "host_file"]

HostFormat: TypeAlias = Literal[
    "auto", "claude-desktop", "cursor", "windsurf", "claude-code", "vscode"
]
# The concrete formats (every choice but `auto`), read off the Literal so a
# format is added in one place.
HOST_FORMATS: Final[tuple[str, ...]] = tuple(f for f in get_args(HostFormat) if f != "auto")

# Hosts `connect` knows, and whether each can reach a server by URL. Here,
# not in gateway.cli.host_files, because the command line's parser needs the
# names for every command and cli_hosts loads only for import and connect.
CONNECT_HOSTS: Final = {
    "claude-desktop": False,
    "claude-code": True,
    "cursor": True,
    "vscode": True,
}

EnvName: TypeAlias = Annotated[
    str,
    Meta(
        pattern="^[A-Za-z_][A-Za-z0-9_]*$",
        extra={"problem": "{value!r} is not an environment variable name"},
    ),
]


class BackendsFrom(Base, frozen=True, kw_only=True):
    """One host config file whose servers become backends.

    Attributes:
        path: the file (``claude_desktop_config.json``, ``.cursor/mcp.json``,
            ``.mcp.json``, ``.vscode/mcp.json``, ...); relative to the
            gateway's config file. Re-read on every reload.
        format: the host whose format the file is in; ``auto`` tells by the
            file's name and its top-level key (``servers`` is VS Code).
        prefix_template: each backend's prefix, ``{name}`` standing for the
            server's key made into a valid name, e.g. ``desk-{name}``. The
            backend is named so too (its prefix is its name), so that two
            files may list a server under the same key; ``""`` mounts the
            file's servers unprefixed instead. Unset, the name (and the
            prefix) is the key made valid.
        defaults: backend keys applied to every server of the file (those
            every transport has: ``session``, ``timeouts``, ``required``,
            ``tools``, ...), checked as the backend's own keys.
        inputs: VS Code ``${input:ID}`` values, each taken from the
            environment variable named here (``{api-key: GITHUB_TOKEN}``):
            the gateway never prompts.
    """

    path: Annotated[str, Meta(min_length=1)]
    format: HostFormat = "auto"
    prefix_template: str | None = None
    defaults: dict[str, Any] = msgspec.field(default_factory=dict)
    inputs: dict[str, EnvName] = msgspec.field(default_factory=dict)


# An entry may be just the file: `backends_from: [~/.cursor/mcp.json]`.
HostFilePath: TypeAlias = Annotated[
    str,
    Meta(min_length=1, description="A host config file: shorthand for `{path: FILE}`."),
]


def host_file(entry: BackendsFrom | str) -> BackendsFrom:
    """A ``backends_from`` item as the full entry (a bare path is ``{path: PATH}``).

    Args:
        entry: the item as written.

    Returns:
        The entry, every option at its default for a bare path.
    """
    return entry if isinstance(entry, BackendsFrom) else BackendsFrom(path=entry)
