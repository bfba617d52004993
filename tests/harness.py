"""Run a real gateway in-process, on loopback, with real backend processes.

``start_gateway`` starts ``gateway.runtime.app.serve`` in the caller's nursery on
port 0 with the given backends and waits until the named ones are up. The
official ``mcp`` client (``open_client``) then talks to it over Streamable
HTTP, exactly as a host would.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from prometheus_client import CollectorRegistry

from gateway.backends.state import BackendState
from gateway.config import GatewayConfig, parse
from gateway.frontend.list_changed import ListChangedCoalescer
from gateway.runtime.app import Gateway, serve
from tests.servers.paths import EVERYTHING_INSTALL_HINT, everything_command, python_server_command

READY_TIMEOUT = 30.0
SDK2_PYTHON = Path(__file__).resolve().parent.parent / ".venv-sdk2" / "bin" / "python"
"""The official SDK 2.x, in a virtualenv of its own (``make sdk2-venv``): it cannot sit
beside the 1.x test peers."""
# The marks of a module that runs the SDK 2.x: skipped, saying why, without its virtualenv.
NEEDS_SDK2 = [
    pytest.mark.sdk2,
    pytest.mark.skipif(
        not SDK2_PYTHON.exists(),
        reason=".venv-sdk2 is missing: run `make sdk2-venv` (make test always creates it)",
    ),
]
# The HTTP engine ``gateway_config`` puts in ``server.engine``; the ``engine``
# fixture (tests/conftest.py) runs a module on each.
ENGINES = ("h11", "hypercorn")
ENGINE = "h11"


def stdio_backend(name: str, argv: Sequence[str], **extra: Any) -> dict[str, Any]:
    """A backend config entry for a stdio child."""
    entry = {"name": name, "transport": "stdio", "command": argv[0], "args": list(argv[1:])}
    # Tests stop many backends; the reference server ignores stdin EOF, so
    # keep the wait before SIGTERM short.
    return {"stop_grace": 0.3, **entry, **extra}


def sdk_backend(server: str, name: str | None = None, **extra: Any) -> dict[str, Any]:
    """A backend entry for one of the official-SDK test servers in tests/servers."""
    return stdio_backend(name or server, python_server_command(server), **extra)


def everything_backend(name: str = "everything", **extra: Any) -> dict[str, Any]:
    """The official reference server over stdio (installed by ``make test``)."""
    argv = everything_command()
    if argv is None:
        raise RuntimeError(f"reference server not installed; run: {EVERYTHING_INSTALL_HINT}")
    return stdio_backend(name, argv, **extra)


def gateway_config(backends: list[dict[str, Any]], **sections: Any) -> GatewayConfig:
    """A config on 127.0.0.1:0 with these backends; extra top-level sections merge in."""
    document: dict[str, Any] = {
        "server": {"host": "127.0.0.1", "port": 0, "engine": ENGINE},
        "backends": backends,
    }
    for key, value in sections.items():
        document[key] = {**document.get(key, {}), **value}
    return parse(json.dumps(document), env={})


@dataclass
class Running:
    """A gateway started by ``start_gateway``."""

    gateway: Gateway
    base_url: str

    @property
    def url(self) -> str:
        """The MCP endpoint."""
        return self.base_url + self.gateway.config.server.path


async def wait_for_states(gateway: Gateway, wanted: dict[str, BackendState]) -> None:
    """Wait (bounded) until each named backend is in the wanted state."""
    with trio.fail_after(READY_TIMEOUT):
        while True:
            changed = gateway.pool.state_changed
            states = {name: gateway.pool.backends[name].state for name in wanted}
            if states == wanted:
                return
            await changed.wait()


async def start_gateway(
    nursery: trio.Nursery,
    config: GatewayConfig,
    *,
    wait_up: Sequence[str] | None = None,
) -> Running:
    """Serve ``config`` in ``nursery``; wait for ``wait_up`` (default: all) to be up."""
    gateway, binds = await nursery.start(partial(serve, config, registry=CollectorRegistry()))
    names = [b.name for b in config.backends] if wait_up is None else list(wait_up)
    await wait_for_states(gateway, dict.fromkeys(names, BackendState.UP))
    return Running(gateway, binds[0])


async def start_up_told(gateway: Gateway) -> None:
    """Wait until the list_changed that the backends coming up caused have been sent.

    ``start_gateway`` returns when the backends are up, but their catalogs'
    list_changed may still wait for the coalescer's window to reopen; a test
    that counts notices from here on waits for those first.
    """
    live = gateway.live
    assert live is not None
    coalescer = live.coalescer
    assert isinstance(coalescer, ListChangedCoalescer)
    with trio.fail_after(READY_TIMEOUT):
        await coalescer.drained()


@asynccontextmanager
async def open_client(url: str, **session_kwargs: Any) -> AsyncIterator[ClientSession]:
    """The official MCP client, initialized, over Streamable HTTP."""
    async with (
        streamable_http_client(url) as (read, write, _),
        ClientSession(read, write, **session_kwargs) as session,
    ):
        await session.initialize()
        yield session


# A host speaking raw HTTP, for the tests that check the wire rather than a client.
MCP_POST_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
}


def initialize_message(
    client: str = "t", version: str | None = "1", *, msg_id: int = 1, revision: str = "2025-11-25"
) -> dict[str, Any]:
    """A host's `initialize` request as a JSON-RPC object (version None: no clientInfo version)."""
    client_info = {"name": client} if version is None else {"name": client, "version": version}
    return {
        "jsonrpc": "2.0",
        "id": msg_id,
        "method": "initialize",
        "params": {"protocolVersion": revision, "capabilities": {}, "clientInfo": client_info},
    }


def unspawned_backend(name: str) -> dict[str, Any]:
    """A stdio backend entry whose command never runs: a fake connector stands in for it."""
    return {"name": name, "transport": "stdio", "command": "x", "health": {"ping_interval": 0}}


async def run_sdk2_host(script: Path, *args: str, limit: float) -> dict[str, Any]:
    """Run an SDK 2.x host script to its end (exit 0, or its stderr's tail is the failure);
    what it printed last, as JSON."""
    with trio.fail_after(limit):
        done = await trio.run_process(
            [str(SDK2_PYTHON), str(script), *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]
    seen: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return seen
