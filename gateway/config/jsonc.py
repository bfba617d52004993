"""JSON with comments (``jsonc``), as VS Code writes its ``mcp.json``.

VS Code accepts ``//`` and ``/* */`` comments and trailing commas in its
settings files; Claude Desktop, Cursor and Claude Code write plain JSON,
which this reads unchanged. Comments are blanked out (kept as spaces, so a
``json`` error still points at the right line and column) and a comma
before ``}`` or ``]`` is dropped; strings are left alone.
"""

from __future__ import annotations

import json
from typing import Final

from gateway.errors import GatewayError

__all__ = ["JsoncError", "loads", "has_comments"]

_WHITESPACE: Final = " \t\r\n"


class JsoncError(GatewayError, ValueError):
    """Text that is not JSON even once comments and trailing commas are set aside.

    Args:
        message: what is wrong, with its line and column.
    """


def loads(text: str) -> object:
    """Parse JSON that may hold comments and trailing commas.

    Args:
        text: the document.

    Returns:
        The parsed value.

    Raises:
        JsoncError: with the line and column of the first problem.
    """
    try:
        return json.loads(_strip(text))
    except json.JSONDecodeError as exc:
        raise JsoncError(f"line {exc.lineno}, column {exc.colno}: {exc.msg}") from None


def has_comments(text: str) -> bool:
    """Whether a document holds comments or trailing commas (which a rewrite loses).

    Args:
        text: the document.

    Returns:
        True when stripping changed something other than whitespace.
    """
    return _strip(text).split() != text.split()


def _strip(text: str) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == '"':
            end = _string_end(text, i)
            out.append(text[i:end])
            i = end
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            # Newlines stay, so later line numbers stay right.
            out.append("".join(c if c == "\n" else " " for c in text[i:end]))
            i = end
        elif char == ",":
            j = _skip_blank(text, i + 1)
            out.append(" " if j < n and text[j] in "}]" else ",")
            i += 1
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _string_end(text: str, start: int) -> int:
    """The index just past the JSON string opening at ``start``."""
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return i + 1
        else:
            i += 1
    return len(text)


def _skip_blank(text: str, i: int) -> int:
    """The index of the next character that is neither whitespace nor inside a comment."""
    n = len(text)
    while i < n:
        if text[i] in _WHITESPACE:
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            break
    return i
