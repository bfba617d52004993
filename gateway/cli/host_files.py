"""``import`` and ``connect``: from a host's config to the gateway's, and back (issue 19).

``import FILE`` prints the native YAML of a host file's servers, so a user
can switch over for good; it is the same translation ``backends_from``
uses, so the printed YAML loads to the same backends.

``connect HOST`` prints the entry that points a host at the gateway: the
gateway's URL for hosts that speak Streamable HTTP (Claude Code, Cursor, VS
Code), ``trio-mcp-gateway stdio -c FILE`` for Claude Desktop, whose config file
starts only local servers. ``--write PATH`` merges it into the host's file:
the file is read as JSON with comments, a backup ``PATH.bak-<UTC time>`` is
written first, and every key the gateway does not know is kept as it was.
Comments cannot survive a JSON rewrite; the backup keeps them, and the
command says so.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import yaml

from gateway import COMMAND
from gateway.config.backends_from import decode_hosts, read_entry
from gateway.config.hosts import root_key
from gateway.config.jsonc import JsoncError, has_comments, loads
from gateway.config.problems import Problems
from gateway.config.schema_gateway import GatewayConfig
from gateway.config.schema_hosts import CONNECT_HOSTS, BackendsFrom, host_file
from gateway.config.source import Unresolved
from gateway.errors import ConfigError

if TYPE_CHECKING:
    from gateway.config.schema_hosts import HostFormat

__all__ = [
    "CONNECT_HOSTS",
    "import_yaml",
    "gateway_command",
    "connect_entry",
    "snippet",
    "merge_into",
    "read_by",
]


def import_yaml(path: str, fmt: str, inputs: dict[str, str]) -> str:
    """The native YAML of a host file's servers.

    Args:
        path: the host's file.
        fmt: its format, or ``auto``.
        inputs: VS Code input ids → environment variable names.

    Returns:
        A ``backends:`` document; variables stay ``${VAR}`` references, so
        no secret that was an ``${env:...}`` in the file is printed.

    Raises:
        ConfigError: for every problem of the file, each at its place.
    """
    # argparse checked the format against its choices already.
    entry = BackendsFrom(path=path, format=cast("HostFormat", fmt), inputs=inputs)
    problems = Problems()
    hosts = read_entry(entry, 0, Path.cwd(), problems)
    # The decoding backends_from does, so what it would refuse is refused here;
    # a value holding a reference is left to the environment the gateway runs in.
    decode_hosts(hosts, GatewayConfig(), Unresolved(), problems)
    if problems.items:
        raise ConfigError(problems.items)
    header = f"# Imported from {path} by `{COMMAND} import`; check it with `{COMMAND} check`.\n"
    document = {"backends": [host.backend for host in hosts]}
    body = yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    if yaml.safe_load(body) != document:
        # PyYAML writes some line breaks (U+0085, U+2028) raw, and reads them
        # back as breaks: then every non-ASCII character is written escaped.
        body = yaml.safe_dump(document, sort_keys=False, allow_unicode=False)
    return header + body


def gateway_command(config: str) -> tuple[str, list[str]]:
    """The command a host runs to start this gateway in stdio mode.

    Hosts start servers with their own working directory and often a short
    ``PATH`` (Claude Desktop on macOS), so both the program and the config
    are absolute. The program is this install's own ``trio-mcp-gateway`` script
    (beside the interpreter, as in a venv, pipx or uv tool install), not
    whichever one ``PATH`` finds first; without one, the interpreter runs
    ``-m gateway``.

    Args:
        config: the gateway's config file.

    Returns:
        The program and its arguments.
    """
    config_path = str(Path(config).resolve())
    script = Path(sys.executable).parent / COMMAND
    if script.is_file():
        return str(script), ["stdio", "-c", config_path]
    return sys.executable, ["-m", "gateway", "stdio", "-c", config_path]


def connect_entry(host: str, *, url: str | None, stdio_config: str | None) -> dict[str, Any]:
    """The server entry pointing ``host`` at the gateway.

    Args:
        host: one of :data:`CONNECT_HOSTS`.
        url: the gateway's URL (HTTP mode).
        stdio_config: the config file for ``trio-mcp-gateway stdio`` (stdio mode).

    Returns:
        The entry, in the host's own format.

    Raises:
        ValueError: when the host cannot use the mode asked for.
    """
    if url is not None:
        if not CONNECT_HOSTS[host]:
            raise ValueError(
                f"{host}'s config file starts only local (stdio) servers: use --stdio -c FILE"
            )
        if host == "cursor":
            return {"url": url}
        return {"type": "http", "url": url}
    if stdio_config is None:
        raise ValueError("give --url URL or --stdio -c FILE")
    command, args = gateway_command(stdio_config)
    entry: dict[str, Any] = {"command": command, "args": args}
    return {"type": "stdio", **entry} if host in ("vscode", "claude-code") else entry


def snippet(host: str, name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """The top-level object holding one entry, as the host's file has it.

    Args:
        host: one of :data:`CONNECT_HOSTS`.
        name: the server's key.
        entry: from :func:`connect_entry`.

    Returns:
        ``{"mcpServers": {name: entry}}`` or, for VS Code, ``{"servers": ...}``.
    """
    return {root_key("vscode" if host == "vscode" else "claude-desktop"): {name: entry}}


def merge_into(path: Path, host: str, name: str, entry: dict[str, Any]) -> list[str]:
    """Merge one server entry into a host's file, after a backup.

    Args:
        path: the host's file; created when missing.
        host: one of :data:`CONNECT_HOSTS`.
        name: the server's key.
        entry: from :func:`connect_entry`.

    Returns:
        Notes for the user (the backup, a replaced entry, lost comments).

    Raises:
        ValueError: when the file is not JSON, or its shape is not the host's;
            nothing is written then.
    """
    notes: list[str] = []
    # A symlinked file (dotfiles kept in a repository) is written where it
    # points, so the link stays a link.
    path = path.resolve() if path.is_symlink() else path
    # utf-8-sig: an editor on Windows may have written a byte-order mark.
    text = path.read_text(encoding="utf-8-sig") if path.exists() else ""
    document: object = {}
    if text.strip():
        try:
            document = loads(text)
        except JsoncError as exc:
            raise ValueError(f"{path} is not valid JSON ({exc}); nothing written") from None
    if not isinstance(document, dict):
        raise ValueError(f"{path}: expected a JSON object at the top level; nothing written")
    root = next(iter(snippet(host, name, entry)))
    servers = document.setdefault(root, {})
    if not isinstance(servers, dict):
        raise ValueError(f"{path}: `{root}` is not an object; nothing written")
    if name in servers:
        notes.append(f"replaced the existing entry {root}.{name}")
    servers[name] = entry
    if path.exists():
        backup = _backup_path(path)
        shutil.copy2(path, backup)
        notes.insert(0, f"backup: {backup}")
        if has_comments(text):
            notes.append(
                f"{path} had comments or trailing commas, which a JSON rewrite cannot keep; "
                f"the backup {backup} has them"
            )
    _write_atomically(path, _dumps(document))
    return notes


def read_by(config: GatewayConfig, config_path: str, target: Path) -> str | None:
    """The ``backends_from`` entry of a config that reads ``target``, if one does.

    Writing the gateway into a file the gateway reads its backends from
    would make it start (or connect to) itself on the next reload.

    Args:
        config: the gateway's config.
        config_path: its file, which relative paths are relative to.
        target: the host file about to be written.

    Returns:
        The entry's place (``backends_from[0]``), or None.
    """
    base = Path(config_path).parent
    for index, entry in enumerate(config.backends_from):
        path = Path(os.path.expanduser(host_file(entry).path))
        if (base / path).resolve() == target.resolve():
            return f"backends_from[{index}]"
    return None


def _dumps(document: object) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _backup_path(path: Path) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    candidate = path.with_name(f"{path.name}.bak-{stamp}")
    counter = 1
    while candidate.exists():  # two writes within a second keep both backups
        candidate = path.with_name(f"{path.name}.bak-{stamp}-{counter}")
        counter += 1
    return candidate


def _write_atomically(path: Path, text: str) -> None:
    """Write via a temporary file and a rename, so a host never reads half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.mcp-gateway-tmp")
    temporary.write_text(text, encoding="utf-8")
    if path.exists():
        shutil.copymode(path, temporary)
    os.replace(temporary, path)
