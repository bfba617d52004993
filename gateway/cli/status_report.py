"""``trio-mcp-gateway status``: a running gateway's overview in the terminal.

It reads the daemon's ``/readyz`` details (:mod:`gateway.telemetry.overview`) and
prints every backend and the client sessions as aligned columns, or the
JSON as it came with ``--json``. Exit codes: 0 ready, 1 not ready, 2 when
the gateway cannot be asked (unreachable, refused, not a gateway) or the
config cannot be read.

Which listener, which credential (docs/operations.md, "trio-mcp-gateway status"):

- ``--url`` names the gateway (any path is replaced by ``/readyz``);
- otherwise the config decides: the separate operations listener
  (``metrics.port``) when there is one, else the main listener;
- ``/readyz`` details off loopback need an admin token: ``--token``, else
  ``$MCP_GATEWAY_ADMIN_TOKEN``, else the config's first
  ``auth.admin_tokens`` (sent to the main listener only; the operations
  listener is open).

The path stays lean on purpose (it must answer in under a second): the
standard library's ``urllib`` and msgspec, no HTTP client, no trio.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import TYPE_CHECKING, Final, TextIO

import msgspec

from gateway import COMMAND
from gateway.errors import GatewayError
from gateway.telemetry.overview import BackendStatus, ConsentSurvey, Readyz, sessions_total

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gateway.config import GatewayConfig

EXIT_READY: Final = 0
EXIT_NOT_READY: Final = 1
EXIT_UNREACHABLE: Final = 2
TOKEN_ENV: Final = "MCP_GATEWAY_ADMIN_TOKEN"
# /readyz is answered from memory; waiting longer than this means the
# daemon is stuck, which is itself the answer.
REQUEST_TIMEOUT: Final = 3.0
_ANY_ADDRESS: Final = frozenset({"0.0.0.0", "::", ""})
_COLOURS: Final = {"up": "32", "starting": "33", "down": "31", "incompatible": "31"}


class Unreachable(GatewayError):
    """The gateway could not be asked, or did not answer as a gateway does."""


class Target(msgspec.Struct, frozen=True, kw_only=True):
    """Where to ask, and with which token.

    Attributes:
        url: the ``/readyz`` URL.
        token: the admin token to send, or None.
    """

    url: str
    token: str | None = None


def _host(host: str) -> str:
    host = "127.0.0.1" if host in _ANY_ADDRESS else host
    return f"[{host}]" if ":" in host else host


def target_from_config(config: GatewayConfig, token: str | None) -> Target:
    """The ``/readyz`` to ask for a config: the operations listener if any, else the main one."""
    if config.metrics.port:
        return Target(url=f"http://{_host(config.metrics.host)}:{config.metrics.port}/readyz")
    server = config.server
    scheme = "https" if server.tls.enabled else "http"
    if token is None and config.auth.admin_tokens:
        token = config.auth.admin_tokens[0]
    return Target(url=f"{scheme}://{_host(server.host)}:{server.port}/readyz", token=token)


def target_from_url(url: str, token: str | None) -> Target:
    """The ``/readyz`` of the gateway at ``url`` (its path is replaced).

    Raises:
        Unreachable: ``url`` is not an http(s) URL.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise Unreachable(f"--url {url!r}: expected http://HOST:PORT or https://HOST:PORT")
    return Target(url=f"{parts.scheme}://{parts.netloc}/readyz", token=token)


def fetch(target: Target) -> tuple[bytes, Readyz]:
    """GET the ``/readyz`` and decode it; 200 and 503 are both answers.

    Returns:
        The body as it came, and its decoded form.

    Raises:
        Unreachable: no connection, no answer in time, another status, or a
            body that is not a ``/readyz`` document.
    """
    headers = {"accept": "application/json"}
    if target.token:
        headers["authorization"] = f"Bearer {target.token}"
    request = urllib.request.Request(target.url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT) as response:
            body: bytes = response.read()
    except urllib.error.HTTPError as exc:
        if exc.code != 503:
            raise Unreachable(f"{target.url} answered HTTP {exc.code}") from None
        body = exc.read()
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise Unreachable(f"cannot reach {target.url}: {reason}") from None
    try:
        return body, msgspec.json.decode(body, type=Readyz)
    except msgspec.ValidationError as exc:
        raise Unreachable(f"{target.url} is not a gateway's /readyz: {exc}") from None
    except msgspec.DecodeError:
        raise Unreachable(f"{target.url} answered something that is not JSON") from None


def duration(seconds: float | None) -> str:
    """``3d04h``, ``2h05m``, ``4m09s``, ``12s``; ``-`` for none."""
    if seconds is None:
        return "-"
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def _last_error(row: BackendStatus, now: float) -> str:
    if row.last_error is None:
        return "-"
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(row.last_error.at))
    ago = duration(max(0.0, now - row.last_error.at))
    message = " ".join(row.last_error.message.split())
    message = message if len(message) <= 60 else message[:59] + "…"
    return f"{stamp} ({ago} ago) {message}"


