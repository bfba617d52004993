"""The configuration schema: the ``store:`` block, where state that outlives a request lives.

Without ``store:`` (or without ``store.url``) the embedded store serves:
memory for what may die with the process, a SQLite file for what must
survive a restart of one gateway. With ``store.url`` every replica shares
one Valkey or Redis server.
"""

from __future__ import annotations

from typing import Annotated, Final

from msgspec import Meta

from gateway.config.schema import Base, Invalid

#: The URL schemes of a shared store; ``rediss`` is TLS.
SCHEMES: Final = ("redis://", "rediss://", "valkey://", "valkeys://")


class StoreConfig(Base, frozen=True, kw_only=True):
    """The state store: embedded (the default) or a shared Valkey/Redis server.

    Attributes:
        url: ``redis://HOST:PORT/DB`` or ``rediss://...`` (TLS); empty means
            the embedded store.
        key_prefix: put in front of every key, so several gateways (or other
            applications) can share one server.
        tls: force TLS even on a ``redis://`` URL.
        ca_file: PEM bundle that verifies the server's certificate (TLS);
            empty means the system's.
        password: the server's password (``AUTH``); prefer ``password_file``.
        password_file: a file holding the password (its last newline dropped).
        username: the ACL user, with ``password``; empty means ``default``.
        timeout: seconds one store operation may take before it counts as
            failed; no request waits on the store longer than this.
        path: the embedded store's SQLite file; empty means a file named after
            the config file, beside it (``gateway.yaml`` →
            ``gateway.state.sqlite``), or memory only when the config came
            from no file.
        task_owner_timeout: seconds after the last heartbeat of the replica
            running a task that the task counts as lost: the replica asked
            next about it ends it ``failed`` with a message saying so.
    """

    url: str = ""
    key_prefix: str = "mcp-gateway:"
    tls: bool = False
    ca_file: str = ""
    password: str = ""
    password_file: str = ""
    username: str = ""
    timeout: Annotated[float, Meta(gt=0, le=60)] = 1.0
    path: str = ""
    task_owner_timeout: Annotated[float, Meta(ge=3, le=3600)] = 60.0

    def __post_init__(self) -> None:
        problems: list[tuple[str, str]] = []
        if self.url and not self.url.startswith(SCHEMES):
            problems.append(("url", "must start with redis://, rediss:// or valkey://"))
        if self.password and self.password_file:
            problems.append(("password_file", "give password or password_file, not both"))
        if problems:
            raise Invalid(*problems)
