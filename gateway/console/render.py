"""Pages from Jinja2 templates, and the static files beside them.

Autoescape is on for every template (HTML-escaping every value a backend
or a host could have chosen: tool names, descriptions, error messages).
Templates and static files are package data (``pyproject.toml``), read
once at startup: the console needs no repository and no network.
"""

from __future__ import annotations

import datetime
import json
from importlib import resources
from typing import Any, Final

import jinja2

#: What a table cell shows for "no figure yet" (an en dash).
NONE: Final = "\u2013"
STATIC_TYPES: Final = {
    ".css": b"text/css; charset=utf-8",
    ".js": b"text/javascript; charset=utf-8",
    ".svg": b"image/svg+xml",
}


def _duration(seconds: float | None) -> str:
    """``3d 4h``, ``5m 2s``, ``812 ms``: an age an operator reads at a glance."""
    if seconds is None:
        return NONE
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{secs}s"


def _moment(at: float | None) -> str:
    """A wall-clock moment in UTC, as log lines print it."""
    if at is None:
        return NONE
    stamp = datetime.datetime.fromtimestamp(at, tz=datetime.UTC)
    return stamp.strftime("%Y-%m-%d %H:%M:%S UTC")


def _ms(value: float | None) -> str:
    if value is None:
        return NONE
    if value == float("inf"):
        return "> 600 s"
    return f"{value:.1f} ms" if value < 100 else f"{value:.0f} ms"


def _percent(value: float | None) -> str:
    return NONE if value is None else f"{value * 100:.1f} %"


class Renderer:
    """The console's templates and static files, loaded from the package."""

    def __init__(self) -> None:
        self._env = jinja2.Environment(
            loader=jinja2.PackageLoader("gateway.console", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self._env.filters.update(duration=_duration, moment=_moment, ms=_ms, percent=_percent)
        self._env.filters["json"] = lambda value: json.dumps(value, ensure_ascii=False)
        folder = resources.files("gateway.console") / "static"
        self.static: dict[str, tuple[bytes, bytes]] = {}
        for item in folder.iterdir():
            suffix = "." + item.name.rsplit(".", 1)[-1]
            if item.is_file() and suffix in STATIC_TYPES:
                self.static[item.name] = (item.read_bytes(), STATIC_TYPES[suffix])

    def page(self, template: str, **context: Any) -> bytes:
        """One page rendered to UTF-8 bytes."""
        return self._env.get_template(template).render(**context).encode()
