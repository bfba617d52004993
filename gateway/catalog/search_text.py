"""What the tool search reads from a tool, and what it reads from a query (sans-IO).

Rules:

1. Documents and queries go through the same ``words`` function, so a word
   split one way in a tool is split the same way in a request: ``readTextFile``,
   ``read_text_file``, ``read-text-file`` and ``read text file`` are one
   thing, and ``base64`` is ``base 64`` on both sides. Stemming (``files`` ->
   ``file``, ``listing`` -> ``list``) is left to FTS5's porter tokenizer,
   which applies it to both sides as well.
2. A query is never FTS5 syntax. It is cut into words, each word is quoted
   and the words are joined with ``OR``: quotes, ``*``, ``^``, ``:`` column
   filters, ``NEAR``, ``AND``/``OR``/``NOT`` and parentheses in a request are
   plain text. ``OR`` and not FTS5's implicit ``AND`` because a request in
   natural language has words no tool mentions ("please", "my").
3. Everything read from a tool is bounded (schema depth, property count,
   characters per field): a backend with a huge or hostile schema costs a
   bounded index row, never a slow gateway.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

# Bounds on what one tool contributes (rule 3). A real tool's schema is a few
# levels deep with tens of properties; these are well above that.
MAX_SCHEMA_DEPTH: Final = 4
MAX_SCHEMA_PROPERTIES: Final = 64
MAX_ENUM_VALUES: Final = 16
MAX_FIELD_CHARS: Final = 4096
MAX_PARAMS_CHARS: Final = 16384
MAX_QUERY_WORDS: Final = 32

# Lower/upper-case boundaries ("readText" -> "read Text", "HTTPServer" ->
# "HTTP Server") and letter/digit boundaries ("base64" -> "base 64").
_CAMEL: Final = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_DIGITS: Final = re.compile(r"(?<=[^\W\d_])(?=\d)|(?<=\d)(?=[^\W\d_])")
# A word: letters and digits in any script; "_", "-" and punctuation separate.
_WORD: Final = re.compile(r"[^\W_]+")

# Words that say nothing about which tool is meant. BM25's IDF already weighs
# common words down; dropping them also keeps a 10,000-tool query from
# scoring every row that says "the".
STOP_WORDS: Final = frozenset(
    [
        "a",
        "about",
        "all",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "could",
        "do",
        "does",
        "for",
        "from",
        "get",
        "give",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "let",
        "me",
        "my",
        "need",
        "of",
        "on",
        "or",
        "our",
        "please",
        "show",
        "some",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "this",
        "those",
        "to",
        "us",
        "using",
        "want",
        "we",
        "what",
        "when",
        "where",
        "which",
        "who",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)


def words(text: str) -> list[str]:
    """The lower-case words of ``text``, split on ``_``, ``-``, case changes and digits.

    Args:
        text: any text: a tool name, a description, a request.

    Returns:
        The words in order, repeats kept (BM25 counts them).
    """
    spaced = _DIGITS.sub(" ", _CAMEL.sub(" ", text[:MAX_FIELD_CHARS]))
    return [word.casefold() for word in _WORD.findall(spaced)]


def _text(value: object) -> str:
    return value[:MAX_FIELD_CHARS] if isinstance(value, str) else ""


@dataclass(frozen=True, slots=True)
class ToolText:
    """One tool as the index's columns, each already split into words."""

    name: str
    title: str
    description: str
    params: str
    backend: str


def _schema_words(schema: Mapping[str, Any]) -> Iterator[str]:
    """Names, titles, descriptions and string enum values of a schema's properties, bounded.

    Walks ``properties`` breadth-first, into nested objects and array
    ``items``, at most ``MAX_SCHEMA_DEPTH`` levels and
    ``MAX_SCHEMA_PROPERTIES`` properties in all.
    """
    level: list[Mapping[str, Any]] = [schema]
    seen = 0
    for _ in range(MAX_SCHEMA_DEPTH):
        deeper: list[Mapping[str, Any]] = []
        for node in level:
            properties = node.get("properties")
            if not isinstance(properties, dict):
                continue
            for name, spec in properties.items():
                if seen >= MAX_SCHEMA_PROPERTIES:
                    return
                seen += 1
                yield _text(name)
                if not isinstance(spec, dict):
                    continue
                yield _text(spec.get("title"))
                yield _text(spec.get("description"))
                enum = spec.get("enum")
                if isinstance(enum, list):
                    yield from (_text(v) for v in enum[:MAX_ENUM_VALUES])
                deeper.append(spec)
                items = spec.get("items")
                if isinstance(items, dict):
                    deeper.append(items)
        level = deeper
        if not level:
            return


