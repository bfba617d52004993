"""The ``mcp-gateway`` command.

Exit codes: 0 on a clean stop, 2 for a configuration that cannot be used
(every problem is printed, each with its place), 1 for anything else.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

from gateway import __version__
from gateway.config import GatewayConfig, format_problems, load
from gateway.errors import ConfigError
from gateway.observability import configure_logging

if TYPE_CHECKING:
    from collections.abc import Sequence

EXIT_CONFIG: Final = 2
DEFAULT_CONFIG: Final = "config/gateway.yaml"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-gateway", description="One MCP endpoint in front of many MCP servers."
    )
    parser.add_argument("--version", action="version", version=f"mcp-gateway {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve Streamable HTTP at server.path")
    serve.add_argument("-c", "--config", default=DEFAULT_CONFIG, help="YAML config file")
    serve.add_argument("--host", help="override server.host")
    serve.add_argument("--port", type=int, help="override server.port")
    stdio = commands.add_parser("stdio", help="serve one host on stdin/stdout (logs on stderr)")
    stdio.add_argument("-c", "--config", default=DEFAULT_CONFIG, help="YAML config file")
    stdio.add_argument("--profile", default="default", help="serve this profile (default: all)")
    catalog = commands.add_parser(
        "catalog", help="start the backends, print each profile's items and tools/list size"
    )
    catalog.add_argument("-c", "--config", default=DEFAULT_CONFIG, help="YAML config file")
    catalog.add_argument("--profile", help="only this profile")
    check = commands.add_parser("check", help="validate a config file and exit")
    check.add_argument("-c", "--config", default=DEFAULT_CONFIG, help="YAML config file")
    reload = commands.add_parser(
        "reload", help="make a running gateway re-read its config (SIGHUP via shutdown.pid_file)"
    )
    reload.add_argument("-c", "--config", default=DEFAULT_CONFIG, help="YAML config file")
    reload.add_argument("--pid", type=int, help="signal this pid instead of the pid file's")
    return parser


def _reload(config: GatewayConfig, pid: int | None) -> None:
    """Validate the config, then SIGHUP the running daemon."""
    if pid is None:
        if not config.shutdown.pid_file:
            print(
                "mcp-gateway reload: set shutdown.pid_file in the config, or pass --pid",
                file=sys.stderr,
            )
            raise SystemExit(1)
        try:
            pid = int(Path(config.shutdown.pid_file).read_text().strip())
        except (OSError, ValueError) as exc:
            print(
                f"mcp-gateway reload: cannot read {config.shutdown.pid_file}: {exc}",
                file=sys.stderr,
            )
            raise SystemExit(1) from None
    try:
        os.kill(pid, signal.SIGHUP)
    except ProcessLookupError:
        print(f"mcp-gateway reload: no process {pid}", file=sys.stderr)
        raise SystemExit(1) from None
    print(f"sent SIGHUP to {pid}")


def _load_or_exit(path: str) -> GatewayConfig:
    try:
        return load(path)
    except ConfigError as exc:
        print(format_problems(exc), file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None


def _check_profile(config: GatewayConfig, profile: str | None) -> None:
    """Exit 2 when ``--profile`` names no profile (``default`` always exists)."""
    names = {"default", *(p.name for p in config.profiles)}
    if profile is not None and profile not in names:
        print(
            f"mcp-gateway: no profile named {profile!r} (configured: {', '.join(sorted(names))})",
            file=sys.stderr,
        )
        raise SystemExit(2)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the console script."""
    args = _parser().parse_args(argv)
    config = _load_or_exit(args.config)
    if args.command == "check":
        print(f"{args.config}: ok ({len(config.backends)} backends)")
        return
    if args.command == "reload":
        _reload(config, args.pid)
        return
    if args.command in ("stdio", "catalog"):
        _check_profile(config, args.profile)
    if args.command == "stdio":
        # stdout belongs to MCP: logs always go to stderr, as JSON lines.
        configure_logging(config.logging.level, "json", sys.stderr)
        from gateway.app import run_stdio

        run_stdio(config, args.config, args.profile)
        return
    if args.command == "catalog":
        configure_logging("warning", "json", sys.stderr)
        import trio

        from gateway.app import catalog_report

        print(trio.run(catalog_report, config, args.profile))
        return
    server = config.server
    if args.host is not None or args.port is not None:
        server = msgspec.structs.replace(
            server,
            host=args.host if args.host is not None else server.host,
            port=args.port if args.port is not None else server.port,
        )
        config = msgspec.structs.replace(config, server=server)
    configure_logging(config.logging.level, config.logging.format)
    from gateway.app import run  # hypercorn and trio load only for serving

    run(config, args.config)
