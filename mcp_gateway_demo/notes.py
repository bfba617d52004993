"""Demo backend: a small note store, run as ``python -m mcp_gateway_demo.notes``.

It exists to show every MCP feature a gateway has to route, not just tools:
tools that answer with ``resource_link`` and embedded ``resource`` blocks,
fixed and templated resources whose list changes at run time (announced with
``notifications/resources/list_changed``), a prompt that embeds a resource,
argument completion of a resource template, and log messages to the client.

Notes live in memory, seeded with a few, unless ``NOTES_DIR`` names a
directory: then each note is a Markdown file there (see
:mod:`mcp_gateway_demo.store`).
"""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path
from typing import Any, Final

import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from pydantic import AnyUrl

from mcp_gateway_demo.serve import (
    ClientLog,
    invalid_params,
    prompt_argument,
    reject_unknown_tools,
    resource_not_found,
    run,
    strict_tool,
)
from mcp_gateway_demo.store import MAX_TITLE_LENGTH, NoteStore

NAME: Final = "gateway-demo-notes"
NOTES_DIR_ENV: Final = "NOTES_DIR"
NOTE_MIME_TYPE: Final = "text/markdown"
INDEX_URI: Final = "notes://index"
NOTE_URI_PREFIX: Final = "notes://note/"
NOTE_URI_TEMPLATE: Final = NOTE_URI_PREFIX + "{title}"

_TITLE: Final = {"type": "string", "minLength": 1, "maxLength": MAX_TITLE_LENGTH}


def note_uri(title: str) -> str:
    """Return the URI of a note; the title is percent-encoded so any title is one segment."""
    return NOTE_URI_PREFIX + urllib.parse.quote(title, safe="")


def _title_param(description: str) -> dict[str, Any]:
    return {**_TITLE, "title": "Title", "description": description}


# None of the tools reaches outside this process.
_READ_ONLY: Final = {"readOnlyHint": True, "openWorldHint": False}
TOOLS: Final = (
    strict_tool(
        "add_note",
        "Add note",
        "Store a new note. Titles are unique; pick another title if one is taken.",
        {
            "readOnlyHint": False,
            "destructiveHint": False,
            "idempotentHint": False,
            "openWorldHint": False,
        },
        {
            "title": _title_param("A short, unique title for the note."),
            "text": {
                "type": "string",
                "title": "Text",
                "description": "The note's body, in Markdown.",
            },
        },
    ),
    strict_tool(
        "list_notes", "List notes", "List the titles of all notes, oldest first.", _READ_ONLY
    ),
    strict_tool(
        "get_note",
        "Get note",
        "Return one note's text, embedded as a notes:// resource.",
        _READ_ONLY,
        {"title": _title_param("The title of the note to read.")},
    ),
    strict_tool(
        "delete_note",
        "Delete note",
        "Delete one note for good.",
        {
            "readOnlyHint": False,
            "destructiveHint": True,
            "idempotentHint": True,
            "openWorldHint": False,
        },
        {"title": _title_param("The title of the note to delete.")},
    ),
)
INDEX: Final = types.Resource(
    uri=AnyUrl(INDEX_URI),
    name="index",
    title="Note index",
    description="A Markdown list of every note, linking to each one's notes:// URI.",
    mimeType=NOTE_MIME_TYPE,
)
TEMPLATE: Final = types.ResourceTemplate(
    uriTemplate=NOTE_URI_TEMPLATE,
    name="note",
    title="Note by title",
    description="One note's Markdown text; the title is percent-encoded.",
    mimeType=NOTE_MIME_TYPE,
)
SUMMARIZE: Final = types.Prompt(
    name="summarize_note",
    title="Summarize note",
    description="Ask the model for a short summary of one note.",
    arguments=[prompt_argument("title", "Title", "The title of the note to summarize.")],
)


def _text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def _embedded(title: str, text: str) -> types.EmbeddedResource:
    contents = types.TextResourceContents(
        uri=AnyUrl(note_uri(title)), mimeType=NOTE_MIME_TYPE, text=text
    )
    return types.EmbeddedResource(type="resource", resource=contents)


def _missing(title: str) -> LookupError:
    return LookupError(f"No note titled {title!r}; list_notes shows the titles that exist")


def _index(store: NoteStore) -> str:
    lines = ["# Notes", ""]
    lines.extend(f"- [{title}]({note_uri(title)})" for title in store.titles())
    if not store.titles():
        lines.append("_No notes yet._")
    return "\n".join(lines) + "\n"


