"""Tool search: BM25 over an in-memory SQLite FTS5 index of the catalog's tools (sans-IO).

Rules:

1. One row per public tool, in five weighted columns: the tool's own name,
   its title, its description, its parameters (names, titles, descriptions,
   enum values; see ``search_text``) and its backend's prefix. Scores are
   FTS5's ``bm25()`` with per-column weights, negated so higher is better.
2. The index is keyed by backend. ``replace_backend`` swaps one backend's
   tools, rewriting only rows whose public form changed; ``remove_backend``
   drops them. BM25's statistics (row count, column lengths, document
   frequencies) are kept exact by FTS5 itself, so an index updated step by
   step scores every query exactly as one built from scratch.
3. Results are ordered by score, then by public name, so ties are stable
   and the order does not depend on the order rows were written in.
4. Rows hold the public item's encoded JSON, shared with the snapshot
   rather than copied; a hit is decoded only when it is returned.
5. A profile that overrides a tool's name or description (catalog.profiles
   rule 7) gets rows of its own for those tools, indexed with the text it
   shows (``replace_overrides``); its search reads them with ``scope`` and
   leaves the catalog's rows of the same tools out through ``within``, so a
   tool is found by the words its host sees, never by the replaced ones.
   The override rows count in BM25's statistics (row count, average
   lengths) for every profile: a handful of rows beside thousands, which
   shifts scores by a fraction of a percent and never the set matched.

Theory of operation: the gateway keeps one ``ToolIndex`` next to the
catalog and calls ``sync_index(index, old, new)`` after each snapshot swap;
only the backends whose tools changed are touched. A profile restricts
results with ``within`` instead of owning an index of its own, and
``sync_overrides`` keeps its override rows in step with its view.

Why FTS5 and not a Python BM25 library (measured with ``benchmarks/search.py``
and the relevance set, 10,000 tools): ``sqlite3`` ships with CPython and
FTS5 keeps BM25's statistics exact under in-place updates, so one backend's
change costs ~10 ms against ~1 s for indexing everything. rank_bm25 (pure
Python, last release 2022) scores every document per query word: p50 19 ms,
p99 47 ms. bm25s (numpy, eager sparse scores) answers in 0.4/0.5 ms with the
same recall but needs numpy, has no field weights or stemming of its own
and re-indexes everything on any change. FTS5 here: p50 ~4 ms, p99 ~15 ms
CPU; its cost is ~1.3 us per matching row, and a request with common words
matches most rows of a catalog that repeats the same tools.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import msgspec

from gateway.catalog.search_text import SYNONYMS, match_expression, tool_text
from gateway.catalog.snapshot import Kind

if TYPE_CHECKING:
    from collections.abc import Container, Iterable, Iterator, Mapping

    from gateway.catalog.snapshot import Entry, Snapshot

MIN_LIMIT: Final = 1
MAX_LIMIT: Final = 50
DEFAULT_LIMIT: Final = 8
# Past the first query, rows are read in batches of this many until
# ``limit`` of them pass ``within`` and no tie is left.
_FETCH_BATCH: Final = 64
# Rows read past ``limit`` in the first query, so that a few ties at the cut
# are ordered without a second one.
_TIE_SLACK: Final = 8

_decoder: Final = msgspec.json.Decoder(dict[str, Any])


@dataclass(frozen=True, slots=True)
class FieldWeights:
    """BM25 weight of each column; a match in a heavier column counts for more.

    The defaults were chosen on the relevance set in
    ``tests/catalog/relevance``: the name says most, the title nearly as much,
    a long description less per word, parameters and the prefix least.
    """

    name: float = 4.0
    title: float = 3.0
    description: float = 1.0
    params: float = 0.5
    backend: float = 0.5


DEFAULT_WEIGHTS: Final = FieldWeights()


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One search result: the public tool, how well it matched, and the tool as listed."""

    name: str
    score: float
    item: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Row:
    rowid: int
    encoded: bytes


def clamp_limit(limit: int) -> int:
    """``limit`` forced into ``MIN_LIMIT..MAX_LIMIT`` (a request never asks for everything)."""
    return max(MIN_LIMIT, min(MAX_LIMIT, limit))


def _prefix_of(entry: Entry, separator: str) -> str:
    # A prefixed public name is "prefix{sep}rest" and a prefix never holds the
    # separator (naming rules), so the head is the prefix.
    head, sep, _ = entry.key.partition(separator)
    return head if sep and entry.key != entry.original else ""


