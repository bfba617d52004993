"""``trio-mcp-gateway pins``: list, diff, approve, reject, export and import pins from a terminal.

Rules:

1. **Two places to act on.** ``-c FILE`` opens the state store the config
   names (``store:``) and acts on it directly: the way for a gateway that
   is stopped, or for one that shares a Redis store (a decision there is
   announced to every replica). ``--url URL`` asks a running gateway's
   console (``admin.path``, ``/admin`` unless ``--admin-path``) with the
   admin token (``--token``, else ``$MCP_GATEWAY_ADMIN_TOKEN``), as the
   console would: the CSRF token comes from ``pins.json``.
2. **Names are public names** (``github__create_issue``), as hosts and the
   console show them, or ``backend:kind:name``.
3. **Exit codes:** 0 done, 1 nothing matched or a refusal, 2 the gateway or
   store could not be reached.
4. A decision from the terminal is audited as ``cli`` (``-c``) or as the
   console identity of the token (``--url``).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import TYPE_CHECKING, Any, Final

from gateway.cli.status_report import TOKEN_ENV
from gateway.errors import GatewayError

if TYPE_CHECKING:
    import argparse

    from gateway.config import GatewayConfig
    from gateway.pinning.baseline import BackendIdentity

__all__ = ["add_parser", "run_pins"]

REQUEST_TIMEOUT: Final = 10.0


class PinsCommandError(GatewayError):
    """A ``pins`` command that cannot be done: the message says why; ``code`` is the exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        self.code = code
        super().__init__(message)


def add_parser(commands: Any, config_help: str) -> None:
    """Add ``pins`` and its subcommands to the CLI's parser."""
    pins = commands.add_parser("pins", help="list, diff, approve, reject, export, import pins")
    where = pins.add_mutually_exclusive_group()
    where.add_argument("-c", "--config", help=config_help)
    where.add_argument("--url", help="act through the gateway at this URL (http://HOST:PORT)")
    pins.add_argument("--token", help=f"admin token (default: ${TOKEN_ENV})")
    pins.add_argument("--admin-path", default="/admin", help="the console's path (admin.path)")
    verbs = pins.add_subparsers(dest="verb", required=True)
    listing = verbs.add_parser("list", help="the changes waiting for approval")
    listing.add_argument("--json", action="store_true", help="print them as JSON")
    diff = verbs.add_parser("diff", help="one change: its classes and the definitions' diff")
    diff.add_argument("name", help="the public name")
    for verb in ("approve", "reject"):
        decide = verbs.add_parser(verb, help=f"{verb} changes")
        decide.add_argument("names", nargs="*", help="public names")
        decide.add_argument("--backend", help="every change of this backend")
        decide.add_argument("--all", action="store_true", help="every change")
    export = verbs.add_parser("export", help="print (or write) the signed baseline")
    export.add_argument("-o", "--output", help="write it to this file")
    imp = verbs.add_parser("import", help="pin a signed baseline's definitions as approved")
    imp.add_argument("file")


def _print_list(pending: list[dict[str, Any]], as_json: bool) -> int:
    if as_json:
        print(json.dumps(pending, indent=2))
        return 0
    if not pending:
        print("no change waits for approval")
        return 0
    for p in pending:
        print(f"{p['public']}\t{p['backend']}\t{p['kind']}\t{', '.join(p['classes'])}")
    return 0


def _print_diff(view: dict[str, Any]) -> int:
    print(f"{view['public']} ({view['kind']} of {view['backend']}): {', '.join(view['classes'])}")
    for finding in view["findings"]:
        print(f"  {finding['class']}: {finding['place']}: {finding['detail']}")
    old = (
        json.dumps(view["pinned"], indent=2, sort_keys=True).splitlines() if view["pinned"] else []
    )
    new = json.dumps(view["pending"], indent=2, sort_keys=True).splitlines()
    for line in difflib.unified_diff(old, new, "pinned", "offered", lineterm=""):
        print(line)
    return 0


def _forms(args: argparse.Namespace) -> dict[str, str]:
    if args.all:
        return {"all": "1"}
    if args.backend:
        return {"backend": args.backend}
    if not args.names:
        raise PinsCommandError("name the changes: NAME..., --backend B or --all")
    return {"names": "\n".join(args.names)}


# -- --url: the running gateway's console ------------------------------------------


class _Console:
    def __init__(self, url: str, admin_path: str, token: str | None) -> None:
        parts = urllib.parse.urlsplit(url)
        self.base = f"{parts.scheme}://{parts.netloc}{admin_path.rstrip('/')}"
        self.token = token

    def _ask(self, path: str, form: dict[str, str] | None = None) -> bytes:
        headers = {"accept": "application/json"}
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
        data = None
        if form is not None:
            data = urllib.parse.urlencode(form).encode()
            headers["content-type"] = "application/x-www-form-urlencoded"
        request = urllib.request.Request(self.base + path, data=data, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT) as response:
                body: bytes = response.read()
                return body
        except urllib.error.HTTPError as exc:
            text = exc.read().decode(errors="replace")
            message = f"{self.base}{path} answered HTTP {exc.code}: {_text(text)}"
            raise PinsCommandError(message) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise PinsCommandError(f"cannot reach {self.base}: {reason}", 2) from None

    def pending(self) -> tuple[list[dict[str, Any]], str]:
        answer = json.loads(self._ask("/pins.json"))
        return answer["pending"], answer["csrf"]

    def post(self, path: str, form: dict[str, str]) -> dict[str, Any]:
        _, csrf = self.pending()
        answer: dict[str, Any] = json.loads(
            self._ask(path, {**form, "csrf": csrf, "reply": "json"})
        )
        return answer