def build_server(store: NoteStore) -> Server[Any, Any]:
    """Declare the notes demo's tools, resources and prompt over ``store``.

    Args:
        store: the notes to serve.

    Returns:
        The server, ready for :func:`mcp_gateway_demo.serve.run` with
        ``resources_changed=True``.
    """
    server: Server[Any, Any] = Server(
        NAME,
        "0.2.0",
        instructions=(
            "Keeps short Markdown notes that you can add, list, read and delete with the"
            " tools, or read as notes:// resources."
        ),
    )
    log = ClientLog(server, NAME)

    async def _changed(event: str) -> None:
        await server.request_context.session.send_resource_list_changed()
        await log.send("info", event)

    @server.list_tools()
    async def _list_tools() -> list[types.Tool]:
        return list(TOOLS)

    @server.call_tool()
    async def _call_tool(name: str, arguments: dict[str, Any]) -> list[types.ContentBlock]:
        # The SDK has checked the arguments against the tool's inputSchema;
        # an exception here becomes an isError result carrying its message.
        if name == "list_notes":
            titles = store.titles()
            if not titles:
                return [_text("There are no notes.")]
            return [_text("\n".join([f"{len(titles)} notes:", *(f"- {t}" for t in titles)]))]
        title = arguments["title"]
        if name == "add_note":
            store.add(title, arguments["text"])
            await _changed(f"note added: {title}")
            link = types.ResourceLink(
                type="resource_link",
                uri=AnyUrl(note_uri(title)),
                name=title,
                title=title,
                mimeType=NOTE_MIME_TYPE,
            )
            return [_text(f"Added note {title!r}."), link]
        if title not in store.titles():
            raise _missing(title)
        if name == "get_note":
            return [_embedded(title, store.get(title).text)]
        store.delete(title)
        await _changed(f"note deleted: {title}")
        return [_text(f"Deleted note {title!r}.")]

    reject_unknown_tools(server, {tool.name for tool in TOOLS})

    @server.list_resources()
    async def _list_resources() -> list[types.Resource]:
        notes = [
            types.Resource(
                uri=AnyUrl(note_uri(title)),
                name=title,
                title=title,
                description=f"The note {title!r}.",
                mimeType=NOTE_MIME_TYPE,
            )
            for title in store.titles()
        ]
        return [INDEX, *notes]

    @server.list_resource_templates()
    async def _list_resource_templates() -> list[types.ResourceTemplate]:
        return [TEMPLATE]

    @server.read_resource()
    async def _read_resource(uri: AnyUrl) -> list[ReadResourceContents]:
        text = str(uri)
        if text == INDEX_URI:
            return [ReadResourceContents(content=_index(store), mime_type=NOTE_MIME_TYPE)]
        segment = text.removeprefix(NOTE_URI_PREFIX)
        title = urllib.parse.unquote(segment)
        if segment == text or "/" in segment or title not in store.titles():
            raise resource_not_found(text)
        return [ReadResourceContents(content=store.get(title).text, mime_type=NOTE_MIME_TYPE)]

    @server.list_prompts()
    async def _list_prompts() -> list[types.Prompt]:
        return [SUMMARIZE]

    @server.get_prompt()
    async def _get_prompt(name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        if name != SUMMARIZE.name:
            raise invalid_params(f"Unknown prompt: {name}")
        title = (arguments or {}).get("title")
        if title is None:
            raise invalid_params(f"Missing required argument for prompt {name}: title")
        if title not in store.titles():
            raise invalid_params(f"Unknown note: {title}")
        instruction = _text("Summarize this note in at most three bullet points.")
        return types.GetPromptResult(
            description=SUMMARIZE.description,
            messages=[
                types.PromptMessage(role="user", content=instruction),
                types.PromptMessage(role="user", content=_embedded(title, store.get(title).text)),
            ],
        )

    @server.completion()
    async def _complete(
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: types.CompletionArgument,
        context: types.CompletionContext | None,
    ) -> types.Completion:
        # Both the prompt and the template take a title; nothing else completes.
        known = (
            ref.name == SUMMARIZE.name
            if isinstance(ref, types.PromptReference)
            else ref.uri == NOTE_URI_TEMPLATE
        )
        if not known:
            raise invalid_params("Unknown completion reference")
        typed = argument.value.casefold()
        offered = store.titles() if argument.name == "title" else []
        matches = [title for title in offered if title.casefold().startswith(typed)]
        # Spec: at most 100 values per answer.
        return types.Completion(
            values=matches[:100], total=len(matches), hasMore=len(matches) > 100
        )

    return server


def main() -> None:
    """Run the notes demo on stdin/stdout."""
    directory = os.environ.get(NOTES_DIR_ENV)
    store = NoteStore(Path(directory).expanduser() if directory else None)
    run(build_server(store), resources_changed=True)


if __name__ == "__main__":
    main()
