"""The notes demo's store: in memory, or one Markdown file per note under a directory.

Kept apart from the server so the MCP side reads as a list of features, and
so the store can be checked without a process.
"""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pathlib import Path

# Titles become file names under NOTES_DIR; this keeps them well under NAME_MAX.
MAX_TITLE_LENGTH: Final = 100

SEED_NOTES: Final = (
    ("Welcome", "This is the notes demo.\n\nAdd, read and delete notes with the tools."),
    ("Shopping list", "- oat milk\n- coffee beans\n- lemons"),
    ("Gateway ideas", "Route `notes://` resources through the gateway and read them back."),
)


@dataclass(frozen=True)
class Note:
    """One note.

    Args:
        title: the note's unique title, also its identity.
        text: its Markdown body.
    """

    title: str
    text: str


class NoteStore:
    """The notes, kept in memory and, when given a directory, mirrored to it.

    One Markdown file per note (the percent-encoded title plus ``.md``), so
    the directory is readable and editable by hand between runs.

    Args:
        directory: where to persist notes; ``None`` keeps them in memory only.
    """

    def __init__(self, directory: Path | None = None) -> None:
        self._directory = directory
        self._notes: dict[str, Note] = {}
        if directory is not None and directory.is_dir():
            for path in sorted(directory.glob("*.md")):
                title = urllib.parse.unquote(path.stem)
                self._notes[title] = Note(title, path.read_text(encoding="utf-8"))
            return
        if directory is not None:
            directory.mkdir(parents=True)
        for title, body in SEED_NOTES:
            self.add(title, body)

    def titles(self) -> list[str]:
        """Return the titles in the order the notes were added."""
        return list(self._notes)

    def get(self, title: str) -> Note:
        """Return the note with this title.

        Raises:
            KeyError: there is no such note.
        """
        return self._notes[title]

    def add(self, title: str, body: str) -> Note:
        """Store a new note.

        Args:
            title: a title no other note has.
            body: the Markdown text.

        Returns:
            The stored note.

        Raises:
            ValueError: the title is blank or already taken.
        """
        if not title.strip():
            raise ValueError("A note title must not be blank")
        if title in self._notes:
            raise ValueError(f"A note titled {title!r} already exists")
        note = Note(title, body)
        self._notes[title] = note
        if self._directory is not None:
            path = self._path(title)
            partial = path.with_name(path.name + ".tmp")
            partial.write_text(body, encoding="utf-8")
            # Replace atomically so a crash never leaves half a note behind.
            os.replace(partial, path)
        return note

    def delete(self, title: str) -> None:
        """Delete a note.

        Raises:
            KeyError: there is no such note.
        """
        del self._notes[title]
        if self._directory is not None:
            self._path(title).unlink(missing_ok=True)

    def _path(self, title: str) -> Path:
        assert self._directory is not None
        return self._directory / (urllib.parse.quote(title, safe=" ") + ".md")