class ToolIndex:
    """A BM25 index of public tools, updated one backend at a time.

    Not thread-safe; the gateway calls it from its one trio thread.
    """

    def __init__(
        self,
        *,
        separator: str = "__",
        weights: FieldWeights = DEFAULT_WEIGHTS,
        synonyms: Mapping[str, tuple[str, ...]] = SYNONYMS,
    ) -> None:
        self._separator = separator
        self._synonyms = synonyms
        self._db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        # porter over unicode61: stems both tools and queries (search_text rule 1).
        self._db.execute(
            "CREATE VIRTUAL TABLE tools USING fts5("
            "name, title, description, params, backend, "
            "tokenize = 'porter unicode61 remove_diacritics 2')"
        )
        w = weights
        self._select = (
            "SELECT rowid, -bm25(tools, ?, ?, ?, ?, ?) AS score FROM tools "
            "WHERE tools MATCH ? ORDER BY score DESC"
        )
        self._weights = (w.name, w.title, w.description, w.params, w.backend)
        # Rows by (scope, backend): scope "" holds the catalog's tools, a
        # profile's name its overridden ones (backend "").
        self._rows: dict[tuple[str, str], dict[str, _Row]] = {}
        self._names: dict[int, tuple[str, str, bytes]] = {}
        self._next_rowid = 1

    def __len__(self) -> int:
        """How many tools the index holds."""
        return len(self._names)

    def backends(self) -> frozenset[str]:
        """The backends with at least one indexed tool."""
        return frozenset(backend for scope, backend in self._rows if not scope)

    def overrides(self, profile: str) -> dict[str, bytes]:
        """The profile's own rows: its public name -> the tool JSON indexed."""
        rows = self._rows.get((profile, ""), {})
        return {key: row.encoded for key, row in rows.items()}

    def close(self) -> None:
        """Free the in-memory database; the index is unusable afterwards."""
        self._db.close()

    def replace_backend(self, backend: str, entries: Iterable[Entry]) -> None:
        """Make ``entries`` the backend's tools: add new ones, rewrite changed ones, drop the rest.

        Args:
            backend: the backend's configured name.
            entries: its public tools as the snapshot holds them (each
                ``Entry.encoded`` is the public tool JSON).
        """
        self._replace(
            ("", backend),
            ((e, e.original, _prefix_of(e, self._separator)) for e in entries),
        )

    def remove_backend(self, backend: str) -> None:
        """Drop every tool of ``backend`` (it went down or left the config)."""
        self.replace_backend(backend, ())

    def replace_overrides(self, profile: str, overridden: Iterable[tuple[str, Entry]]) -> None:
        """Make ``overridden`` the profile's own rows (rule 5), rewriting only what changed.

        Args:
            profile: the profile's name; its rows are seen only by a search
                with ``scope=profile``.
            overridden: (catalog name, the profile's entry) per tool the
                profile overrides. When the profile renames the tool, the
                name column holds its new name (less a prefix it shows) and
                the prefix column the prefix only if the new name shows it:
                the row holds what the profile's host reads.
        """
        rows = []
        for catalog, entry in overridden:
            # The prefix only if the profile's name shows it (a rename may drop it).
            prefix = _prefix_of(entry, self._separator)
            if entry.key == catalog:
                named = entry.original
            else:
                named = entry.key[len(prefix) + len(self._separator) :] if prefix else entry.key
            rows.append((entry, named, prefix))
        self._replace((profile, ""), rows)

    def _replace(self, group: tuple[str, str], rows: Iterable[tuple[Entry, str, str]]) -> None:
        """Make ``rows`` (entry, name column, prefix column) the group's rows."""
        scope = group[0]
        old = self._rows.get(group, {})
        new: dict[str, _Row] = {}
        stale: list[int] = []
        inserts: list[tuple[Any, ...]] = []
        for entry, named, prefix in rows:
            kept = old.get(entry.key)
            if kept is not None and kept.encoded == entry.encoded:
                new[entry.key] = kept
                continue
            if kept is not None:
                stale.append(kept.rowid)
            text = tool_text(_decoder.decode(entry.encoded), original=named, prefix=prefix)
            rowid = self._next_rowid
            self._next_rowid += 1
            new[entry.key] = _Row(rowid, entry.encoded)
            inserts.append(
                (
                    rowid,
                    text.name,
                    text.title,
                    text.description,
                    text.params,
                    text.backend,
                )
            )
        stale.extend(row.rowid for key, row in old.items() if key not in new)
        self._write(stale, inserts)
        for rowid in stale:
            del self._names[rowid]
        for key, row in new.items():
            self._names[row.rowid] = (scope, key, row.encoded)
        if new:
            self._rows[group] = new
        else:
            self._rows.pop(group, None)

    def _write(self, stale: list[int], inserts: list[tuple[Any, ...]]) -> None:
        if not stale and not inserts:
            return
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany("DELETE FROM tools WHERE rowid = ?", ((r,) for r in stale))
            self._db.executemany(
                "INSERT INTO tools (rowid, name, title, description, params, backend) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                inserts,
            )

    def search(
        self,
        query: str,
        limit: int = DEFAULT_LIMIT,
        *,
        within: Container[str] | None = None,
        scope: str = "",
    ) -> list[SearchHit]:
        """The tools that best match a natural-language request, best first.

        Args:
            query: the request as a user or model wrote it; any text is
                accepted and none of it is FTS5 syntax.
            limit: how many hits at most, forced into ``1..50``.
            within: when given, only catalog tools whose public name is in
                it (a profile's view, less the tools it overrides) are
                returned.
            scope: a profile whose own rows (``replace_overrides``) are
                searched too, whatever ``within`` says; other profiles'
                rows are never returned.

        Returns:
            Up to ``limit`` hits; none for a request with no words or no match.
        """
        expression = match_expression(query, self._synonyms)
        if expression is None or not self._names:
            return []
        wanted = clamp_limit(limit)
        found: list[tuple[float, str, bytes]] = []
        boundary = 0.0
        for rowid, score in self._ranked(expression, wanted + _TIE_SLACK):
            if len(found) >= wanted and score < boundary:
                break
            row_scope, key, encoded = self._names[rowid]
            if row_scope:
                if row_scope != scope:
                    continue  # another profile's override (rule 5)
            elif within is not None and key not in within:
                continue
            found.append((score, key, encoded))
            if len(found) == wanted:
                boundary = score
        # Rule 3: rows tied with the last one kept were all read; the name decides.
        found.sort(key=lambda hit: (-hit[0], hit[1]))
        return [SearchHit(key, score, _decoder.decode(enc)) for score, key, enc in found[:wanted]]

    def _ranked(self, expression: str, first: int) -> Iterator[tuple[int, float]]:
        """(rowid, score) of every match, best first; the first ``first`` in one top-N sort.

        Ordering by score alone lets SQLite keep a top-N heap of rowids;
        adding the name to ORDER BY would read every matching row's content
        and doubles the time at 10,000 tools. The rest, needed only for ties
        at the cut or a narrow ``within``, comes from a second, lazy query.
        """
        params = (*self._weights, expression)
        rows = self._db.execute(f"{self._select} LIMIT {first}", params).fetchall()
        yield from rows
        if len(rows) < first:
            return
        cursor = self._db.execute(f"{self._select} LIMIT -1 OFFSET {first}", params)
        try:
            while batch := cursor.fetchmany(_FETCH_BATCH):
                yield from batch
        finally:
            cursor.close()


