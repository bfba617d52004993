"""The gateway as a process: signals, the pid file, stdio mode, one-shot reports.

``gateway.runtime.app`` composes a gateway inside a nursery; this module is what
runs one as a program: ``run`` serves until SIGTERM or SIGINT and reloads on
SIGHUP, ``run_stdio`` serves one host on the process's own stdin/stdout, and
``catalog_report`` starts the backends just long enough to measure the
profiles. Only the command line imports it.
"""

from __future__ import annotations

import contextlib
import os
import signal
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import structlog
import trio

from gateway.catalog.profiles import DEFAULT_PROFILE
from gateway.cli import collector
from gateway.frontend.stdio import STARTUP_WAIT, StdioServer
from gateway.router.profile_setup import budgets, report
from gateway.runtime.app import drain, open_gateway, reload_config, serve

if TYPE_CHECKING:
    from gateway.config import GatewayConfig

logger = structlog.get_logger("gateway.runtime.app")


def _write_pid_file(path: str) -> None:
    if path:
        Path(path).write_text(f"{os.getpid()}\n")


def _remove_pid_file(path: str) -> None:
    if path:
        with contextlib.suppress(OSError):
            Path(path).unlink()


async def _serve_until_signal(config: GatewayConfig, config_path: str | None) -> None:
    signals_wanted = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP]
    with trio.open_signal_receiver(*signals_wanted) as signals:
        async with trio.open_nursery() as nursery:
            gateway, _ = await nursery.start(partial(serve, config, config_path=config_path))
            pid_file = config.shutdown.pid_file
            _write_pid_file(pid_file)
            try:
                async for signum in signals:
                    if signum == signal.SIGHUP:
                        if config_path is None:
                            logger.warning("config.reload.unavailable", reason="no config file")
                        else:
                            logger.info("config.reload.started", path=config_path)
                            await reload_config(gateway, config_path)
                        continue
                    logger.info("gateway.stopping", signal=signal.Signals(signum).name)
                    left = await drain(gateway)
                    logger.info("gateway.drained", cancelled_calls=left)
                    nursery.cancel_scope.cancel()
                    break
            finally:
                _remove_pid_file(pid_file)


async def serve_stdio(
    config: GatewayConfig, config_path: str | None = None, profile: str = DEFAULT_PROFILE
) -> None:
    """Serve one host on stdin/stdout, on one profile, until stdin closes or a signal arrives."""
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async with (
            open_gateway(config, config_path=config_path) as gateway,
            trio.open_nursery() as nursery,
        ):

            async def watch_signals() -> None:
                """SIGHUP reloads; SIGTERM/SIGINT end stdio mode."""
                async for signum in signals:
                    if signum == signal.SIGHUP and config_path is not None:
                        await reload_config(gateway, config_path)
                        continue
                    nursery.cancel_scope.cancel()
                    return

            nursery.start_soon(watch_signals)
            server = StdioServer(
                gateway.router,
                gateway.clients,
                stdin,
                stdout,
                startup=gateway.pool.settled,
                metrics=gateway.metrics,
                profile=profile,
            )
            await server.run()
            nursery.cancel_scope.cancel()


def run_stdio(
    config: GatewayConfig, config_path: str | None = None, profile: str = DEFAULT_PROFILE
) -> None:
    """stdio mode: one host, MCP on stdin/stdout, logs on stderr."""
    trio.run(serve_stdio, config, config_path, profile)


async def catalog_report(config: GatewayConfig, profile: str | None = None) -> str:
    """Start the backends, wait for their first listing, and measure each profile.

    Returns:
        The report ``trio-mcp-gateway catalog`` prints (``router.profiles.report``).
    """
    from prometheus_client import CollectorRegistry as Registry  # only here: serve needs none

    async with open_gateway(config, registry=Registry()) as gateway:
        with trio.move_on_after(STARTUP_WAIT):
            await gateway.pool.settled()
        snapshot = gateway.pool.snapshot
        views = gateway.router.profiles
        names = views.names if profile is None else (profile,)
        return report(budgets(views, names, snapshot), snapshot.problems)


def run(config: GatewayConfig, config_path: str | None = None) -> None:
    """Serve until SIGTERM or SIGINT; SIGHUP reloads ``config_path``.

    The collector's policy for a long-running server is set here
    (``gateway.cli.collector``), not in ``app.serve``, which tests embed.
    """
    collector.tune()
    trio.run(_serve_until_signal, config, config_path)
