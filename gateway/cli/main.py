"""The ``trio-mcp-gateway`` command: parses the command line and dispatches.

Exit codes: 0 on a clean stop, 2 for a configuration that cannot be used
(every problem is printed, each with its place) or a file a command
refuses to touch, 1 for anything else.

The commands that set a gateway up live in :mod:`gateway.cli.config_files`
(``init``, ``schema``, which config file) and :mod:`gateway.cli.host_files`
(``import``, ``connect``); ``status`` is :mod:`gateway.cli.status_report`;
``consent`` is :mod:`gateway.cli.consent_admin`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

from gateway import COMMAND, __version__
from gateway.cli import pins_command
from gateway.cli.config_files import ConfigChoice, choose_config, init, schema_text, set_python_env
from gateway.config import GatewayConfig, format_problems, load
from gateway.config.schema_hosts import CONNECT_HOSTS, HOST_FORMATS
from gateway.errors import ConfigError
from gateway.telemetry import tracing

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

EXIT_CONFIG: Final = 2
CONFIG_HELP: Final = (
    "YAML config file (default: $MCP_GATEWAY_CONFIG, else ./config/gateway.yaml, "
    "else the packaged default)"
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=COMMAND, description="One MCP endpoint in front of many MCP servers."
    )
    parser.add_argument("--version", action="version", version=f"{COMMAND} {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve Streamable HTTP at server.path")
    serve.add_argument("-c", "--config", help=CONFIG_HELP)
    serve.add_argument("--host", help="override server.host")
    serve.add_argument("--port", type=int, help="override server.port")
    stdio = commands.add_parser("stdio", help="serve one host on stdin/stdout (logs on stderr)")
    stdio.add_argument("-c", "--config", help=CONFIG_HELP)
    stdio.add_argument("--profile", default="default", help="serve this profile (default: all)")
    catalog = commands.add_parser(
        "catalog", help="start the backends, print each profile's items and tools/list size"
    )
    catalog.add_argument("-c", "--config", help=CONFIG_HELP)
    catalog.add_argument("--profile", help="only this profile")
    check = commands.add_parser("check", help="validate a config file and exit")
    check.add_argument("-c", "--config", help=CONFIG_HELP)
    reload = commands.add_parser(
        "reload", help="make a running gateway re-read its config (SIGHUP via shutdown.pid_file)"
    )
    reload.add_argument("-c", "--config", help=CONFIG_HELP)
    reload.add_argument("--pid", type=int, help="signal this pid instead of the pid file's")
    imp = commands.add_parser("import", help="print a host config file's servers as native YAML")
    imp.add_argument("file", help="claude_desktop_config.json, .cursor/mcp.json, .vscode/mcp.json…")
    imp.add_argument("--format", default="auto", choices=("auto", *HOST_FORMATS))
    imp.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="ID=VAR",
        help="VS Code ${input:ID} is read from environment variable VAR (repeatable)",
    )
    connect = commands.add_parser("connect", help="print (or write) a host's entry for the gateway")
    connect.add_argument("host", choices=tuple(CONNECT_HOSTS))
    mode = connect.add_mutually_exclusive_group()
    mode.add_argument("--url", help="the gateway's URL (default: from the config's server)")
    mode.add_argument("--stdio", action="store_true", help=f"the host starts `{COMMAND} stdio`")
    connect.add_argument("-c", "--config", help=CONFIG_HELP)
    connect.add_argument("--name", default=COMMAND, help="the server's key in the host")
    connect.add_argument("--write", metavar="PATH", help="merge into this host file (backed up)")
    init_ = commands.add_parser("init", help="write a commented starter config")
    init_.add_argument("path", nargs="?", default="gateway.yaml")
    init_.add_argument("--force", action="store_true", help="overwrite an existing file")
    commands.add_parser("schema", help="print the config's JSON Schema")
    status = commands.add_parser(
        "status",
        help="a running gateway's backends and sessions (exit 0 ready, 1 not, 2 unreachable)",
    )
    where = status.add_mutually_exclusive_group()
    where.add_argument("-c", "--config", help=CONFIG_HELP)
    where.add_argument("--url", help="ask the gateway at this URL (http://HOST:PORT)")
    status.add_argument("--token", help="admin token (default: $MCP_GATEWAY_ADMIN_TOKEN, config)")
    status.add_argument("--json", action="store_true", help="print the /readyz JSON")
    consent = commands.add_parser(
        "consent", help="the people's stored consents to user_consent backends"
    )
    consent_actions = consent.add_subparsers(dest="action", required=True)
    listing = consent_actions.add_parser("list", help="one line per (principal, backend)")
    listing.add_argument("-c", "--config", help=CONFIG_HELP)
    revoke = consent_actions.add_parser("revoke", help="forget a principal's tokens")
    revoke.add_argument("-c", "--config", help=CONFIG_HELP)
    revoke.add_argument("principal", help="the principal key (token:NAME or jwt:ISSUER|SUB)")
    revoke.add_argument("backend", nargs="?", help="only at this backend (default: every one)")
    pins_command.add_parser(commands, CONFIG_HELP)
    return parser


def _reload(config: GatewayConfig, pid: int | None) -> None:
    """Validate the config, then SIGHUP the running daemon."""
    if pid is None:
        if not config.shutdown.pid_file:
            print(
                f"{COMMAND} reload: set shutdown.pid_file in the config, or pass --pid",
                file=sys.stderr,
            )
            raise SystemExit(1)
        try:
            pid = int(Path(config.shutdown.pid_file).read_text().strip())
        except (OSError, ValueError) as exc:
            print(
                f"{COMMAND} reload: cannot read {config.shutdown.pid_file}: {exc}",
                file=sys.stderr,
            )
            raise SystemExit(1) from None
    try:
        os.kill(pid, signal.SIGHUP)
    except ProcessLookupError:
        print(f"{COMMAND} reload: no process {pid}", file=sys.stderr)
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
            f"{COMMAND}: no profile named {profile!r} (configured: {', '.join(sorted(names))})",
            file=sys.stderr,
        )
        raise SystemExit(2)


def _check_anonymous_access(config: GatewayConfig, profile: str | None) -> None:
    """Exit 2 when a ``policy:`` lets no anonymous caller open the stdio profile.

    stdio mode has no principal: under a policy only rules with
    ``anonymous: true`` or ``everyone: true`` apply to it, and a pipe that
    could see nothing is a configuration mistake better said at start.
    """
    from gateway.identity.policy import Policy

    policy = Policy.from_config(config.policy)
    name = profile or "default"
    if policy is not None and not policy.decide(None).opens(name):
        print(
            f"{COMMAND}: the access policy lets no anonymous caller open the profile {name!r}"
            " (stdio mode has no principal: add a rule with anonymous: true)",
            file=sys.stderr,
        )
        raise SystemExit(2)


def _fail(command: str, message: str) -> None:
    print(f"{COMMAND} {command}: {message}", file=sys.stderr)
    raise SystemExit(EXIT_CONFIG)


def _import(args: argparse.Namespace) -> None:
    inputs: dict[str, str] = {}
    for item in args.input:
        ident, sep, variable = item.partition("=")
        if not sep or not ident or not variable:
            _fail("import", f"--input {item!r}: expected ID=VAR")
        inputs[ident] = variable
    from gateway.cli.host_files import import_yaml  # only import and connect load it (start-up)

    try:
        sys.stdout.write(import_yaml(args.file, args.format, inputs))
    except ConfigError as exc:
        print(format_problems(exc), file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None


def _connect(args: argparse.Namespace) -> None:
    from gateway.cli.host_files import connect_entry, merge_into, read_by, snippet  # see _import

    url: str | None = args.url
    stdio_config: str | None = None
    config_path = choose_config(args.config).path
    # Loaded in every mode: a host would only show a server that fails to start.
    config = _load_or_exit(config_path)
    if args.write is not None:
        reader = read_by(config, config_path, Path(args.write))
        if reader is not None:
            _fail(
                "connect",
                f"{args.write} is read by {reader} of {config_path}: the gateway would start "
                "itself; write to the host's file, and let the gateway read a copy",
            )
    if url is None and (args.stdio or not CONNECT_HOSTS[args.host]):
        stdio_config = config_path
    elif url is None:
        server = config.server
        host = "127.0.0.1" if server.host in ("0.0.0.0", "::", "") else server.host
        host = f"[{host}]" if ":" in host else host
        url = f"http://{host}:{server.port}{server.path}"
    try:
        entry = connect_entry(args.host, url=url, stdio_config=stdio_config)
    except ValueError as exc:
        _fail("connect", str(exc))
        return
    if args.write is None:
        print(json.dumps(snippet(args.host, args.name, entry), indent=2))
        return
    try:
        notes = merge_into(Path(args.write), args.host, args.name, entry)
    except (ValueError, OSError) as exc:
        _fail("connect", str(exc))
        return
    for note in notes:
        print(f"{COMMAND} connect: {note}", file=sys.stderr)
    print(f"wrote {args.name} into {args.write}")


def _init(args: argparse.Namespace) -> None:
    try:
        written = init(Path(args.path), force=args.force)
    except FileExistsError as exc:
        _fail("init", str(exc))
        return
    for path in written:
        print(f"wrote {path}")


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the console script."""
    args = _parser().parse_args(argv)
    set_python_env()
    handlers = {"import": _import, "connect": _connect, "init": _init}
    if args.command in handlers:
        handlers[args.command](args)
        return
    if args.command == "schema":
        sys.stdout.write(schema_text())
        return
    if args.command == "status":
        from gateway.cli.status_report import run_status

        config = None if args.url else _load_or_exit(choose_config(args.config).path)
        raise SystemExit(run_status(config, args.url, args.token, as_json=args.json))
    if args.command == "pins":
        if args.url:
            raise SystemExit(pins_command.run_pins(None, None, args))
        choice = choose_config(args.config)
        config = _load_or_exit(choice.path)
        raise SystemExit(pins_command.run_pins(config, choice.path, args))
    choice = choose_config(args.config)
    config = _load_or_exit(choice.path)
    if args.command == "consent":
        import trio

        from gateway.cli.consent_admin import run_consent

        raise SystemExit(
            trio.run(
                run_consent,
                config,
                choice.path,
                args.action,
                getattr(args, "principal", None),
                getattr(args, "backend", None),
            )
        )
    if args.command == "check":
        print(f"{choice.path}: ok ({len(config.backends)} backends)")
        return
    if args.command == "reload":
        _reload(config, args.pid)
        return
    if args.command in ("stdio", "catalog"):
        _check_profile(config, args.profile)
    # structlog and prometheus load here, not for `status`, which must be quick.
    from gateway.telemetry.logs import configure_logging

    if args.command == "stdio":
        # stdout belongs to MCP: logs always go to stderr, as JSON lines.
        configure_logging(config.logging.level, "json", sys.stderr)
        _log_choice(choice)
        _check_anonymous_access(config, args.profile)
        from gateway.cli.process import run_stdio

        with _tracing(config):
            run_stdio(config, choice.path, args.profile)
        return
    if args.command == "catalog":
        configure_logging("warning", "json", sys.stderr)
        import trio

        from gateway.cli.process import catalog_report

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
    _log_choice(choice)
    from gateway.cli.process import run  # hypercorn and trio load only for serving

    with _tracing(config):
        run(config, choice.path)


@contextlib.contextmanager
def _tracing(config: GatewayConfig) -> Iterator[None]:
    """Install the tracer for the process's life (off: nothing is imported); flush at exit."""
    try:
        tracing.configure(config.tracing)
    except ConfigError as exc:
        print(format_problems(exc), file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None
    try:
        yield
    finally:
        tracing.shutdown()


def _log_choice(choice: ConfigChoice) -> None:
    """Say which config file runs, and why that one: without -c it may be a surprise."""
    import structlog

    structlog.get_logger().info("config.file", path=choice.path, chosen_by=choice.chosen_by)