def tools_by_backend(snapshot: Snapshot) -> dict[str, tuple[Entry, ...]]:
    """The snapshot's public tools grouped by the backend that offers them."""
    grouped: defaultdict[str, list[Entry]] = defaultdict(list)
    for entry in snapshot.view(Kind.TOOLS):
        grouped[entry.backend].append(entry)
    return {backend: tuple(entries) for backend, entries in grouped.items()}


def diff_backends(old: Snapshot, new: Snapshot) -> dict[str, tuple[Entry, ...]]:
    """Per backend whose tools differ between two snapshots, its tools in ``new``.

    A backend whose tools are gone maps to ``()``; an unchanged one is absent.
    """
    before = tools_by_backend(old)
    after = tools_by_backend(new)
    changed = {name: entries for name, entries in after.items() if before.get(name) != entries}
    changed.update({name: () for name in before if name not in after})
    return changed


def sync_index(index: ToolIndex, old: Snapshot, new: Snapshot) -> frozenset[str]:
    """Bring an index of ``old`` up to ``new``, touching only the backends that changed.

    Returns:
        The names of the backends whose rows were rewritten.
    """
    changed = diff_backends(old, new)
    for backend, entries in changed.items():
        index.replace_backend(backend, entries)
    return frozenset(changed)


def overridden_entries(view: Snapshot) -> list[tuple[str, Entry]]:
    """(catalog name, the profile's entry) per tool a profile view overrides."""
    tools = view.view(Kind.TOOLS)
    return [
        (catalog, entry)
        for catalog, public in view.overridden_tools.items()
        if (entry := tools.get(public)) is not None
    ]


def sync_overrides(index: ToolIndex, profile: str, view: Snapshot) -> None:
    """Bring a profile's own rows up to its view, rewriting only overrides whose JSON changed."""
    index.replace_overrides(profile, overridden_entries(view))


def index_snapshot(
    snapshot: Snapshot,
    *,
    separator: str = "__",
    weights: FieldWeights = DEFAULT_WEIGHTS,
    synonyms: Mapping[str, tuple[str, ...]] = SYNONYMS,
) -> ToolIndex:
    """A new index of every tool in ``snapshot``."""
    index = ToolIndex(separator=separator, weights=weights, synonyms=synonyms)
    for backend, entries in sorted(tools_by_backend(snapshot).items()):
        index.replace_backend(backend, entries)
    return index
