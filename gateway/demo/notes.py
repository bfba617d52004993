"""Demo backend: a small note store, run as ``python -m gateway.demo.notes``.

It exists to show every MCP feature a gateway has to route, not just tools:
tools that answer with ``resource_link`` and embedded ``resource`` blocks,
fixed and templated resources whose list changes at run time (announced with
``notifications/resources/list_changed``), a prompt that embeds a resource,
and argument completion of a resource template.

Notes live in memory, seeded with a few, unless ``NOTES_DIR`` names a
directory: then each note is a Markdown file there, and a directory that does
not exist yet is created and seeded.
"""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from gateway.demo._stdio_server import (
    DemoServer,
    InvalidParams,
    Param,
    PromptArg,
    ResourceInfo,
    ToolOutput,
    embedded_text,
    message,
    resource_link,
)
from gateway.demo._stdio_server import text as text_block

NOTES_DIR_ENV: Final = "NOTES_DIR"
NOTE_MIME_TYPE: Final = "text/markdown"
INDEX_URI: Final = "notes://index"
NOTE_URI_TEMPLATE: Final = "notes://note/{title}"
# Titles become file names under NOTES_DIR; this keeps them well under NAME_MAX.
MAX_TITLE_LENGTH: Final = 100

SEED_NOTES: Final = (
    ("Welcome", "This is the notes demo.\n\nAdd, read and delete notes with the tools."),
    ("Shopping list", "- oat milk\n- coffee beans\n- lemons"),
    ("Gateway ideas", "Route `notes://` resources through the gateway and read them back."),
)

# Shared by the tools: none of them reaches outside this process.
_READ_ONLY: Final = {"readOnlyHint": True, "openWorldHint": False}
_TITLE_SCHEMA: Final = {"type": "string", "minLength": 1, "maxLength": MAX_TITLE_LENGTH}


def note_uri(title: str) -> str:
    """Return the URI of a note; the title is percent-encoded so any title is one segment."""
    return "notes://note/" + urllib.parse.quote(title, safe="")


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


def build_server(store: NoteStore) -> DemoServer:
    """Declare the notes demo's tools, resources and prompts over ``store``.

    Args:
        store: the notes to serve.

    Returns:
        The server, ready to ``run()``.
    """
    server = DemoServer(
        "gateway-demo-notes",
        "0.1.0",
        title="Demo notes",
        instructions=(
            "Keeps short Markdown notes that you can add, list, read and delete with the"
            " tools, or read as notes:// resources."
        ),
        resources_list_changed=True,
    )

    def missing(title: str) -> str:
        return f"No note titled {title!r}; list_notes shows the titles that exist"

    @server.tool(
        title="Add note",
        description="Store a new note. Titles are unique; pick another title if one is taken.",
        params=[
            Param("title", _TITLE_SCHEMA, "Title", "A short, unique title for the note."),
            Param("text", {"type": "string"}, "Text", "The note's body, in Markdown."),
        ],
        annotations={
            "readOnlyHint": False,
            "destructiveHint": False,
            "idempotentHint": False,
            "openWorldHint": False,
        },
    )
    def add_note(title: str, text: str) -> ToolOutput:
        note = store.add(title, text)
        server.notify_resources_changed()
        server.log("info", f"note added: {title}")
        return [
            text_block(f"Added note {note.title!r}."),
            resource_link(
                note_uri(note.title), note.title, title=note.title, mime_type=NOTE_MIME_TYPE
            ),
        ]

    @server.tool(
        title="List notes",
        description="List the titles of all notes, oldest first.",
        annotations=_READ_ONLY,
    )
    def list_notes() -> ToolOutput:
        titles = store.titles()
        if not titles:
            return "There are no notes."
        return "\n".join([f"{len(titles)} notes:", *(f"- {title}" for title in titles)])

    @server.tool(
        title="Get note",
        description="Return one note's text, embedded as a notes:// resource.",
        params=[Param("title", _TITLE_SCHEMA, "Title", "The title of the note to read.")],
        annotations=_READ_ONLY,
    )
    def get_note(title: str) -> ToolOutput:
        try:
            note = store.get(title)
        except KeyError:
            raise LookupError(missing(title)) from None
        return [embedded_text(note_uri(title), note.text, mime_type=NOTE_MIME_TYPE)]

    @server.tool(
        title="Delete note",
        description="Delete one note for good.",
        params=[Param("title", _TITLE_SCHEMA, "Title", "The title of the note to delete.")],
        annotations={
            "readOnlyHint": False,
            "destructiveHint": True,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    )
    def delete_note(title: str) -> ToolOutput:
        try:
            store.delete(title)
        except KeyError:
            raise LookupError(missing(title)) from None
        server.notify_resources_changed()
        server.log("info", f"note deleted: {title}")
        return f"Deleted note {title!r}."

    @server.resource(
        INDEX_URI,
        name="index",
        title="Note index",
        description="A Markdown list of every note, linking to each one's notes:// URI.",
        mime_type=NOTE_MIME_TYPE,
    )
    def read_index() -> str:
        lines = ["# Notes", ""]
        lines.extend(f"- [{title}]({note_uri(title)})" for title in store.titles())
        if not store.titles():
            lines.append("_No notes yet._")
        return "\n".join(lines) + "\n"

    def list_note_resources() -> list[ResourceInfo]:
        return [
            ResourceInfo(
                uri=note_uri(title),
                name=title,
                title=title,
                description=f"The note {title!r}.",
                mime_type=NOTE_MIME_TYPE,
            )
            for title in store.titles()
        ]

    @server.template(
        NOTE_URI_TEMPLATE,
        name="note",
        title="Note by title",
        description="One note's Markdown text; the title is percent-encoded.",
        mime_type=NOTE_MIME_TYPE,
        lister=list_note_resources,
    )
    def read_note(title: str) -> str:
        return store.get(title).text

    @server.completion("title", template=NOTE_URI_TEMPLATE)
    def complete_note_uri_title(context: dict[str, str]) -> list[str]:
        return store.titles()

    @server.prompt(
        title="Summarize note",
        description="Ask the model for a short summary of one note.",
        arguments=[PromptArg("title", "Title", "The title of the note to summarize.")],
    )
    def summarize_note(title: str) -> list[dict[str, Any]]:
        try:
            note = store.get(title)
        except KeyError:
            raise InvalidParams(f"Unknown note: {title}") from None
        return [
            message("user", text_block("Summarize this note in at most three bullet points.")),
            message("user", embedded_text(note_uri(title), note.text, mime_type=NOTE_MIME_TYPE)),
        ]

    @server.completion("title", prompt="summarize_note")
    def complete_prompt_title(context: dict[str, str]) -> list[str]:
        return store.titles()

    return server


def main() -> None:
    """Run the notes demo on stdin/stdout until EOF or SIGTERM."""
    directory = os.environ.get(NOTES_DIR_ENV)
    store = NoteStore(Path(directory).expanduser() if directory else None)
    raise SystemExit(build_server(store).run())


if __name__ == "__main__":
    main()