def tool_text(item: Mapping[str, Any], *, original: str, prefix: str) -> ToolText:
    """The searchable text of one public tool.

    Args:
        item: the tool as listed (``name``, ``title``, ``description``,
            ``inputSchema``; ``annotations.title`` stands in for a missing
            ``title``).
        original: the tool's name at its backend; the name column holds
            this, so the backend prefix every tool of a backend shares does
            not dilute what the name says.
        prefix: the backend's public prefix, indexed in a column of its own
            ("files", "notes") so a request that names a server still helps.

    Returns:
        The columns, space-joined words.
    """
    title = item.get("title")
    annotations = item.get("annotations")
    if not isinstance(title, str) and isinstance(annotations, dict):
        title = annotations.get("title")
    schema = item.get("inputSchema")
    params: list[str] = []
    if isinstance(schema, dict):
        budget = MAX_PARAMS_CHARS
        for piece in _schema_words(schema):
            if len(piece) > budget:
                break
            budget -= len(piece)
            params.extend(words(piece))
    return ToolText(
        name=" ".join(words(original)),
        title=" ".join(words(_text(title))),
        description=" ".join(words(_text(item.get("description")))),
        params=" ".join(params),
        backend=" ".join(words(prefix)),
    )


# Groups of words that name the same thing in tool land: a request's word
# also searches for the rest of its group. Only general software and
# desk vocabulary (shell verbs, file and media words), nothing about one
# server's tools; BM25 still decides which tool says it best.
SYNONYM_GROUPS: Final[tuple[frozenset[str], ...]] = tuple(
    frozenset(group.split())
    for group in (
        "directory folder dir",
        "delete remove erase rm del",
        "move rename mv",
        "copy cp duplicate",
        "list ls enumerate",
        "read cat open view",
        "write save store persist",
        "edit modify change patch",
        "search find locate lookup grep",
        "create make mkdir touch",
        "image picture photo png jpg jpeg gif img",
        "audio sound mp3 wav",
        "note memo",
        "sleep wait pause delay",
        "multiply times product",
        "add plus sum total",
        "mean average",
        "statistics stats",
        "uuid guid",
        "time clock",
        "environment env",
        "variables vars",
        "compress zip gzip",
        "fail error exception",
        "echo repeat parrot",
        "info metadata stat details",
        "identifier id",
        "size biggest largest smallest",
    )
)
SYNONYMS: Final[Mapping[str, tuple[str, ...]]] = {
    word: tuple(sorted(group - {word})) for group in SYNONYM_GROUPS for word in group
}
# Short numbers in a request are argument values ("add 3 and 4"), not words
# a tool is described by; longer ones ("ISO 8601") may be.
_MIN_NUMBER_DIGITS: Final = 3


def _synonyms_of(word: str, synonyms: Mapping[str, tuple[str, ...]]) -> tuple[str, ...]:
    found = synonyms.get(word)
    if found is None and word.endswith("s"):
        found = synonyms.get(word[:-1])
    return found or ()


def query_terms(query: str, synonyms: Mapping[str, tuple[str, ...]] = SYNONYMS) -> list[str]:
    """The words a natural-language request searches for, its synonyms included.

    Stop words and short numbers are dropped unless the request has nothing
    else ("what is it" still searches). Each word brings its synonyms.
    Repeated words count once.

    Args:
        query: the request, any text at all.
        synonyms: word -> the words that also stand for it; ``{}`` for plain BM25.

    Returns:
        The words, the request's own first; empty for a request with no
        letters or digits.
    """
    found = list(dict.fromkeys(words(query)))
    kept = [
        word
        for word in found
        if word not in STOP_WORDS and not (word.isdigit() and len(word) < _MIN_NUMBER_DIGITS)
    ] or found
    kept = kept[:MAX_QUERY_WORDS]
    expanded = dict.fromkeys(kept)
    for word in kept:
        expanded.update(dict.fromkeys(_synonyms_of(word, synonyms)))
    return list(expanded)


def or_expression(terms: list[str]) -> str | None:
    """``"w1" OR "w2" ...``: an FTS5 MATCH expression for words, or None for no words.

    Words are runs of letters and digits (rule 2), so no quote can occur in
    one and quoting makes each a plain term.
    """
    return " OR ".join(f'"{term}"' for term in terms) or None


def match_expression(query: str, synonyms: Mapping[str, tuple[str, ...]] = SYNONYMS) -> str | None:
    """An FTS5 MATCH expression for a natural-language request, or None if it has no words."""
    return or_expression(query_terms(query, synonyms))