def _text(html: str) -> str:
    """The message of the console's refusal page (its text, tags dropped, short)."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()[:300]


def _by_url(args: argparse.Namespace) -> int:
    console = _Console(args.url, args.admin_path, args.token or os.environ.get(TOKEN_ENV))
    if args.verb == "list":
        return _print_list(console.pending()[0], args.json)
    if args.verb == "diff":
        found = [p for p in console.pending()[0] if p["public"] == args.name]
        if not found:
            raise PinsCommandError(f"no change waits for {args.name!r}")
        return _print_diff(found[0])
    if args.verb in ("approve", "reject"):
        answer = console.post("/pins/decide", {"action": args.verb, **_forms(args)})
        for view in answer["decided"]:
            print(f"{args.verb.rstrip('e')}ed {view['public']}")
        return 0 if answer["decided"] else 1
    if args.verb == "export":
        return _write(console._ask("/pins/export"), args.output)
    with open(args.file, encoding="utf-8") as baseline:
        answer = console.post("/pins/import", {"baseline": baseline.read()})
    print(f"imported {answer['imported']} items, {answer['changed']} pins changed")
    return 0


def _write(body: bytes, output: str | None) -> int:
    if output:
        with open(output, "wb") as out:
            out.write(body)
    else:
        sys.stdout.write(body.decode())
    return 0


# -- -c: the store the config names ------------------------------------------------


def _identities(config: GatewayConfig) -> dict[str, BackendIdentity]:
    from gateway.pinning.baseline import BackendIdentity

    out: dict[str, BackendIdentity] = {}
    for backend in config.backends:
        command = str(getattr(backend, "command", "") or "")
        out[backend.name] = BackendIdentity(
            name=backend.name,
            url=str(getattr(backend, "url", "") or ""),
            command=command.replace("\\", "/").rsplit("/", 1)[-1],
        )
    return out


def _key(config: GatewayConfig) -> Any:
    from gateway.pinning.baseline import load_signing_key

    path = config.pins.signing_key_file
    if not path:
        raise PinsCommandError("pinning.signing_key_file is not set in the config")
    try:
        with open(path, "rb") as key_file:
            return load_signing_key(key_file.read())
    except OSError as exc:
        raise PinsCommandError(f"cannot read {path}: {exc.strerror}") from None


async def _by_store(config: GatewayConfig, path: str, args: argparse.Namespace) -> int:
    # The store, the pins and their crypto load here, not for the parser or --url.
    from gateway.backends.pins import PinGuard
    from gateway.catalog.naming import NamingRules
    from gateway.pinning.baseline import decode_baseline, encode_baseline
    from gateway.pinning.book import PinBook
    from gateway.runtime.app import pin_settings
    from gateway.store.opening import open_store

    rules = NamingRules(config.naming.separator, config.naming.max_length)
    guard = PinGuard(*pin_settings(config), rules)
    async with open_store(config.store, config_file=path) as store:
        guard.book = PinBook(store)
        await guard.book.load()
        guard.loaded = True
        if args.verb == "list":
            return _print_list(guard.pending(), args.json)
        if args.verb == "diff":
            found = [p for p in guard.pending() if p["public"] == args.name]
            if not found:
                raise PinsCommandError(f"no change waits for {args.name!r}")
            return _print_diff(found[0])
        if args.verb in ("approve", "reject"):
            form = _forms(args)
            if "all" in form:
                chosen = guard.book.pending()
            elif "backend" in form:
                chosen = guard.book.pending(form["backend"])
            else:
                chosen = []
                for name in args.names:
                    record = guard.find(name)
                    if record is None or record.pending is None:
                        raise PinsCommandError(f"no change waits for {name!r}")
                    chosen.append(record)
            decided = await guard.decide(chosen, approved=args.verb == "approve", by="cli")
            for view in decided:
                print(f"{args.verb.rstrip('e')}ed {view['public']}")
            return 0 if decided else 1
        if args.verb == "export":
            key = _key(config)
            if not hasattr(key, "sign"):
                raise PinsCommandError("pinning.signing_key_file holds a public key: cannot sign")
            return _write(encode_baseline(guard.export(_identities(config)), key), args.output)
        with open(args.file, "rb") as baseline:  # noqa: ASYNC230 - one small file, from a terminal
            document = decode_baseline(baseline.read(), _key(config))
        changed = await guard.import_baseline(document)
        print(f"imported {len(document.items)} items, {changed} pins changed")
        return 0


def _only(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one exception a nursery's group carries (the group itself when there are more)."""
    leaves = list(group.exceptions)
    while len(leaves) == 1 and isinstance(leaves[0], BaseExceptionGroup):
        leaves = list(leaves[0].exceptions)
    return leaves[0] if len(leaves) == 1 else group


def run_pins(config: GatewayConfig | None, path: str | None, args: argparse.Namespace) -> int:
    """Do one ``pins`` command (rules 1-4); returns the exit code."""
    import trio

    try:
        if args.url:
            return _by_url(args)
        assert config is not None
        assert path is not None
        try:
            return trio.run(_by_store, config, path, args)
        except BaseExceptionGroup as group:  # the store's nursery wraps what the command raised
            raise _only(group) from None
    except PinsCommandError as exc:
        print(f"pins: {exc}", file=sys.stderr)
        return exc.code
    except OSError as exc:
        print(f"pins: {exc}", file=sys.stderr)
        return 2
    except GatewayError as exc:  # a baseline that does not verify, a store that does not answer
        print(f"pins: {exc}", file=sys.stderr)
        return 1
