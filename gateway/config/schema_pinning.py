"""The configuration schema: the ``pinning:`` block, for when backend definitions change.

``pinning.mode`` at the top level is every backend's mode;
``backends[].pinning`` overrides it for one backend. YAML reads an unquoted
``off`` (and ``no``, ``false``) as the boolean false: it means ``off``, as
the issue's config names promise; ``true`` names no mode and is refused.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from gateway.config.schema import Base, Invalid

__all__ = ["BackendPinning", "PinModeName", "PinningConfig", "mode_name"]

PinModeName: TypeAlias = Literal["off", "record", "warn", "hold", "block"]
#: A mode as written: a name, or YAML's ``false`` (``off`` unquoted) for ``off``.
ModeValue: TypeAlias = PinModeName | bool


def mode_name(value: ModeValue) -> PinModeName:
    """The mode a written value names: ``false`` is ``off``."""
    if isinstance(value, bool):
        return "off"
    return value


def _mode_problem(value: ModeValue) -> list[tuple[str, str]]:
    if value is True:
        return [("mode", "true names no mode: give off, record, warn, hold or block")]
    return []


class PinningConfig(Base, frozen=True, kw_only=True):
    """Pinning of what backends declare (docs/security.md, "Pinning").

    Attributes:
        mode: ``off`` pins nothing; ``record`` pins on first sight and lists
            changes, serving them; ``warn`` also logs a warning per change;
            ``hold`` keeps serving the pinned definition until a person
            approves the change; ``block`` shows the pinned definition and
            refuses calls to a changed item (-32602) until approved. Off by
            default: pinning writes every backend's definitions to the state
            store, which an operator opts into.
        hold_new: under ``hold``, an item never seen before is hidden until
            approved too (otherwise first sight pins it).
        baseline: a signed baseline file (``pins export``) imported at start:
            its definitions are pinned as approved before any backend lists.
        signing_key_file: a PEM Ed25519 key; its private half signs exported
            baselines, its public half verifies imported ones.
    """

    mode: ModeValue = "off"
    hold_new: bool = False
    baseline: str = ""
    signing_key_file: str = ""

    def __post_init__(self) -> None:
        problems = _mode_problem(self.mode)
        if self.baseline and not self.signing_key_file:
            problems.append(("baseline", "a baseline is verified: set signing_key_file too"))
        if problems:
            raise Invalid(*problems)

    @property
    def mode_name(self) -> PinModeName:
        """The mode, ``false`` read as ``off``."""
        return mode_name(self.mode)


class BackendPinning(Base, frozen=True, kw_only=True):
    """One backend's override of ``pinning:`` (the long form of ``backends[].pinning``).

    Attributes:
        mode: this backend's mode (see :class:`PinningConfig`).
        hold_new: this backend's ``hold_new``; None follows the top level.
    """

    mode: ModeValue
    hold_new: bool | None = None

    def __post_init__(self) -> None:
        problems = _mode_problem(self.mode)
        if problems:
            raise Invalid(*problems)
