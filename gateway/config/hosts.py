"""The MCP hosts' own config formats, translated into native backend entries.

Sans-IO: a parsed document in, native backend mappings out (the shape of
one ``backends:`` item of the gateway's YAML), with every problem recorded
at its place in the host's file. :mod:`gateway.config.backends_from` reads
the files and decodes what this returns exactly as it decodes a native
entry, so validation and error messages are the native ones.

The formats (issue 19; each host's MCP documentation):

- ``mcpServers`` (Claude Desktop ``claude_desktop_config.json``, Cursor
  ``.cursor/mcp.json``, Windsurf ``mcp_config.json``, Claude Code
  ``.mcp.json``): ``command``, ``args``, ``env``, ``cwd``, ``url`` (Windsurf
  also ``serverUrl``), ``type``, ``headers``, ``disabled``.
- ``servers`` (VS Code ``.vscode/mcp.json``): the same keys with ``type``
  ``stdio | http | sse``, plus the file's ``inputs``.

Variables become native ``${VAR}`` references, so they are expanded (or
refused when unset) by the same code as the gateway's YAML, and ``import``
can print them unexpanded:

- Claude Code: ``${VAR}`` and ``${VAR:-default}`` are the native syntax.
- Cursor, Windsurf, VS Code: ``${env:VAR}`` is ``${VAR}``; ``${userHome}``
  is ``${HOME}``; ``${workspaceFolder}`` is the folder holding ``.cursor``
  or ``.vscode``.
- VS Code: ``${input:ID}`` is the environment variable that the
  ``backends_from`` entry's ``inputs`` names for ID; the gateway never
  prompts, so an input without one is an error.
- Claude Desktop expands nothing: a ``${`` there is literal text.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from gateway.config.problems import join, kind
from gateway.config.schema import MAX_NAME_LENGTH

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["HostServer", "detect_format", "make_name", "translate", "root_key"]

# `type` values of the hosts, by the native transport they map to.
_TYPES: Final = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamableHttp": "http",
    "sse": "sse",
}
# Keys a server entry may hold, per format family.
_COMMON_KEYS: Final = ("type", "command", "args", "env", "cwd", "url", "headers")
_KEYS: Final = {
    "claude-desktop": (*_COMMON_KEYS, "disabled"),
    "cursor": (*_COMMON_KEYS, "disabled"),
    "windsurf": (*_COMMON_KEYS, "serverUrl", "disabled"),
    "claude-code": _COMMON_KEYS,
    "vscode": _COMMON_KEYS,
}
# The host key each native key is read from, where the names differ.
_NATIVE_KEY: Final = {"type": "transport", "serverUrl": "url", "disabled": "enabled"}
_REFERENCE: Final = re.compile(r"\$\{([^}]*)\}")
_NOT_NAME: Final = re.compile(r"[^a-z0-9-]+")


class HostServer(NamedTuple):
    """One server of a host's file, as a native backend entry.

    Attributes:
        key: its key in the file (``github``).
        place: its place in the file (``mcpServers.github``).
        backend: the native entry: ``name``, ``transport`` and the mapped keys.
        origin: for each native key read from a differently named host key,
            that key (``transport`` came from ``type``), so a problem found
            in the native entry is reported at the host's key.
    """

    key: str
    place: str
    backend: dict[str, Any]
    origin: dict[str, str]


def root_key(fmt: str) -> str:
    """The top-level key listing the servers in a format.

    Args:
        fmt: a concrete format.

    Returns:
        ``servers`` for VS Code, ``mcpServers`` for the others.
    """
    return "servers" if fmt == "vscode" else "mcpServers"


def detect_format(path: str, document: object) -> str:
    """Tell a host's format by the file's name and its top-level key.

    The ``mcpServers`` formats differ only in how they write variables, so
    the name decides; a file of another name with ``mcpServers`` is read as
    Claude Desktop's (nothing expanded), the format every tool shares.

    Args:
        path: the file's path.
        document: its parsed content.

    Returns:
        A concrete format name.
    """
    pure = PurePath(path)
    parent = pure.parent.name
    if isinstance(document, dict) and "servers" in document and "mcpServers" not in document:
        return "vscode"
    if parent == ".vscode":
        return "vscode"
    if parent == ".cursor":
        return "cursor"
    if pure.name == "mcp_config.json" or parent == "windsurf":
        return "windsurf"
    if pure.name == ".mcp.json":
        return "claude-code"
    return "claude-desktop"


def make_name(key: str) -> str:
    """A server's key made into a valid backend name (``GitHub Tools`` → ``github-tools``).

    Args:
        key: the key in the host's file.

    Returns:
        Lowercase letters, digits and ``-``, at most the longest name; ""
        when nothing of the key is usable.
    """
    return _NOT_NAME.sub("-", key.lower()).strip("-")[:MAX_NAME_LENGTH].rstrip("-")


def translate(
    document: object,
    fmt: str,
    *,
    path: str,
    inputs: Mapping[str, str],
    add: Callable[[str, str], None],
) -> list[HostServer]:
    """The servers of a host's document as native backend entries.

    Args:
        document: the parsed file.
        fmt: its concrete format.
        path: the file's path (for ``${workspaceFolder}``).
        inputs: VS Code input ids → environment variable names.
        add: records ``(place, message)`` for a problem in the file.

    Returns:
        One entry per server, in file order; a server with a problem that
        makes it untranslatable is left out (its problem is recorded).
    """
    root = root_key(fmt)
    if not isinstance(document, dict):
        add("", f"expected a JSON object at the top level, got {kind(document)}")
        return []
    servers = document.get(root)
    if servers is None:
        other = "mcpServers" if root == "servers" else "servers"
        hint = f" (it has `{other}`: set `format`)" if other in document else ""
        add(root, f"required key missing{hint}")
        return []
    if not isinstance(servers, dict):
        add(root, f"expected an object, got {kind(servers)}")
        return []
    declared = _declared_inputs(document) if fmt == "vscode" else set()
    refs = _References(fmt, path, inputs, declared)
    found: list[HostServer] = []
    for key, entry in servers.items():
        place = join(root, key)
        server = _server(str(key), entry, place, fmt, refs, add)
        if server is not None:
            found.append(server)
    return found


def _declared_inputs(document: dict[str, Any]) -> set[str]:
    inputs = document.get("inputs")
    if not isinstance(inputs, list):
        return set()
    return {str(i["id"]) for i in inputs if isinstance(i, dict) and "id" in i}


def _server(
    key: str,
    entry: object,
    place: str,
    fmt: str,
    refs: _References,
    add: Callable[[str, str], None],
) -> HostServer | None:
    if not isinstance(entry, dict):
        add(place, f"expected an object, got {kind(entry)}")
        return None
    name = make_name(key)
    if not name:
        add(place, "no backend name can be made of this key (use letters or digits)")
        return None
    known = _KEYS[fmt]
    backend: dict[str, Any] = {"name": name}
    origin: dict[str, str] = {}
    ok = True
    for raw_key, value in entry.items():
        host_key = str(raw_key)
        if host_key not in known:
            # Recorded, and the rest of the entry still checked.
            add(join(place, host_key), f"not supported by the gateway (known: {', '.join(known)})")
            continue
        native = _NATIVE_KEY.get(host_key) or host_key
        if native in backend:
            add(join(place, host_key), f"given twice (also as `{origin.get(native, native)}`)")
            continue
        if host_key != native:
            origin[native] = host_key
        if host_key == "disabled":
            backend[native] = (not value) if isinstance(value, bool) else value
            continue
        if host_key == "type":
            transport = _TYPES.get(value) if isinstance(value, str) else None
            if transport is None:
                add(join(place, "type"), f"unknown type {value!r} (one of: {', '.join(_TYPES)})")
                ok = False
                continue
            value = transport
        else:
            value = refs.rewrite(value, join(place, host_key), add)
        backend[native] = value
    if not ok:
        return None  # its transport is unknown: nothing more to say about it
    if "transport" not in backend:
        transport = _implied_transport(backend, place, add)
        if transport is None:
            return None
        backend["transport"] = transport
    # The native order: what it is called and how it is reached, then the rest.
    ordered = {"name": name, "transport": backend.pop("transport"), **backend}
    return HostServer(key, place, ordered, origin)


def _implied_transport(
    backend: dict[str, Any], place: str, add: Callable[[str, str], None]
) -> str | None:
    """The transport of an entry without ``type``: ``command`` is stdio, ``url`` HTTP."""
    if "command" in backend and "url" in backend:
        add(place, "has both `command` and `url`: set `type`")
        return None
    if "command" in backend:
        return "stdio"
    if "url" in backend:
        return "http"
    add(join(place, "command"), "required field missing (or `url`, for a remote server)")
    return None


class _References:
    """Rewrites a host's variables into native ``${VAR}`` references."""

    def __init__(self, fmt: str, path: str, inputs: Mapping[str, str], declared: set[str]) -> None:
        self.fmt = fmt
        self.inputs = inputs
        self.declared = declared
        parent = PurePath(path).parent
        self.workspace = (
            str(parent.parent) if parent.name in (".vscode", ".cursor", ".windsurf") else None
        )

    def rewrite(self, value: object, place: str, add: Callable[[str, str], None]) -> object:
        """``value`` with every string in it rewritten (lists and objects walked)."""
        if isinstance(value, str):
            return self._string(value, place, add)
        if isinstance(value, list):
            return [self.rewrite(v, f"{place}[{i}]", add) for i, v in enumerate(value)]
        if isinstance(value, dict):
            return {k: self.rewrite(v, join(place, k), add) for k, v in value.items()}
        return value

    def _string(self, text: str, place: str, add: Callable[[str, str], None]) -> str:
        if self.fmt == "claude-code":
            return text  # the native syntax already
        out: list[str] = []
        last = 0
        for match in _REFERENCE.finditer(text):
            out.append(_literal(text[last : match.start()]))
            out.append(self._variable(match.group(1), match.group(0), place, add))
            last = match.end()
        out.append(_literal(text[last:]))
        return "".join(out)

    def _variable(self, inner: str, whole: str, place: str, add: Callable[[str, str], None]) -> str:
        if self.fmt == "claude-desktop":
            return _literal(whole)
        kind_, _, arg = inner.partition(":")
        if kind_ == "env" and arg:
            return "${" + arg + "}"
        if inner == "userHome":
            return "${HOME}"
        if inner == "workspaceFolder":
            if self.workspace is None:
                add(
                    place,
                    f"{whole} is the folder holding the file's .vscode, .cursor or .windsurf "
                    "folder, and this file is in none",
                )
                return ""
            return _literal(self.workspace)
        if self.fmt == "vscode" and kind_ == "input" and arg:
            return self._input(arg, whole, place, add)
        add(
            place,
            f"{whole} is not supported by the gateway (it knows ${{env:NAME}}, "
            "${userHome}, ${workspaceFolder}"
            + (" and ${input:ID})" if self.fmt == "vscode" else ")"),
        )
        return ""

    def _input(self, ident: str, whole: str, place: str, add: Callable[[str, str], None]) -> str:
        if self.declared and ident not in self.declared:
            add(place, f"{whole}: no input {ident!r} in the file's `inputs`")
            return ""
        variable = self.inputs.get(ident)
        if variable is None:
            add(
                place,
                f"{whole} needs a value and the gateway never prompts: name the environment "
                f"variable that holds it in the backends_from entry (inputs: {{{ident}: VAR}})",
            )
            return ""
        return "${" + variable + "}"


def _literal(text: str) -> str:
    """Text that native ``${VAR}`` expansion leaves as it is."""
    return text.replace("${", "$${")
