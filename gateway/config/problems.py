"""The list of ``place: message`` lines that becomes a ConfigError, and how places are written.

Places read like the YAML they point into: ``backends[2].timeouts.request``;
the top level itself is ``<top>``.
"""

from __future__ import annotations

from typing import Final

__all__ = ["TOP", "Problems", "join", "kind"]

TOP: Final = "<top>"


class Problems:
    """Collects ``place: message`` lines, in the order they were found.

    A place already found broken before decoding (an unset environment
    variable, a recursive alias) is *muted*: what stands there now would only
    cause follow-up complaints about the same value.

    Attributes:
        items: the lines so far.
    """

    def __init__(self) -> None:
        self.items: list[str] = []
        self._muted: set[str] = set()

    def add(self, place: str, message: str) -> None:
        """Record a problem, unless its place is within a muted one.

        Args:
            place: where the problem is; "" for the top level.
            message: what is wrong there.
        """
        if any(_within(place, muted) for muted in self._muted):
            return
        self.items.append(f"{place or TOP}: {message}")

    def mute(self, place: str) -> None:
        """Drop every later problem at ``place`` or inside it.

        Args:
            place: a place whose value is already reported as broken.
        """
        self._muted.add(place)


def _within(place: str, root: str) -> bool:
    return place == root or place.startswith((root + ".", root + "["))


def join(place: str, key: object) -> str:
    """The place of ``key`` inside the mapping at ``place``.

    Args:
        place: the mapping's place; "" for the top level.
        key: the key within it.

    Returns:
        ``place.key``, or just the key at the top level; ``place`` itself for
        the key "" (a rule about a whole Struct, not one of its fields).
    """
    if key == "":
        return place
    return f"{place}.{key}" if place else str(key)


def kind(value: object) -> str:
    """What a YAML value is, in the words of a config reader.

    Args:
        value: a parsed YAML value.

    Returns:
        ``null``, ``a mapping``, ``a list`` or the scalar's type name.
    """
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__