def _table(
    header: tuple[str, ...], rows: Sequence[tuple[str, ...]], paint: frozenset[int] = frozenset()
) -> str:
    """Aligned columns; cells of the ``paint`` columns coloured by state (TTY only)."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
    lines = []
    for line_number, row in enumerate((header, *rows)):
        cells = []
        for index, cell in enumerate(row):
            padded = cell if index == len(row) - 1 else cell.ljust(widths[index])
            code = _COLOURS.get(cell) if line_number and index in paint else None
            cells.append(f"\x1b[{code}m{padded}\x1b[0m" if code else padded)
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def render(readyz: Readyz, url: str, *, colour: bool, now: float | None = None) -> str:
    """The overview as text: a heading line, the backends, the sessions."""
    now = time.time() if now is None else now
    overview = readyz.overview
    verdict = "ready" if readyz.ready else "NOT READY"
    if overview is None:
        return (
            f"{verdict}  ({url})\n"
            "no details: this listener shows them only to an admin token "
            f"(--token, ${TOKEN_ENV}, auth.admin_tokens) or on the metrics listener"
        )
    heading = (
        f"mcp-gateway {overview.version}  {verdict}"
        f"{'  draining' if overview.draining else ''}  up {duration(overview.uptime_seconds)}  "
        f"calls in flight {overview.calls_in_flight}  ({url})"
    )
    backends = [
        (
            row.name + ("*" if row.required else ""),
            row.transport,
            row.era or "-",
            row.protocol_version or "-",
            row.state,
            duration(row.uptime_seconds),
            str(row.restarts),
            str(row.in_flight),
            _last_error(row, now),
        )
        for row in overview.backends
    ]
    header = (
        "BACKEND",
        "TRANSPORT",
        "ERA",
        "PROTOCOL",
        "STATE",
        "UPTIME",
        "RESTARTS",
        "IN-FLIGHT",
        "LAST ERROR",
    )
    parts = [heading, "", _table(header, backends, frozenset({4}) if colour else frozenset())]
    if any(row.required for row in overview.backends):
        parts.append("(* required: the gateway is not ready while it is not up)")
    parts.extend(f"{row.name}: {row.era_reason}" for row in overview.backends if row.era_reason)
    # The column above is cut to keep one line per backend; why a backend is
    # not up (a child's last stderr line, say) is worth its whole line.
    why = [
        f"  {row.name}: {' '.join(row.last_error.message.split())}"
        for row in overview.backends
        if row.state != "up" and row.last_error is not None
    ]
    if why:
        parts += ["", "why not up:", *why]
    parts += _consent_lines(overview.consent, now)
    parts.append("")
    parts.append(f"client sessions: {sessions_total(overview)}")
    if overview.sessions:
        groups = [(g.era, g.protocol_version, g.profile, str(g.count)) for g in overview.sessions]
        parts.append(_table(("ERA", "PROTOCOL", "PROFILE", "SESSIONS"), groups))
    return "\n".join(parts)


def _consent_lines(survey: ConsentSurvey | None, now: float) -> list[str]:
    """The ``user_consent`` backends' counts (how many, never who); none without any."""
    if survey is None or not survey.backends:
        return []
    rows = [
        (row.backend, str(row.consented), str(row.expiring_soon), str(row.refresh_failures))
        for row in survey.backends
    ]
    header = ("CONSENT BACKEND", "PRINCIPALS", "EXPIRING SOON", "REFRESH FAILURES")
    ago = duration(max(0.0, now - survey.counted_at))
    return [
        "",
        _table(header, rows),
        f"(principals signed in; expiring soon: no refresh token and the access token ends "
        f"within an hour; refresh failures: refused since this gateway started; "
        f"counted {ago} ago)",
    ]


def run_status(
    config: GatewayConfig | None,
    url: str | None,
    token: str | None,
    *,
    as_json: bool,
    out: TextIO = sys.stdout,
) -> int:
    """Ask the gateway and print the answer; returns the exit code.

    Args:
        config: the loaded config (used unless ``url`` is given).
        url: the gateway's URL (``--url``), or None.
        token: ``--token``, or None: then ``$MCP_GATEWAY_ADMIN_TOKEN``, then
            the config's first admin token.
        as_json: print the ``/readyz`` JSON rather than the table.
        out: where the answer goes (errors go to stderr).
    """
    token = token or os.environ.get(TOKEN_ENV) or None
    try:
        if url is not None:
            target = target_from_url(url, token)
        else:
            assert config is not None
            target = target_from_config(config, token)
        body, readyz = fetch(target)
    except Unreachable as exc:
        print(f"{COMMAND} status: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    if as_json:
        out.write(json.dumps(json.loads(body), indent=2) + "\n")
    else:
        colour = out.isatty() and not os.environ.get("NO_COLOR")
        out.write(render(readyz, target.url, colour=colour) + "\n")
    return EXIT_READY if readyz.ready else EXIT_NOT_READY
