"""``backends_from``: the servers of host config files, decoded as native backends.

For each entry, the file is read (JSON, or VS Code's JSON with comments),
its format told (:func:`~gateway.config.hosts.detect_format`), and each of
its servers translated into a native backend entry
(:func:`~gateway.config.hosts.translate`), the entry's ``defaults`` and
``prefix_template`` applied. That entry then goes through the same
``${VAR}`` expansion and the same decoder as a ``backends:`` item, and the
rules across backends see the native and the host backends together.

Every problem keeps its place, in the host's file when it is about a key
written there (``claude_desktop_config.json: mcpServers.github.command:
required field missing``), in the gateway's file when it is about the
entry's ``defaults`` or ``prefix_template``.

Reading the files here, at load time, is what makes ``reload`` re-read
them: a reload loads the whole configuration again.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import msgspec

from gateway.config.decode import decode_backend
from gateway.config.hosts import HostServer, detect_format, translate
from gateway.config.jsonc import JsoncError, loads
from gateway.config.problems import Problems, join
from gateway.config.schema_backends import BackendBase
from gateway.config.schema_gateway import BackendIdentity, GatewayConfig, backend_problems
from gateway.config.schema_hosts import host_file
from gateway.config.source import expand

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from gateway.config.schema_backends import BackendConfig
    from gateway.config.schema_hosts import BackendsFrom

__all__ = ["HostBackend", "DEFAULT_KEYS", "read_entry", "decode_hosts", "resolve"]

# What `defaults` may set: what every backend has, but its identity.
DEFAULT_KEYS: Final = tuple(
    f.encode_name for f in msgspec.structs.fields(BackendBase) if f.name not in ("name", "prefix")
)
_HEAD: Final = re.compile(r"[^.\[]*")


class HostBackend(NamedTuple):
    """One server of a host file, as a native entry, and where its keys came from.

    Attributes:
        label: its place for problems: ``FILE: mcpServers.KEY``.
        backend: the native entry, ``${VAR}`` references unexpanded.
        server: the translation it came from.
        from_defaults: the native keys that the entry's ``defaults`` gave.
        entry_place: the ``backends_from[I]`` item it came from.
        templated: whether the entry's ``prefix_template`` made the name.
    """

    label: str
    backend: dict[str, Any]
    server: HostServer
    from_defaults: frozenset[str]
    entry_place: str
    templated: bool

    def place(self, native: str) -> str:
        """Where a problem at ``native`` (a place inside the native entry) belongs.

        Args:
            native: ``command``, ``env.TOKEN``, ``timeouts.request``, ...

        Returns:
            The place in the host file, or in the gateway file for what the
            ``backends_from`` entry itself set.
        """
        match = _HEAD.match(native)
        head = match.group(0) if match else native
        rest = native[len(head) :]
        if head in self.from_defaults:
            return f"{self.entry_place}.defaults.{native}"
        if head == "prefix" or (head == "name" and self.templated):
            return f"{self.entry_place}.prefix_template"
        if head in ("", "name") or (head == "transport" and head not in self.server.origin):
            return self.label
        return self.label + "." + self.server.origin.get(head, head) + rest


def read_entry(
    entry: BackendsFrom, index: int, base_dir: Path, problems: Problems
) -> list[HostBackend]:
    """Read one ``backends_from`` file and translate its servers.

    Args:
        entry: the ``backends_from`` item.
        index: its position, for places in the gateway's file.
        base_dir: what a relative ``path`` is relative to.
        problems: where problems are recorded.

    Returns:
        The servers that translated, in file order.
    """
    entry_place = f"backends_from[{index}]"
    path = Path(os.path.expanduser(entry.path))
    if not path.is_absolute():
        path = base_dir / path
    try:
        # utf-8-sig: an editor on Windows may have written a byte-order mark.
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        problems.add(join(entry_place, "path"), f"cannot read {entry.path}: {reason}")
        return []
    try:
        document = loads(text)
    except JsoncError as exc:
        problems.add(entry.path, f"not JSON: {exc}")
        return []
    fmt = entry.format if entry.format != "auto" else detect_format(str(path), document)
    unknown = sorted(set(entry.defaults) - set(DEFAULT_KEYS))
    for key in unknown:
        problems.add(
            join(join(entry_place, "defaults"), key),
            "not a key every backend has (one of: " + ", ".join(DEFAULT_KEYS) + ")",
        )
    defaults = {k: v for k, v in entry.defaults.items() if k not in unknown}

    def add(place: str, message: str) -> None:
        problems.add(f"{entry.path}: {place}" if place else entry.path, message)

    servers = translate(document, fmt, path=str(path.resolve()), inputs=entry.inputs, add=add)
    found: list[HostBackend] = []
    for server in servers:
        backend = {**defaults, **server.backend}
        if entry.prefix_template is not None:
            rendered = entry.prefix_template.replace("{name}", backend["name"])
            if rendered:
                # The name too, not only the prefix: names must be unique, and
                # two files may well both list a `github`.
                backend["name"] = rendered
            else:
                backend["prefix"] = ""
        given = frozenset(k for k in defaults if k not in server.backend)
        label = f"{entry.path}: {server.place}"
        templated = bool(entry.prefix_template)
        found.append(HostBackend(label, backend, server, given, entry_place, templated))
    return found


class _Relocated(Problems):
    """Problems of one host backend, forwarded with their places mapped back."""

    def __init__(self, outer: Problems, host: HostBackend) -> None:
        super().__init__()
        self.outer = outer
        self.host = host

    def add(self, place: str, message: str) -> None:
        line_place = self.host.place(place)
        if f"{line_place}: {message}" not in self.outer.items:  # defaults fail once, not per server
            self.outer.add(line_place, message)

    def mute(self, place: str) -> None:
        self.outer.mute(self.host.place(place))


def decode_hosts(
    hosts: Sequence[HostBackend],
    config: GatewayConfig,
    env: Mapping[str, str],
    problems: Problems,
) -> list[BackendConfig] | None:
    """Decode host backends as ``backends:`` items and check them beside the native ones.

    The one decoding path of host servers: :func:`resolve` takes it when the
    gateway loads its file, ``import`` when it prints a host file's servers,
    so ``import`` refuses exactly what ``backends_from`` would.

    Args:
        hosts: what :func:`read_entry` found.
        config: the gateway file (its native backends and naming).
        env: variables for ``${VAR}`` expansion (``import`` passes
            :class:`~gateway.config.source.Unresolved`).
        problems: where problems are recorded, at their places.

    Returns:
        The native backends, then the decoded host backends; None when a
        problem was found, or a value muted by its expansion did not decode
        (``import``'s references: only where the gateway runs is it known).
    """
    decoded: list[tuple[HostBackend, BackendConfig]] = []
    for host in hosts:
        relocated = _Relocated(problems, host)
        backend = decode_backend(expand(host.backend, env, relocated), "", relocated)
        if backend is not None:
            decoded.append((host, backend))
    # The rules across backends see those that decoded: a duplicate name is
    # worth knowing about beside a broken server.
    native = len(config.backends)
    every = [*config.backends, *(backend for _, backend in decoded)]

    def where(position: int) -> str:
        return f"backends[{position}]" if position < native else decoded[position - native][0].label

    identities = [BackendIdentity(i, b.name, b.prefix) for i, b in enumerate(every)]
    for place, message in backend_problems(identities, config.naming, where):
        problems.add(place, message)
    if len(decoded) != len(hosts):
        return None
    return None if problems.items else every


def resolve(
    config: GatewayConfig, base_dir: Path, env: Mapping[str, str], problems: Problems
) -> GatewayConfig | None:
    """Add the servers of every ``backends_from`` file to the config's backends.

    Args:
        config: the decoded gateway file.
        base_dir: the gateway file's folder.
        env: variables for ``${VAR}`` expansion.
        problems: where problems are recorded.

    Returns:
        The config with the host backends after the native ones, or None
        when a problem was found.
    """
    if not config.backends_from:
        return config
    hosts = [
        host
        for index, entry in enumerate(config.backends_from)
        for host in read_entry(host_file(entry), index, base_dir, problems)
    ]
    every = decode_hosts(hosts, config, env, problems)
    if every is None:
        return None
    merged = msgspec.structs.replace(config, backends=every)
    for place, message in merged.profile_problems():
        problems.add(place, message)
    return None if problems.items else merged
