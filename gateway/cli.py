"""The ``mcp-gateway`` command.

Exit codes: 0 on a clean stop, 2 for a configuration that cannot be used
(every problem is printed, each with its place), 1 for anything else.
"""

from __future__ import annotations

import argparse
import sys
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
    check = commands.add_parser("check", help="validate a config file and exit")
    check.add_argument("-c", "--config", default=DEFAULT_CONFIG, help="YAML config file")
    return parser


def _load_or_exit(path: str) -> GatewayConfig:
    try:
        return load(path)
    except ConfigError as exc:
        print(format_problems(exc), file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the console script."""
    args = _parser().parse_args(argv)
    config = _load_or_exit(args.config)
    if args.command == "check":
        print(f"{args.config}: ok ({len(config.backends)} backends)")
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

    run(config)
